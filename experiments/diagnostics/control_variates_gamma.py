"""Stein control variates on a Gamma(3, 2) in log space: do the reported errors match the spread of the estimates?

The case the issue "Trust, round 4" found: ``z = log x``, ``x ~ Gamma(shape 3, rate 2)``, so
``log p(z) = 3 z - 2 e^z`` (the Jacobian included), i.i.d. exact draws, and the functions
``f = (exp(z / 2), z^2)`` with exact expectations ``E sqrt(x) = Gamma(3.5) / (Gamma(3) sqrt(2))`` and
``E (log x)^2 = (psi(3) - log 2)^2 + psi'(3)``. Its 95% intervals covered 270 of 300 replications, below the
binomial 99% band [275, 294], with misses on both sides.

Per function, over ``--reps`` replications of ``--draws`` draws: the coverage of the library's 95% intervals
(``cv.interval()``: the simulated, possibly asymmetric ones), with the misses on each side; the ratio of
the estimates' spread (the sd of their errors) to the median reported standard error (1 when the reported error
is honest), and their mean error (a bias) in the same unit; the measured variance reduction (variance of the plain means over that of the estimates) against the
median reported one; and which basis ``auto`` chose how often.

    python experiments/diagnostics/control_variates_gamma.py [--reps 300] [--draws 1000] [--basis auto] [--seed 0]
        [--tail-draws N]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special, stats

from steinax.diagnostics import stein_control_variates

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

SHAPE, RATE = 3.0, 2.0


def logp(z):
    return jnp.sum(SHAPE * z - RATE * jnp.exp(z))


def functions(z):
    return jnp.stack([jnp.exp(z[0] / 2.0), z[0] ** 2])


def exact():
    sqrt_x = special.gamma(SHAPE + 0.5) / (special.gamma(SHAPE) * np.sqrt(RATE))
    log_sq = (special.digamma(SHAPE) - np.log(RATE)) ** 2 + special.polygamma(1, SHAPE)
    return np.array([sqrt_x, log_sq])


def candidates(est, se, bounds, fold_se, truth):
    """Coverage and rms error over rms half-width (in se units) of the library's intervals and of four repairs that
    use the folds' spread ``fold_se`` (docs/tools/control-variates.md, "The Gamma case")."""
    z = stats.norm.ppf(0.975)
    err = est - truth[None]
    ratio = np.maximum(1.0, fold_se / se)
    half = np.sqrt((1 + ratio**2) / 2)
    rules = {
        "library": (bounds[:, 0], bounds[:, 1]),
        "(a) normal, max(se, se_fold)": (est - z * np.maximum(se, fold_se), est + z * np.maximum(se, fold_se)),
        "(b) normal, pooled": (est - z * np.sqrt((se**2 + fold_se**2) / 2), est + z * np.sqrt((se**2 + fold_se**2) / 2)),
        "(d) simulated, widened": (est - (est - bounds[:, 0]) * ratio, est + (bounds[:, 1] - est) * ratio),
        "(e) simulated, half-widened": (est - (est - bounds[:, 0]) * half, est + (bounds[:, 1] - est) * half),
    }
    for name, (lo, hi) in rules.items():
        cover = ((lo <= truth[None]) & (truth[None] <= hi)).sum(axis=0)
        rms = np.sqrt(np.mean(err**2, axis=0) / np.mean(((hi - lo) / (2 * z)) ** 2, axis=0))
        print(f"  {name:>28}: covered {cover.tolist()}, rms error / rms half-width in se {np.round(rms, 2).tolist()}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--basis", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tail-draws", type=int, default=None,
                   help="the library's tail_draws (default its own: min(4 n, 20000)); 0: normal intervals")
    p.add_argument("--save", default=None, help="an .npz path for the per-replication arrays (for offline analysis)")
    p.add_argument("--out", default="docs/experiments/diagnostics",
                   help="folder for control_variates_gamma.csv (one row per replication and function) and .png")
    a = p.parse_args(argv)
    with jax.enable_x64(True):  # scoped: the caller's precision is left as it was
        run(a)


