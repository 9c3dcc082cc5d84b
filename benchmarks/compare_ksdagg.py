"""steinax's KSDAgg against the authors' JAX code (github.com/antoninschrab/ksdagg, not on PyPI), one run.

    python benchmarks/compare_ksdagg.py --ksdagg /path/to/ksdagg-checkout [--n 10000] [--reps 100]

``--ksdagg``: a directory holding the authors' ``ksdagg`` package (``ksdagg/jax.py``); compared at
commit ``cc09450d`` (docs/tools/ksdagg.md). Three comparisons on shared inputs:

1. *Statistics*: the U-statistic KSD per bandwidth of the authors' default collection (their
   dictionary) against ``ksdagg_test``'s, on one Gaussian sample (float32 both).
2. *Aggregation*: the authors' Rademacher matrix (their seed and key splits, rebuilt here), the
   bootstrap statistics computed from it by steinax's Stein kernel, and
   :func:`steinax.stein.ksdagg.aggregated_decision` against the authors' decision and p-values.
3. *Decisions in distribution*: rejection rates over ``--reps`` samples (null: N(0, I); alternative:
   a 0.3 shift), each implementation with its own randomness, and the binomial 99% intervals.

``--n`` (default 0: skipped): wall time of both at this n with the authors' defaults (B1 = B2 = 2000,
10 bandwidths) and steinax's (B1 = B2 = 500), first call (compilation counted) and second.

``--speed 250`` (only this, then exit): both implementations at the same B (2000 + 2000, the authors'
default, the only B their compiled function accepts) on samples of that size (d = 2 and 10), the median of 7
calls after the first (each on new draws of the same shape: what a user checking many chains sees), and the
ratio steinax / authors.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from steinax.kernels import IMQ
from steinax.stein.ksd import stein_kernel_matrix
from steinax.stein.ksdagg import aggregated_decision, aggregation_weights, ksdagg_test


def _authors_multipliers(seed, b1, b2, m):
    """The authors' R: ``random.choice`` of +-1 after one split of ``PRNGKey(seed)``, column ``B1`` set to ones."""
    key = jax.random.PRNGKey(seed)
    key, subkey = jax.random.split(key)
    r = jax.random.choice(subkey, jnp.array([-1.0, 1.0]), shape=(b1 + b2 + 1, m))
    return r.at[b1].set(jnp.ones(m))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ksdagg", required=True)
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--d", type=int, default=2)
    p.add_argument("--speed", type=int, default=0)
    a = p.parse_args(argv)
    sys.path.insert(0, a.ksdagg)
    from ksdagg.jax import human_readable_dict, ksdagg

    if a.speed:
        return _speed(a.speed, ksdagg)

    d, m = a.d, 200
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(m, d)) + np.array([0.3] + [0.0] * (d - 1)), jnp.float32)
    s = -x
    print(f"jax {jax.__version__} on {jax.default_backend()}; ksdagg at {a.ksdagg}; n = {m}, d = {d}, float32")

    # 1. statistics
    out, dic = ksdagg(x, s, return_dictionary=True)
    human_readable_dict(dic)  # in place
    theirs = np.array([dic[f"Single test {i + 1}"]["KSD"] for i in range(10)])
    lam_theirs = np.array([dic[f"Single test {i + 1}"]["Bandwidth"] for i in range(10)])
    ours = ksdagg_test(x, s, rng_key=jax.random.key(0), n_bootstrap=(2000, 2000))
    print("1. statistics: max relative difference of the 10 KSDs "
          f"{np.max(np.abs(np.asarray(ours.discrepancies) - theirs) / np.abs(theirs)):.2e}; bandwidths "
          f"{np.max(np.abs(np.asarray(ours.bandwidths) - lam_theirs) / lam_theirs):.2e}; decisions: authors "
          f"{bool(out)}, steinax {ours.reject}")

    # 2. aggregation on the authors' multipliers
    b1 = b2 = 2000
    r = _authors_multipliers(42, b1, b2, m)
    boots, statistics = [], []
    for lam in lam_theirs:
        h = stein_kernel_matrix(x, s, x, s, IMQ(h=float(lam) ** 2))
        h = h - jnp.diag(jnp.diag(h))
        vals = jnp.sum(r * (r @ h), axis=1) / (m * (m - 1))
        statistics.append(vals[b1])
        boots.append(jnp.concatenate([vals[:b1], vals[b1 + 1:]]))
    boots, statistics = jnp.stack(boots), jnp.stack(statistics)
    reject, u, p_values, thresholds = aggregated_decision(statistics, boots[:, :b1], boots[:, b1:],
                                                          jnp.asarray(aggregation_weights(10)), 0.05, 50)
    p_theirs = np.array([dic[f"Single test {i + 1}"]["p-value"] for i in range(10)])
    t_theirs = np.array([dic[f"Single test {i + 1}"]["p-value threshold"] for i in range(10)])
    print(f"2. aggregation on the authors' multipliers: decision {bool(reject)} vs {bool(out)}; p-values equal "
          f"{int(np.sum(np.isclose(np.asarray(p_values), p_theirs, rtol=0, atol=1e-6)))}/10; thresholds max relative "
          f"difference {np.max(np.abs(np.asarray(thresholds) - t_theirs) / t_theirs):.2e}")

    # 3. decisions in distribution
    for label, shift in (("null", 0.0), ("shift 0.3", 0.3)) if a.reps else ():
        rej_t = rej_o = 0
        for rep in range(a.reps):
            y = jnp.asarray(np.random.default_rng(100 + rep).normal(size=(m, d)) + shift * (np.arange(d) == 0),
                            jnp.float32)
            rej_t += int(ksdagg(y, -y, seed=rep))
            rej_o += int(ksdagg_test(y, -y, rng_key=jax.random.key(rep)).reject)
        lo_t, hi_t = stats.binomtest(rej_t, a.reps).proportion_ci(0.99)
        lo_o, hi_o = stats.binomtest(rej_o, a.reps).proportion_ci(0.99)
        print(f"3. {label}: rejection rate authors {rej_t / a.reps:.3f} [{lo_t:.3f}, {hi_t:.3f}], steinax "
              f"{rej_o / a.reps:.3f} [{lo_o:.3f}, {hi_o:.3f}] (99% intervals, {a.reps} samples of n = {m})", flush=True)

    if a.n:
        y = jnp.asarray(np.random.default_rng(1).normal(size=(a.n, 10)), jnp.float32)
        for label, fn in (("authors (B = 2000 + 2000)", lambda: int(ksdagg(y, -y))),
                          ("steinax (B = 500 + 500)", lambda: ksdagg_test(y, -y, rng_key=jax.random.key(0)).reject),
                          ("steinax (B = 2000 + 2000)",
                           lambda: ksdagg_test(y, -y, rng_key=jax.random.key(0), n_bootstrap=2000).reject)):
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            print(f"n = {a.n}, d = 10: {label}: {times[0]:.1f} s first call, {times[1]:.1f} s second", flush=True)


