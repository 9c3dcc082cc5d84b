"""How the SGLD and pSGLD baselines' step sizes for ``steinax bench`` were chosen.

Setting: ``steinax bench``'s own jobs (the task's default settings: BNN 20 chains, BLR 100
chains, the same steps and minibatches as the particle methods; each chain keeps 10 thinned
draws of its second half), on splits 100, 101, 102, which the reported tables (splits
0..19) do not use, over a grid of step sizes. The bench default (``BenchSettings.sgld_step``)
is the step with the best mean test log-likelihood here; a step at which a chain diverges
scores -inf.

    python experiments/bnn/sgld_step_grid.py [--task bnn] [--dataset boston] [--steps 1e-6 3e-6 1e-5 3e-5 1e-4]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

from steinax import datasets
from steinax.interfaces import bench

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

SPLITS = (100, 101, 102)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="bnn", choices=bench.TASKS)
    p.add_argument("--dataset", default="boston")
    p.add_argument("--step-sizes", type=float, nargs="+", default=[1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3])
    p.add_argument("--methods", nargs="+", default=["sgld", "psgld"])
    p.add_argument("--splits", type=int, nargs="+", default=list(SPLITS))
    p.add_argument("--steps", type=int, default=None, help="override the task's steps (smoke runs)")
    p.add_argument("--out", default="docs/experiments/bnn")
    args = p.parse_args(argv)
    s = bench.DEFAULTS[args.task]
    if args.steps is not None:
        s = dataclasses.replace(s, steps=args.steps, keep=min(s.keep, args.steps // 2))
    banner(f"SG-MCMC step size for steinax bench {args.task} on {args.dataset}", {
        "settings": s.key(), "chains": s.particles, "draws kept per chain": s.keep, "splits": args.splits,
        "grid": args.step_sizes, "selection": "best mean test log-likelihood over these splits",
    })
    X, y = datasets.load(args.dataset)
    rows = []
    for method in args.methods:
        for eps in args.step_sizes:
            for split in args.splits:
                try:
                    r = bench._one_job(args.task, X, y, method, split, dataclasses.replace(s, sgld_step=eps, psgld_step=eps))
                except FloatingPointError:
                    r = {"rmse": float("nan"), "loglik": -float("inf"), "accuracy": float("nan"), "wall_time": 0.0}
                rows.append({"method": method, "step_size": eps, "split": split, **{k: r[k] for k in ("rmse", "loglik", "accuracy")}})
            at = [r for r in rows if r["method"] == method and r["step_size"] == eps]
            metric = "rmse" if args.task == "bnn" else "accuracy"
            print(f"   {method:>6} eps={eps:<8g} test {metric} {np.mean([float(r[metric] or 'nan') for r in at]):.4f}  "
                  f"test LL {np.mean([r['loglik'] for r in at]):.4f}", flush=True)
    best = {}
    for method in args.methods:
        scores = {eps: np.mean([r["loglik"] for r in rows if r["method"] == method and r["step_size"] == eps])
                  for eps in args.step_sizes}
        best[method] = max(scores, key=scores.get)
        print(f"best {method}: step size {best[method]:g} (test LL {scores[best[method]]:.4f})")
    if args.out:
        stem = os.path.join(args.out, f"sgld_step_grid_{args.task}_{args.dataset}_{'_'.join(args.methods)}")
        write_csv_atomically(stem + ".csv", rows)
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        for method in args.methods:
            ll = [np.mean([r["loglik"] for r in rows if r["method"] == method and r["step_size"] == e]) for e in args.step_sizes]
            ax.plot(args.step_sizes, ll, "o-", label=method)
        ax.set_xscale("log")
        ax.set_xlabel("step size")
        ax.set_ylabel("mean test log-likelihood")
        ax.set_title(f"{args.task} / {args.dataset}, splits {args.splits}", fontsize="small")
        ax.legend()
        fig.tight_layout()
        save_figure(fig, stem + ".png")
        print(f"wrote {stem}.csv and .png")
    return best


if __name__ == "__main__":
    main()
