"""KCC-SD paper, Fig. 2: a non-tight sequence (after Gorham & Mackey 2017) against p = N(0, I_d).

The text keeps only: Q_n is the empirical distribution of n points with pairwise distances
``>= r_n -> infinity``, so RBF kernel values between distinct points vanish as n grows.
Chosen here and printed: d = 5; points ``x_i = (i - (n + 1)/2) r_n e_1`` with ``r_n = sqrt(n)``
(spread along the first axis, the other coordinates at 0); U-statistics (the V-statistic's
diagonal grows with ||x_i||^2 and would "detect" the sequence trivially); RBF h = 1 and
IMQ(1, -1/2), the same kernel per coordinate for KCC-SD.

Expected (Gorham & Mackey): the RBF KSD goes to 0 although Q_n does not converge; KCC-SD does not.

    python experiments/kcc_sd/nontight.py [--ns 4 8 16 32 64 128 256 512]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax.numpy as jnp

import steinax
from steinax.stein import kcc_sd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ns", type=int, nargs="+", default=[4, 8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--d", type=int, default=5)
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    args = p.parse_args(argv)
    kernels = {"rbf": steinax.RBF(1.0), "imq": steinax.IMQ(1.0, -0.5)}
    banner("KCC-SD Fig. 2: a non-tight sequence against N(0, I)", {
        "points": "x_i = (i - (n+1)/2) sqrt(n) e_1, i = 1..n", "d": args.d, "n": args.ns,
        "statistic": "squared U-statistics", "kernels": "RBF h = 1; IMQ c = 1, beta = -1/2",
    })
    rows = []
    print(f"{'n':>5} " + " ".join(f"{k + '_' + m:>12}" for k in kernels for m in ("ksd", "kcc_sd")))
    for n in args.ns:
        pos = (jnp.arange(1, n + 1) - (n + 1) / 2.0) * jnp.sqrt(float(n))
        x = jnp.zeros((n, args.d)).at[:, 0].set(pos)
        s = -x  # score of N(0, I)
        vals = []
        for name, kernel in kernels.items():
            for metric, fn in (("ksd", steinax.ksd), ("kcc_sd", kcc_sd)):
                v = float(fn(x, s, kernel, "u"))
                vals.append(v)
                rows.append({"n": n, "kernel": name, "discrepancy": metric, "value": v, "d": args.d})
        print(f"{n:>5} " + " ".join(f"{v:>12.4g}" for v in vals), flush=True)
    write_csv_atomically(os.path.join(args.out, "nontight.csv"), rows)
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name in kernels:
        for metric, ls in (("ksd", "--"), ("kcc_sd", "-")):
            sel = [r for r in rows if r["kernel"] == name and r["discrepancy"] == metric]
            ax.plot([r["n"] for r in sel], [abs(r["value"]) + 1e-12 for r in sel], ls, marker="o", label=f"{metric} ({name})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (points spread by sqrt(n))")
    ax.set_ylabel("|squared U-statistic| (+1e-12)")
    ax.set_title(f"non-tight sequence vs N(0, I_{args.d})")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "nontight.png"))
    print(f"wrote {args.out}/nontight.csv and .png")


if __name__ == "__main__":
    main()
