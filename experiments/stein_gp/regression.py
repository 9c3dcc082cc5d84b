"""Stein variational GPs, section 5.1 and Tables 6-7: GP regression against type-II ML and Gaussian VI.

Setting (paper section 5.1; ALGORITHMS.md section D): the six offline datasets
of its list (autompg, boston, challenger, concrete, machine, servo; the others
have no offline copy), 70/30 splits with inputs and outputs standardised on
the training part, 5 splits. Model: ``steinax.gp.GPRegression``, ARD squared
exponential, Gamma(1, scale 2) priors on the softplus-constrained
hyperparameters (lengthscales, variance, noise variance).

* SteinGP-J, J in {2, 5, 10, 20}: SVGD (median-rule RBF) with Liu & Wang's
  AdaGrad-momentum, ``--lr`` for ``--steps`` iterations, particles from the
  priors.
* ML: type-II maximum likelihood (``steinax.gp.type2_ml``, Adam 0.05, 2000
  steps, from the paper's start).
* VI: a full-rank Gaussian over the same hyperparameter posterior (NumPyro
  SVI, ``AutoMultivariateNormal``, Adam 0.01, 2000 steps); its predictive
  mixes 20 posterior draws.
* NUTS (``steinax.baselines.mcmc.nuts``, NumPyro) on the same posterior, one chain
  started at the ML optimum (not timed), ``--nuts-warmup`` + ``--nuts-samples``
  draws; its predictive mixes every 5th draw. The paper has no MCMC row for
  regression; it is here for the runtime ratio (the issue's "against NUTS").

Metric: the mean test log-likelihood of the predictive mixture in
standardised units (the paper's Table 6 scale), and the RMSE in the data's
units; paired per-split differences SteinGP-J minus ML and minus VI, with
standard errors over splits. Runtimes include compilation (one process, this
machine), end when the result is on hand (``jax.block_until_ready``: JAX
dispatches asynchronously) and are reported as ratios. Rows are kept per (dataset, split,
method), so a run resumes where it stopped and ``--methods`` adds a method to
splits already run.

``--datasets machine_log`` regresses ``log(perf)`` of the same machines: the paper's copy of machine (7
inputs in its Table 4) is A. G. Wilson's UCI collection, whose target is log performance
(``regression_levels.py``, H3); the paper's machine row is compared with it.

    python experiments/stein_gp/regression.py [--splits 5] [--steps 500] [--datasets autompg,boston,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax import datasets
from steinax.gp import GPRegression, type2_ml
from steinax.baselines.mcmc import nuts
from steinax.baselines.vi import gaussian_vi

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, run_steingp, pyplot, resumable_rows, save_figure, write_csv_atomically  # noqa: E402

DATASETS = ("autompg", "boston", "challenger", "concrete", "machine", "servo")
PAPER = {  # Table 6: test log-likelihood, SteinGP2 / 5 / 10 / 20 / VI / ML (mean ± sd over 5 splits)
    "autompg": (-0.39, -0.39, -0.39, -0.40, -0.39, -0.39),
    "boston": (-0.30, -0.28, -0.30, -0.30, -0.31, -0.31),
    "challenger": (-1.53, -1.52, -1.46, -1.53, -1.51, -1.51),
    "concrete": (-0.25, -0.25, -0.25, -0.25, -0.24, -0.24),
    "machine": (-0.51, -0.52, -0.52, -0.52, -0.52, -0.52),
    "servo": (-0.48, -0.43, -0.41, -0.41, -0.39, -0.39),
}
PAPER["machine_log"] = PAPER["machine"]
LOG_TARGETS = {"machine_log": "machine"}  # name -> the dataset whose target is regressed on the log scale
PARTICLES = (2, 5, 10, 20)


def load(name):
    """``(X, y)`` of a dataset of the list, or of a ``LOG_TARGETS`` name (``y`` on the log scale)."""
    if name in LOG_TARGETS:
        X, y = datasets.load(LOG_TARGETS[name])
        return X, np.log(np.asarray(y, np.float64))
    return datasets.load(name)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--particles", type=int, nargs="+", default=list(PARTICLES))
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--baseline-steps", type=int, default=2000)
    p.add_argument("--methods", default="ML,VI,SteinGP,NUTS", help="comma-separated subset of ML,VI,SteinGP,NUTS")
    p.add_argument("--nuts-warmup", type=int, default=500)
    p.add_argument("--nuts-samples", type=int, default=500)
    p.add_argument("--out", default="docs/experiments/stein_gp")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    names = [n for n in args.datasets.split(",") if n]
    banner("Stein variational GPs, regression (section 5.1, Tables 6-7)", {
        "datasets": names, "splits": f"{args.splits} x 70/30, standardised on training data",
        "model": "ARD squared exponential, Gamma(1, scale 2) priors, softplus",
        "SteinGP": f"J in {args.particles}, SVGD, AdaGrad-momentum {args.lr}, {args.steps} iterations, prior init",
        "ML": f"type-II, Adam 0.05, {args.baseline_steps} steps", "VI": f"full-rank Gaussian (NumPyro SVI), Adam 0.01, "
        f"{args.baseline_steps} steps, 20 draws",
        "NUTS": f"NumPyro, 1 chain from the ML optimum, {args.nuts_warmup} warmup + {args.nuts_samples} draws, "
        "every 5th in the predictive",
        "metric": "test log-likelihood (standardised units), RMSE (data units)",
        "jax": f"{jax.__version__}, {jax.default_backend()}, float64",
    })
    setting = f"T{args.steps}-lr{args.lr:g}-b{args.baseline_steps}-J{'.'.join(map(str, args.particles))}"
    nuts_setting = f"{setting}-nuts{args.nuts_warmup}.{args.nuts_samples}"
    # ML and NUTS rows are "-blocked": those timed before their results were on hand (JAX's asynchronous
    # dispatch) are not resumed from but run again
    ml_setting, nuts_setting = f"{setting}-blocked", f"{nuts_setting}-blocked"
    wanted = [m for m in args.methods.split(",") if m]
    unknown = set(wanted) - {"ML", "VI", "SteinGP", "NUTS"}
    if unknown:
        raise SystemExit(f"--methods: unknown {sorted(unknown)}; expected a subset of ML,VI,SteinGP,NUTS")
    methods_run = [m for m in ("ML", "VI") if m in wanted] + (
        [f"SteinGP{J}" for J in args.particles] if "SteinGP" in wanted else []) + (["NUTS"] if "NUTS" in wanted else [])
    path = os.path.join(args.out, "regression_splits.csv")
    def setting_of(method):
        return {"NUTS": nuts_setting, "ML": ml_setting}.get(method, setting)

    rows = resumable_rows(path, setting_of, ("split",), ("test_loglik", "rmse", "seconds"))
    done = {(r["dataset"], r["split"], r["method"]) for r in rows}
    with jax.enable_x64(True):
        for name in names:
            try:
                X, y = load(name)
            except datasets.DatasetNotFoundError as exc:
                print(f"   {name}: skipped ({str(exc).split('.')[0]})")
                continue
            for seed in range(args.splits):
                todo = [m for m in methods_run if (name, seed, m) not in done]
                if not todo:
                    continue
                split = datasets.train_test_split(X, y, 0.7, seed=seed)
                Xtr, ytr = jnp.asarray(split.X_train), jnp.asarray(split.y_train)
                Xte, yte = jnp.asarray(split.X_test), jnp.asarray(split.y_test)
                model = GPRegression(Xtr, ytr, "se")
                key = jax.random.key(seed)

                def record(method, particles, seconds):
                    mean, _ = model.predict(particles, Xte)
                    rows.append({
                        "dataset": name, "split": seed, "method": method,
                        "setting": setting_of(method),
                        "test_loglik": float(model.log_predictive(particles, Xte, yte)),
                        "rmse": float(jnp.sqrt(jnp.mean((mean - yte) ** 2)) * split.y_std),
                        "seconds": seconds,
                    })

                first = len(rows)
                if "ML" in todo or "NUTS" in todo:
                    t0 = time.perf_counter()
                    theta = jax.block_until_ready(type2_ml(Xtr, ytr, "se", steps=args.baseline_steps))
                    if "ML" in todo:
                        record("ML", theta[None], time.perf_counter() - t0)
                if "VI" in todo:
                    t0 = time.perf_counter()
                    draws = gaussian_vi(model, model.dim, steps=args.baseline_steps, num_draws=20,
                                        rng_key=jax.random.fold_in(key, 1))
                    record("VI", draws, time.perf_counter() - t0)
                for J in args.particles:
                    if f"SteinGP{J}" not in todo:
                        continue
                    record(f"SteinGP{J}", *run_steingp(model, key, J, args.steps, args.lr))
                if "NUTS" in todo:
                    t0 = time.perf_counter()
                    draws = jax.block_until_ready(nuts(model, theta[None], num_warmup=args.nuts_warmup,
                                                       num_samples=args.nuts_samples, rng_key=jax.random.fold_in(key, 2)))
                    record("NUTS", draws[0, ::5], time.perf_counter() - t0)
                jax.clear_caches()
                last = {r["method"]: r["test_loglik"] for r in rows[first:]}
                print(f"   {name} split {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in last.items()), flush=True)
                write_csv_atomically(path, rows)  # after every split: an interrupted run resumes from here
    write_csv_atomically(path, rows)

    summary = []
    methods = [f"SteinGP{J}" for J in args.particles] + ["VI", "ML"]
    if any(r["method"] == "NUTS" for r in rows):
        methods.append("NUTS")
    print(f"   {'dataset':<11} " + " ".join(f"{m:>16}" for m in methods) + "   (test LL mean ± se; paper below)")
    for name in names:
        sub = [r for r in rows if r["dataset"] == name]
        if not sub:
            continue
        splits = sorted({r["split"] for r in sub if all(
            any(q["split"] == r["split"] and q["method"] == m for q in sub) for m in methods if m != "NUTS")})
        by = {(r["split"], r["method"]): r for r in sub}
        ll = {m: np.array([by[s, m]["test_loglik"] for s in splits if (s, m) in by]) for m in methods}
        secs = {m: np.array([by[s, m]["seconds"] for s in splits if (s, m) in by]) for m in methods}
        rmse = {m: np.array([by[s, m]["rmse"] for s in splits if (s, m) in by]) for m in methods}
        n = len(splits)
        if n == 0:  # no split has every method yet
            continue

        def se(a):
            return float(np.std(a, ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")

        def mean(a):  # seconds may be unknown (nan) for some rows: the mean of those measured
            return float(np.nanmean(a)) if len(a) and not np.all(np.isnan(a)) else float("nan")

        print(f"   {name:<11} " + " ".join(f"{mean(ll[m]):>8.3f} ± {se(ll[m]):<5.3f}" for m in methods))
        if name in PAPER:
            paper = dict(zip([f"SteinGP{J}" for J in PARTICLES] + ["VI", "ML"], PAPER[name]))
            print(f"   {'  paper':<11} " + " ".join(f"{paper.get(m, float('nan')):>16.2f}" for m in methods))
        for m in methods:
            if not len(ll[m]):
                continue
            paired = len(ll[m]) == n
            d_ml, d_vi = (ll[m] - ll["ML"], ll[m] - ll["VI"]) if paired else (np.array([]), np.array([]))
            summary.append({
                "dataset": name, "method": m, "splits": len(ll[m]), "test_loglik": mean(ll[m]), "se": se(ll[m]),
                "minus_ML": mean(d_ml), "minus_ML_se": se(d_ml), "minus_VI": mean(d_vi),
                "minus_VI_se": se(d_vi), "rmse": mean(rmse[m]), "seconds": mean(secs[m]),
                "seconds_over_ML": mean(secs[m]) / mean(secs["ML"]),
                "paper_test_loglik": PAPER.get(name, {}) and dict(
                    zip([f"SteinGP{J}" for J in PARTICLES] + ["VI", "ML"], PAPER[name])).get(m, ""),
            })
        diffs = "  ".join(f"{m}-ML {np.mean(ll[m] - ll['ML']):+.3f}±{se(ll[m] - ll['ML']):.3f} "
                          f"-VI {np.mean(ll[m] - ll['VI']):+.3f}±{se(ll[m] - ll['VI']):.3f}"
                          for m in methods if m.startswith("SteinGP"))
        print(f"   {'  paired':<11} {diffs}")
        print(f"   {'  seconds':<11} " + " ".join(f"{mean(secs[m]):>16.1f}" for m in methods))
    if not summary:  # the summary pairs every method with ML and VI: a --methods subset without them has none
        print("   no split has ML, VI and SteinGP all run: no summary table (the per-split rows are in "
              f"{path})")
        return summary
    write_csv_atomically(os.path.join(args.out, "regression_summary.csv"), summary)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    shown = [n for n in names if any(r["dataset"] == n for r in rows)]
    for i, m in enumerate(methods):
        vals = [np.mean([r["test_loglik"] for r in rows if r["dataset"] == n and r["method"] == m] or [np.nan])
                for n in shown]
        ax.bar(np.arange(len(shown)) + i * 0.13, vals, width=0.13, label=m)
    ax.set_xticks(np.arange(len(shown)) + 0.33, shown)
    ax.set(ylabel="test log-likelihood (standardised)", title=f"GP regression, {args.splits} splits")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "regression.png"))
    return summary


if __name__ == "__main__":
    main()
