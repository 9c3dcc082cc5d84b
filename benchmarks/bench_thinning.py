"""Stein thinning against the authors' package (stein-thinning 0.2.0, NumPy), in one run on one machine.

    python benchmarks/bench_thinning.py                     # n = 100,000 draws, d = 10, m = 1000
    python benchmarks/bench_thinning.py --n 20000 --m 200

Draws of a correlated Gaussian (an AR(1) chain with a shifted start), their exact scores, the same
preconditioner ('med', standardised) for both. Prints each side's wall time (steinax: compilation
and the one-off preparation counted, first call; and a second call, compiled), the ratio, and how
many of the picks agree (float64 for the comparison run; the timed runs are float32 for steinax,
float64 for the package, each its own default).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def chain(n, d, seed=0, rho=0.9):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d)) / np.sqrt(d)
    cov = a @ a.T + np.eye(d)
    chol = np.linalg.cholesky(cov)
    z = np.empty((n, d))
    z[0] = 5.0
    eps = rng.normal(size=(n, d)) * np.sqrt(1 - rho * rho)
    for i in range(1, n):
        z[i] = rho * z[i - 1] + eps[i]
    x = z @ chol.T
    return x, -x @ np.linalg.inv(cov)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--m", type=int, default=1000)
    p.add_argument("--preconditioner", default="med")
    a = p.parse_args(argv)
    import jax

    from stein_thinning.thinning import thin

    from steinax.diagnostics import stein_thinning

    x, s = chain(a.n, a.d)
    print(f"jax {jax.__version__} on {jax.default_backend()}; n = {a.n}, d = {a.d}, m = {a.m}, IMQ(1, -1/2), "
          f"preconditioner {a.preconditioner!r}, standardize=True", flush=True)
    t0 = time.perf_counter()
    ours = stein_thinning(x, None, a.m, scores=s, preconditioner=a.preconditioner)
    ours.indices.block_until_ready()
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    stein_thinning(x, None, a.m, scores=s, preconditioner=a.preconditioner).indices.block_until_ready()
    t_second = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = thin(x, s, a.m, standardize=True, preconditioner=a.preconditioner)
    t_pkg = time.perf_counter() - t0
    with jax.enable_x64(True):
        ours64 = np.asarray(stein_thinning(x, None, a.m, scores=s, preconditioner=a.preconditioner).indices)
    agree = int(np.sum(ours64 == theirs))
    first_diff = np.flatnonzero(ours64 != theirs)
    print(f"steinax (float32): {t_first:.2f} s first call, {t_second:.2f} s compiled")
    print(f"stein-thinning 0.2.0 (float64): {t_pkg:.2f} s")
    print(f"ratio: {t_pkg / t_first:.1f}x (first call), {t_pkg / t_second:.1f}x (compiled)")
    print(f"float64 picks equal to the package's: {agree}/{a.m}"
          + (f" (first difference at pick {first_diff[0]})" if first_diff.size else ""))
    print(f"squared KSD of the picks (float32 path): {float(ours.ksd[-1]):.4g}")


if __name__ == "__main__":
    main()
