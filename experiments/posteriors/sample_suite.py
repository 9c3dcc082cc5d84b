"""``steinax.sample`` with its defaults on every suite posterior, each stage scored, beside NumPyro NUTS (issue 49).

    python experiments/posteriors/sample_suite.py [--posteriors NAME ...] [--seeds 5] [--nuts-seeds 5] [--out DIR]

For each posterior and seed: ``steinax.sample(target, rng_key=key(seed), num_particles=100)`` in float64 (rows
``sample:warm_start`` (Pathfinder's draws alone), ``sample:particles`` (with the particle method, no correction) and
``sample:sample`` (the answer)), and NumPyro NUTS, 4 chains, 1000 warm-up, then 1000-draw blocks until the minimum
bulk ESS is 1000 (row ``nuts``), one after the other in a fresh process per posterior and seed (so every run
compiles, as a user's script does). Every row: worst |mean error| and median
and minimum sd ratio against the reference, cumulative gradient evaluations and wall seconds (compilation included). Rows are appended to
``DIR/results.csv`` as they finish (a rerun skips done rows); ``DIR/summary.md`` is the table of the issue: per
posterior, the mean over seeds of each stage's scores, whether NUTS's reference is clean (R-hat <= 1.01, no
divergences), the goal (worst error <= 0.2, median sd ratio in [0.9, 1.1], minimum >= 0.7 on every seed), the
median wall time against NUTS's, and how the runs that miss [0.5 sd error, sd ratio in [0.8, 1.25]] were flagged.
"""

import argparse
import collections
import os
import subprocess
import sys

import jax
import numpy as np

from steinax._io import append_row, atomic_write_text, check_output, read_rows
from steinax.posteriors import NAMES, get
from steinax.posteriors.sampling import nuts_row, sample_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure  # noqa: E402

FIELDS = ("posterior", "d", "method", "seed", "n", "gradient_evaluations", "wall_s", "mean_error_max",
          "mean_error_median", "sd_ratio_median", "sd_ratio_min", "sinkhorn", "ok", "message", "correction_steps",
          "rhat", "ess_bulk", "divergences", "draws_per_chain")
KEY = ("posterior", "method", "seed")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(NAMES), choices=list(NAMES))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--nuts-seeds", type=int, default=None, help="NUTS runs per posterior (default: --seeds)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "sample_suite"))
    p.add_argument("--nuts-min-ess", type=float, default=1000.0, help="NUTS runs until this minimum bulk ESS")
    p.add_argument("--nuts-warmup", type=int, default=1000)
    p.add_argument("--only-seed", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--previous", default=None,
                   help="an earlier run's results.csv: its rows stand in the summary for posteriors this run has not "
                        "finished (all --seeds sample seeds), and the summary names them")
    p.add_argument("--summary-only", action="store_true", help="write summary.md and the figure from the rows; run nothing")
    p.add_argument("--in-process", action="store_true",
                   help="run every job in this process (default: each (posterior, seed) in a fresh one)")
    a = p.parse_args(argv)
    path = os.path.join(a.out, "results.csv")
    check_output(path)
    nuts_seeds = a.seeds if a.nuts_seeds is None else a.nuts_seeds
    banner("steinax.sample on the posterior suite, beside NumPyro NUTS (float64)",
           {"posteriors": len(a.posteriors), "seeds": a.seeds, "NUTS seeds": nuts_seeds, "particles": 100,
            "NUTS": f"4 chains, {a.nuts_warmup} warm-up, 1000-draw blocks to min bulk ESS {a.nuts_min_ess:g}",
            "out": a.out,
            "devices": jax.devices()})
    done = {tuple(r[k] for k in KEY) for r in read_rows(path)}
    for name in ([] if a.summary_only else a.posteriors):
        for seed in range(max(a.seeds, nuts_seeds)):
            methods = (["sample:sample"] if seed < a.seeds else []) + (["nuts"] if seed < nuts_seeds else [])
            if all((name, m, str(seed)) in done for m in methods):
                continue
            if not a.in_process:  # a fresh process per (posterior, seed): every run compiles, as a user's script does,
                # and XLA's compiled code does not pile up (one process of many runs ran out of memory maps)
                subprocess.run([sys.executable, os.path.abspath(__file__), "--in-process", "--posteriors", name,
                                "--seeds", str(a.seeds), "--nuts-seeds", str(nuts_seeds), "--only-seed", str(seed),
                                "--nuts-min-ess", str(a.nuts_min_ess), "--nuts-warmup", str(a.nuts_warmup),
                                "--out", a.out], check=False)
                continue
            if a.only_seed is not None and seed != a.only_seed:
                continue
            run_seed(name, seed, methods, done, path, a.nuts_min_ess, a.nuts_warmup)
    if a.only_seed is not None:
        return 0
    rows, note = merged_rows(read_rows(path), read_rows(a.previous) if a.previous else [], a.seeds, a.previous)
    text = note + summary(rows)
    atomic_write_text(os.path.join(a.out, "summary.md"), text)
    figure(rows, os.path.join(a.out, "sample_suite.png"))
    print(text)
    return 0


