"""``steinax.sample`` with its defaults on every suite posterior, each stage scored, beside NumPyro NUTS (as written and
after its usual fixes) and nutpie (issues 49 and 57).

    python experiments/posteriors/sample_suite.py [--posteriors NAME ...] [--seeds 5] [--nuts-seeds 5]
        [--peers nuts nuts_fixed nutpie [nutpie_flow]] [--out DIR]

For each posterior and seed: ``steinax.sample(target, rng_key=key(seed), num_particles=100)`` in float64 (rows
``sample:warm_start`` (the warm start's draws alone), ``sample:particles`` (with the particle method, no correction)
and ``sample:sample`` (the answer)), and the peers (:data:`PEERS`): NumPyro NUTS, 4 chains, 1000 warm-up, then
1000-draw blocks until the minimum bulk ESS is 1000 (row ``nuts``); the same after its usual fixes, hierarchical
sites non-centred and target acceptance 0.95 (``nuts_fixed``); nutpie, 4 chains, 1000 warm-up and 1000 draws each
(``nutpie``), and with its flow adaptation (``nutpie_flow``, opt-in: it trains a flow per run). Each (posterior,
seed) runs in a fresh process, so every run compiles, as a user's script does. Every row: worst |mean error|, median,
minimum and maximum sd ratio against the reference, gradient evaluations and wall seconds (compilation included).
Rows are appended to ``DIR/results.csv`` as they finish (a rerun skips done rows); ``DIR/summary.md`` is the table
of the issue: per posterior, the mean over seeds of each stage's and peer's scores, whether the reference is clean
(R-hat <= 1.01, no divergences), the goal (worst error <= 0.2, median sd ratio in [0.9, 1.1], minimum >= 0.7 on
every seed), the right answers called not ok (false alarms) and the runs called ok that miss the goal (silent
failures)."""

import argparse
import collections
import os
import subprocess
import sys

import jax
import numpy as np

from steinax._io import append_row, atomic_write_text, check_output, read_rows
from steinax.posteriors import NAMES, get
from steinax.posteriors.sampling import nuts_fixed_row, nuts_row, nutpie_row, sample_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure  # noqa: E402

FIELDS = ("posterior", "d", "method", "seed", "n", "gradient_evaluations", "wall_s", "mean_error_max",
          "mean_error_median", "sd_ratio_median", "sd_ratio_min", "sd_ratio_max", "sinkhorn", "ok", "message", "correction_steps",
          "rhat", "ess_bulk", "divergences", "draws_per_chain", "grads_by_stage", "decisions", "compile_s", "programs",
          "cache")
