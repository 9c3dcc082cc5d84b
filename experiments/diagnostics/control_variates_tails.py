"""Why *normal* control-variate intervals under-cover on a heavy-tailed target, and what does not fix it.

The normal intervals (the draws' sd of the adjusted values: what ``stein_control_variates`` reports when
``f`` is given as values, as here, or without a log-density) of ``E x_k^2`` on the skewed Student-t(5)
covered 169-178 times in 200, below the binomial 99% band. The library's answer, intervals simulated
from weighted tail draws (its module docstring), is measured by ``control_variates_coverage.py``. This script
reruns its i.i.d. setting (the same target, draws and seeds) and shows where the misses come from:

* the error in units of the reported standard error, ``z = (estimate - truth) / se``, by quartile of
  the replication's largest ``|x_k|``: a sample that has not reached far into the tail gives a fit
  ``g`` that is wrong where there are no draws, and since ``E_p g = 0`` holds over the whole line, the
  draws' mean of ``f - g`` is then shifted, while the adjusted values' sd (from the same draws) is small;
* the coverage of four intervals computed from the same adjusted values
  (``ControlVariateEstimate.adjusted``): the normal interval the library reports; a Student-t
  quantile with ``2 n / (kurtosis - 1)`` degrees of freedom (the sample variance's own uncertainty);
  the spread of the five cross-fitting folds' means with a t_4 quantile; and Johnson's (1978)
  skewness-corrected t;
* the same normal interval with each *fixed* basis instead of the cross-validated choice (polynomial
  fields of degree 2, 3, 4; polynomials of degree 3, 4) and for the plain mean, counting the misses
  above and below the truth: if the choice of basis caused the misses, some fixed basis would cover.

    python experiments/diagnostics/control_variates_tails.py [--reps 200] [--draws 1000]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import stein_control_variates
from steinax.diagnostics.control_variates import _n_features

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402
from control_variates_coverage import targets  # noqa: E402

FOLDS = 5  # stein_control_variates' default


def intervals(u: np.ndarray, truth: float) -> dict[str, bool]:
    """Whether each interval rule, applied to one replication's adjusted values ``u`` ``[n]``, covers ``truth``."""
    from scipy import stats

    n = u.size
    m, sd = u.mean(), u.std(ddof=1)
    se = sd / np.sqrt(n)
    c = u - m
    kurt = np.mean(c**4) / np.mean(c**2) ** 2
    df = max(2.0 * n / max(kurt - 1.0, 1e-9), 1.0)
    edges = np.linspace(0, n, FOLDS + 1).astype(int)
    fold_means = np.array([u[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
    se_folds = fold_means.std(ddof=1) / np.sqrt(FOLDS)
    mu3 = np.mean(c**3)
    d = m - truth  # Johnson (1978): T = (d + mu3 / (6 s^2 n) + mu3 d^2 / (3 s^4)) / (s / sqrt n)
    johnson = (d + mu3 / (6 * sd**2 * n) + mu3 * d * d / (3 * sd**4)) / se
    return {"normal (reported)": abs(d) <= 1.96 * se,
            "t, kurtosis df": abs(d) <= stats.t.ppf(0.975, df) * se,
            "fold means, t_4": abs(d) <= stats.t.ppf(0.975, FOLDS - 1) * se_folds,
            "Johnson skew-corrected": abs(johnson) <= 1.96}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--out", default="docs/experiments/diagnostics")
    a = p.parse_args(argv)
    from scipy.stats import binom

    fixed = [("polynomial_field", 2), ("polynomial_field", 3), ("polynomial_field", 4), ("polynomial", 3),
             ("polynomial", 4), ("plain mean", None)]
    # every fixed basis must fit the library's rule (fewer than n / 4 coefficients), or the comparison is incomplete
    least = max(4 * (_n_features(b, 2, q) + 1) for b, q in fixed if q is not None)
    if a.draws < least:
        p.error(f"--draws must be at least {least} (the degree-4 fields' coefficients times 4); received {a.draws}")

    lo, hi = (int(v) for v in binom.interval(0.99, a.reps, 0.95))
    banner("Stein control variates on a heavy-tailed target: where the intervals miss", {
        "target": "skewed Student-t(5), 2-D (control_variates_coverage.py)", "functions": "x_1^2, x_2^2",
        "draws": f"{a.draws} exact i.i.d. draws per replication (the coverage experiment's seeds)",
        "replications": a.reps, "estimator": "stein_control_variates(basis='auto'), 5 folds",
        "calibrated coverage within": f"[{lo}, {hi}] (binomial 99%)"})
    target, _, sampler, m1, m2 = targets()["skewed_t5"]
    z, reach, covered = [], [], []
    sides = {b: np.zeros((2, 2), int) for b in fixed}  # [function, (miss above, miss below)]
    for r in range(a.reps):
        x = sampler(jax.random.fold_in(jax.random.key(7), r), a.draws)
        f = jnp.concatenate([x, x * x], axis=-1)
        cv = stein_control_variates(x, target, f)
        for b in fixed:
            if b[1] is None:
                est, se = np.asarray(cv.mean, np.float64)[2:], np.asarray(cv.mean_standard_error, np.float64)[2:]
            else:
                one = stein_control_variates(x, target, f, basis=b[0], degree=b[1])
                est, se = np.asarray(one.estimate, np.float64)[2:], np.asarray(one.standard_error, np.float64)[2:]
            sides[b][:, 0] += (est - m2) > 1.96 * se
            sides[b][:, 1] += (est - m2) < -1.96 * se
        u = np.asarray(cv.adjusted, np.float64)[:, 2:]
        z.append((np.asarray(cv.estimate, np.float64)[2:] - m2) / np.asarray(cv.standard_error, np.float64)[2:])
        reach.append(np.abs(np.asarray(x, np.float64)).max(axis=0))
        covered.append([intervals(u[:, j], m2[j]) for j in range(2)])
    z, reach = np.array(z), np.array(reach)
    rows, rules = [], []
    print("   z = (estimate - truth) / reported se, by quartile of the replication's largest |x_k|:")
    for j in range(2):
        order = np.argsort(reach[:, j])
        for q, part in enumerate(np.array_split(order, 4)):
            row = {"function": f"x{j + 1}^2", "quartile": q + 1, "max_abs_x_low": float(reach[part, j].min()),
                   "max_abs_x_high": float(reach[part, j].max()), "mean_z": float(z[part, j].mean()),
                   "miss_rate": float(np.mean(np.abs(z[part, j]) > 1.96))}
            rows.append(row)
            print(f"   x{j + 1}^2  largest |x| {row['max_abs_x_low']:5.1f}-{row['max_abs_x_high']:5.1f}: mean z "
                  f"{row['mean_z']:+.2f}, |z| > 1.96 in {row['miss_rate']:.0%}")
    print(f"   covering replications of {a.reps} (calibrated: [{lo}, {hi}]):")
    for rule in covered[0][0]:
        counts = [sum(c[j][rule] for c in covered) for j in range(2)]
        rules.append({"rule": rule, "reps": a.reps, "covered_x1sq": counts[0], "covered_x2sq": counts[1],
                      "above_below_x1sq": "", "above_below_x2sq": ""})
        print(f"   {rule:<24s} x1^2 {counts[0]:3d}  x2^2 {counts[1]:3d}")
    print(f"   fixed bases, normal interval: covering of {a.reps} (misses above / below the truth):")
    for b, m in sides.items():
        name = b[0] if b[1] is None else f"{b[0]}:{b[1]}"
        counts = [a.reps - int(m[j].sum()) for j in range(2)]
        rules.append({"rule": f"fixed basis {name}", "reps": a.reps, "covered_x1sq": counts[0],
                      "covered_x2sq": counts[1], "above_below_x1sq": f"{m[0, 0]}/{m[0, 1]}",
                      "above_below_x2sq": f"{m[1, 0]}/{m[1, 1]}"})
        print(f"   {name:<22s} x1^2 {counts[0]:3d} ({m[0, 0]:2d} / {m[0, 1]:2d})  x2^2 {counts[1]:3d} "
              f"({m[1, 0]:2d} / {m[1, 1]:2d})")
    os.makedirs(a.out, exist_ok=True)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3), sharey=True)
    for j, ax in enumerate(axes):
        ax.scatter(reach[:, j], z[:, j], s=6)
        for level in (-1.96, 1.96):
            ax.axhline(level, color="C3", ls="--", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"the replication's largest |x_{j + 1}|")
        ax.set_title(f"E x_{j + 1}^2: error / reported se", fontsize=9)
    axes[0].set_ylabel("z")
    fig.tight_layout()
    save_figure(fig, os.path.join(a.out, "control_variates_tails.png"))
    write_csv_atomically(os.path.join(a.out, "control_variates_tails.csv"), rows)
    write_csv_atomically(os.path.join(a.out, "control_variates_tails_intervals.csv"), rules)
    print(f"wrote {a.out}/control_variates_tails.csv, control_variates_tails_intervals.csv and control_variates_tails.png")


if __name__ == "__main__":
    main()
