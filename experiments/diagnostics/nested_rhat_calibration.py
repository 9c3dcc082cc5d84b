"""How often a right answer fails a many-chain R-hat rule (issue 57, a first calibration): nested R-hat against
classic split R-hat on chains that are already converged.

    python experiments/diagnostics/nested_rhat_calibration.py [--reps 200] [--d 10] [--rho 0.0 0.9] [--out DIR]

Chains of stationary AR(1) draws with N(0, 1) marginals (``rho = 0``: exact independent draws; ``rho = 0.9``: a
mixing chain's autocorrelation), started at stationarity, so every run is right. For ``C`` chains of ``N`` draws in
``d`` coordinates, the worst coordinate's statistic is compared with thresholds: classic split R-hat
(``numpyro.diagnostics.split_gelman_rubin``, steinax.sample's current rule at 1.01) and nested R-hat
(:func:`steinax.diagnostics.nested_rhat`) with superchains of ``M = 4`` and ``M = 16`` chains. Printed: the fraction
of runs over 1.01 and over 1.005 (a right answer called not converged), and the 99th percentile of the worst
``R - 1``. A rule for ``steinax.sample`` needs both this and runs that are wrong (issue 57); this is the first half.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def chains(rng, c: int, n: int, d: int, rho: float) -> np.ndarray:
    """``[c, n, d]`` stationary AR(1) draws with N(0, 1) marginals."""
    x = np.empty((c, n, d))
    x[:, 0] = rng.standard_normal((c, d))
    scale = np.sqrt(1.0 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + scale * rng.standard_normal((c, d))
    return x


def main(argv=None):
    from numpyro.diagnostics import split_gelman_rubin

    from steinax.diagnostics import nested_rhat

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.9])
    p.add_argument("--chains", type=int, nargs="+", default=[64, 256])
    p.add_argument("--draws", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("many-chain R-hat rules on converged chains", {"reps": a.reps, "d": a.d, "rho": a.rho, "chains": a.chains,
                                                         "draws": a.draws, "marginals": "N(0, 1), at stationarity"})
    rng = np.random.default_rng(0)
    rows = []
    for rho in a.rho:
        for c in a.chains:
            for n in a.draws:
                stats = {"split R-hat": [], "nested R-hat (M=4)": [], "nested R-hat (M=16)": []}
                for _ in range(a.reps):
                    x = chains(rng, c, n, a.d, rho)
                    stats["split R-hat"].append(np.max(split_gelman_rubin(x)) if n >= 4 else np.nan)
                    stats["nested R-hat (M=4)"].append(np.max(nested_rhat(x, superchains=c // 4)))
                    stats["nested R-hat (M=16)"].append(np.max(nested_rhat(x, superchains=c // 16)))
                for rule, v in stats.items():
                    v = np.asarray(v)
                    row = {"rho": rho, "chains": c, "draws": n, "rule": rule,
                           "over_1.01": float(np.mean(v > 1.01)), "over_1.005": float(np.mean(v > 1.005)),
                           "p99_minus_1": float(np.nanquantile(v - 1.0, 0.99)) if np.isfinite(v).any() else np.nan}
                    rows.append(row)
                    print(f"rho {rho:3.1f} chains {c:4d} x {n:5d} draws  {rule:20s} over 1.01: {row['over_1.01']:5.1%}  "
                          f"over 1.005: {row['over_1.005']:5.1%}  99th percentile of R - 1: {row['p99_minus_1']:.4f}",
                          flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "nested_rhat_calibration.csv"), rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for rule in ("split R-hat", "nested R-hat (M=4)", "nested R-hat (M=16)"):
        for rho, style in zip(a.rho, ("-", "--")):
            sub = [r for r in rows if r["rule"] == rule and r["rho"] == rho and r["chains"] == max(a.chains)]
            ax.plot([r["draws"] for r in sub], [r["p99_minus_1"] for r in sub], style, marker="o",
                    label=f"{rule}, rho {rho}")
    ax.axhline(0.01, color="k", lw=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"draws per chain ({max(a.chains)} chains)")
    ax.set_ylabel("99th percentile of worst R - 1 (converged chains)")
    ax.legend(fontsize=6)
    save_figure(fig, os.path.join(a.out, "nested_rhat_calibration.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
