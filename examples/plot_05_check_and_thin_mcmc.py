"""
# Check MCMC output, then thin it

A sampler's draws and the target's scores are all the Stein tools need. Two chains on the same
banana: NUTS, and an unadjusted Langevin chain (ULA, step 0.1), which is biased.
`sample_quality` runs the aggregated KSD test (KSDAgg) with the dependent wild bootstrap for
chains; `stein_thinning` then picks the 200 draws closest to the target in KSD.
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from steinax.diagnostics import sample_quality, stein_thinning
from steinax.baselines.mcmc import nuts


def logdensity(x):
    return -0.5 * x[0] ** 2 - 2.0 * (x[1] - 0.5 * x[0] ** 2) ** 2


def ula(key, x0, steps, eps=0.1):
    grad = jax.grad(logdensity)

    def move(x, k):
        x = x + eps * grad(x) + jnp.sqrt(2 * eps) * jax.random.normal(k, x.shape)
        return x, x

    return jax.lax.scan(move, x0, jax.random.split(key, steps))[1]


nuts_draws = nuts(logdensity, jnp.zeros((2, 2)), num_warmup=500, num_samples=2000, rng_key=jax.random.key(0))
ula_draws = jnp.stack([ula(k, jnp.zeros(2), 2000) for k in jax.random.split(jax.random.key(1), 2)])
for name, draws in (("NUTS", nuts_draws), ("ULA", ula_draws)):
    q = sample_quality(draws, logdensity, test=True, rng_key=jax.random.key(2))  # [chains, draws, d]: dependent bootstrap
    print(f"{name}: KSD^2 {float(q.discrepancy):.4f}, test p-value {float(q.test.p_value):.3f}, "
          f"reject: {bool(q.test.reject)}")
thinned = stein_thinning(ula_draws, logdensity, 200)
print(thinned)

# %%
# The biased chain, and the draws Stein thinning keeps from it.

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
flat = np.asarray(ula_draws.reshape(-1, 2))
ax.scatter(*flat.T, s=2, alpha=0.3, label="ULA draws")
ax.scatter(*np.asarray(thinned.points).T, s=8, color="C3", label="200 Stein-thinned")
ax.legend()
ax2.loglog(np.arange(1, 201), np.asarray(thinned.ksd))
ax2.set_xlabel("picks")
ax2.set_ylabel("squared KSD of the picks")
fig.tight_layout()
plt.show()
