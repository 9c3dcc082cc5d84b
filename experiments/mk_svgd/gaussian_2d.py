"""MK-SVGD paper, section 5.1: the 2-D Gaussian, final mean over 10 runs and the learned kernel weights.

Setting (paper): target N(mu, Sigma), mu = [-0.6871, 0.8010],
Sigma = [[0.2260, 0.1652], [0.1652, 0.6779]] (eq. 22); 500 particles from
N(0, I); 200 iterations; AdaGrad with step 0.05 (Liu & Wang's AdaGrad with
momentum); RBF kernels with h = 2^-4 ... 2^5; weights by eq. 21. The paper
reports the mean of the final particles over 10 runs, [-0.68792629, 0.80107447],
and that the kernels with h = 1 and h = 2 dominate (Fig. 1b).

The matrix of eq. 22 is read two ways (ALGORITHMS.md section A): as the
covariance (the paper's text) and as a precision (Liu & Wang's demo, which the
paper's code presumably reused). Each reading is run with the per-kernel KSDs
of eq. 21 estimated by the V-statistic (steinax's default) and by the
U-statistic, to show where the weights concentrate.

    python experiments/mk_svgd/gaussian_2d.py [--runs 10] [--out docs/experiments/mk_svgd]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax.interfaces.plot import plot_particles, plot_trace
from steinax.targets import Gaussian

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

MU = jnp.array([-0.6871, 0.8010])
MAT = jnp.array([[0.2260, 0.1652], [0.1652, 0.6779]])
PAPER_MEAN = np.array([-0.68792629, 0.80107447])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--out", default="docs/experiments/mk_svgd")
    args = p.parse_args(argv)
    hs = [2.0**e for e in range(-4, 6)]
    banner("MK-SVGD sec. 5.1, 2-D Gaussian", {
        "particles": f"{args.particles} from N(0, I)", "steps": args.steps, "optimizer": f"adagrad_momentum({args.lr})",
        "kernels": "RBF h = 2^-4 .. 2^5", "weights": "eq. 21, initialised 1/m", "runs": args.runs,
        "paper mean": PAPER_MEAN.tolist(),
    })
    rows, weight_rows, shown = [], [], {}
    for reading, target in (("covariance", Gaussian(MU, MAT)), ("precision", Gaussian.from_precision(MU, MAT))):
        for est in ("v", "u"):
            method = steinax.mk_svgd(ksd_estimator=est)
            means, covs, weights, avg_weights = [], [], [], []
            for r in range(args.runs):
                x0 = jax.random.normal(jax.random.key(r), (args.particles, 2))
                res = steinax.run(method, target, x0, steps=args.steps, optimizer=steinax.adagrad_momentum(args.lr),
                                  rng_key=jax.random.key(1000 + r), progress=False)
                means.append(np.asarray(res.particles.mean(0)))
                covs.append(np.asarray(jnp.cov(res.particles.T)))
                weights.append(np.asarray(res.trace.method["weights"][-1]))
                avg_weights.append(np.asarray(res.trace.method["weights"][1:]).mean(0))  # over the run
                if r == 0 and (reading, est) == ("covariance", "v"):
                    shown = {"target": target, "x0": x0, "result": res}
            mean = np.mean(means, axis=0)
            cov = np.mean(covs, axis=0)
            w = np.mean(weights, axis=0)
            w_avg = np.mean(avg_weights, axis=0)
            true_cov = np.asarray(target.cov)
            err = np.abs(mean - np.asarray(MU))
            cov_rel = np.max(np.abs(cov - true_cov) / np.abs(true_cov))
            print(f"-- Sigma read as {reading}, eq. 21 with {est.upper()}-statistic KSDs")
            fmt = lambda a: "[" + ", ".join(f"{v:.5f}" for v in np.ravel(a)) + "]"  # noqa: E731
            print(f"   mean over runs {fmt(mean)}  truth {fmt(MU)}  |err| {fmt(err)}  (paper {fmt(PAPER_MEAN)})")
            print(f"   covariance {fmt(cov)}  truth {fmt(true_cov)}  max rel err {cov_rel:.3f}")
            print("   final weights    " + "  ".join(f"h=2^{e}:{wi:.3f}" for e, wi in zip(range(-4, 6), w)))
            print("   run-avg weights  " + "  ".join(f"h=2^{e}:{wi:.3f}" for e, wi in zip(range(-4, 6), w_avg)))
            rows.append({"reading": reading, "ksd_estimator": est, "mean_x": mean[0], "mean_y": mean[1],
                         "abs_err_x": err[0], "abs_err_y": err[1], "cov_max_rel_err": cov_rel,
                         "paper_mean_x": PAPER_MEAN[0], "paper_mean_y": PAPER_MEAN[1], "runs": args.runs})
            for h, wi, wa in zip(hs, w, w_avg):
                weight_rows.append({"reading": reading, "ksd_estimator": est, "bandwidth": h, "weight": wi,
                                    "run_average_weight": wa})
    write_csv_atomically(os.path.join(args.out, "gaussian_2d.csv"), rows)
    write_csv_atomically(os.path.join(args.out, "gaussian_2d_weights.csv"), weight_rows)
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, reading in zip(axes, ("covariance", "precision")):
        for k, est in enumerate(("v", "u")):
            w = [r["weight"] for r in weight_rows if r["reading"] == reading and r["ksd_estimator"] == est]
            ax.bar(np.arange(10) + 0.4 * k - 0.2, w, width=0.4, label=f"{est.upper()}-statistic")
        ax.set_xticks(np.arange(10), [f"$2^{{{e}}}$" for e in range(-4, 6)])
        ax.set_xlabel("bandwidth h")
        ax.set_title(f"final weights, matrix read as {reading}")
    axes[0].set_ylabel(f"weight (mean of {args.runs} runs)")
    axes[0].legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "gaussian_2d_weights.png"))
    # run 0 of the paper's reading (covariance, V-statistic): particles over the density (Fig. 1a) and the trace
    res = shown["result"]
    fig = plot_particles(res.particles, shown["target"], extent=(-3.0, 2.0, -2.0, 3.5), initial=shown["x0"],
                         title=f"MK-SVGD, run 0, {args.particles} particles, {args.steps} steps")
    save_figure(fig, os.path.join(args.out, "gaussian_2d_particles.png"))
    save_figure(plot_trace(res), os.path.join(args.out, "gaussian_2d_trace.png"))
    print(f"wrote {args.out}/gaussian_2d.csv, gaussian_2d_weights.csv and the figures gaussian_2d_weights.png, "
          "gaussian_2d_particles.png, gaussian_2d_trace.png")


if __name__ == "__main__":
    main()
