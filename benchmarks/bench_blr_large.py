"""Bayesian logistic regression on the large binary set (AER Fertility, the Covtype substitute): steps per second.

Setting: 80% of the 254,654 rows for training, an intercept column, Liu & Wang's Gamma-hyperprior
model, 100 particles, minibatches of 100 (with replacement: O(B) per step), SVGD with the median RBF,
AdaGrad-momentum 0.05. Steps per second are measured on a second, compiled run. To show that the
per-step cost does not grow with N, the same run is timed on a quarter of the training rows.

    python benchmarks/bench_blr_large.py [--steps 2000]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax import datasets
from steinax.models import LogisticRegression


def steps_per_second(X, y, steps, particles=100, batch=100):
    X = jnp.asarray(np.concatenate([X, np.ones((X.shape[0], 1))], axis=1), jnp.float32)
    model = LogisticRegression(X.shape[1])
    target = model.target(X, y, batch_size=batch)
    x0 = model.init_particles(jax.random.key(0), particles)
    kw = dict(optimizer=steinax.adagrad_momentum(0.05), rng_key=jax.random.key(1), progress=False)
    steinax.run(steinax.svgd(), target, x0, steps=steps, **kw)  # compile
    t0 = time.perf_counter()
    res = steinax.run(steinax.svgd(), target, x0, steps=steps, **kw)
    jax.block_until_ready(res.particles)
    return steps / (time.perf_counter() - t0), res, model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000)
    args = p.parse_args(argv)
    X, y = datasets.load("fertility")
    split = datasets.train_test_split(X, y, 0.8, seed=0, standardize_y=False)
    print(f"fertility: {split.X_train.shape[0]} training rows, {X.shape[1]} features (+ intercept); "
          f"100 particles, minibatch 100, {args.steps} steps")
    for frac in (0.25, 1.0):
        n = int(frac * split.X_train.shape[0])
        rate, res, model = steps_per_second(split.X_train[:n], split.y_train[:n], args.steps)
        Xte = jnp.asarray(np.concatenate([split.X_test, np.ones((split.X_test.shape[0], 1))], axis=1), jnp.float32)
        ev = model.evaluate(res.particles, Xte, split.y_test)
        print(f"  N = {n:>7d}: {rate:8.0f} steps/s   test accuracy {float(ev.accuracy):.3f}, test LL {float(ev.loglik):.3f}")


if __name__ == "__main__":
    main()