def merged_rows(rows, previous, seeds: int, previous_path=None) -> tuple[list, str]:
    """This run's rows for the posteriors it finished (``seeds`` sample seeds), ``previous`` rows for the others, and
    a sentence naming the posteriors whose rows are the previous run's ("" where none are)."""
    finished = {p for p, k in collections.Counter(r["posterior"] for r in rows if r["method"] == "sample:sample").items()
                if k >= seeds}
    carried = sorted({r["posterior"] for r in previous} - finished)
    merged = [r for r in rows if r["posterior"] in finished or not previous] + [r for r in previous if r["posterior"] in carried]
    note = (f"Rows of {', '.join(carried)} are an earlier run's (`{os.path.basename(previous_path or '')}`); every other "
            "row is this run's (`results.csv`).\n\n") if carried else ""
    return merged, note


def figure(rows, path: str) -> None:
    """Worst |mean error| (left) and wall seconds (right) per posterior: each stage of steinax.sample and NUTS,
    mean over seeds."""
    plt = pyplot()
    names = list(dict.fromkeys(r["posterior"] for r in rows))
    methods = ["sample:warm_start", "sample:particles", "sample:sample", "nuts"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 0.35 * len(names) + 1.8), sharey=True)
    y = np.arange(len(names))
    for k, m in enumerate(methods):
        err = [np.mean([float(r["mean_error_max"]) for r in rows if r["posterior"] == n and r["method"] == m] or [np.nan])
               for n in names]
        ax1.barh(y + 0.2 * k - 0.3, err, height=0.2, label=m, color=f"C{k}")
        if m in ("sample:sample", "nuts"):
            wall = [np.median([float(r["wall_s"]) for r in rows if r["posterior"] == n and r["method"] == m] or [np.nan])
                    for n in names]
            ax2.barh(y + (0.2 if m == "nuts" else -0.2), wall, height=0.4, label=m, color=f"C{k}")
    ax1.set_xscale("log")
    ax1.axvline(0.2, color="k", lw=0.5)
    ax1.set_yticks(y, names)
    ax1.set_xlabel("worst |mean error| (reference sds)")
    ax2.set_xlabel("wall seconds (compilation included)")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.subplots_adjust(left=0.2, wspace=0.08)
    save_figure(fig, path)


def run_seed(name: str, seed: int, methods, done, path, nuts_min_ess: float = 1000.0, nuts_warmup: int = 1000) -> None:
    """``steinax.sample`` and NUTS on ``name`` with ``seed`` (those of ``methods`` not ``done``), rows appended."""
    for method in methods:
        if (name, method, str(seed)) in done:
            continue
        with jax.enable_x64(True):  # scoped: the caller's precision is left as it was
            rows = (sample_rows(name, seed) if method == "sample:sample"
                    else [nuts_row(name, seed, min_ess=nuts_min_ess, warmup=nuts_warmup)])
        for row in rows:
            append_row(path, row, FIELDS, KEY)
            print(f"{name:26s} {row['method']:20s} seed {seed}: err {row['mean_error_max']:.3f} sd, sd ratio "
                  f"{row['sd_ratio_median']:.3f} (min {row['sd_ratio_min']:.3f}), "
                  f"{row['gradient_evaluations']} grads, {row['wall_s']:.1f} s"
                  + (f", ok={row['ok']}" if row.get("ok") is not None else ""), flush=True)


