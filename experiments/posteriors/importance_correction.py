"""An importance correction measured against the HMC correction (issue 49): Stein importance weights on each
hand-off of ``steinax.sample`` (the warm start's draws, the particles), scored against the NUTS references.

    python experiments/posteriors/importance_correction.py [--posteriors NAME ...] [--seeds 3] [--out DIR]

For each posterior and seed: ``steinax.sample(target, rng_key=key(seed), num_particles=100, correction="never")`` in
float64, then :func:`steinax.diagnostics.stein_importance_weights` (Liu & Lee 2017's black-box weights: the
simplex weights minimising the squared KSD, IMQ(1, -1/2)) on the warm start's draws and on the particles, both in the
coordinates the warm start's draws whiten (the weights then do not depend on the target's units). Rows (``DIR/
results.csv``, appended as they finish; a rerun skips done rows): the hand-off unweighted and weighted, worst |mean
error| and median and minimum sd ratio (weighted moments) against the reference, the weights' Kish ESS, the seconds
the weights took. ``DIR/summary.md``: means over seeds beside the HMC correction's rows of the sample suite
(``results/sample_suite/results.csv``) where they exist.

What it can and cannot do, stated before measuring: weights reweight the points they are given. They can move a mean
within the points' hull and shrink a spread, but never widen it beyond the points' own: particles collapsed to a
fifth of the posterior's sd stay collapsed.
"""

import argparse
import collections
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax._io import append_row, atomic_write_text, check_output, read_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure  # noqa: E402

DEFAULT = ("lake_huron_trend", "mtcars_regression", "lynx_ar5", "quine_negbin", "challenger_binomial",
           "eight_schools_centered", "german_logistic", "banana")
FIELDS = ("posterior", "d", "seed", "handoff", "weighted", "mean_error_max", "sd_ratio_median", "sd_ratio_min", "ess",
          "seconds")
KEY = ("posterior", "seed", "handoff", "weighted")
HERE = os.path.dirname(os.path.abspath(__file__))


