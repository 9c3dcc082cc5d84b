"""Stein thinning against the authors' package (stein-thinning 0.2.0, NumPy), in one run on one machine.

    python benchmarks/bench_thinning.py                     # n = 100,000 draws, d = 10, m = 1000, 3 repeats
    python benchmarks/bench_thinning.py --n 20000 --m 200 --repeats 1

Draws of a correlated Gaussian (an AR(1) chain with a shifted start), their exact scores, the same
preconditioner ('med', standardised) for both. Each repeat times steinax in a fresh Python process
(so its first call pays every compilation: the JAX runtime is started by one trivial operation
first, as NumPy is imported before the package is timed) and then the package, one after the
other, so both see the same machine load. Prints every repeat's times, and the ratios of the
medians: first call (compilation and the one-off preparation counted) and a second call (compiled).
How many of the picks agree is checked once (float64 for the comparison run; the timed runs are
float32 for steinax, float64 for the package, each its own default).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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


def time_steinax(n, d, m, preconditioner):
    """``(first call, second call)`` seconds of steinax's thinning in this process (call it in a fresh one)."""
    import jax
    import jax.numpy as jnp

    from steinax.diagnostics import stein_thinning

    x, s = chain(n, d)
    jnp.zeros(1).block_until_ready()  # the JAX runtime's start, as NumPy's import for the package
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        stein_thinning(x, None, m, scores=s, preconditioner=preconditioner).indices.block_until_ready()
        times.append(time.perf_counter() - t0)
    return times, jax.__version__, jax.default_backend()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--m", type=int, default=1000)
    p.add_argument("--preconditioner", default="med")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(time_steinax(a.n, a.d, a.m, a.preconditioner)))
        return
    from stein_thinning.thinning import thin

    x, s = chain(a.n, a.d)
    ours, theirs = [], []
    for r in range(a.repeats):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--n", str(a.n), "--d", str(a.d),
                              "--m", str(a.m), "--preconditioner", a.preconditioner],
                             capture_output=True, text=True, check=True)
        times, version, backend = json.loads(out.stdout.strip().splitlines()[-1])
        if r == 0:
            print(f"jax {version} on {backend}; n = {a.n}, d = {a.d}, m = {a.m}, IMQ(1, -1/2), preconditioner "
                  f"{a.preconditioner!r}, standardize=True; {a.repeats} repeat(s)", flush=True)
        ours.append(times)
        t0 = time.perf_counter()
        picks = thin(x, s, a.m, standardize=True, preconditioner=a.preconditioner)
        theirs.append(time.perf_counter() - t0)
        print(f"repeat {r + 1}: steinax (float32) {times[0]:.2f} s first call, {times[1]:.2f} s compiled; "
              f"stein-thinning 0.2.0 (float64) {theirs[-1]:.2f} s", flush=True)
    first, second = np.median([t[0] for t in ours]), np.median([t[1] for t in ours])
    pkg = np.median(theirs)
    print(f"medians: steinax {first:.2f} s first call, {second:.2f} s compiled; stein-thinning {pkg:.2f} s")
    print(f"ratio of medians: {pkg / first:.1f}x (first call), {pkg / second:.1f}x (compiled); per repeat, first "
          f"call: {', '.join(f'{b / t[0]:.1f}x' for t, b in zip(ours, theirs))}")

    import jax

    from steinax.diagnostics import stein_thinning

    with jax.enable_x64(True):
        res = stein_thinning(x, None, a.m, scores=s, preconditioner=a.preconditioner)
        ours64 = np.asarray(res.indices)
    agree = int(np.sum(ours64 == picks))
    first_diff = np.flatnonzero(ours64 != picks)
    print(f"float64 picks equal to the package's: {agree}/{a.m}"
          + (f" (first difference at pick {first_diff[0]})" if first_diff.size else ""))
    print(f"squared KSD of the picks (float64 path): {float(res.ksd[-1]):.4g}")


if __name__ == "__main__":
    main()
