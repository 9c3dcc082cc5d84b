"""KCC-SD paper, Figs. 3, 8 and 9: both discrepancies go to zero on i.i.d. samples of p as n grows.

Setting (paper): i.i.d. samples of p, RBF and IMQ kernels, a growing number of
samples; p a standard Gaussian (Fig. 3), a Gaussian with a random covariance
(Fig. 9) and a mixture (Fig. 8). What the text lost, chosen here and printed:
d = 5; the random covariance is A A^T / d + 0.1 I with A ~ N(0, 1) (seed 0);
the mixture is 0.5 N(-2 e_1, I) + 0.5 N(2 e_1, I); IMQ(1, -1/2) and RBF h = 1;
V-statistics reported as unsquared discrepancies; mean over 3 seeds.

The paper's finding: KSD and KCC-SD both go to zero, at the same rate (1/sqrt(n) for the
unsquared V-statistic).

    python experiments/kcc_sd/exact_samples.py [--ns 30 100 300 1000 3000]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax.stein import kcc_sd
from steinax.targets import Gaussian, GaussianMixture

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def targets(d):
    a = jax.random.normal(jax.random.key(0), (d, d))
    e1 = jnp.zeros(d).at[0].set(2.0)
    return {
        "standard (Fig. 3)": Gaussian(jnp.zeros(d), jnp.eye(d)),
        "random covariance (Fig. 9)": Gaussian(jnp.zeros(d), a @ a.T / d + 0.1 * jnp.eye(d)),
        "mixture (Fig. 8)": GaussianMixture(jnp.array([0.5, 0.5]), jnp.stack([-e1, e1]), jnp.stack([jnp.eye(d)] * 2)),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ns", type=int, nargs="+", default=[30, 100, 300, 1000, 3000])
    p.add_argument("--d", type=int, default=5)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    args = p.parse_args(argv)
    kernels = {"rbf": steinax.RBF(1.0), "imq": steinax.IMQ(1.0, -0.5)}
    banner("KCC-SD Figs. 3/8/9: discrepancies of exact samples as n grows", {
        "d": args.d, "targets": "N(0, I); N(0, A A^T/d + 0.1 I); 0.5 N(-2e1, I) + 0.5 N(2e1, I)",
        "kernels": "RBF h = 1; IMQ c = 1, beta = -1/2", "statistic": "sqrt of the V-statistic",
        "n": args.ns, "seeds": args.seeds,
    })
    rows = []
    for tname, target in targets(args.d).items():
        print(f"-- {tname}")
        print(f"{'n':>6} " + " ".join(f"{k + '_' + m:>12}" for k in kernels for m in ("ksd", "kcc_sd")))
        for n in args.ns:
            vals = {}
            for kname, kernel in kernels.items():
                ks, kc = [], []
                for seed in range(args.seeds):
                    x = target.sample(jax.random.key(100 + seed), n)
                    _, s = target.evaluate(None, x)
                    ks.append(float(steinax.ksd(x, s, kernel, squared=False, block_size=1000)))
                    kc.append(float(kcc_sd(x, s, kernel, squared=False, block_size=1000)))
                vals[kname] = (np.mean(ks), np.mean(kc))
                for metric, v in (("ksd", ks), ("kcc_sd", kc)):
                    rows.append({"target": tname, "n": n, "kernel": kname, "discrepancy": metric,
                                 "mean": np.mean(v), "std": np.std(v), "d": args.d, "seeds": args.seeds})
            print(f"{n:>6} " + " ".join(f"{vals[k][i]:>12.4g}" for k in kernels for i in (0, 1)), flush=True)
    write_csv_atomically(os.path.join(args.out, "exact_samples.csv"), rows)
    plt = pyplot()

    names = list(targets(args.d))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6))
    for ax, tname in zip(axes, names):
        for kname in kernels:
            for metric, ls in (("ksd", "--"), ("kcc_sd", "-")):
                sel = [r for r in rows if r["target"] == tname and r["kernel"] == kname and r["discrepancy"] == metric]
                ax.plot([r["n"] for r in sel], [r["mean"] for r in sel], ls, marker="o", label=f"{metric} ({kname})")
        ns = np.array(args.ns, float)
        ax.plot(ns, 3.0 / np.sqrt(ns), ":", color="gray", label="3 / sqrt(n)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("samples n")
        ax.set_title(f"{tname}, d = {args.d}")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("discrepancy (sqrt of V-statistic)")
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "exact_samples.png"))
    print(f"wrote {args.out}/exact_samples.csv and .png")


if __name__ == "__main__":
    main()
