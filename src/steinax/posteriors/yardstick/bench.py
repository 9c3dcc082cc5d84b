"""One run of one sampler on one suite posterior on the yardstick, as a results row (and its trace): what the
experiment ``experiments/posteriors/yardstick.py`` tabulates.

Settings, the same for every posterior (none tuned per posterior): float64; ``chains`` chains (or particles) from
the posterior's own initialiser; the MCMC peers ``warmup`` adaptation steps and then ``steps`` transitions (the per-run
cap: a sampler whose squared bias is not below 0.01 at the end has its cost reported as ``inf``, "not reached
within the cap"); ``steinax.sample`` with its defaults.
"""

from __future__ import annotations

import collections
import os

import jax
import numpy as np

from steinax.metrics.posterior import reference_moments
from steinax.posteriors.yardstick.mchmc import laps, mams
from steinax.posteriors.yardstick.mcmc import chees, meads, numpyro_nuts, nuts
from steinax.posteriors.yardstick.pipeline import steinax_sample
from steinax.posteriors.yardstick.trace import Trace
from steinax.posteriors.yardstick.vi import pathfinder

__all__ = ["FIELDS", "PUBLISHED", "PUBLISHED_SOURCE", "SAMPLERS", "harness_check", "run_one", "run_table", "summary", "trace_row"]

SAMPLERS = {"steinax.sample": steinax_sample, "numpyro_nuts": numpyro_nuts, "nuts": nuts, "chees": chees,
            "meads": meads, "mams": mams, "laps": laps, "pathfinder": pathfinder}
"""The samplers by name: ``(target or log-density, init, key, moments, steps, warmup) -> Trace`` (LAPS also takes
``draw_init``, the posterior's initialiser for one chain, as it draws its own starts)."""

FIELDS = ("posterior", "d", "chains", "sampler", "seed", "steps", "warmup", "grads_total", "grads_tuning",
          "sequential_total", "seconds_total", "compile_seconds",
          "grads_to_x2_max", "grads_to_x2_mean", "grads_to_x_max", "sequential_to_x2_max", "seconds_to_x2_max",
          "chain_grads_to_x2_mean", "chain_grads_to_x2_max", "x2_max_end", "x2_mean_end", "chain_x2_max_end",
          "published_grads_to_x2_max", "note")


def run_one(name: str, sampler: str, chains: int, seed: int = 0, steps: int = 200, warmup: int = 1000) -> Trace:
    """``sampler`` on posterior ``name`` with ``chains`` chains, in float64 (scoped), traced."""
    from steinax.posteriors import get

    if sampler not in SAMPLERS:
        raise ValueError(f"`sampler` must be one of {sorted(SAMPLERS)}; received {sampler!r}")
    with jax.enable_x64(True):  # the posterior built inside: its data in float64 too
        post = get(name)
        moments = reference_moments(post.reference())
        key_init, key_run = jax.random.split(jax.random.key(seed))
        make = getattr(post.target, "init_particles", None)
        init = make(key_init, chains) if make is not None else post.init(key_init, chains)
        model = post.target if sampler == "steinax.sample" else post.target.logdensity
        extra = {"draw_init": lambda k: (make or post.init)(k, 1)[0]} if sampler == "laps" else {}
        return SAMPLERS[sampler](model, init, key_run, moments, steps, warmup, **extra)


