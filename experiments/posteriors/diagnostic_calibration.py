"""False-alarm rate of the spread check (steinax.diagnostics.spread_check) on draws from the posterior.

    python experiments/posteriors/diagnostic_calibration.py [--draws DIR] [--subsets 200]

For every posterior of the suite: 200 disjoint subsets of 100 draws. Closed-form posteriors
use exact i.i.d. draws; NUTS posteriors use the 20000 reference draws written by
``make_references.py --all-draws DIR`` (4 chains interleaved, so each subset spans the
chains; without DIR, the 1000 stored draws give 10 subsets). Prints, per posterior, how
many subsets are flagged (the target: at most 5%), and the spread of median T_k and of the
cross statistic over the subsets; writes ``calibration.csv`` and ``calibration.png`` (the
distribution of median T_k per posterior, with the flagging threshold) to ``--out``.
"""

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import SPREAD_THRESHOLD, spread_check
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
    banner("spread check on draws from the posterior (false alarms)",
           {"subsets": a.subsets, "draws per subset": a.size, "NUTS draws from": a.draws or "the stored 1000 draws"})
    worst, rows, all_ts = 0.0, [], []
    for name in a.posteriors:
        post, sets = subsets_of(name, a.draws, a.subsets, a.size)
        flags, ts, cs = 0, [], []
        for s in sets:
            xs = jnp.asarray(s, jnp.result_type(float))
            _, scores = evaluate(post.target, jax.random.key(0), xs)
            c = spread_check(xs, scores)
            flags += c.collapsed
            ts.append(c.median_ratio)
            cs.append(c.cross)
        rate = flags / len(sets)
        worst = max(worst, rate)
        all_ts.append(ts)
        rows.append({"posterior": name, "d": post.dim, "subsets": len(sets), "flagged": flags,
                     "median_T_p5": np.percentile(ts, 5), "median_T_p95": np.percentile(ts, 95),
                     "cross_median": np.percentile(cs, 50), "cross_p95": np.percentile(cs, 95)})
        print(f"{name:28s} d={post.dim:4d} flagged {flags:3d}/{len(sets)} ({100 * rate:.1f}%)  median T_k "
              f"{np.percentile(ts, 5):.2f}-{np.percentile(ts, 95):.2f} (5-95%)  cross {np.percentile(cs, 50):.2f} "
              f"(median), {np.percentile(cs, 95):.2f} (95%)", flush=True)
    print(f"worst false-alarm rate: {100 * worst:.1f}% (target <= 5%)")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "calibration.csv"), rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.5))
    ax.boxplot(all_ts, vert=False, tick_labels=[r["posterior"] for r in rows])
    ax.axvline(SPREAD_THRESHOLD, color="C3", ls="--", label=f"threshold {SPREAD_THRESHOLD}")
    ax.set_xlabel("median_k T_k over 100-draw subsets (1 for draws from the posterior)")
    ax.legend()
    save_figure(fig, os.path.join(a.out, "calibration.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
