"""
# One call on a model as users write it: `steinax.sample` on fuel consumption against unscaled predictors

`mtcars`: miles per gallon against weight (1000 lb), horsepower, displacement (cubic inches), quarter-mile time and
rear-axle ratio, in their own units, with default priors (`steinax.posteriors.real_data.mtcars_regression`). The
coefficients differ in scale by 10^3 and correlate strongly: SVGD from N(0, I) is sds off there while "settled".
`steinax.sample` runs a warm start (MAP and Laplace), SVGD in the coordinates the warm start whitens, and a correction
in which each particle continues as a ChEES-HMC chain until R-hat and ESS say the draws are usable. The panels show
what each stage handed on against the long NUTS reference, for the displacement and horsepower coefficients.
"""

import jax
import matplotlib.pyplot as plt
import numpy as np

import steinax
import steinax.posteriors as sp

with jax.enable_x64(True):  # real data in their own units: float64, as NUTS's reference was made
    post = sp.get("mtcars_regression")
    result = steinax.sample(post.target, rng_key=jax.random.key(0), progress=False)
ref = post.reference()
print(result.ok, result.message)
print("gradient evaluations:", result.gradient_evaluations)
print("seconds:", {k: round(v, 1) for k, v in result.seconds.items()})
err = np.abs(result.draws.mean(0) - ref.mean) / ref.sd
print(f"worst |mean error| {err.max():.3f} reference sds; sd ratios {np.round(result.draws.std(0) / ref.sd, 2)}")

# coordinates: coefficients (wt, hp, disp, qsec, drat), intercept, log sigma
i, j = 2, 1
stages = [("warm start", result.stage_draws["warm_start"]), ("particles", result.stage_draws["particles"]),
          ("sample (corrected)", result.draws[:: max(1, result.draws.shape[0] // 1000)])]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharex=True, sharey=True)
for ax, (title, x) in zip(axes, stages):
    ax.scatter(ref.draws[:, i], ref.draws[:, j], s=3, color="0.75", label="NUTS reference")
    ax.scatter(x[:, i], x[:, j], s=5, color="C0", label=title)
    ax.set_title(title)
    ax.set_xlabel("displacement coefficient")
    ax.legend(fontsize=7, loc="upper right")
axes[0].set_ylabel("horsepower coefficient")
fig.tight_layout()
plt.show()
