"""Level and power of KSDAgg against the single-kernel KSD test, i.i.d. samples and autocorrelated chains.

Setting (the project's calibration experiments, experiments/kcc_sd/gof_calibration.py and
experiments/diagnostics/dependent_bootstrap.py): p = N(0, I_d).

* Level, i.i.d.: ``--reps`` samples of n = 200 from p, d = 5 (KSDAgg, 10 bandwidths, B1 = B2 = 500;
  the single-kernel test: IMQ(1, -1/2), U-statistic, B = 500).
* Level, chains: ``--reps`` sets of 4 stationary AR(1) chains of 500 draws (phi in ``--phis``),
  d = 3, both tests with the dependent wild bootstrap (block length 8 tau, estimated).
* Power: the alternatives of gof_calibration.py (coordinate 0's mean shifted by delta, n = 200, d = 5),
  ``--power-reps`` samples per delta; the difference of the two rejection rates and its Monte Carlo
  standard error (paired samples: the same data for both tests).

A calibrated test's rejection count is Binomial(reps, level): the 99% interval is printed beside it.

    python experiments/diagnostics/ksdagg_calibration.py [--reps 200] [--power-reps 200]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np

from steinax.stein import gof_test, ksdagg_test

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402
from diagnostics.dependent_bootstrap import ar1_chains  # noqa: E402


def decisions(x, chains, rng_key, bootstrap, n_bootstrap, level):
    """``(KSDAgg rejects, single-kernel test rejects)`` on one data set."""
    kw = dict(bootstrap=bootstrap, chains=chains)
    agg = ksdagg_test(x, -x, rng_key=rng_key, n_bootstrap=n_bootstrap, level=level, **kw).reject
    one = gof_test(x, -x, rng_key=rng_key, estimator="u", n_bootstrap=n_bootstrap, level=level, **kw).reject
    return bool(agg), bool(one)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--power-reps", type=int, default=200)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--level", type=float, default=0.05)
    p.add_argument("--shifts", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.4, 0.6])
    p.add_argument("--phis", type=float, nargs="+", default=[0.5, 0.7],
                   help="AR(1) coefficients; 8 tau must fit 10 times in a chain (phi 0.9 needs chains of >= 1520 draws)")
    p.add_argument("--parts", default="level_iid,level_ar1,power", help="comma-separated subset of the three parts")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--out", default="docs/experiments/diagnostics")
    a = p.parse_args(argv)
    from scipy.stats import binom

    lo, hi = (int(v) for v in binom.interval(0.99, a.reps, a.level))
    banner("KSDAgg vs the single-kernel KSD test: level and power", {
        "p": "N(0, I_d)", "level": a.level, "bootstrap draws": f"KSDAgg B1 = B2 = {a.bootstrap}; single test B = {a.bootstrap}",
        "KSDAgg": "10 IMQ bandwidths (the authors' collection), uniform weights, 50 bisection steps",
        "single test": "IMQ(1, -1/2), U-statistic", "level replications": a.reps,
        "calibrated: rejections within": f"[{lo}, {hi}] (binomial 99%)", "power replications": a.power_reps,
        "i.i.d.": f"n = {a.n}, d = 5", "chains": f"{a.chains} AR(1) chains x {a.draws} draws, d = 3, phi {a.phis}"})
    rows = []
    key = jax.random.key(2026)

    def record(setting, value, reps, agg, one):
        rows.append({"setting": setting, "value": value, "reps": reps, "ksdagg_rejections": agg,
                     "single_rejections": one, "ksdagg_rate": agg / reps, "single_rate": one / reps,
                     "difference": np.nan, "difference_se": np.nan})

    parts = set(a.parts.split(","))
    # level, i.i.d.
    counts = np.zeros(2, int)
    for r in range(a.reps if "level_iid" in parts else 0):
        k1, k2 = jax.random.split(jax.random.fold_in(key, r))
        counts += decisions(jax.random.normal(k1, (a.n, 5)), 1, k2, "iid", a.bootstrap, a.level)
    if "level_iid" in parts:
        record("level_iid", 0.0, a.reps, *counts)
        print(f"level, i.i.d.: KSDAgg {counts[0]}/{a.reps}, single {counts[1]}/{a.reps} (interval [{lo}, {hi}])",
              flush=True)
    # level, chains
    for phi in (a.phis if "level_ar1" in parts else []):
        counts = np.zeros(2, int)
        for r in range(a.reps):
            k1, k2 = jax.random.split(jax.random.fold_in(key, 10_000 + r))
            x = ar1_chains(k1, a.chains, a.draws, 3, phi).reshape(a.chains * a.draws, 3)
            counts += decisions(x, a.chains, k2, "dependent", a.bootstrap, a.level)
        record("level_ar1", phi, a.reps, *counts)
        print(f"level, AR(1) phi = {phi}: KSDAgg {counts[0]}/{a.reps}, single {counts[1]}/{a.reps} "
              f"(dependent bootstrap; interval [{lo}, {hi}])", flush=True)
    # power
    if "power" in parts:
        print(f"power ({a.power_reps} paired samples per shift): rates and KSDAgg - single +- 2 s.e.")
    for shift in (a.shifts if "power" in parts else []):
        both = np.zeros((a.power_reps, 2), int)
        for r in range(a.power_reps):
            k1, k2 = jax.random.split(jax.random.fold_in(key, 20_000 + r))
            x = jax.random.normal(k1, (a.n, 5)).at[:, 0].add(shift)
            both[r] = decisions(x, 1, k2, "iid", a.bootstrap, a.level)
        diff = both[:, 0] - both[:, 1]
        se = diff.std(ddof=1) / np.sqrt(a.power_reps) if a.power_reps > 1 else np.nan
        record("power_shift", shift, a.power_reps, *both.sum(0))
        rows[-1].update(difference=diff.mean(), difference_se=se)
        verdict = "at least as powerful" if diff.mean() >= -2 * se else "LESS powerful"
        print(f"  shift {shift:.2f}: KSDAgg {both[:, 0].mean():.3f}, single {both[:, 1].mean():.3f}; difference "
              f"{diff.mean():+.3f} +- {2 * se:.3f} -> {verdict} within 2 s.e.", flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, f"ksdagg_calibration_{'_'.join(sorted(parts))}.csv"), rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    sel = [r for r in rows if r["setting"] == "power_shift"]
    if not sel:
        print(f"wrote {a.out}/ksdagg_calibration_{'_'.join(sorted(parts))}.csv")
        return
    for col, label in (("ksdagg_rate", "KSDAgg (10 bandwidths)"), ("single_rate", "KSD, IMQ(1, -1/2)")):
        ax.plot([r["value"] for r in sel], [r[col] for r in sel], marker="o", label=label)
    ax.axhline(a.level, color="gray", lw=0.8, ls="--")
    ax.set_xlabel("shift of coordinate 0's mean")
    ax.set_ylabel("rejection rate")
    ax.set_title(f"power, n = {a.n}, d = 5, level {a.level}")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(a.out, "ksdagg_power.png"))
    print(f"wrote {a.out}/ksdagg_calibration_{'_'.join(sorted(parts))}.csv and ksdagg_power.png")


if __name__ == "__main__":
    main()