def trace_row(trace: Trace, name: str, d: int, seed: int, steps: int, warmup: int, note: str = "",
              chains: int | None = None) -> dict:
    """The results row of ``trace`` (:data:`FIELDS`): totals with tuning, costs to 0.01 with tuning (pooled
    estimates), per-chain costs without tuning (the published single-chain figures' convention), and the biases at
    the end of the run. ``chains`` is the count the run was asked for (its table's column); a sampler that runs
    fewer (NumPyro NUTS: 4) says so in the note."""
    t = trace.tuning
    if chains is not None and chains != trace.chains:
        note = f"ran {trace.chains} chains; {note}"
    if trace.info.get("nonfinite_step") is not None:  # never silent: the costs are then "not reached"
        note = f"non-finite positions from transition {trace.info['nonfinite_step']}; {note}"
    return {"posterior": name, "d": d, "chains": chains or trace.chains, "sampler": trace.sampler, "seed": seed, "steps": steps,
            "warmup": warmup, "grads_total": float(trace.gradient_evaluations[-1] + t["gradient_evaluations"]),
            "grads_tuning": float(t["gradient_evaluations"]),
            "sequential_total": float(trace.sequential_steps[-1] + t["sequential_steps"]),
            "seconds_total": round(float(trace.seconds[-1] + t["seconds"]), 2),
            "compile_seconds": round(float(trace.compile_seconds), 2),
            "grads_to_x2_max": trace.cost("x2_max"), "grads_to_x2_mean": trace.cost("x2_mean"),
            "grads_to_x_max": trace.cost("x_max"),
            "sequential_to_x2_max": trace.cost("x2_max", of="sequential_steps"),
            "seconds_to_x2_max": round(trace.cost("x2_max", of="seconds"), 2),
            "chain_grads_to_x2_mean": trace.cost("chain_x2_mean", tuning=False),
            "chain_grads_to_x2_max": trace.cost("chain_x2_max", tuning=False),
            "x2_max_end": float(trace.biases["x2_max"][-1]), "x2_mean_end": float(trace.biases["x2_mean"][-1]),
            "chain_x2_max_end": float(trace.biases["chain_x2_max"][-1]),
            "published_grads_to_x2_max": trace.published_cost(), "note": note}


MANY_CHAIN = ("chees", "meads", "mams", "laps")
"""The many-chain samplers whose sequential steps the goal compares with ``steinax.sample``'s."""
NUTS = ("nuts", "numpyro_nuts")
"""NUTS for the goal: whichever of BlackJAX's (the table's chains) and NumPyro's (4 chains, from any table) costs less
on a posterior."""
PUBLISHED = {  # one chain, gradient evaluations to b2(x^2) < 0.01 after tuning, (mean over coordinates, worst):
    # NUTS and MAMS as issue 50 quotes them, from the MAMS paper's benchmark results (PUBLISHED_SOURCE)
    "item_response_theory": {"nuts": (5_848, 71_758), "mams": (3_806, 47_414)},
    "german_sparse_logistic": {"nuts": (13_830, 110_828), "mams": (7_145, 63_807)},
    "brownian_motion": {"nuts": (6_270, 33_462), "mams": (3_247, 18_649)},
    "stochastic_volatility": {"nuts": (29_872, 1_628_519), "mams": (35_783, 482_668)},
    "neals_funnel": {"nuts": (26_392, float("inf")), "mams": (96_921, 1_432_043)},
}
PUBLISHED_SOURCE = ("the CSVs of the MAMS paper's benchmark code (github.com/reubenharry/sampler-benchmarks, "
                    "sampler-comparison/MAMS_PAPER_2025/table1 and sampler-comparison/results), not the text of "
                    "Robnik, Cohn-Gordon & Seljak, arXiv 2503.01707; their statistic: per chain, the worst "
                    "coordinate's squared bias and the gradient evaluations until it stays below 0.01, then the "
                    "median over the chains (128 for most models)")
"""Where :data:`PUBLISHED`'s figures come from, and what they measure."""
PUBLISHED_DIM = {"item_response_theory": 501, "german_sparse_logistic": 51, "brownian_motion": 32,
                 "stochastic_volatility": 2429, "neals_funnel": None}
"""The dimension of each published posterior (SV: the benchmark's adaptation of NumPyro's stochastic-volatility
model, d = 2429; the funnel's is not recorded here). Only where it equals ours is the comparison like for like."""


def fmt_cost(v) -> str:
    """A cost for a table: ``not reached`` where infinite, ``not measured`` where NaN (the sampler has no such
    estimate: LAPS's answer is scored on E[x^2] alone, Pathfinder has no chains)."""
    v = float(v)
    return "not measured" if np.isnan(v) else "not reached" if not np.isfinite(v) else f"{v:,.0f}"


def unfinished(rs) -> str:
    """The cell of runs that ended without a trace: ``over the time cap`` (the harness stopped them) or ``failed``
    (the sampler raised; the row's note holds the error); empty where any finished."""
    for prefix, cell in (("stopped", "over the time cap"), ("failed", "failed")):
        if rs and all(r["note"].startswith(prefix) for r in rs):
            return cell
    return ""