def _clean(name: str) -> bool:
    meta = get(name).reference().meta
    return meta.get("source") != "nuts" or (meta["max_rhat"] <= 1.01 and meta["divergences"] == 0)


def summary(rows) -> str:
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["posterior"], r["method"])].append(r)
    f = lambda g, k: [float(r[k]) for r in g if r.get(k) not in ("", None)]  # noqa: E731
    lines = ["Cells: worst |mean error| (sds, mean over seeds); median sd ratio (mean); minimum sd ratio (min over "
             "seeds); gradient evaluations (median). Goal: worst error <= 0.2, median sd ratio in [0.9, 1.1], minimum "
             ">= 0.7 on every seed. Wall: median seconds over seeds (seed 0's), "
             "compilation included (each run in a fresh process).", "",
             "| posterior | d | clean ref | warm start | particles | sample | ok | goal | sample s (seed 0) | NUTS s (seed 0) | NUTS |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    met = wall_ok = counted = 0
    missed_flagged, missed = 0, 0
    for name in dict.fromkeys(r["posterior"] for r in rows):
        cells = []
        for stage in ("sample:warm_start", "sample:particles", "sample:sample"):
            g = groups.get((name, stage), [])
            cells.append(f"{np.mean(f(g, 'mean_error_max')):.2f}; {np.mean(f(g, 'sd_ratio_median')):.2f}; "
                         f"{np.min(f(g, 'sd_ratio_min')):.2f}; {np.median(f(g, 'gradient_evaluations')):.3g}" if g else "")
        g = groups.get((name, "sample:sample"), [])
        nuts = groups.get((name, "nuts"), [])
        goal = bool(g) and all(float(r["mean_error_max"]) <= 0.2 and 0.9 <= float(r["sd_ratio_median"]) <= 1.1
                               and float(r["sd_ratio_min"]) >= 0.7 for r in g)
        clean = _clean(name)
        for r in g:
            bad = (float(r["mean_error_max"]) > 0.5 or not 0.8 <= float(r["sd_ratio_median"]) <= 1.25)
            missed += bad
            missed_flagged += bad and str(r["ok"]) == "False"
        ws, wn = (np.median(f(g, "wall_s")) if g else np.nan), (np.median(f(nuts, "wall_s")) if nuts else np.nan)
        if clean and g:
            counted += 1
            met += goal
            wall_ok += ws <= wn
        oks = sum(str(r["ok"]) == "True" for r in g)
        cold = lambda rs: next((float(r["wall_s"]) for r in rs if str(r["seed"]) == "0"), np.nan)  # noqa: E731
        nuts_cell = (f"{np.mean(f(nuts, 'mean_error_max')):.2f}; {np.mean(f(nuts, 'sd_ratio_median')):.2f}; "
                     f"{np.median(f(nuts, 'gradient_evaluations')):.3g}" if nuts else "")
        lines.append(f"| {name} | {g[0]['d'] if g else ''} | {'yes' if clean else 'no'} | " + " | ".join(cells)
                     + f" | {oks}/{len(g)} | {'met' if goal else 'not met'} | {ws:.1f} ({cold(g):.1f}) | {wn:.1f} ({cold(nuts):.1f})"
                     f" | {nuts_cell} |")
    lines += ["", f"Goal met on {met} of {counted} posteriors with a clean reference; wall time at most NUTS's on "
              f"{wall_ok} of {counted}. Runs outside [0.5 sd, sd ratio 0.8-1.25]: {missed}, flagged (ok=False): "
              f"{missed_flagged}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