def _speed(n, ksdagg):
    """Later calls in one process at the same B: the median of 7 calls after a first (compiling) one. The authors'
    function compiles B1 and B2 as traced values (they are not among its static arguments) and then fails its own
    integer check, so it runs at its default B = 2000 + 2000 only; steinax runs there too, and at its own 500."""
    print(f"jax {jax.__version__} on {jax.default_backend()}; n = {n}, float32; median of 7 calls after the first, "
          "each on new draws of the same shape")
    for d in (2, 10):
        rng = np.random.default_rng(d)
        draws = [jnp.asarray(rng.normal(size=(n, d)), jnp.float32) for _ in range(8)]
        medians = {}
        for label, fn in (("authors, B = 2000 + 2000", lambda y: int(ksdagg(y, -y))),
                          ("steinax, B = 2000 + 2000",
                           lambda y: ksdagg_test(y, -y, rng_key=jax.random.key(0), n_bootstrap=2000).reject),
                          ("steinax, B = 500 + 500 (its default)",
                           lambda y: ksdagg_test(y, -y, rng_key=jax.random.key(0)).reject)):
            times = []
            for y in draws:
                t0 = time.perf_counter()
                fn(y)
                times.append(time.perf_counter() - t0)
            medians[label] = float(np.median(times[1:]))
            print(f"d = {d}: {label}: first call {times[0]:.2f} s, later calls {medians[label] * 1e3:.1f} ms", flush=True)
        ratio = medians["steinax, B = 2000 + 2000"] / medians["authors, B = 2000 + 2000"]
        print(f"d = {d}: steinax / authors at the same B = {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