def summary(rows, chains_list) -> str:
    """The tables (cost to 0.01 in the worst coordinate's E[x^2], tuning included) and the goal's counts."""
    lines = []
    four = collections.defaultdict(list)  # NumPyro NUTS runs 4 chains whatever the table's count
    for r in rows:
        if r["sampler"] == "numpyro_nuts":
            four[r["posterior"]].append(r)
    for chains in chains_list:
        sub = [r for r in rows if int(r["chains"]) == chains]
        present = set(r["sampler"] for r in sub)  # columns in the registry's order (steinax.sample first)
        samplers = [s for s in SAMPLERS if s in present] + sorted(present - set(SAMPLERS))
        if not sub:
            continue
        by = collections.defaultdict(list)
        for r in sub:
            by[(r["posterior"], r["sampler"])].append(r)
        med = lambda rs, k: float(np.median([float(r[k]) for r in rs])) if rs else float("nan")
        lines += [(f"### {chains} chains (particles): gradient evaluations / sequential steps / seconds to b2(x^2) "
                  "< 0.01, worst coordinate, tuning included (median over seeds)"), "",
                  "| posterior | d | " + " | ".join(samplers) + " |", "|---|---|" + "---|" * len(samplers)]
        reach = fewer = fewer_seq = both = seq_both = 0
        for name in dict.fromkeys(r["posterior"] for r in sub):
            cells = []
            for s in samplers:
                rs = by.get((name, s), [])
                cells.append(unfinished(rs) or ("" if not rs else f"{fmt_cost(med(rs, 'grads_to_x2_max'))} / "
                             f"{fmt_cost(med(rs, 'sequential_to_x2_max'))} / {fmt_cost(med(rs, 'seconds_to_x2_max'))}"))
            d = next(r["d"] for r in sub if r["posterior"] == name)
            lines.append(f"| {name} | {d} | " + " | ".join(cells) + " |")
            ours = by.get((name, "steinax.sample"))
            costs = [med(rs, "grads_to_x2_max") for rs in (by.get((name, "nuts")), four.get(name)) if rs]
            nuts_cost = min(costs, default=float("inf"))
            if ours and np.isfinite(nuts_cost):
                both += 1
                reach += np.isfinite(med(ours, "grads_to_x2_max"))
                fewer += wins(med(ours, "grads_to_x2_max"), nuts_cost)
            many = [med(by[(name, s)], "sequential_to_x2_max") for s in MANY_CHAIN if by.get((name, s))]
            best_many = min(many, default=float("inf"))
            if ours and many and (np.isfinite(best_many) or np.isfinite(med(ours, "sequential_to_x2_max"))):
                seq_both += 1  # a posterior where neither reached 0.01 is left out: no one won there
                fewer_seq += wins(med(ours, "sequential_to_x2_max"), best_many)
        lines += ["", (f"Goal at {chains}: steinax.sample reaches 0.01 on {reach} of the {both} posteriors where NUTS "
                  f"does (BlackJAX's {chains} chains or NumPyro's 4, the cheaper), with gradient evaluations at most "
                  f"NUTS's on {fewer} of {both} (goal: at least half); "
                  f"sequential steps at most the best many-chain sampler's on {fewer_seq} of the {seq_both} where "
                  "either reached 0.01 (goal: at least a third)."), ""]
        lines += first_moment_table(sub, samplers, by, med)
    return "\n".join(lines) + "\n"


def wins(ours: float, theirs: float) -> bool:
    """Whether our cost is at most theirs, counted as a win only where ours is finite: ``inf <= inf`` (neither
    reached 0.01) is no win, and NaN (not measured) never is."""
    return bool(np.isfinite(ours) and ours <= theirs)


