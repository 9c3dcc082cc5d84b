"""
# A learned step-size schedule, trained once and reused

Deep-unfolded SVGD (`steinax.unfold`) learns the step sizes of a short SVGD run by
backpropagating through it. Here the Chebyshev parameterisation (two numbers) is trained on
problems of one kind (a 1-D two-component mixture, particles started at -2) and reused on new
initial particles, against a constant step.
"""

import os
import tempfile

import jax
import matplotlib.pyplot as plt
import numpy as np
import optax

import steinax
from steinax import unfold
from steinax.metrics import mmd2
from steinax.targets import gmm_1d

target = gmm_1d()
samples = target.sample(jax.random.key(0), 900)


def problem(key):
    k1, k2 = jax.random.split(key)
    idx = jax.random.choice(k2, 900, (100,), replace=False)
    return unfold.Problem(jax.random.normal(k1, (100, 1)) - 2.0, data=samples[idx])


schedule = unfold.train_chebyshev(problem, unfold.mmd_loss(), T=10, target=target, epochs=5, batch_size=4,
                                  optimizer=optax.adam(1e-3), alpha=0.3, beta=1.0)
path = os.path.join(tempfile.mkdtemp(), "chebyshev_gmm.json")  # a file of yours; a temporary one here
schedule.save(path)
reused = unfold.load_schedule(path)
print("learned steps:", np.round(np.asarray(reused.steps), 3))

x0 = jax.random.normal(jax.random.key(7), (100, 1)) - 2.0
runs = {"learned (Chebyshev)": optax.sgd(reused), "constant 0.1": optax.sgd(0.1)}
final = {}
for name, opt in runs.items():
    res = steinax.run(steinax.svgd(), target, x0, steps=10, optimizer=opt, rng_key=jax.random.key(8))
    final[name] = res.particles
    print(f"{name:>20}: MMD^2 to the target's draws after 10 steps {float(mmd2(res.particles, samples, 2.0)):.4f}")

# %%
# The particles after ten steps.

fig, ax = plt.subplots(figsize=(7, 3))
grid = np.linspace(-6, 6, 400)
ax.plot(grid, np.exp(np.asarray(jax.vmap(target.logdensity)(grid[:, None]))), "k", label="target")
for name, p in final.items():
    ax.hist(np.asarray(p[:, 0]), bins=30, density=True, alpha=0.5, label=name)
ax.legend()
fig.tight_layout()
plt.show()
