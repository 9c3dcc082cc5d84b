"""
# A NumPyro model: eight schools, SVGD beside NUTS

`steinax.targets.from_numpyro` turns a NumPyro model into a target in NumPyro's unconstrained
space; `result.samples` gives the draws back by site name. NUTS (NumPyro's, through
`steinax.baselines.mcmc.nuts`) on the same target is the reference. The non-centred model, 100 particles.
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import numpyro
import numpyro.distributions as dist

import steinax
from steinax.baselines.mcmc import nuts
from steinax.targets import from_numpyro

y = jnp.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
sigma = jnp.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", 8):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)


target = from_numpyro(eight_schools, y, sigma)
t0 = time.perf_counter()
svgd = steinax.run(steinax.svgd(), target, target.init_particles(jax.random.key(0), 100), steps=None,
                   rng_key=jax.random.key(1))
print(f"SVGD: {time.perf_counter() - t0:.1f} s, settled: {svgd.converged}")
t0 = time.perf_counter()
draws = nuts(target, target.init_particles(jax.random.key(2), 4), num_warmup=500, num_samples=1000,
             rng_key=jax.random.key(3))
print(f"NUTS, 4 chains x 1000 draws: {time.perf_counter() - t0:.1f} s")
nuts_samples = target.postprocess(draws.reshape(-1, target.dim))
for name in ("mu", "tau"):
    a, b = np.asarray(svgd.samples[name]), np.asarray(nuts_samples[name])
    print(f"{name:>4}: SVGD mean {a.mean():6.2f} sd {a.std():5.2f} | NUTS mean {b.mean():6.2f} sd {b.std():5.2f}")

# %%
# The two posteriors of `tau` and `theta[0]`.

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for ax, (name, pick) in zip(axes, (("tau", lambda s: s["tau"]), ("theta[0]", lambda s: s["theta"][:, 0]))):
    bins = np.linspace(*np.percentile(np.asarray(pick(nuts_samples)), [0.5, 99.5]), 40)
    ax.hist(np.asarray(pick(nuts_samples)), bins=bins, density=True, alpha=0.5, label="NUTS")
    ax.hist(np.asarray(pick(svgd.samples)), bins=bins, density=True, alpha=0.5, label="SVGD, 100 particles")
    ax.set_title(name)
axes[0].legend()
fig.tight_layout()
plt.show()
