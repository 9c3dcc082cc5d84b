"""Time one SVGD step of the sparse GP (steinax.gp.SparseGP): 10 particles, M = 300 inducing points, minibatch 1000.

Synthetic 2-D regression data with N observations (default 20,000 and 100,000, to show that the step time and
its memory do not grow with N: a step touches one minibatch, O(B M^2 + M^3) per particle). Prints the median
step time over repeated steps after compilation, and the compiled step's temporary memory.

    python benchmarks/bench_sparse_gp.py [--n 20000 100000] [--particles 10] [--inducing 300] [--batch 1000]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax
from steinax.gp import SparseGP


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, nargs="+", default=[20_000, 100_000])
    p.add_argument("--particles", type=int, default=10)
    p.add_argument("--inducing", type=int, default=300)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.default_backend()}; float32; {args.particles} particles, "
          f"M = {args.inducing}, minibatch {args.batch}, Matern-3/2, Gaussian likelihood")
    print(f"{'N':>8} {'step ms (median)':>18} {'temp MiB':>10}")
    for n in args.n:
        key = jax.random.key(n)
        X = jax.random.uniform(key, (n, 2), minval=-3, maxval=3)
        y = jnp.sin(X[:, 0]) * jnp.cos(X[:, 1]) + 0.1 * jax.random.normal(jax.random.fold_in(key, 1), (n,))
        model = SparseGP(X, y, num_inducing=args.inducing, batch_size=args.batch)
        method = steinax.svgd()
        opt = optax.adam(1e-2)
        state = method.init(model.init_particles(key, args.particles), opt, model)
        step = jax.jit(lambda s, k: method.step(k, s, model, opt)[0])
        memory = step.lower(state, key).compile().memory_analysis().temp_size_in_bytes / 2**20
        state = step(state, key)
        jax.block_until_ready(state.particles)
        times = []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            state = step(state, jax.random.fold_in(key, r))
            jax.block_until_ready(state.particles)
            times.append(time.perf_counter() - t0)
        print(f"{n:>8} {1e3 * np.median(times):>18.1f} {memory:>10.1f}")


if __name__ == "__main__":
    main()
