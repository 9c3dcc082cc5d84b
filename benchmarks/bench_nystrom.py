"""The Nyström KSD test on many draws: wall time and peak resident memory.

    python benchmarks/bench_nystrom.py                      # n = 10,000,000 draws, d = 10
    python benchmarks/bench_nystrom.py --n 1000000 --chains 4
    python benchmarks/bench_nystrom.py --against-exact      # Nyström at 50,000 against the exact test at 5,000

Draws of N(0, I_d) tested against N(0, I_d) (a null) and against a target whose first mean is shifted
by 0.01 (an alternative only millions of draws can see), IMQ(1, -1/2), the default landmarks
(min(1000, 4 sqrt(n))) and B = 500 bootstrap draws (i.i.d., or the dependent bootstrap with
``--chains``: AR(1) chains, phi = 0.5). Prints each test's wall time (first call: compilation
counted), p-value and the process's peak RSS.

``--against-exact``: the Nyström test at n = 50,000 against the exact wild-bootstrap test (``gof_test``, the same
kernel and B) at n = 5,000, for d = 1, 2, 10, 50: first call (compilation counted) and the median of 3 later
calls, the measured ratio, and the ratio the multiply-adds predict (Nyström: ``n m`` Stein-kernel pairs and
``B n m`` bootstrap products; exact: ``n^2 / 2`` pairs and ``B n^2 / 2`` products, the symmetric tiles).
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp

from steinax.stein import nystrom_ksd_test


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--chains", type=int, default=0, help="0: i.i.d. draws; k: k AR(1) chains (dependent bootstrap)")
    p.add_argument("--against-exact", action="store_true")
    a = p.parse_args(argv)
    if a.against_exact:
        return _against_exact()
    key = jax.random.key(0)
    if a.chains:
        draws = a.n // a.chains
        e = jax.random.normal(key, (draws, a.chains, a.d))

        def step(x, eps):
            x = 0.5 * x + jnp.sqrt(0.75) * eps
            return x, x

        _, xs = jax.lax.scan(step, e[0], e)
        x = jnp.transpose(xs, (1, 0, 2)).reshape(-1, a.d)
        del e, xs
    else:
        x = jax.random.normal(key, (a.n, a.d))
    kw = dict(bootstrap="dependent", chains=a.chains, block_length=20) if a.chains else {}
    print(f"jax {jax.__version__} on {jax.default_backend()}; n = {a.n:,}, d = {a.d}, IMQ(1, -1/2), float32, "
          f"{'dependent bootstrap, ' + str(a.chains) + ' AR(1) chains' if a.chains else 'i.i.d. bootstrap'}, B = 500",
          flush=True)
    for label, shift in (("null (N(0, I))", 0.0), ("mean shifted by 0.01", 0.01)):
        mu = jnp.zeros((1, a.d)).at[0, 0].set(shift)
        t0 = time.perf_counter()
        res = nystrom_ksd_test(x, -(x - mu), rng_key=jax.random.key(1), **kw)
        p_value = float(res.p_value)
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"{label}: {wall:.1f} s, squared Nyström KSD {float(res.discrepancy):.3g}, p = {p_value:.3g}, "
              f"reject {bool(res.reject)}; peak RSS so far {rss:.2f} GB", flush=True)


def _against_exact():
    import numpy as np

    from steinax.stein import gof_test
    from steinax.stein.nystrom import default_landmarks

    def timed(f):
        times = []
        for _ in range(4):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return times[0], float(np.median(times[1:]))

    big, small, b = 50_000, 5_000, 500
    m = default_landmarks(big)
    print(f"jax {jax.__version__} on {jax.default_backend()}; float32, IMQ(1, -1/2), B = {b}, i.i.d. bootstrap; "
          f"Nystrom n = {big:,} (m = {m} landmarks) against the exact test at n = {small:,}")
    for d in (1, 2, 10, 50):
        rng = np.random.default_rng(d)
        xb = jnp.asarray(rng.normal(size=(big, d)), jnp.float32)
        xs = jnp.asarray(rng.normal(size=(small, d)), jnp.float32)
        first_n, later_n = timed(lambda: float(nystrom_ksd_test(xb, -xb, rng_key=jax.random.key(0), n_bootstrap=b).p_value))
        first_e, later_e = timed(lambda: float(gof_test(xs, -xs, rng_key=jax.random.key(0), n_bootstrap=b).p_value))
        flops_n = big * m * (3 * d + 12) + b * big * m
        flops_e = small * small / 2 * (3 * d + 12) + b * small * small / 2
        print(f"d = {d}: Nystrom {first_n:.2f} s first, {later_n:.3f} s later; exact {first_e:.2f} s first, "
              f"{later_e:.3f} s later; ratio later {later_n / later_e:.2f}, first {first_n / first_e:.2f}; "
              f"multiply-adds predict {flops_n / flops_e:.2f}", flush=True)


if __name__ == "__main__":
    main()
