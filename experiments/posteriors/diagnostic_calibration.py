"""False-alarm rate of the collapse diagnostics (spread_check and relaxation_check) on draws from the posterior.

    python experiments/posteriors/diagnostic_calibration.py [--draws DIR] [--subsets 200]

For every posterior of the suite: 200 disjoint subsets of 100 draws. Closed-form posteriors
use exact i.i.d. draws; NUTS posteriors use the 20000 reference draws written by
``make_references.py --all-draws DIR`` (without DIR, the 1000 stored draws give 10 subsets),
dealt into subsets by a seeded random permutation: each subset is a random thinning of the
4 chains, so draws in one subset lie far apart in their chains. Prints, per posterior, how
many subsets each check flags and how many either flags (the suite's ``flagged``; the
target: at most 5%), the spread of median T_k and of the relaxation's growth over the
subsets; writes ``calibration.csv`` and ``calibration.png`` to ``--out``.
"""

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import RELAXATION_LEVEL, SPREAD_THRESHOLD, relaxation_check, spread_check
from steinax.posteriors import NAMES, get
from steinax.targets.base import evaluate

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def subsets_of(name, draws_dir, subsets, size):
    post = get(name)
    if post.exact is not None:
        x = np.asarray(post.exact(jax.random.key(7), subsets * size))
    else:
        path = os.path.join(draws_dir or "", f"{name}.npy")
        x = np.load(path) if draws_dir and os.path.exists(path) else post.reference().draws
        x = x[np.random.default_rng(7).permutation(x.shape[0])]
    k = min(subsets, x.shape[0] // size)
    return post, x[: k * size].reshape(k, size, -1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--draws", default=None)
    p.add_argument("--subsets", type=int, default=200)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--posteriors", nargs="+", default=list(NAMES))
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("collapse diagnostics on draws from the posterior (false alarms)",
           {"subsets": a.subsets, "draws per subset": a.size, "NUTS draws from": a.draws or "the stored 1000 draws",
            "spread threshold": SPREAD_THRESHOLD, "relaxation level": RELAXATION_LEVEL})
    worst, rows, all_ts, all_gs = 0.0, [], [], []
    for name in a.posteriors:
        post, sets = subsets_of(name, a.draws, a.subsets, a.size)
        spread_flags, relax_flags, flags, ts, gs, accs = 0, 0, 0, [], [], []
        for i, s in enumerate(sets):
            xs = jnp.asarray(s, jnp.result_type(float))
            _, scores = evaluate(post.target, jax.random.key(0), xs)
            c = spread_check(xs, scores)
            r = relaxation_check(post.target, xs, rng_key=jax.random.key(i))
            spread_flags += c.collapsed
            relax_flags += r.collapsed or r.untestable is not None
            flags += c.collapsed or r.collapsed or r.untestable is not None
            ts.append(c.median_ratio)
            gs.append(r.growth)
            accs.append(r.acceptance)
        rate = flags / len(sets)
        worst = max(worst, rate)
        all_ts.append(ts)
        all_gs.append(gs)
        rows.append({"posterior": name, "d": post.dim, "subsets": len(sets), "spread_flagged": spread_flags,
                     "relaxation_flagged": relax_flags, "flagged": flags,
                     "median_T_p5": np.percentile(ts, 5), "median_T_p95": np.percentile(ts, 95),
                     "growth_p5": np.percentile(gs, 5), "growth_p95": np.percentile(gs, 95),
                     "min_acceptance": float(np.min(accs))})
        print(f"{name:28s} d={post.dim:4d} flagged {flags:3d}/{len(sets)} ({100 * rate:.1f}%; spread {spread_flags}, "
              f"relaxation {relax_flags})  median T_k {np.percentile(ts, 5):.2f}-{np.percentile(ts, 95):.2f} (5-95%)  "
              f"growth {np.percentile(gs, 5):+.3f}..{np.percentile(gs, 95):+.3f}  min MALA acceptance {np.min(accs):.2f}",
              flush=True)
    print(f"worst false-alarm rate (either check): {100 * worst:.1f}% (target <= 5%)")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "calibration.csv"), rows)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.4 * len(rows) + 1.5), sharey=True)
    labels = [r["posterior"] for r in rows]
    axes[0].boxplot(all_ts, orientation="horizontal", tick_labels=labels)
    axes[0].axvline(SPREAD_THRESHOLD, color="C3", ls="--", label=f"threshold {SPREAD_THRESHOLD}")
    axes[0].set_xlabel("spread check: median_k T_k (1 for draws from the posterior)")
    axes[0].legend()
    axes[1].boxplot(all_gs, orientation="horizontal", tick_labels=labels)
    axes[1].axvline(0.0, color="k", lw=0.5)
    axes[1].set_xlabel("relaxation check: spread growth after 300 MALA moves (0 for draws from the posterior)")
    save_figure(fig, os.path.join(a.out, "calibration.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