KEY = ("posterior", "method", "seed")
PEERS = ("nuts", "nuts_fixed", "nutpie", "nutpie_flow")
"""The peers' rows: NumPyro NUTS as written and after its usual fixes (non-centred hierarchies, target acceptance
0.95), nutpie, and nutpie with its normalizing-flow adaptation."""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(NAMES), choices=list(NAMES))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--nuts-seeds", type=int, default=None, help="runs per posterior of each peer (default: --seeds)")
    p.add_argument("--peers", nargs="*", default=["nuts", "nuts_fixed", "nutpie"], choices=list(PEERS),
                   help="the peers' rows (nutpie_flow trains a flow per run: minutes on a CPU)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "sample_suite"))
    p.add_argument("--nuts-min-ess", type=float, default=1000.0, help="NUTS runs until this minimum bulk ESS")
    p.add_argument("--nuts-warmup", type=int, default=1000)
    p.add_argument("--only-seed", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--previous", default=None,
                   help="an earlier run's results.csv: its rows stand in the summary for posteriors this run has not "
                        "finished (all --seeds sample seeds), and the summary names them")
    p.add_argument("--cache", default=None,
                   help="a folder: each posterior's runs use JAX's persistent compilation cache in DIR/<posterior> "
                        "(steinax.enable_compilation_cache): seed 0 fills it (a first call, cold), later seeds read "
                        "it (a user's second script); rows say which (column `cache`)")
    p.add_argument("--float32", action="store_true",
                   help="run steinax.sample in float32 (JAX's default precision; the peers and scores stay float64): "
                        "issue 59's precision question, in its own --out")
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
            methods = (["sample:sample"] if seed < a.seeds else []) + (list(a.peers) if seed < nuts_seeds else [])
            if all((name, m, str(seed)) in done for m in methods):
                continue
            if not a.in_process:  # a fresh process per (posterior, seed): every run compiles, as a user's script does,
                # and XLA's compiled code does not pile up (one process of many runs ran out of memory maps)
                env = dict(os.environ)
                if a.cache:  # read at `import steinax` in the fresh process
                    env["STEINAX_COMPILATION_CACHE"] = os.path.abspath(os.path.join(a.cache, name))
                subprocess.run([sys.executable, os.path.abspath(__file__), "--in-process", "--posteriors", name,
                                "--seeds", str(a.seeds), "--nuts-seeds", str(nuts_seeds), "--only-seed", str(seed),
                                "--peers", *a.peers, *(["--float32"] if a.float32 else []),
                                "--nuts-min-ess", str(a.nuts_min_ess), "--nuts-warmup", str(a.nuts_warmup),
                                "--out", a.out], check=False, env=env)
                continue
            if a.only_seed is not None and seed != a.only_seed:
                continue
            run_seed(name, seed, methods, done, path, a.nuts_min_ess, a.nuts_warmup, float32=a.float32)
    if a.only_seed is not None:
        return 0
    rows, note = merged_rows(read_rows(path), read_rows(a.previous) if a.previous else [], a.seeds, a.previous)
    text = note + summary(rows) + cost_summary(rows)
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


def run_seed(name: str, seed: int, methods, done, path, nuts_min_ess: float = 1000.0, nuts_warmup: int = 1000,
             float32: bool = False) -> None:
    """``steinax.sample`` and NUTS on ``name`` with ``seed`` (those of ``methods`` not ``done``), rows appended;
    ``float32``: ``steinax.sample`` (the target built, the run, its draws) in float32, scored in float64."""
    for method in methods:
        if (name, method, str(seed)) in done:
            continue
        with jax.enable_x64(not (float32 and method == "sample:sample")):  # scoped: the caller's precision is kept
            if method == "sample:sample":
                cache = _cache_state()
                try:
                    rows = sample_rows(name, seed)
                except Exception as err:  # a run that raises is a result (float32 on a model in raw units)
                    nan = float("nan")
                    rows = [{"posterior": name, "d": get(name).dim, "method": method, "seed": seed, "n": 100,
                             "gradient_evaluations": 0, "wall_s": nan, "mean_error_max": nan, "mean_error_median": nan,
                             "sd_ratio_median": nan, "sd_ratio_min": nan, "sd_ratio_max": nan, "sinkhorn": nan,
                             "ok": False, "message": f"raised {type(err).__name__}: {str(err)[:300]}"}]
                rows[-1]["cache"] = cache
            elif method in ("nuts", "nuts_fixed"):
                row = nuts_row if method == "nuts" else nuts_fixed_row
                rows = [row(name, seed, min_ess=nuts_min_ess, warmup=nuts_warmup)]
            else:
                rows = [nutpie_row(name, seed, flow=method == "nutpie_flow", tune=nuts_warmup)]
        for row in rows:
            append_row(path, row, FIELDS, KEY)
            print(f"{name:26s} {row['method']:20s} seed {seed}: err {row['mean_error_max']:.3f} sd, sd ratio "
                  f"{row['sd_ratio_median']:.3f} (min {row['sd_ratio_min']:.3f}), "
                  f"{row['gradient_evaluations']} grads, {row['wall_s']:.1f} s"
                  + (f", ok={row['ok']}" if row.get("ok") is not None else ""), flush=True)


def _cache_state() -> str:
    """``"off"``, or whether this process's persistent compilation cache held anything before the run (``"cold"``:
    empty, a first call; ``"warm"``: an earlier process's programs)."""
    from steinax.runtime.compilation_cache import ENV, cache_size

    folder = os.environ.get(ENV)
    if not folder:
        return "off"
    return "warm" if os.path.isdir(folder) and cache_size(folder) > 0 else "cold"


def _clean(name: str) -> bool:
    meta = get(name).reference().meta
    return meta.get("source") != "nuts" or (meta["max_rhat"] <= 1.01 and meta["divergences"] == 0)


def right(r) -> bool:
    """Issue 57's right answer: worst |mean error| <= 0.1 sd and every sd ratio within [0.95, 1.05] (rows without
    the largest ratio, from before it was recorded, are judged by the median and the minimum)."""
    top = r.get("sd_ratio_max") or r["sd_ratio_median"]
    return float(r["mean_error_max"]) <= 0.1 and float(r["sd_ratio_min"]) >= 0.95 and float(top) <= 1.05


def meets_goal(r) -> bool:
    """The accuracy goal on one run: worst error <= 0.2 sd, median sd ratio in [0.9, 1.1], minimum >= 0.7."""
    return (float(r["mean_error_max"]) <= 0.2 and 0.9 <= float(r["sd_ratio_median"]) <= 1.1
            and float(r["sd_ratio_min"]) >= 0.7)


def summary(rows) -> str:
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["posterior"], r["method"])].append(r)
    f = lambda g, k: [float(r[k]) for r in g if r.get(k) not in ("", None)]  # noqa: E731
    peers = [m for m in PEERS if any(r["method"] == m for r in rows)]
    lines = ["Cells: worst |mean error| (sds, mean over seeds); median sd ratio (mean); minimum sd ratio (min over "
             "seeds, steinax.sample only); gradient evaluations (median); wall seconds (median over seeds, "
             "compilation included, each run in a fresh process). Goal: worst error <= 0.2, median sd ratio in "
             "[0.9, 1.1], minimum >= 0.7 on every seed. 'right, not ok': runs within 0.1 sd and sd ratios within "
             "[0.95, 1.05] that ok calls not ok; 'ok, wrong': runs ok calls ok that miss the goal.", "",
             "| posterior | d | clean ref | warm start | particles | sample | ok | goal | right, not ok | ok, wrong | "
             + " | ".join(peers) + " |",
             "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(peers)]
    met = counted = cheaper = 0
    false_alarms = silent = runs = right_runs = 0
    for name in dict.fromkeys(r["posterior"] for r in rows):
        cells = []
        for stage in ("sample:warm_start", "sample:particles", "sample:sample"):
            g = groups.get((name, stage), [])
            cells.append(f"{np.mean(f(g, 'mean_error_max')):.2f}; {np.mean(f(g, 'sd_ratio_median')):.2f}; "
                         f"{np.min(f(g, 'sd_ratio_min')):.2f}; {np.median(f(g, 'gradient_evaluations')):.3g}"
                         + (f"; {np.median(f(g, 'wall_s')):.0f} s" if stage == "sample:sample" else "") if g else "")
        g = groups.get((name, "sample:sample"), [])
        goal = bool(g) and all(meets_goal(r) for r in g)
        alarms = sum(right(r) and str(r["ok"]) != "True" for r in g)
        wrong_ok = sum(str(r["ok"]) == "True" and not meets_goal(r) for r in g)
        runs += len(g)
        right_runs += sum(right(r) for r in g)
        false_alarms += alarms
        silent += wrong_ok
        clean = _clean(name)
        best_peer = min((np.median(f(groups[(name, m)], "gradient_evaluations")) for m in ("nuts", "nuts_fixed")
                         if groups.get((name, m))), default=np.nan)
        if clean and g:
            counted += 1
            met += goal
            cheaper += goal and np.median(f(g, "gradient_evaluations")) <= best_peer
        oks = sum(str(r["ok"]) == "True" for r in g)
        peer_cells = []
        for m in peers:
            pg = groups.get((name, m), [])
            peer_cells.append(f"{np.mean(f(pg, 'mean_error_max')):.2f}; {np.mean(f(pg, 'sd_ratio_median')):.2f}; "
                              f"{np.median(f(pg, 'gradient_evaluations')):.3g}; {np.median(f(pg, 'wall_s')):.0f} s"
                              + (f" ({len(pg)})" if len(pg) != len(g) else "") if pg else "")
        lines.append(f"| {name} | {g[0]['d'] if g else ''} | {'yes' if clean else 'no'} | " + " | ".join(cells)
                     + f" | {oks}/{len(g)} | {'met' if goal else 'not met'} | {alarms} | {wrong_ok} | "
                     + " | ".join(peer_cells) + " |")
    lines += ["", f"Goal met on {met} of {counted} posteriors with a clean reference, with at most the gradient "
              f"evaluations of the cheaper NUTS (as written or fixed) on {cheaper}. Right answers called not ok: "
              f"{false_alarms} of {right_runs} right runs ({false_alarms / max(runs, 1):.1%} of all {runs} runs); "
              f"runs called ok that miss the goal: {silent}. A peer cell's count in parentheses is its number of "
              "seeds where it differs from steinax.sample's."]
    return "\n".join(lines) + "\n"


def _stage_grads(r) -> dict:
    return {k: int(v) for k, v in (kv.split("=") for kv in (r.get("grads_by_stage") or "").split(";") if kv)}


def cost_summary(rows) -> str:
    """Issue 58's table: per posterior, ``steinax.sample``'s gradient evaluations per stage (median over seeds), what
    the sizing decided, compile seconds and wall seconds of a first call (cache cold) and of a later one (cache warm),
    beside NUTS's (the cheaper of NUTS as written and fixed: median gradient evaluations and wall seconds)."""
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["posterior"], r["method"])].append(r)
    stage_names = ("reparam", "warm_start", "sizing", "particles", "checks", "correction")
    lines = ["", "### Cost and sizing (issue 58)", "",
             "Gradient evaluations per stage (median over seeds); the particle stage run or skipped on how many seeds; "
             "the correction's chains; compile seconds and wall seconds of a first call (a fresh process, its cache "
             "cold: seed 0) and of a later call (a fresh process reading the persistent compilation cache the first "
             "filled: median over seeds 1-4); NUTS: the cheaper of NUTS as written and fixed (median gradient "
             "evaluations, median wall seconds). Ratios are steinax.sample's over NUTS's.", "",
             "| posterior | d | " + " | ".join(stage_names) + " | total | particles run | chains | compile s (first) | "
             "wall first | wall cached | NUTS grads | NUTS wall | grads ratio | wall ratio first / cached | goal |",
             "|---|---|" + "---|" * (len(stage_names) + 11)]
    counts = collections.Counter()
    for name in dict.fromkeys(r["posterior"] for r in rows):
        g = [r for r in groups.get((name, "sample:sample"), []) if r.get("grads_by_stage")]
        if not g:
            continue
        per = [_stage_grads(r) for r in g]
        cells = [f"{np.median([p.get(k, 0) for p in per]):.3g}" for k in stage_names]
        total = np.median([float(r["gradient_evaluations"]) for r in g])
        ran = sum("particles run" in (r.get("decisions") or "") for r in g)
        chains = sorted({c for r in g for c in [_chains(r)] if c})
        first = [r for r in g if r.get("cache") in ("cold", "off") and str(r["seed"]) == "0"]
        cached = [float(r["wall_s"]) for r in g if r.get("cache") == "warm"]
        first_wall = float(first[0]["wall_s"]) if first else np.nan
        compile_first = float(first[0]["compile_s"]) if first else np.nan
        cached_wall = np.median(cached) if cached else np.nan
        peers = [groups.get((name, m), []) for m in ("nuts", "nuts_fixed")]
        nuts = [(np.median([float(r["gradient_evaluations"]) for r in pg]), np.median([float(r["wall_s"]) for r in pg]))
                for pg in peers if pg]
        nuts_grads, nuts_wall = min(nuts) if nuts else (np.nan, np.nan)
        goal = all(meets_goal(r) for r in g)
        grads_ratio, first_ratio, cached_ratio = total / nuts_grads, first_wall / nuts_wall, cached_wall / nuts_wall
        if goal and _clean(name) and np.isfinite(grads_ratio):
            counts["easy"] += 1
            counts["grads"] += grads_ratio <= 1
            counts["first"] += first_ratio <= 1
            counts["cached"] += cached_ratio <= 0.5
        lines.append(f"| {name} | {g[0]['d']} | " + " | ".join(cells) + f" | {total:.3g} | {ran}/{len(g)} | "
                     f"{'/'.join(map(str, chains))} | {compile_first:.1f} | {first_wall:.0f} | {cached_wall:.0f} | "
                     f"{nuts_grads:.3g} | {nuts_wall:.0f} | {grads_ratio:.2f} | {first_ratio:.2f} / {cached_ratio:.2f} | "
                     f"{'met' if goal else 'not met'} |")
    lines += ["", f"Of the {counts['easy']} posteriors with a clean reference where the accuracy goal is met on every "
              f"seed and NUTS ran: gradient evaluations at most NUTS's on {counts['grads']}; a first call's wall time "
              f"at most NUTS's on {counts['first']}; a cached call's at most half NUTS's on {counts['cached']}."]
    return "\n".join(lines) + "\n"


def _chains(r):
    for part in (r.get("decisions") or "").split(";"):
        if part.strip().startswith("chains "):
            return int(part.split()[1])
    return None


if __name__ == "__main__":
    raise SystemExit(main())
