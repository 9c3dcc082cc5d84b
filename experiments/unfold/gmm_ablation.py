"""Deep-unfolded SVGD, section IV-A: why DUSVGD needs ~108 iterations here and ~20 in the paper (issue 28).

Each row changes one thing from the setting of ``experiments/unfold/gmm.py`` (the paper's: T = 10,
B = 50, E = 10 epochs per stage, Adam 1e-2, gamma = 2.0; C-DUSVGD E = 40, Adam 1e-3, (0.3, 1.0)) and
retrains, then evaluates on the same 50 trials (same initial particles, same references):

* ``median gradient``: the bandwidth's median passes its gradient as PyTorch's ``torch.median`` does
  (``RBF("liu", median_gradient=True)``); steinax stops it. Hypothesis H1: the paper's learned steps
  differ because its autograd saw the median.
* ``Adam 1e-1`` / ``E = 100``: the learning rate and the epochs (H2: the steps hardly move from 2.0
  with the paper's Adam 1e-2 and 10 epochs; do larger updates find a schedule that reaches the
  threshold in ~20 iterations?).
* ``init 5.0``: a larger initial step (H2 too).
* The threshold's reading (H3): iterations to settle below log10 MMD^2 in {-1.0, -1.3, -1.7, -2.0} for
  the trained DUSVGD and the fixed step 2 (the paper's ratio DU / fixed is about 20 / 200); and, for every
  row, three readings of "iterations to reach": settle (stay below to the end), first touch (per trial),
  and the first crossing of the mean curve (what a figure of mean MMD shows).

    python experiments/unfold/gmm_ablation.py [--trials 50] [--out docs/experiments/unfold]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np
import optax

import steinax
from steinax import unfold
from steinax.kernels import RBF
from steinax.targets import gmm_1d

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402
from gmm import MMD_BANDWIDTH, common_arguments, evaluation_curves, iterations_below, seeds, training_problems  # noqa: E402

THRESHOLDS = (-1.0, -1.3, -1.7, -2.0)


def parse(argv):
    p = common_arguments(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--quick", action="store_true", help="2 epochs, 4 trials, 100 iterations (a smoke test)")
    p.add_argument("--out", default="docs/experiments/unfold")
    p.add_argument("--figure-only", action="store_true", help="redraw the figure from the CSV of a finished run")
    return p.parse_args(argv)


def figure(out: str, threshold: float) -> None:
    """Mean log10 MMD^2 against the iteration for every row, from ``gmm_ablation_curves.csv``."""
    import csv

    with open(os.path.join(out, "gmm_ablation_curves.csv")) as f:
        rows = list(csv.DictReader(f))
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, method in zip(axes, ("DUSVGD", "C-DUSVGD")):
        for change in dict.fromkeys(r["change"] for r in rows if r["method"] == method):
            pts = [(int(r["iteration"]), float(r["log10_mean_mmd2"])) for r in rows
                   if r["method"] == method and r["change"] == change]
            ax.plot(*zip(*pts), label=change, lw=1)
        ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"threshold {threshold}")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(0, None)
        ax.set(xlabel="iteration", title=f"{method}: one change at a time (50 trials)")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("log10 mean MMD^2")
    fig.tight_layout()
    save_figure(fig, os.path.join(out, "gmm_ablation.png"))


def main(argv=None):
    args = parse(argv)
    if args.figure_only:
        return figure(args.out, args.threshold)
    if args.quick:
        args.trials, args.iterations, args.batch = 4, 100, 4
    os.makedirs(args.out, exist_ok=True)
    epochs = (lambda e: 1) if args.quick else (lambda e: e)
    banner("Deep-unfolded SVGD, IV-A ablations (issue 28)", {
        "base": "gmm.py's setting: T = 10, B = 50; DU E = 10, Adam 1e-2, init 2.0; C-DU E = 40, Adam 1e-3, (0.3, 1.0)",
        "evaluation": f"{args.trials} trials x {args.iterations} iterations, MMD^2 to {args.reference} exact samples",
        "threshold": f"log10 MMD^2 = {args.threshold} (and {THRESHOLDS} for the threshold rows)",
        "jax": f"{jax.__version__}, {jax.default_backend()}, float32",
    })
    target = gmm_1d()
    key = jax.random.key(args.seed)
    n = args.particles
    problem = training_problems(target, key, n)
    loss = unfold.mmd_loss(MMD_BANDWIDTH)
    plain, torch_like = steinax.svgd(), steinax.svgd(RBF("liu", median_gradient=True))
    _, eval_seeds = seeds(args)

    def du(method, lr=1e-2, e=10, init=2.0):
        return unfold.train_dusvgd(problem, loss, args.T, target=target, method=method, epochs=epochs(e),
                                   batch_size=args.batch, optimizer=optax.adam(lr), init=init,
                                   rng_key=jax.random.fold_in(key, 2))

    def cdu(method, lr=1e-3, e=40):
        return unfold.train_chebyshev(problem, loss, args.T, target=target, method=method, epochs=epochs(e),
                                      batch_size=args.batch, optimizer=optax.adam(lr), alpha=0.3, beta=1.0,
                                      rng_key=jax.random.fold_in(key, 3))

    # (row, what changes, schedule trainer) -- each from the paper's setting; evaluation always uses steinax's
    # SVGD with the stopped median (the schedule is what is learned; the update is the paper's)
    rows = [
        ("DUSVGD", "none (gmm.py's setting)", lambda: du(plain)),
        ("DUSVGD", "median gradient passed (torch.median)", lambda: du(torch_like)),
        ("DUSVGD", "Adam 1e-1", lambda: du(plain, lr=1e-1)),
        ("DUSVGD", "E = 100 epochs per stage", lambda: du(plain, e=100)),
        ("DUSVGD", "init 5.0", lambda: du(plain, init=5.0)),
        ("C-DUSVGD", "none (gmm.py's setting)", lambda: cdu(plain)),
        ("C-DUSVGD", "median gradient passed (torch.median)", lambda: cdu(torch_like)),
        ("C-DUSVGD", "Adam 1e-2", lambda: cdu(plain, lr=1e-2)),
    ]
    out, curves_by_row = [], {}
    print(f"   {'method':<9} {'change':<40} {'steps (t = 0..9)':<44} {'iters to settle':>16} {'first touch':>11} "
          f"{'mean crv':>9} {'final':>8} {'train s':>8}")
    for name, change, train in rows:
        t0 = time.perf_counter()
        schedule = train()
        seconds = time.perf_counter() - t0
        mmd = evaluation_curves(plain, target, key, n, args, optax.sgd(schedule), eval_seeds)[0]
        its = iterations_below(mmd, args.threshold)
        first = iterations_below(mmd, args.threshold, settle=False)
        reached = ~np.isnan(its)
        mean = float(np.mean(its[reached])) if reached.any() else float("nan")
        se = float(np.std(its[reached], ddof=1) / np.sqrt(reached.sum())) if reached.sum() > 1 else float("nan")
        mean_curve = np.log10(np.mean(mmd, axis=0))
        below = mean_curve <= args.threshold
        crossing = int(np.argmax(below)) if below.any() else None  # the mean curve's first crossing (a figure's reading)
        steps = " ".join(f"{v:.2f}" for v in np.asarray(schedule.steps))
        first_mean = float(np.mean(first[~np.isnan(first)])) if np.any(~np.isnan(first)) else float("nan")
        print(f"   {name:<9} {change:<40} {steps:<44} {mean:>9.1f} ± {se:<4.1f} {first_mean:>11.1f} "
              f"{str(crossing):>9} {mean_curve[-1]:>8.2f} {seconds:>8.1f}", flush=True)
        out.append({"method": name, "change": change, "steps": " ".join(f"{v:.3f}" for v in np.asarray(schedule.steps)),
                    "reached": int(reached.sum()), "trials": len(its), "iterations_mean": mean, "iterations_se": se,
                    "first_touch_mean": first_mean, "mean_curve_crossing": crossing,
                    "log10_mean_mmd2_final": float(mean_curve[-1]), "training_seconds": seconds,
                    "threshold": args.threshold})
        curves_by_row[(name, change)] = mmd
    write_csv_atomically(os.path.join(args.out, "gmm_ablation.csv"), out)
    write_csv_atomically(os.path.join(args.out, "gmm_ablation_curves.csv"), [
        {"method": name, "change": change, "iteration": t, "log10_mean_mmd2": float(v)}
        for (name, change), mmd in curves_by_row.items() for t, v in enumerate(np.log10(np.mean(mmd, axis=0)))])

    # the threshold's reading: the trained DUSVGD (paper's setting) against the fixed step 2
    base = curves_by_row[("DUSVGD", "none (gmm.py's setting)")]
    fixed = evaluation_curves(plain, target, key, n, args, optax.sgd(2.0), eval_seeds)[0]
    thr_rows = []
    print("   threshold (log10 MMD^2)   DUSVGD iters   fixed-2 iters   DU / fixed   (paper: ~20 / ~200 = 0.1)")
    for thr in THRESHOLDS:
        a, b = iterations_below(base, thr), iterations_below(fixed, thr)
        ma = float(np.mean(a[~np.isnan(a)])) if np.any(~np.isnan(a)) else float("nan")
        mb = float(np.mean(b[~np.isnan(b)])) if np.any(~np.isnan(b)) else float("nan")
        print(f"   {thr:>24.1f} {ma:>14.1f} {mb:>15.1f} {ma / mb:>12.2f}")
        thr_rows.append({"threshold": thr, "dusvgd_iterations": ma, "fixed2_iterations": mb, "ratio": ma / mb,
                         "dusvgd_reached": int(np.sum(~np.isnan(a))), "fixed2_reached": int(np.sum(~np.isnan(b)))})
    write_csv_atomically(os.path.join(args.out, "gmm_ablation_thresholds.csv"), thr_rows)
    figure(args.out, args.threshold)
    return out, thr_rows


if __name__ == "__main__":
    main()