def first_moment_table(sub, samplers, by, med) -> list[str]:
    """The same runs on the first moment: gradient evaluations until the worst coordinate's b2(x) stays below 0.01.
    The published yardstick scores E[x^2] only, which cannot see the weights of modes placed symmetrically about 0
    (a mixture whose modes carry the wrong weights has the right E[x^2]); this table does."""
    chains = sub[0]["chains"]
    lines = [(f"#### {chains} chains: gradient evaluations to b2(x) < 0.01, worst coordinate (the first moment; "
              "tuning included)"), "", "| posterior | " + " | ".join(samplers) + " |", "|---|" + "---|" * len(samplers)]
    for name in dict.fromkeys(r["posterior"] for r in sub):
        cells = []
        for s in samplers:
            rs = by.get((name, s), [])
            cells.append(unfinished(rs) or (fmt_cost(med(rs, "grads_to_x_max"))
                                            if rs and all("grads_to_x_max" in r for r in rs) else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def harness_check(rows) -> str:
    """Our per-chain costs beside the published ones, where both exist, in two statistics: ours (each coordinate's
    squared bias averaged over the chains, then the mean or worst coordinate; gradient evaluations per chain, tuning
    apart) and the published one on the worst coordinate (:meth:`Trace.published_cost`: each chain's own worst
    coordinate and cost, the median over chains), which is the like-for-like comparison. Rows run before the
    published statistic was recorded read "not recorded" there."""
    lines = [("### The harness against the published single-chain figures (gradient evaluations per chain to "
             "b2(x^2) < 0.01, tuning apart)"), "", f"Published: {PUBLISHED_SOURCE}.", "",
             "| posterior | d (published) | sampler | chains x steps | ours: mean / worst | published statistic: worst "
             "| published: mean / worst | ratio: mean / worst (published statistic) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pub = PUBLISHED.get(r["posterior"], {}).get("mams" if r["sampler"] == "mams" else
                                                    "nuts" if r["sampler"] in ("nuts", "numpyro_nuts") else "")
        if pub is None:
            continue
        ours = (float(r["chain_grads_to_x2_mean"]), float(r["chain_grads_to_x2_max"]))
        like = r.get("published_grads_to_x2_max", "")
        like = float(like) if like not in ("", None) else None
        ratio = lambda o, p: f"{o / p:.2f}" if np.isfinite(o) and np.isfinite(p) else "-"
        pd = PUBLISHED_DIM.get(r["posterior"])
        cell = unfinished([r]) or f"{fmt_cost(ours[0])} / {fmt_cost(ours[1])}"
        like_cell = unfinished([r]) or ("not recorded" if like is None else fmt_cost(like))
        like_ratio = "-" if like is None else ratio(like, pub[1])
        lines.append(f"| {r['posterior']} | {r['d']} ({pd if pd else 'not recorded'}) | {r['sampler']} | "
                     f"{r['chains']} x {r['steps']} | {cell} | {like_cell} | {fmt_cost(pub[0])} / {fmt_cost(pub[1])} | "
                     f"{ratio(ours[0], pub[0])} / {ratio(ours[1], pub[1])} ({like_ratio}) |")
    return "\n".join(lines) + "\n"


KEY = ("posterior", "sampler", "chains", "seed")


def run_table(names, samplers, chains_list, seeds: int, out: str, steps: int = 200, warmup: int = 1000,
              log=print) -> str:
    """Every (posterior, sampler, chains, seed) in this process, rows appended to ``out/results.csv`` (a rerun skips
    done rows), and the summary (:func:`summary` and :func:`harness_check`) written to ``out/summary.md`` and
    returned. ``experiments/posteriors/yardstick.py`` runs the same jobs each in a fresh process, with a time cap."""
    from steinax._io import append_row, atomic_write_text, check_output, read_rows
    from steinax.posteriors import get

    path = os.path.join(out, "results.csv")
    check_output(path)
    for s in samplers:
        if s not in SAMPLERS:
            raise ValueError(f"`samplers`: {s!r} is not one of {sorted(SAMPLERS)}")
    done = {tuple(str(r[k]) for k in KEY) for r in read_rows(path)}
    for name in names:
        d = get(name).dim
        for chains in chains_list:
            for sampler in samplers:
                for seed in range(seeds):
                    if (name, sampler, str(chains), str(seed)) in done:
                        continue
                    trace = run_one(name, sampler, chains, seed, steps, warmup)
                    row = trace_row(trace, name, d, seed, steps, warmup, note=str(trace.info.get("message", ""))[:200],
                                    chains=chains)
                    append_row(path, row, FIELDS, KEY)
                    log(f"{name} {sampler} {chains} seed {seed}: {fmt_cost(row['grads_to_x2_max'])} gradient "
                        f"evaluations to b2(x^2) < 0.01")
    rows = read_rows(path)
    text = summary(rows, sorted({int(r["chains"]) for r in rows})) + "\n" + harness_check(rows)
    atomic_write_text(os.path.join(out, "summary.md"), text)
    return text
