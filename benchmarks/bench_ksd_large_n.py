"""KSD of many samples: the exact blocked U/V-statistic (memory O(block * n)) and the linear-time block KSD.

    python benchmarks/bench_ksd_large_n.py                       # n = 200,000, d = 10, IMQ
    python benchmarks/bench_ksd_large_n.py --n 20000 --check     # also the dense result where it fits

Samples of N(0, I_d) with one mean coordinate of the target shifted by 0.5 (so the
discrepancy is not zero). Prints wall time, peak resident memory and the values;
``--check`` compares blocked with dense (float32; relative agreement reported).
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp

import steinax
from steinax.stein import block_ksd


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--block-size", type=int, default=2048)
    p.add_argument("--check", action="store_true", help="also compute the dense KSD (needs n^2 memory)")
    args = p.parse_args(argv)
    n, d = args.n, args.d
    x = jax.random.normal(jax.random.key(0), (n, d))
    mu = jnp.zeros((1, d)).at[0, 0].set(0.5)
    s = -(x - mu)
    k = steinax.IMQ()
    print(f"jax {jax.__version__} on {jax.default_backend()}; n = {n}, d = {d}, IMQ(1, -1/2), float32, "
          f"row blocks of {args.block_size}")
    t0 = time.perf_counter()
    v = float(steinax.ksd(x, s, k, "v", block_size=args.block_size))
    t_v = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"exact blocked V-statistic: {v:.6g} in {t_v:.1f} s; peak RSS {rss:.2f} GiB")
    t0 = time.perf_counter()
    lin = float(block_ksd(x, s, k, block=64))
    print(f"linear-time block KSD (B = 64): {lin:.6g} in {time.perf_counter() - t0:.2f} s")
    if args.check:
        t0 = time.perf_counter()
        dense = float(steinax.ksd(x, s, k, "v"))
        print(f"dense V-statistic: {dense:.6g} in {time.perf_counter() - t0:.1f} s; "
              f"|blocked - dense| / dense = {abs(v - dense) / dense:.2e}")


if __name__ == "__main__":
    main()
