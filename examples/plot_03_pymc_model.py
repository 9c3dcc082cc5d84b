"""
# A PyMC model, with ArviZ

`steinax.targets.from_pymc` takes a `pm.Model`: PyMC compiles its log-density to JAX itself.
The run's DataTree has the names, dims and coordinates `pm.sample` would give, so ArviZ's
summary and plots read it. A linear regression with a group dimension (needs the `pymc` extra).
"""

import time

import arviz_plots
import arviz_stats
import jax
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import steinax
from steinax.diagnostics import sample_quality
from steinax.targets import from_pymc

rng = np.random.default_rng(0)
groups = ["north", "south", "east"]
g = rng.integers(0, 3, 150)
x = rng.normal(size=150)
y = np.array([1.0, -0.5, 0.3])[g] + 0.8 * x + 0.5 * rng.normal(size=150)

with pm.Model(coords={"group": groups}) as model:
    intercept = pm.Normal("intercept", 0.0, 2.0, dims="group")
    slope = pm.Normal("slope", 0.0, 2.0)
    noise = pm.HalfCauchy("noise", 1.0)
    pm.Normal("y", intercept[g] + slope * x, noise, observed=y)

target = from_pymc(model)
t0 = time.perf_counter()
result = steinax.run(steinax.svgd(), target, target.init_particles(jax.random.key(0), 100), steps=None,
                     rng_key=jax.random.key(1))
print(f"{time.perf_counter() - t0:.1f} s, settled: {result.converged}")

# %%
# Always check the particles before reading them (docs: "Is my posterior right?"): the discrepancy, and the
# collapse and missing-mode checks, which need no reference draws. A flag means: do not read the particles'
# spread as the posterior's (more particles, another method, or NUTS).

report = sample_quality(result.particles, target, spread=True)
print(report.summary())
print("flagged:", report.flagged)

# %%
# The DataTree: PyMC's names, dims and coordinates; the particles are not a chain, so ArviZ's summary is asked
# for statistics only (`kind="stats"`: R-hat and ESS do not apply).

tree = result.to_datatree()
print(arviz_stats.summary(tree, kind="stats"))

# %%
# ArviZ's own plot of the marginals (the particles are draws of one "chain").

pc = arviz_plots.plot_dist(tree, var_names=["intercept", "slope", "noise"])
plt.show()
