"""KCC-SD Table 2 (issue 28): can any setting give the paper's 2-7x gap between OPVI with KSD and with KCC-SD?

The paper's N, dimensions, sample count and step size were lost in extraction; opvi_linear_regression.py
chose N = 100, m = 100, AdaGrad 0.1 and found KCC-SD ahead of KSD by 1-5% after 20 iterations (paper:
KSD / KCC-SD = 0.34/0.05, 0.38/0.19, 4.39/1.26, 6.31/3.25, a 1.9-6.8x gap). Hypotheses, one factor each:

* H1, the data size N (the posterior's concentration: its sd is ~1/sqrt(N), against the IMQ kernel's
  unit scale): N in {10, 100, 1000, 10000}.
* H2, the step size: AdaGrad lr in {0.01, 0.1, 1}.
* H3, the samples per step m in {10, 100}.

The grid is their product, 24 settings (at most 50, as the issue allows). For each, the gap is the
geometric mean over d in {2, 5, 10, 20} of err(KSD) / err(KCC-SD) after 20 iterations (err = ||mu - mu*||,
mean over seeds). The setting with the largest gap on 5 validation seeds is selected, and its gap on 5
fresh test seeds is reported beside the grid's median (selection on the same seeds would flatter it).

    python experiments/kcc_sd/opvi_search.py [--out docs/experiments/kcc_sd]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax
from steinax.stein import kcc_sd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402
from opvi_linear_regression import posterior  # noqa: E402

PAPER = {2: (0.34, 0.05), 5: (0.38, 0.19), 10: (4.39, 1.26), 20: (6.31, 3.25)}  # dims unstated: read in order


@functools.partial(jax.jit, static_argnames=("objective", "samples", "iterations"))
def fit_error(mean, precision, lr, key, *, objective, samples, iterations):
    """``||mu_hat - mu*||`` after ``iterations`` AdaGrad steps on the squared V-statistic KSD / KCC-SD of
    ``samples`` reparameterised draws (opvi_linear_regression.fit, compiled once per shape; ``lr`` traced)."""
    d = mean.shape[0]
    disc = steinax.ksd if objective == "ksd" else kcc_sd

    def loss(params, eps):
        z = params["mu"][None, :] + jnp.exp(params["log_sigma"])[None, :] * eps
        return disc(z, -(z - mean[None, :]) @ precision, steinax.IMQ())

    opt = optax.adagrad(lr)
    params = {"mu": jnp.zeros(d, mean.dtype), "log_sigma": jnp.zeros(d, mean.dtype)}

    def step(carry, k):
        params, state = carry
        grads = jax.grad(loss)(params, jax.random.normal(k, (samples, d), mean.dtype))
        updates, state = opt.update(grads, state, params)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(key, iterations))
    return jnp.linalg.norm(params["mu"] - mean)


def errors(setting, dims, seeds, iterations):
    """``{d: (mean KSD error, mean KCC-SD error)}`` over ``seeds`` for one ``(N, lr, m)``."""
    n_obs, lr, m = setting
    out = {}
    for d in dims:
        e = {"ksd": [], "kcc_sd": []}
        for seed in seeds:
            mean, precision = posterior(jax.random.key(seed), d, n_obs)
            for obj in e:
                e[obj].append(float(fit_error(mean, precision, jnp.asarray(lr, mean.dtype), jax.random.key(100 + seed),
                                              objective=obj, samples=m, iterations=iterations)))
        out[d] = (float(np.mean(e["ksd"])), float(np.mean(e["kcc_sd"])))
    return out


def gap(errs) -> float:
    """Geometric mean over dimensions of err(KSD) / err(KCC-SD)."""
    return float(np.exp(np.mean([np.log(a / b) for a, b in errs.values()])))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dims", type=int, nargs="+", default=[2, 5, 10, 20])
    p.add_argument("--observations", type=int, nargs="+", default=[10, 100, 1000, 10000])
    p.add_argument("--lrs", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    p.add_argument("--samples", type=int, nargs="+", default=[10, 100])
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--seeds", type=int, default=5, help="validation seeds; as many fresh test seeds")
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    args = p.parse_args(argv)
    grid = list(itertools.product(args.observations, args.lrs, args.samples))
    if len(grid) > 50:
        raise SystemExit(f"the grid has {len(grid)} settings; the issue allows at most 50")
    banner("KCC-SD Table 2, OPVI: searching the lost settings (issue 28)", {
        "grid": f"N {args.observations} x AdaGrad lr {args.lrs} x samples {args.samples} = {len(grid)} settings",
        "gap": f"geometric mean over d {args.dims} of err(KSD) / err(KCC-SD) after {args.iterations} iterations",
        "selection": f"largest gap on {args.seeds} validation seeds; reported on {args.seeds} fresh test seeds",
        "paper": "KSD / KCC-SD = 0.34/0.05, 0.38/0.19, 4.39/1.26, 6.31/3.25 (gap 6.8, 2.0, 3.5, 1.9; geometric mean 3.1)",
    })
    val_seeds = list(range(args.seeds))
    test_seeds = list(range(1000, 1000 + args.seeds))
    rows = []
    print(f"   {'N':>6} {'lr':>6} {'m':>4} {'validation gap':>15} {'test gap':>9}   test errors KSD / KCC-SD by d")
    for setting in grid:
        val = errors(setting, args.dims, val_seeds, args.iterations)
        test = errors(setting, args.dims, test_seeds, args.iterations)
        rows.append({"observations": setting[0], "lr": setting[1], "samples": setting[2],
                     "validation_gap": gap(val), "test_gap": gap(test),
                     **{f"test_ksd_d{d}": test[d][0] for d in args.dims},
                     **{f"test_kcc_sd_d{d}": test[d][1] for d in args.dims}})
        errs = "  ".join(f"{a:.3f}/{b:.3f}" for a, b in test.values())
        print(f"   {setting[0]:>6} {setting[1]:>6g} {setting[2]:>4} {gap(val):>15.3f} {gap(test):>9.3f}   {errs}", flush=True)
    best = max(rows, key=lambda r: r["validation_gap"])
    median = float(np.median([r["test_gap"] for r in rows]))
    print(f"   selected on validation: N = {best['observations']}, lr = {best['lr']:g}, m = {best['samples']}: "
          f"test gap {best['test_gap']:.3f}; the grid's median test gap {median:.3f}; the paper's 3.1 (1.9-6.8)")
    write_csv_atomically(os.path.join(args.out, "opvi_search.csv"), rows)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for m, marker in zip(args.samples, "os^"):
        for lr, color in zip(args.lrs, ("C0", "C1", "C2", "C3")):
            sel = [r for r in rows if r["samples"] == m and r["lr"] == lr]
            ax.plot([r["observations"] for r in sel], [r["test_gap"] for r in sel], marker=marker, color=color,
                    label=f"lr {lr:g}, m {m}")
    ax.axhspan(1.9, 6.8, color="0.85", label="paper's gaps")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="observations N", ylabel="err(KSD) / err(KCC-SD), test seeds",
           title=f"OPVI after {args.iterations} iterations: the gap by setting")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "opvi_search.png"))
    return rows, best, median


if __name__ == "__main__":
    main()
