"""The tuning guide's measurements: bandwidth, particle count, optimizer and step size, when to stop.

Each setting runs on posteriors of the suite with known moments (``steinax.posteriors``), from
``N(0, I)`` in the unconstrained space, and is scored against the reference
(:func:`steinax.metrics.posterior.posterior_errors`: worst |mean error| in posterior sds and median
sd ratio, 1 is right). Four panels, one per question of ``docs/guides/tuning.md``:

1. **kernel bandwidth**: SVGD with the median rule against fixed RBF bandwidths ``h`` (the kernel
   ``exp(-||x - y||^2 / h)``), on the banana (d = 2) and German credit logistic regression (d = 25);
2. **particle count**: SVGD and sliced SVGD (as the suite runs them, 3000 steps), and sliced SVGD until
   settled with its default optimizer (clipped SGD 0.1) and with Adam, n = 10 ... 300 on German credit
   (d = 25); besides the sd ratios, the particles' covariance whitened by the posterior's (its
   extreme sds), beside the same range for n exact draws;
3. **optimizer and step size**: AdaGrad-momentum and Adam at three learning rates, 3000 steps on the
   banana: final squared KSD over the run's own minimum (>= 5 is flagged by ``run``) and mean error;
4. **when to stop**: SVGD runs on German credit (the median rule, and ``h = 10``) scored every 100
   steps: mean error and sd ratio against the step, with the step at which ``steps=None`` stops.

    python experiments/guides/tuning.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import jax
import numpy as np
import optax

import steinax
from steinax.metrics.posterior import posterior_errors, whitened_covariance
from steinax.particles.optim import default_optimizer
from steinax.posteriors import get
from steinax.posteriors.suite import particle_method

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, read_csv, save_figure, write_csv_atomically  # noqa: E402

COLUMNS = ("question", "posterior", "setting", "seed", "steps", "seconds", "converged", "ksd_final_over_min",
           "mean_error_max", "sd_ratio_median", "sd_ratio_min", "sd_ratio_max", "whitened_sd_min", "whitened_sd_max")


class Rows(list):
    """The measured rows, written atomically to ``path`` after each one; rows already there (same columns) are kept
    and their runs skipped, so a stopped run continues where it was (many compilations in one process can exhaust
    the kernel's memory-map limit: ``sysctl vm.max_map_count``)."""

    def __init__(self, path: str, resume: bool):
        super().__init__()
        self.path = path
        if resume and os.path.exists(path):
            kept = read_csv(path)
            if kept and tuple(kept[0]) == COLUMNS:
                self.extend({k: _number(v) for k, v in r.items()} for r in kept)
                print(f"   resuming: {len(self)} rows kept from {path}", flush=True)

    def done(self, question, posterior, setting, seed) -> bool:
        return any((r["question"], r["posterior"], r["setting"], int(r["seed"])) == (question, posterior, setting, seed)
                   for r in self)

    def add(self, row: dict) -> dict:
        row = {c: row.get(c, "") for c in COLUMNS}
        self.append(row)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        write_csv_atomically(self.path, list(self))
        return row


def _number(v: str):
    try:
        return float(v) if v not in ("", "True", "False") else v
    except ValueError:
        return v


def score(post, particles) -> dict:
    """Worst mean error and median sd ratio (:func:`posterior_errors`, sds with ddof 1), the sd ratios' range (ddof 0,
    as the recorded runs were scored: 0.5% apart at n = 100), and the particles' covariance whitened by the reference
    draws' (the square roots of its extreme eigenvalues: 1 for a perfect cloud; exact draws of the same size spread
    about 1 too, see ``exact_draws_range``)."""
    ref = post.reference()
    e = posterior_errors(particles, ref)
    x = np.asarray(particles, np.float64)
    sr = x.std(0) / np.asarray(ref.sd)
    lo, hi = whitened_cov_range(x, ref)
    return {"mean_error_max": e["mean_error_max"], "sd_ratio_median": e["sd_ratio_median"],
            "sd_ratio_min": float(sr.min()), "sd_ratio_max": float(sr.max()), "whitened_sd_min": lo,
            "whitened_sd_max": hi}


def whitened_cov_range(x, ref) -> tuple[float, float]:
    """The smallest and largest sd of ``x`` along the reference draws' principal axes (:func:`whitened_covariance`)."""
    ev = np.linalg.eigvalsh(whitened_covariance(x, np.cov(np.asarray(ref.draws, np.float64).T)))
    return float(np.sqrt(max(ev.min(), 0.0))), float(np.sqrt(ev.max()))


def exact_draws_range(post, n, reps=20) -> tuple[float, float]:
    """The whitened range of ``n`` reference draws (what a perfect sampler's ``n`` points give), mean of ``reps``."""
    ref = post.reference()
    draws = np.asarray(ref.draws, np.float64)
    rng = np.random.default_rng(0)
    r = [whitened_cov_range(draws[rng.choice(len(draws), n, replace=False)], ref) for _ in range(reps)]
    return tuple(float(v) for v in np.mean(r, axis=0))


def run_once(post, method, n, seed, steps, optimizer=None, trace_every=None):
    x0 = post.init(jax.random.key(seed), n)
    kwargs = {} if optimizer is None else {"optimizer": optimizer}
    if trace_every is not None:
        kwargs["trace_every"] = trace_every
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the not-settled warnings are measured here, not acted on
        res = steinax.run(method, post.target, x0, steps=steps, rng_key=jax.random.key(100 + seed), **kwargs)
    return res, time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one seed, fewer settings, 100-step runs (a smoke run)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default="docs/experiments/guides")
    p.add_argument("--fresh", action="store_true", help="ignore the rows already in OUT/tuning.csv (default: keep them)")
    a = p.parse_args(argv)
    seeds = 1 if a.quick else a.seeds
    hs = [10.0] if a.quick else [0.01, 0.1, 1.0, 10.0, 100.0]
    counts = [10] if a.quick else [10, 30, 100, 300]
    lrs = [0.05] if a.quick else [0.01, 0.05, 0.2]
    steps_fixed = 100 if a.quick else 3000
    settle = steps_fixed if a.quick else None  # steps=None: until settled (quick: a fixed short run)
    banner("Tuning guide: bandwidth, particle count, optimizer and step size, when to stop", {
        "posteriors": "banana (d = 2), german_logistic (d = 25); references from long NUTS runs",
        "initial particles": "N(0, I) in the unconstrained space, 100 particles unless varied",
        "runs": "steps=None (run until settled) unless stated; seeds " + str(seeds),
        "scores": "worst |mean error| / reference sd; median sd ratio (1 is right)",
        "jax": f"{jax.__version__}, {jax.default_backend()}"})
    posts = {name: get(name) for name in ("banana", "german_logistic")}
    rows = Rows(os.path.join(a.out, "tuning.csv"), resume=not a.fresh)

    # 1. bandwidth
    for name, post in posts.items():
        for h in ["median"] + hs:
            kernel = steinax.RBF("liu") if h == "median" else steinax.RBF(float(h))
            for seed in range(seeds):
                if rows.done("bandwidth", name, f"h={h}", seed):
                    continue
                res, secs = run_once(post, steinax.svgd(kernel=kernel), 100, seed, settle)
                rows.add({"question": "bandwidth", "posterior": name, "setting": f"h={h}", "seed": seed,
                             "steps": int(res.trace.step[-1]), "seconds": secs, **score(post, res.particles)})
                print(f"   bandwidth {name:>15} h={h!s:>6} seed {seed}: {rows[-1]['mean_error_max']:.2f} sd, "
                      f"sd ratio {rows[-1]['sd_ratio_median']:.2f} ({rows[-1]['steps']} steps)", flush=True)

    # 2. particle count: each method as the suite runs it (SVGD: AdaGrad-momentum 0.05; sliced SVGD: SGD 0.1
    # clipped to 1; the suite's 3000 steps), and sliced SVGD until settled with run's default for it (the same SGD)
    # and with Adam (the other methods' default)
    post = posts["german_logistic"]
    for n in counts:
        if rows.done("particles", "german_logistic", f"exact_draws,n={n}", 0):
            continue
        lo, hi = exact_draws_range(post, n)
        rows.add({"question": "particles", "posterior": "german_logistic", "setting": f"exact_draws,n={n}",
                     "seed": 0, "steps": 0, "seconds": 0.0, "converged": "", "mean_error_max": float("nan"),
                     "sd_ratio_median": float("nan"), "sd_ratio_min": float("nan"), "sd_ratio_max": float("nan"),
                     "whitened_sd_min": lo, "whitened_sd_max": hi})
        print(f"   particles {'exact draws':>19} n={n:>4}: whitened sds {lo:.2f}-{hi:.2f}", flush=True)
    for mname in ("svgd", "sliced_svgd", "sliced_svgd_settled", "sliced_svgd_adam"):
        for n in counts:
            for seed in range(seeds):
                if rows.done("particles", "german_logistic", f"{mname},n={n}", seed):
                    continue
                if mname == "sliced_svgd_settled":
                    res, secs = run_once(post, steinax.sliced_svgd(), n, seed, settle)
                elif mname == "sliced_svgd_adam":
                    res, secs = run_once(post, steinax.sliced_svgd(), n, seed, settle,
                                         optimizer=default_optimizer())
                else:
                    method, opt = particle_method(mname, steps_fixed)
                    res, secs = run_once(post, method, n, seed, steps_fixed, optimizer=opt)
                rows.add({"question": "particles", "posterior": "german_logistic", "setting": f"{mname},n={n}",
                             "seed": seed, "steps": int(res.trace.step[-1]), "seconds": secs,
                             "converged": res.converged, **score(post, res.particles)})
                r = rows[-1]
                print(f"   particles {mname:>19} n={n:>4} seed {seed}: {r['mean_error_max']:.2f} sd, sd ratio "
                      f"{r['sd_ratio_median']:.2f} ({r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f}), whitened sds "
                      f"{r['whitened_sd_min']:.2f}-{r['whitened_sd_max']:.2f} ({r['steps']} steps, "
                      f"converged {res.converged})", flush=True)

    # 3. optimizer and step size (fixed length: what a user who sets them gets)
    post = posts["banana"]
    for oname, make in (("adagrad_momentum", steinax.adagrad_momentum), ("adam", optax.adam)):
        for lr in lrs:
            for seed in range(seeds):
                if rows.done("optimizer", "banana", f"{oname},lr={lr}", seed):
                    continue
                res, secs = run_once(post, steinax.svgd(), 100, seed, steps_fixed, optimizer=make(lr))
                ksd = np.asarray(res.trace.ksd)
                rows.add({"question": "optimizer", "posterior": "banana", "setting": f"{oname},lr={lr}",
                             "seed": seed, "steps": steps_fixed, "seconds": secs,
                             "ksd_final_over_min": float(ksd[-1] / ksd.min()), **score(post, res.particles)})
                print(f"   optimizer {oname:>16} lr={lr:<5} seed {seed}: final/min KSD "
                      f"{rows[-1]['ksd_final_over_min']:.1f}, {rows[-1]['mean_error_max']:.2f} sd", flush=True)

    # 4. when to stop: long fixed runs scored every 100 steps (the median rule, and the bandwidth panel 1 finds
    # right on this posterior), beside the step at which steps=None stops
    post = posts["german_logistic"]
    total = 400 if a.quick else 4000
    curve, stops = [], {}
    for label, kernel in (("median rule", steinax.RBF("liu")), ("h = 10", steinax.RBF(10.0))):
        method = steinax.svgd(kernel=kernel)
        state = None
        x0 = post.init(jax.random.key(0), 100)
        opt = optax.adam(0.05)
        for seg in range(total // 100):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = steinax.run(method, post.target, x0 if state is None else state.particles, steps=100,
                                  optimizer=opt, rng_key=jax.random.key(7 + seg), initial_state=state)
            state = res.state
            curve.append({"kernel": label, "step": (seg + 1) * 100, "ksd": float(res.trace.ksd[-1]),
                          "direction_norm": float(res.trace.direction_norm[-1]), **score(post, res.particles)})
        stop, _ = run_once(post, method, 100, 0, settle)
        stops[label] = int(stop.trace.step[-1])
        at_stop = score(post, stop.particles)
        print(f"   when to stop ({label}): steps=None settled at step {stops[label]}: {at_stop['mean_error_max']:.2f} sd, "
              f"sd ratio {at_stop['sd_ratio_median']:.2f}; after {total} fixed steps "
              f"{curve[-1]['mean_error_max']:.2f} sd, sd ratio {curve[-1]['sd_ratio_median']:.2f}", flush=True)

    write_csv_atomically(os.path.join(a.out, "tuning_stop.csv"), curve)

    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    axes = axes.ravel()

    def agg(question, key, setting):
        v = [r[key] for r in rows if r["question"] == question and r["setting"] == setting]
        return float(np.mean(v)), (float(np.std(v)) if len(v) > 1 else 0.0)

    ax = axes[0]
    for name in posts:
        xs = [float(h) for h in hs]
        m = [np.mean([r["sd_ratio_median"] for r in rows if r["question"] == "bandwidth" and r["posterior"] == name
                      and r["setting"] == f"h={h}"]) for h in hs]
        line = ax.semilogx(xs, m, "o-", label=name)[0]
        med = np.mean([r["sd_ratio_median"] for r in rows if r["question"] == "bandwidth" and r["posterior"] == name
                       and r["setting"] == "h=median"])
        ax.axhline(med, color=line.get_color(), ls="--", lw=0.8)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xlabel("fixed bandwidth h (dashed: the median rule)")
    ax.set_ylabel("median sd ratio (1 is right)")
    ax.set_title("1. kernel bandwidth (SVGD)")
    ax.legend(fontsize=7)

    ax = axes[1]
    for mname, label in (("svgd", "SVGD (AdaGrad-mom., 3000 steps)"), ("sliced_svgd", "sliced (SGD 0.1, 3000 steps)"),
                         ("sliced_svgd_settled", "sliced (steps=None)"), ("sliced_svgd_adam", "sliced (Adam, settled)")):
        m = [agg("particles", "sd_ratio_median", f"{mname},n={n}")[0] for n in counts]
        ax.semilogx(counts, m, "o-", label=label)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xlabel("particles n (German credit, d = 25)")
    ax.set_ylabel("median sd ratio")
    ax.set_title("2. particle count")
    ax.legend(fontsize=7)

    ax = axes[2]
    for oname in ("adagrad_momentum", "adam"):
        m = [agg("optimizer", "ksd_final_over_min", f"{oname},lr={lr}")[0] for lr in lrs]
        ax.loglog(lrs, m, "o-", label=oname)
    ax.axhline(5.0, color="C3", ls="--", lw=0.8, label="run() warns at 5")
    ax.set_xlabel(f"learning rate ({steps_fixed} steps, banana)")
    ax.set_ylabel("final KSD / the run's minimum")
    ax.set_title("3. optimizer and step size")
    ax.legend(fontsize=7)

    ax = axes[3]
    for i, label in enumerate(stops):
        part = [c for c in curve if c["kernel"] == label]
        ax.semilogy([c["step"] for c in part], [c["mean_error_max"] for c in part], color=f"C{i}",
                    label=f"{label}: worst mean error (sds)")
        ax.semilogy([c["step"] for c in part], [abs(1 - c["sd_ratio_median"]) + 1e-3 for c in part], color=f"C{i}",
                    ls=":", label=f"{label}: |1 - median sd ratio|")
        ax.axvline(stops[label], color=f"C{i}", ls="--", lw=0.8)
    ax.set_xlabel("step (German credit, Adam 0.05; dashed: where steps=None stops)")
    ax.set_title("4. when to stop")
    ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, os.path.join(a.out, "tuning.png"))
    print(f"wrote {a.out}/tuning.csv, tuning_stop.csv and tuning.png")


if __name__ == "__main__":
    main()
