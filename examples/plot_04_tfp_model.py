"""
# A TensorFlow Probability model: logistic regression

`steinax.targets.from_tfp` takes a joint distribution with named parts (JAX substrate), the
observed part pinned. Particles move in the space of TFP's default event-space bijector. Five
weights of a logistic regression on 300 synthetic points (needs the `tfp` extra).
"""

import time

import jax
import matplotlib.pyplot as plt
import numpy as np
import tensorflow_probability.substrates.jax as tfp

import steinax
from steinax.targets import from_tfp

tfd = tfp.distributions
rng = np.random.default_rng(1)
X = rng.normal(size=(300, 5)).astype(np.float32)
w_true = np.array([1.5, -1.0, 0.0, 0.5, 2.0], np.float32)
labels = (rng.uniform(size=300) < 1 / (1 + np.exp(-X @ w_true))).astype(np.float32)

model = tfd.JointDistributionNamed(dict(
    w=tfd.Sample(tfd.Normal(0.0, 2.0), 5),
    labels=lambda w: tfd.Independent(tfd.Bernoulli(logits=X @ w, dtype=np.float32), 1),
))
target = from_tfp(model, observed={"labels": labels})
t0 = time.perf_counter()
result = steinax.run(steinax.svgd(), target, target.init_particles(jax.random.key(0), 100), steps=None,
                     rng_key=jax.random.key(1))
print(f"{time.perf_counter() - t0:.1f} s, settled: {result.converged}")
w = np.asarray(result.samples["w"])
print("posterior mean:", np.round(w.mean(0), 2), " true:", w_true)

# %%
# Each weight's particles beside the value the data were drawn with.

fig, ax = plt.subplots(figsize=(6, 3))
ax.violinplot(w, showmeans=True)
ax.scatter(np.arange(1, 6), w_true, color="C3", zorder=3, label="true weight")
ax.set_xlabel("weight")
ax.legend()
fig.tight_layout()
plt.show()
