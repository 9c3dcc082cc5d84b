"""False-alarm rate of the no-ground-truth diagnostics (spread_check, relaxation_check, mode_check) on draws from the posterior.

    python experiments/posteriors/diagnostic_calibration.py [--draws DIR] [--subsets 200] [--checks spread,relaxation,modes]

For every posterior of the suite: 200 disjoint subsets of 100 draws. Closed-form posteriors
use exact i.i.d. draws; NUTS posteriors use the 20000 reference draws written by
``make_references.py --all-draws DIR`` (without DIR, the 1000 stored draws give 10 subsets),
dealt into subsets by a seeded random permutation: each subset is a random thinning of the
4 chains, so draws in one subset lie far apart in their chains. Prints, per posterior, how
many subsets each check flags and how many any of the checks run flags (the suite's ``flagged``
when all three run; the target: at most 5%), the spread of median T_k and of the relaxation's
growth over the subsets; writes ``calibration.csv``, ``subsets.csv`` (every subset's flags and
statistics, so checks run separately can be joined) and ``calibration.png`` to ``--out``.

Resumable: ``subsets.csv`` is rewritten after every subset, and a rerun into the same ``--out``
with the same checks skips the subsets it holds. Keep ``--subsets``, ``--size`` and ``--draws``
as they were (the closed forms' exact draws depend on all three), or start a fresh ``--out``. At d = 501 (item response) the three checks take about 35 s a subset on 2 cores.
"""

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import MODES_LEVEL, RELAXATION_LEVEL, SPREAD_THRESHOLD, mode_check, relaxation_check, spread_check
from steinax.posteriors import NAMES, get
from steinax.targets.base import evaluate

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, read_csv, save_figure, write_csv_atomically  # noqa: E402


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
    p.add_argument("--checks", default=",".join(CHECKS), help="comma-separated subset of " + ", ".join(CHECKS))
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    checks = [c for c in a.checks.split(",") if c]
    for c in checks:
        if c not in CHECKS:
            raise ValueError(f"`--checks`: {c!r} is not one of {list(CHECKS)}")
    banner("no-ground-truth diagnostics on draws from the posterior (false alarms)",
           {"subsets": a.subsets, "draws per subset": a.size, "NUTS draws from": a.draws or "the stored 1000 draws",
            "checks": ", ".join(checks), "spread threshold": SPREAD_THRESHOLD, "relaxation level": RELAXATION_LEVEL,
            "modes level": MODES_LEVEL})
    os.makedirs(a.out, exist_ok=True)
    subsets_path = os.path.join(a.out, "subsets.csv")
    per_subset = [r for r in _done_subsets(subsets_path, checks)]
    done = {(r["posterior"], int(r["subset"])) for r in per_subset}
    worst, rows, all_ts, all_gs = 0.0, [], [], []
    for name in a.posteriors:
        post, sets = subsets_of(name, a.draws, a.subsets, a.size)
        for i, s in enumerate(sets):
            if (name, i) in done:
                continue
            per_subset.append({"posterior": name, "subset": i,
                               **subset_record(post, jnp.asarray(s, jnp.result_type(float)), i, checks)})
            write_csv_atomically(subsets_path, per_subset)  # after every subset: a stopped run resumes here
        mine = [r for r in per_subset if r["posterior"] == name and int(r["subset"]) < len(sets)]
        row, line, ts, gs = summary_row(name, post.dim, mine, checks)
        worst = max(worst, row["flagged"] / row["subsets"])
        rows.append(row)
        all_ts.append(ts)
        all_gs.append(gs)
        print(line, flush=True)
    print(f"worst false-alarm rate (any of {', '.join(checks)}): {100 * worst:.1f}% (target <= 5%)")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "calibration.csv"), rows)
    if all(all_ts) and all(all_gs):
        plot(rows, all_ts, all_gs, a.out)
    return 0


CHECKS = ("spread", "relaxation", "modes")


def subset_record(post, xs, i, checks) -> dict:
    """Each requested check's flag on one subset (the suite's rule: an untestable relaxation check counts), with
    its statistic: the spread check's median T_k, the relaxation's growth and acceptance, the modes found."""
    rec = {}
    if "spread" in checks:
        _, scores = evaluate(post.target, jax.random.key(0), xs)
        c = spread_check(xs, scores)
        rec.update(spread=bool(c.collapsed), median_T=float(c.median_ratio))
    if "relaxation" in checks:
        r = relaxation_check(post.target, xs, rng_key=jax.random.key(i))
        rec.update(relaxation=bool(r.collapsed or r.untestable is not None), growth=float(r.growth),
                   acceptance=float(r.acceptance))
    if "modes" in checks:
        m = mode_check(post.target, xs, rng_key=jax.random.key(i))
        rec.update(modes=bool(m.mismatch), modes_found=int(m.shares.shape[0]))
    return rec


def _done_subsets(path, checks):
    """The rows of an earlier run's ``subsets.csv`` that hold every requested check (typed), or none."""
    if not os.path.exists(path):
        return []
    rows = read_csv(path)
    if not rows or any(c not in rows[0] for c in checks):
        return []
    typed = {"spread": _bool, "relaxation": _bool, "modes": _bool, "median_T": float, "growth": float,
             "acceptance": float, "modes_found": int}
    return [{k: typed[k](v) if k in typed else v for k, v in r.items()} for r in rows]


def _bool(v):
    return v in (True, "True")


def summary_row(name, dim, recs, checks):
    """A posterior's calibration row, its printed line, and its subsets' median T_k and growths."""
    counts = {c: sum(bool(r[c]) for r in recs) for c in checks}
    flagged = sum(any(bool(r[c]) for c in checks) for r in recs)
    ts = [r["median_T"] for r in recs if "spread" in checks]
    gs = [r["growth"] for r in recs if "relaxation" in checks]
    accs = [r["acceptance"] for r in recs if "relaxation" in checks]
    modes_found = [r["modes_found"] for r in recs if "modes" in checks]
    row = {"posterior": name, "d": dim, "subsets": len(recs), "checks": "+".join(checks), "flagged": flagged,
           **{f"{c}_flagged": counts[c] for c in checks}}
    if ts:
        row.update(median_T_p5=np.percentile(ts, 5), median_T_p95=np.percentile(ts, 95))
    if gs:
        row.update(growth_p5=np.percentile(gs, 5), growth_p95=np.percentile(gs, 95), min_acceptance=float(np.min(accs)))
    if modes_found:
        row.update(modes_found_max=int(np.max(modes_found)))
    detail = ", ".join(f"{c} {counts[c]}" for c in checks)
    extra = (f"  median T_k {np.percentile(ts, 5):.2f}-{np.percentile(ts, 95):.2f} (5-95%)" if ts else "") + (
        f"  growth {np.percentile(gs, 5):+.3f}..{np.percentile(gs, 95):+.3f}  min MALA acceptance {np.min(accs):.2f}"
        if gs else "") + (f"  settled modes found: {min(modes_found)}-{max(modes_found)}" if modes_found else "")
    line = (f"{name:28s} d={dim:4d} flagged {flagged:3d}/{len(recs)} ({100 * flagged / len(recs):.1f}%; {detail})"
            f"{extra}")
    return row, line, ts, gs


def plot(rows, all_ts, all_gs, out):
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
    save_figure(fig, os.path.join(out, "calibration.png"))


if __name__ == "__main__":
    sys.exit(main())
