"""
# A Stein variational GP: hyperparameter uncertainty in a regression

`steinax.gp.GPRegression` is a target over a GP's (unconstrained) hyperparameters; SVGD's
particles are hyperparameter settings, and predictions average over them. Ten particles, a
1-D toy with a gap in the data.
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import steinax
from steinax.gp import GPRegression

key = jax.random.key(0)
X = jnp.concatenate([jax.random.uniform(key, (30, 1), minval=-3, maxval=-0.5),
                     jax.random.uniform(jax.random.fold_in(key, 1), (30, 1), minval=1.0, maxval=3)])
y = jnp.sin(2 * X[:, 0]) + 0.15 * jax.random.normal(jax.random.fold_in(key, 2), (60,))
model = GPRegression(X, y, kernel="se")
result = steinax.run(steinax.svgd(), model, model.init_particles(jax.random.key(3), 10), rng_key=jax.random.key(4))
print(f"settled: {result.converged} after {int(result.state.step)} steps")
X_test = jnp.linspace(-4, 4, 200)[:, None]
mean, var = model.predict(result.particles, X_test)
print("hyperparameter particles (unconstrained):")
print(np.round(np.asarray(result.particles), 2))

# %%
# The predictive mean and two standard deviations, a mixture over the ten particles.

fig, ax = plt.subplots(figsize=(7, 3.2))
sd = np.sqrt(np.asarray(var))
ax.fill_between(np.asarray(X_test[:, 0]), np.asarray(mean) - 2 * sd, np.asarray(mean) + 2 * sd, alpha=0.3)
ax.plot(np.asarray(X_test[:, 0]), np.asarray(mean), label="predictive mean")
ax.scatter(np.asarray(X[:, 0]), np.asarray(y), s=8, color="k", label="data")
ax.legend()
fig.tight_layout()
plt.show()
