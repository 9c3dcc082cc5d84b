"""Matrix-SVGD paper, Fig. 1 and Fig. 3-4: the 2-D toys, particles and MMD^2 vs iteration.

Setting (paper section 4.1 and appendix B; the authors' 2d_toy code, ALGORITHMS.md section C):
50 particles from 1.5 N(0, I), the same initial particles for every method
(one per seed), AdaGrad without momentum (the code's ``A += v^2; x += lr v / sqrt(A + 1e-12)``,
``optax.adagrad(lr, initial_accumulator_value=0, eps=1e-12)``), 300 iterations.
Methods: vanilla SVGD (``RBF("liu")``), matrix SVGD average and mixture, and
SVN, all with steinax's defaults (median bandwidths, in the preconditioner's
metric for the matrix methods; eigenvalue floor 1e-2; mixture anchors at the
particles, each anchor's curvature mixed half-and-half with the average).
The preconditioner is the exact Hessian for the mixtures (the paper:
"exact Hessian matrices") and the Gauss-Newton matrix for the double banana
and the sine (the authors' code; both targets are least-squares).

Step sizes: each method runs every step of the grid {0.01, 0.03, 0.1, 0.3, 1, 3}
and keeps the one with the lowest mean log10 MMD^2 over the recorded
iterations (area under the curve: the paper's claim is about speed), averaged
over the seeds; the paper says only that it searched the learning rate
"exhaustively" (its code uses 0.7 for every method).

MMD^2: V-statistic with ``RBF(1.0)`` (``exp(-||x - y||^2)``, a fixed
"standard RBF kernel", the paper's words) against 2000 exact samples
(mixtures: direct; banana, sine: rejection from the Gaussian prior).

The paper does not print its Fig. 1 Gaussian mixture; we use two anisotropic
components, weights (0.5, 0.5), means (+-2, 0), covariances
[[1, +-0.8], [+-0.8, 1]], so the Hessian varies between the modes and a single
preconditioner cannot fit both. Targets use the paper's formulas
(``variant="paper"``); ``--variant code`` runs the authors' versions.

    python experiments/matrix_svgd/toys.py [--seeds 10] [--out docs/experiments/matrix_svgd]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax
from steinax.metrics import mmd2
from steinax.interfaces.plot import plot_particles
from steinax.targets import DoubleBanana, GaussianMixture, Sine, star

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
PAPER_ITERS = {"gmm": 30, "star": 30, "banana": 100, "sine": 30}  # Fig. 1 (30th) and Fig. 3 (30/100/30)
EXTENT = {"gmm": (-5, 5, -4, 4), "star": (-3, 3, -3, 3), "banana": (-2, 2, -1.5, 2.5), "sine": (-3, 3, -2, 2)}


def gmm():
    covs = jnp.array([[[1.0, 0.8], [0.8, 1.0]], [[1.0, -0.8], [-0.8, 1.0]]])
    return GaussianMixture(jnp.array([0.5, 0.5]), jnp.array([[-2.0, 0.0], [2.0, 0.0]]), covs)


def targets(variant):
    return {
        "gmm": (gmm(), "hessian"),
        "star": (star(variant=variant), "hessian"),
        "banana": (DoubleBanana(variant), "gauss_newton"),
        "sine": (Sine(variant), "gauss_newton"),
    }


def methods(curvature):
    return {
        "svgd": steinax.svgd(),
        "average": steinax.matrix_svgd(curvature, "average"),
        "mixture": steinax.matrix_svgd(curvature, "mixture"),
        "svn": steinax.svn(curvature),
    }


def trajectory(method, target, lr, x0s, steps, keys):
    """Particles at every step for a batch of initial sets: ``[seeds, steps + 1, n, 2]``."""
    opt = optax.adagrad(lr, initial_accumulator_value=0.0, eps=1e-12)

    @eqx.filter_jit
    def one(x0, key):
        state = method.init(x0, opt, target)

        def body(state, t):
            new, info = method.step(jax.random.fold_in(key, t), state, target, opt)
            return new, (new.particles, info.finite)

        _, (xs, finite) = jax.lax.scan(body, state, jnp.arange(steps))
        return jnp.concatenate([x0[None], xs]), jnp.all(finite)

    out = [one(x0, k) for x0, k in zip(x0s, keys)]
    return jnp.stack([o[0] for o in out]), np.array([bool(o[1]) for o in out])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--particles", type=int, default=50)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--every", type=int, default=5, help="record MMD^2 every this many iterations")
    p.add_argument("--reference", type=int, default=2000)
    p.add_argument("--variant", choices=("paper", "code"), default="paper")
    p.add_argument("--grid", default=",".join(map(str, GRID)))
    p.add_argument("--targets", default="gmm,star,banana,sine")
    p.add_argument("--out", default="docs/experiments/matrix_svgd")
    args = p.parse_args(argv)
    grid = tuple(float(v) for v in args.grid.split(","))
    banner("Matrix SVGD, 2-D toys (Fig. 1, 3, 4)", {
        "particles": f"{args.particles} from 1.5 N(0, I), same for every method", "steps": args.steps,
        "optimizer": "AdaGrad (no momentum, eps 1e-12), step from the grid", "grid": grid,
        "selection": "lowest mean log10 MMD^2 over recorded iterations", "seeds": args.seeds,
        "MMD": f"V-statistic, RBF(1.0), {args.reference} exact samples, every {args.every} iterations",
        "variant": args.variant,
    })
    os.makedirs(args.out, exist_ok=True)
    iters = np.arange(0, args.steps + 1, args.every)
    rows, summary, best_traj = [], [], {}
    all_targets = targets(args.variant)
    for tname in args.targets.split(","):
        target, curvature = all_targets[tname]
        ref = target.sample(jax.random.key(123), args.reference)
        mmd_at = jax.jit(jax.vmap(jax.vmap(lambda x: mmd2(x, ref, 1.0))))
        x0s = [1.5 * jax.random.normal(jax.random.key(40 + s), (args.particles, 2)) for s in range(args.seeds)]
        keys = [jax.random.key(1000 + s) for s in range(args.seeds)]
        for mname, method in methods(curvature).items():
            best = None
            for lr in grid:
                t0 = time.perf_counter()
                xs, finite = trajectory(method, target, lr, x0s, args.steps, keys)
                vals = np.asarray(mmd_at(xs[:, iters]))  # [seeds, len(iters)]
                vals = np.where(np.isfinite(vals), vals, np.nan)
                score = float(np.nanmean(np.log10(np.maximum(vals, 1e-12)))) if np.all(finite) else np.inf
                for s in range(args.seeds):
                    for t, v in zip(iters, vals[s]):
                        rows.append(dict(target=tname, method=mname, lr=lr, seed=s, iteration=int(t), mmd2=float(v)))
                print(f"   {tname:6s} {mname:8s} lr={lr:<5g} score={score:8.3f} all finite={bool(np.all(finite))} "
                      f"({time.perf_counter() - t0:.1f}s)", flush=True)
                if best is None or score < best[0]:
                    best = (score, lr, vals, xs[0])
            score, lr, vals, xs0 = best
            best_traj[(tname, mname)] = (lr, vals, xs0)
            at = {k: int(np.where(iters == k)[0][0]) for k in (PAPER_ITERS[tname], 100, args.steps) if k in iters}
            row = dict(target=tname, method=mname, best_lr=lr, score=round(score, 4))
            for k, j in at.items():
                m = vals[:, j]
                row[f"mmd2_it{k}"] = float(np.mean(m))
                row[f"mmd2_it{k}_se"] = float(np.std(m, ddof=1) / np.sqrt(len(m))) if len(m) > 1 else 0.0
            summary.append(row)
    write_csv_atomically(os.path.join(args.out, "toys_mmd.csv"), rows)
    write_csv_atomically(os.path.join(args.out, "toys_summary.csv"), summary)
    print("\n   best step and MMD^2 (mean over seeds) at the paper's iteration and at the end:")
    for r in summary:
        its = [k for k in r if k.startswith("mmd2_it") and not k.endswith("_se")]
        print(f"   {r['target']:6s} {r['method']:8s} lr={r['best_lr']:<5g} " +
              "  ".join(f"{k[4:]}: {r[k]:.2e} +- {r[k + '_se']:.1e}" for k in its))
    plot(args, best_traj, iters, all_targets)


def plot(args, best_traj, iters, all_targets):
    plt = pyplot()
    names = args.targets.split(",")
    mnames = ["svgd", "average", "mixture", "svn"]
    fig, axes = plt.subplots(len(names), 5, figsize=(17, 3.3 * len(names)), squeeze=False)
    for r, tname in enumerate(names):
        target = all_targets[tname][0]
        k = PAPER_ITERS[tname] // args.every * args.every
        for c, mname in enumerate(mnames):
            lr, vals, xs0 = best_traj[(tname, mname)]
            plot_particles(np.asarray(xs0[k]), target, extent=EXTENT[tname], ax=axes[r, c], colorbar=False,
                           title=f"{tname}: {mname} (lr {lr:g}), it {k}")
        ax = axes[r, 4]
        for mname in mnames:
            lr, vals, _ = best_traj[(tname, mname)]
            ax.plot(iters[1:], np.log10(np.mean(vals[:, 1:], axis=0)), label=mname)
        ax.set_xlabel("iteration")
        ax.set_ylabel("log10 MMD$^2$ (mean over seeds)")
        ax.legend(fontsize=8)
        ax.set_title(f"{tname}: MMD$^2$ vs iteration")
    fig.tight_layout()
    path = os.path.join(args.out, "toys.png")
    save_figure(fig, path)
    print(f"   wrote {path}")


if __name__ == "__main__":
    main()
