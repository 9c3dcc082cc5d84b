"""KCC-SD paper, appendix / Fig. 6: SVGD and CC-SVGD updates against the MAP update as a BNN widens.

Setting (paper): Boston housing, a one-hidden-layer ReLU network, weights
initialised from a standard Gaussian, 20 particles, the difference between the
updates after 10 iterations, growing hidden width; "without tricks like the
median heuristic" (so a fixed bandwidth). What the text lost, chosen here and printed:

* model: Liu & Wang's BNN (:class:`steinax.models.BNNRegression`, a0 = 1, b0 = 0.1),
  90/10 split (seed = trial), standardised data;
* initialisation: every weight and bias N(0, 1), log gamma = log lambda = 0;
* 10 iterations of each method with AdaGrad-momentum (lr 1e-3, Liu's BNN setting), minibatch 100;
* at the particles after those 10 iterations, with the exact full-data score s(x_i):
  the MAP update is the kernel's self term ``s(x_i) / n`` (what the SVGD update reduces to
  when ``k(x_j, x_i) -> 0`` for ``j != i``), and the reported difference is
  ``||Phi_method - S / n||_F`` and the same divided by ``||S / n||_F``;
* kernels: RBF with a fixed h (default 1, for SVGD on the whole vector and for CC-SVGD on each
  coordinate); ``--bandwidth median`` uses the median rules instead, for contrast.

The paper's finding: the SVGD update approaches the MAP update as the width grows,
the CC-SVGD update does not.

    python experiments/kcc_sd/bnn_map_difference.py [--widths 1 2 5 10 20 50 100] [--trials 5]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax.datasets import load_boston, train_test_split
from steinax.models import BNNRegression

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def update_difference(method, target, particles, key):
    """``(||Phi - S/n||_F, ||Phi - S/n||_F / ||S/n||_F)`` at ``particles`` with the exact score."""
    _, scores = target.evaluate(key, particles)
    phi, _, _ = method.direction(key, particles, scores, method.init_aux(particles))
    map_update = scores / particles.shape[0]
    diff = float(jnp.linalg.norm(phi - map_update))
    return diff, diff / float(jnp.linalg.norm(map_update))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", type=int, nargs="+", default=[1, 2, 5, 10, 20, 50, 100])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--particles", type=int, default=20)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--bandwidth", default="1.0", help="a fixed RBF bandwidth h for both methods, or 'median'")
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    p.add_argument("--replot", action="store_true", help="redraw the figure from the CSV written earlier")
    args = p.parse_args(argv)
    if args.replot:
        import csv

        tag = "" if args.bandwidth == "1.0" else f"_h{args.bandwidth}"
        path = os.path.join(args.out, f"bnn_map_difference{tag}.csv")
        with open(path) as f:
            rows = [{k: (v if k in ("method", "bandwidth") else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]
        plot(rows, args, path[:-4] + ".png")
        return
    X, y = load_boston()
    if args.bandwidth == "median":
        methods = {"svgd": steinax.svgd(), "cc_svgd": steinax.cc_svgd()}
    else:
        h = float(args.bandwidth)
        methods = {"svgd": steinax.svgd(steinax.RBF(h)), "cc_svgd": steinax.cc_svgd(steinax.RBF(h))}
    tag = "" if args.bandwidth == "1.0" else f"_h{args.bandwidth}"
    banner("KCC-SD Fig. 6: SVGD / CC-SVGD update vs MAP update as the BNN widens (Boston)", {
        "data": f"Boston {X.shape}, 90/10 split (seed = trial), standardised",
        "model": "Liu & Wang BNN, 1 hidden ReLU layer, a0 = 1, b0 = 0.1",
        "init": "weights and biases N(0, 1), log gamma = log lambda = 0",
        "particles": args.particles, "iterations before measuring": args.steps,
        "optimizer": f"AdaGrad-momentum lr {args.lr}, minibatch {args.batch_size}",
        "kernel": "RBF, h = " + args.bandwidth + (" (SVGD: Liu's rule; CC-SVGD: per coordinate)" if args.bandwidth == "median" else " for both"),
        "difference": "||Phi - S/n||_F with the exact full-data score; relative: / ||S/n||_F",
        "widths": args.widths, "trials": args.trials,
    })
    rows = []
    print(f"{'width':>6} {'dim':>6} {'SVGD diff':>12} {'CC diff':>12} {'SVGD rel':>10} {'CC rel':>10}")
    for width in args.widths:
        model = BNNRegression(n_features=X.shape[1], hidden=width)
        res = {name: [] for name in methods}
        for trial in range(args.trials):
            split = train_test_split(X, y, 0.9, seed=trial)
            train = model.target(jnp.asarray(split.X_train, jnp.float32), jnp.asarray(split.y_train, jnp.float32),
                                 batch_size=args.batch_size)
            exact = model.target(jnp.asarray(split.X_train, jnp.float32), jnp.asarray(split.y_train, jnp.float32),
                                 batch_size=None)
            x0 = model.init_particles(jax.random.key(trial), args.particles, scheme="standard")
            for name, method in methods.items():
                out = steinax.run(method, train, x0, steps=args.steps, optimizer=steinax.adagrad_momentum(args.lr),
                                  rng_key=jax.random.key(1000 + trial), trace_every=args.steps, progress=False)
                res[name].append(update_difference(method, exact, out.particles, jax.random.key(0)))
        stats = {name: np.array(v) for name, v in res.items()}
        for name, v in stats.items():
            rows.append({"width": width, "dim": model.dim, "method": name, "bandwidth": args.bandwidth,
                         "diff_mean": v[:, 0].mean(), "diff_std": v[:, 0].std(),
                         "rel_mean": v[:, 1].mean(), "rel_std": v[:, 1].std(), "trials": args.trials})
        print(f"{width:>6} {model.dim:>6} {stats['svgd'][:, 0].mean():>12.4g} {stats['cc_svgd'][:, 0].mean():>12.4g} "
              f"{stats['svgd'][:, 1].mean():>10.3g} {stats['cc_svgd'][:, 1].mean():>10.3g}", flush=True)
    write_csv_atomically(os.path.join(args.out, f"bnn_map_difference{tag}.csv"), rows)
    plot(rows, args, os.path.join(args.out, f"bnn_map_difference{tag}.png"))
    print(f"wrote {args.out}/bnn_map_difference{tag}.csv and .png")


def plot(rows, args, path):
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, label in zip(axes, ("diff", "rel"), ("||Phi - MAP||_F", "||Phi - MAP||_F / ||MAP||_F")):
        for name in ("svgd", "cc_svgd"):
            sel = [r for r in rows if r["method"] == name]
            ax.errorbar([r["width"] for r in sel], [r[f"{key}_mean"] for r in sel], yerr=[r[f"{key}_std"] for r in sel],
                        marker="o", capsize=3, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("hidden units")
        ax.set_ylabel(label)
        ax.set_title(f"Boston BNN, n={args.particles}, after {args.steps} its, h={args.bandwidth}")
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
