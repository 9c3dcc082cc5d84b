"""Large-n SVGD steps: time and peak memory of one steinax step, dense and blocked.

    python benchmarks/bench_large_n.py        # n=5000 d=100; n=20000 d=64; n=5000 d=100 in blocks of 1024
    python benchmarks/bench_large_n.py --n 20000 --d 64 --block-size 4096

Blocked mode never stores the n x n matrices; its exact median needs one
distance pass per bisection step (~33 in float32 on CPU), so it is much slower
than the dense step and meant for n where the dense matrices do not fit.

Reports ms/step (steady state, median of repeats) and the process's peak resident
memory (ru_maxrss) after the step. Run each size in its own process for a clean peak.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import jax
import numpy as np
import optax

import steinax


def one(n, d, block_size, repeats):
    method = steinax.svgd(block_size=block_size)
    opt = optax.sgd(1e-2)
    target = steinax.targets.LogDensityTarget(lambda x: -0.5 * (x * x).sum())
    state = method.init(jax.random.normal(jax.random.key(0), (n, d)), opt)
    step = jax.jit(lambda s: method.step(jax.random.key(0), s, target, opt))
    state, info = step(state)
    jax.block_until_ready(state)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        state, info = step(state)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t0)
    finite = bool(info.finite)
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"n={n:>6} d={d:>4} block_size={block_size!s:>6} dtype={state.particles.dtype}: "
        f"{1e3 * np.median(times):9.1f} ms/step, bandwidth {float(info.method['bandwidth']):.4g}, "
        f"finite={finite}, peak RSS {peak_gib:.2f} GiB",
        flush=True,
    )


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--d", type=int, default=None)
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    if args.n is not None:
        one(args.n, args.d or 64, args.block_size, args.repeats)
        return
    for n, d, b in [(5000, 100, None), (20000, 64, None), (5000, 100, 1024)]:
        cmd = [sys.executable, __file__, "--n", str(n), "--d", str(d), "--repeats", str(args.repeats)]
        if b:
            cmd += ["--block-size", str(b)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