def run(a):
    truth = exact()
    banner("Stein control variates, Gamma in log space", {
        "target": f"z = log x, x ~ Gamma({SHAPE:g}, rate {RATE:g}): log p(z) = {SHAPE:g} z - {RATE:g} e^z",
        "draws": f"i.i.d., n = {a.draws}, {a.reps} replications, seed {a.seed}, float64",
        "estimator": f"stein_control_variates(basis={a.basis!r}, tail_draws={a.tail_draws}), f passed as a function",
        "functions": f"exp(z / 2), z^2; exact expectations {truth.round(6).tolist()}"})
    rng = np.random.default_rng(a.seed)
    est, se, plain, reported_vr, bounds, fold_se, chosen = [], [], [], [], [], [], collections.Counter()
    t0 = time.perf_counter()
    for r in range(a.reps):
        z = np.log(rng.gamma(SHAPE, 1.0 / RATE, size=(a.draws, 1)))
        cv = stein_control_variates(z, logp, functions, basis=a.basis, key=jax.random.key(a.seed * 100_000 + r),
                                    tail_draws=a.tail_draws)
        est.append(np.asarray(cv.estimate, np.float64))
        se.append(np.asarray(cv.standard_error, np.float64))
        plain.append(np.asarray(jax.vmap(functions)(jnp.asarray(z)), np.float64).mean(axis=0))
        reported_vr.append(np.asarray(cv.variance_reduction, np.float64))
        bounds.append(np.asarray(cv.interval(0.95), np.float64))  # the library's own (simulated, asymmetric) interval
        folds = np.array_split(np.asarray(cv.adjusted, np.float64), 5)  # the library's five contiguous folds
        fold_se.append(np.std([f.mean(axis=0) for f in folds], axis=0, ddof=1) / np.sqrt(5))
        chosen.update(str(b) for b in np.atleast_1d(cv.basis))
        if (r + 1) % 50 == 0:
            print(f"  {r + 1} replications, {time.perf_counter() - t0:.0f} s", flush=True)
    est, se, plain, reported_vr, bounds, fold_se = map(np.asarray, (est, se, plain, reported_vr, bounds, fold_se))
    err = est - truth[None]
    below_truth = bounds[:, 1] < truth[None]  # the interval lies below the truth: the estimate is too low
    above_truth = bounds[:, 0] > truth[None]
    covered = ~(below_truth | above_truth)
    lo, hi = stats.binom.ppf([0.005, 0.995], a.reps, 0.95).astype(int)
    print(f"95% intervals: a calibrated interval covers in Binomial({a.reps}, 0.95), 99% band [{lo}, {hi}]")
    for j, name in enumerate(("exp(z/2)", "z^2")):
        above, below = int(above_truth[:, j].sum()), int(below_truth[:, j].sum())
        spread = float(np.std(err[:, j]))
        measured_vr = float(np.var(plain[:, j]) / np.var(est[:, j]))
        bias = float(np.mean(err[:, j]))
        print(f"{name:>9}: covered {int(covered[:, j].sum())} of {a.reps} (estimate too high {above}, too low {below}); "
              f"mean error {bias / np.median(se[:, j]):+.2f} median se (its own se "
              f"{spread / np.sqrt(a.reps) / np.median(se[:, j]):.2f}); error sd / median reported se "
              f"{spread / np.median(se[:, j]):.2f} (rms error / rms se "
              f"{np.sqrt(np.mean(err[:, j] ** 2) / np.mean(se[:, j] ** 2)):.2f}); variance reduction measured "
              f"{measured_vr:.3g}, reported {np.median(reported_vr[:, j]):.3g} (median over replications), "
              f"{np.var(plain[:, j]) / np.mean(se[:, j] ** 2):.3g} (the plain means' variance over the mean reported "
              "variance: what an honest mean-square error matches)", flush=True)
    if a.save:
        np.savez(a.save, estimate=est, standard_error=se, interval=bounds, fold_se=fold_se, plain=plain, truth=truth,
                 variance_reduction=reported_vr)
    # candidate repairs, measured here before any library change: se_fold = the sd of the five folds' means / sqrt 5
    candidates(est, se, bounds, fold_se, truth)
    names = ("exp(z/2)", "z^2")
    tag = f"n{a.draws}_seed{a.seed}"
    write_csv_atomically(os.path.join(a.out, f"control_variates_gamma_{tag}.csv"), [
        {"replication": r, "function": names[j], "estimate": est[r, j], "standard_error": se[r, j],
         "lower": bounds[r, 0, j], "upper": bounds[r, 1, j], "fold_se": fold_se[r, j], "plain_mean": plain[r, j],
         "exact": truth[j]} for r in range(a.reps) for j in range(2)])
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), layout="constrained")
    grid = np.linspace(-5, 5, 201)
    for j, ax in enumerate(axes):
        ax.hist(err[:, j] / se[:, j], bins=np.linspace(-5, 5, 41), density=True, alpha=0.6, label="error / reported se")
        ax.plot(grid, stats.norm.pdf(grid), "k", label="N(0, 1): an honest se")
        ax.set_title(f"{names[j]}, n = {a.draws}, {a.reps} replications")
    axes[0].legend(fontsize=8)
    save_figure(fig, os.path.join(a.out, f"control_variates_gamma_{tag}.png"))
    print("bases chosen (per function and replication):", dict(chosen))


if __name__ == "__main__":
    main()
