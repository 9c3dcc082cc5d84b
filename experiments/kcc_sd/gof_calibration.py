"""Calibration and power of the KSD and KCC-SD goodness-of-fit tests (wild bootstrap).

Setting: p = N(0, I_d), d = 5; n = 200 samples per replication; level 0.05;
B = 500 Rademacher bootstrap draws; IMQ(1, -1/2) for KSD, the same IMQ per
coordinate for KCC-SD; U- and V-statistics.

* Null: samples from p itself, 200 replications. A calibrated test's rejection
  count is Binomial(200, 0.05): 99% interval [3, 19].
* Power: samples from p with coordinate 0's mean shifted by delta, 100 replications per delta.

    python experiments/kcc_sd/gof_calibration.py [--reps 200] [--power-reps 100]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp

from steinax.stein import gof_test

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

VARIANTS = [("ksd", "v"), ("ksd", "u"), ("kcc_sd", "v"), ("kcc_sd", "u")]


def rejection_rate(kind, estimator, shift, reps, n, d, seed, n_bootstrap, level):
    def one(k):
        k1, k2 = jax.random.split(k)
        x = jax.random.normal(k1, (n, d)).at[:, 0].add(shift)
        # scores of p = N(0, I) at the samples
        return gof_test(x, -x, rng_key=k2, kind=kind, estimator=estimator, n_bootstrap=n_bootstrap, level=level).reject

    rejected = jax.lax.map(one, jax.random.split(jax.random.key(seed), reps))
    return int(jnp.sum(rejected))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--power-reps", type=int, default=100)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--d", type=int, default=5)
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--level", type=float, default=0.05)
    p.add_argument("--shifts", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0])
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    args = p.parse_args(argv)
    from scipy.stats import binom

    lo, hi = binom.interval(0.99, args.reps, args.level)
    banner("Wild-bootstrap KSD / KCC-SD tests: calibration and power", {
        "p": f"N(0, I_{args.d})", "n": args.n, "level": args.level, "bootstrap draws": args.bootstrap,
        "kernel": "IMQ(1, -1/2) (per coordinate for KCC-SD)", "null replications": args.reps,
        "power replications per shift": args.power_reps, "shifts of coordinate 0's mean": args.shifts,
        "calibrated: rejections within": f"[{int(lo)}, {int(hi)}] (binomial 99%)",
    })
    rows = []
    print(f"{'test':<12} {'null rejections':>16} {'rate':>6} {'in 99% interval':>16}")
    for kind, est in VARIANTS:
        count = rejection_rate(kind, est, 0.0, args.reps, args.n, args.d, 2026, args.bootstrap, args.level)
        rows.append({"test": f"{kind}_{est}", "shift": 0.0, "reps": args.reps, "rejections": count,
                     "rate": count / args.reps, "kind": "null"})
        print(f"{kind + '_' + est:<12} {count:>16} {count / args.reps:>6.3f} {str(lo <= count <= hi):>16}", flush=True)
    print(f"\npower (rejection rate, {args.power_reps} replications)")
    print(f"{'shift':>6} " + " ".join(f"{k + '_' + e:>10}" for k, e in VARIANTS))
    for shift in args.shifts:
        rates = []
        for kind, est in VARIANTS:
            count = rejection_rate(kind, est, shift, args.power_reps, args.n, args.d, 7, args.bootstrap, args.level)
            rates.append(count / args.power_reps)
            rows.append({"test": f"{kind}_{est}", "shift": shift, "reps": args.power_reps, "rejections": count,
                         "rate": count / args.power_reps, "kind": "power"})
        print(f"{shift:>6.2f} " + " ".join(f"{r:>10.2f}" for r in rates), flush=True)
    write_csv_atomically(os.path.join(args.out, "gof_calibration.csv"), rows)
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for kind, est in VARIANTS:
        sel = [r for r in rows if r["kind"] == "power" and r["test"] == f"{kind}_{est}"]
        ax.plot([r["shift"] for r in sel], [r["rate"] for r in sel], marker="o", label=f"{kind} ({est})")
    ax.axhline(args.level, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("shift of coordinate 0's mean")
    ax.set_ylabel("rejection rate")
    ax.set_title(f"power, n={args.n}, d={args.d}, level {args.level}")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "gof_power.png"))
    print(f"wrote {args.out}/gof_calibration.csv and gof_power.png")


if __name__ == "__main__":
    main()