def weighted_scores(x, w, reference) -> dict:
    """Worst |mean error| and median and minimum sd ratio of the ``w``-weighted draws ``x`` against ``reference``."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    w = w / w.sum()
    mean = w @ x
    sd = np.sqrt(w @ (x - mean) ** 2 / (1.0 - np.sum(w**2)))  # unbiased for weights (equal weights: ddof=1)
    err = np.abs(mean - reference.mean) / reference.sd
    ratio = sd / reference.sd
    return {"mean_error_max": float(err.max()), "sd_ratio_median": float(np.median(ratio)),
            "sd_ratio_min": float(ratio.min())}


def run_seed(name: str, seed: int, path: str, done: set) -> None:
    import warnings

    import steinax
    from steinax.diagnostics import stein_importance_weights
    from steinax.posteriors import get
    from steinax.targets import AffineMap, AffineTarget

    if all((name, str(seed), h, wtd) in done for h in ("warm_start", "particles") for wtd in ("False", "True")):
        return
    with jax.enable_x64(True):
        post = get(name)
        ref = post.reference()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = steinax.sample(post.target, rng_key=jax.random.key(seed), num_particles=100, correction="never",
                                 progress=False)
        affine = AffineMap.from_particles(jnp.asarray(res.stage_draws["warm_start"]))
        whitened = AffineTarget(steinax.targets.as_target(post.target), affine)
        for handoff, x in res.stage_draws.items():
            n = x.shape[0]
            rows = [{"weighted": False, "ess": float(n), "seconds": 0.0, **weighted_scores(x, np.ones(n), ref)}]
            t0 = time.perf_counter()
            iw = stein_importance_weights(np.asarray(affine.inverse(jnp.asarray(x))), whitened)
            rows.append({"weighted": True, "ess": float(iw.ess), "seconds": round(time.perf_counter() - t0, 2),
                         **weighted_scores(x, np.asarray(iw.weights), ref)})
            for row in rows:
                row.update(posterior=name, d=post.dim, seed=seed, handoff=handoff)
                append_row(path, row, FIELDS, KEY)
                print(f"{name:24s} seed {seed} {handoff:10s} weighted={row['weighted']!s:5s}: err "
                      f"{row['mean_error_max']:.3f}, sd ratio {row['sd_ratio_median']:.3f} (min {row['sd_ratio_min']:.3f}),"
                      f" ESS {row['ess']:.1f}", flush=True)


def summary(rows, suite_rows) -> str:
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["posterior"], r["handoff"], r["weighted"])].append(r)
    cell = lambda g: (f"{np.mean([float(r['mean_error_max']) for r in g]):.2f}; "  # noqa: E731
                      f"{np.mean([float(r['sd_ratio_median']) for r in g]):.2f}; "
                      f"{np.min([float(r['sd_ratio_min']) for r in g]):.2f}") if g else ""
    lines = ["Cells: worst |mean error| (reference sds, mean over seeds); median sd ratio (mean); minimum sd ratio (min "
             "over seeds). ESS: the weights' Kish ESS (mean), of 100 points. HMC: steinax.sample's default answer "
             "(the sample suite's rows, 5 seeds).", "",
             "| posterior | warm start | warm start, weighted (ESS) | particles | particles, weighted (ESS) | HMC correction |",
             "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["posterior"] for r in rows):
        cells = []
        for h in ("warm_start", "particles"):
            for wtd in ("False", "True"):
                g = groups.get((name, h, wtd), [])
                ess = f" ({np.mean([float(r['ess']) for r in g]):.0f})" if g and wtd == "True" else ""
                cells.append(cell(g) + ess)
        hmc = [r for r in suite_rows if r["posterior"] == name and r["method"] == "sample:sample"]
        cells.append(cell(hmc))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figure(rows, suite_rows, path: str) -> None:
    """Worst |mean error| per posterior (mean over seeds): each hand-off unweighted and weighted, and the HMC
    correction."""
    plt = pyplot()
    names = list(dict.fromkeys(r["posterior"] for r in rows))
    series = [(f"{h}{', weighted' if w == 'True' else ''}",
               lambda n, h=h, w=w: [r for r in rows if r["posterior"] == n and r["handoff"] == h and r["weighted"] == w])
              for h in ("warm_start", "particles") for w in ("False", "True")]
    series.append(("HMC correction", lambda n: [r for r in suite_rows if r["posterior"] == n and r["method"] == "sample:sample"]))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.6))
    y = np.arange(len(names))
    for k, (label, pick) in enumerate(series):
        err = [np.mean([float(r["mean_error_max"]) for r in pick(n)] or [np.nan]) for n in names]
        ax.barh(y + 0.16 * k - 0.32, err, height=0.16, label=label, color=f"C{k}")
    ax.set_xscale("log")
    ax.axvline(0.2, color="k", lw=0.5)
    ax.set_yticks(y, names)
    ax.set_xlabel("worst |mean error| (reference sds)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from steinax.posteriors import NAMES

    p.add_argument("--posteriors", nargs="+", default=list(DEFAULT), choices=list(NAMES))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=os.path.join(HERE, "results", "importance_correction"))
    a = p.parse_args(argv)
    path = os.path.join(a.out, "results.csv")
    check_output(path)
    banner("Stein importance weights on steinax.sample's hand-offs, against the HMC correction (float64)",
           {"posteriors": a.posteriors, "seeds": a.seeds, "particles": 100, "kernel": "IMQ(1, -1/2), whitened",
            "out": a.out})
    done = {tuple(r[k] for k in KEY) for r in read_rows(path)}
    for name in a.posteriors:
        for seed in range(a.seeds):
            run_seed(name, seed, path, done)
    suite = os.path.join(HERE, "results", "sample_suite", "results.csv")
    rows, suite_rows = read_rows(path), (read_rows(suite) if os.path.exists(suite) else [])
    text = summary(rows, suite_rows)
    atomic_write_text(os.path.join(a.out, "summary.md"), text)
    figure(rows, suite_rows, os.path.join(a.out, "importance_correction.png"))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
