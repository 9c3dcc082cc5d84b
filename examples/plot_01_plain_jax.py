"""
# A plain JAX log-density: SVGD on a banana

Any function `logdensity(x) -> scalar` of one `[d]` point written with `jax.numpy` is a target.
Here a 2-D banana, `x2 | x1 ~ N(x1^2 / 2, 1/4)`, `x1 ~ N(0, 1)`: 200 particles from N(0, I),
SVGD until the particles settle (`steps=None`: the stopping rule of `run`), then the
collapse check, which needs only the scores.
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt

import steinax
from steinax.interfaces.plot import plot_particles
from steinax.diagnostics import spread_check


def logdensity(x):
    return -0.5 * x[0] ** 2 - 2.0 * (x[1] - 0.5 * x[0] ** 2) ** 2


x0 = jax.random.normal(jax.random.key(0), (200, 2))
t0 = time.perf_counter()
result = steinax.run(steinax.svgd(), logdensity, x0, steps=None, rng_key=jax.random.key(1))
print(f"settled: {result.converged} after {int(result.trace.step[-1])} steps, {time.perf_counter() - t0:.1f} s")
scores = jax.vmap(jax.grad(logdensity))(result.particles)
print(spread_check(result.particles, scores))

# %%
# The particles over the target's density, and the run's trace.

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.8))
plot_particles(result.particles, logdensity, extent=(-3, 3, -1.5, 4), ax=ax, title="SVGD, 200 particles")
ax2.semilogy(result.trace.step, result.trace.ksd)
ax2.set_xlabel("step")
ax2.set_ylabel("squared KSD (IMQ)")
fig.tight_layout()
plt.show()
