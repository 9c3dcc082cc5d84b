"""``steinax.sample`` on the yardstick: what it answers after each stage and after each round of its correction.

Checkpoints: the warm start's draws, the particles, then every round of the correction (every chain's kept draws so
far, pooled; and per chain, for the ``chain_*`` biases). **Decided here:** every stage counts as the run, none as
tuning (``tuning`` is zero): the particles are an answer in their own right, and the correction's warm-up is in the
cost of its first round. Where the correction weighs separated modes, the last round's estimate is the weighted one
(the rounds before it are the chains' unweighted draws, what the call would have answered had it stopped there), and
the bridge sampling's log-density evaluations are counted as gradient evaluations. Sequential steps: L-BFGS iterations (the most of any start), the particle steps, one for the
checks, and the correction's leapfrog steps (per transition the most any chain took). Seconds are wall time less
JAX's compilation before each checkpoint (as the MCMC peers' run time excludes theirs); ``compile_seconds`` is all
of the call's compilation.
"""

from __future__ import annotations

import time
import warnings

import jax
import numpy as np

from steinax.metrics.posterior import squared_bias
from steinax.posteriors.yardstick.trace import BIASES, Trace

__all__ = ["steinax_sample"]

COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                   "/jax/core/compile/backend_compile_duration")


def _row(draws, moments, chains=None, weights=None) -> dict:
    b = squared_bias(np.asarray(draws, np.float64).reshape(-1, np.shape(moments["mean"])[0]), moments, weights)
    row = {"x_mean": b["x"].mean(), "x_max": b["x"].max(), "x2_mean": b["x2"].mean(), "x2_max": b["x2"].max(),
           "chain_x2_mean": np.nan, "chain_x2_max": np.nan}
    if chains is not None:  # [chains, kept, d]: each chain's own estimate
        per = np.mean([squared_bias(c, moments)["x2"] for c in chains], axis=0)
        row.update(chain_x2_mean=per.mean(), chain_x2_max=per.max())
    return row


def steinax_sample(target, init, rng_key, moments: dict, steps: int | None = None, warmup: int | None = None,
                   **kwargs) -> Trace:
    """``steinax.sample(target, rng_key=rng_key, init=init, progress=False, **kwargs)`` traced (module docstring);
    ``steps`` and ``warmup`` are the MCMC peers' settings and are not used (the pipeline decides its own)."""
    import steinax

    seconds = {"events": [], "on": False}

    def listen(event, secs, **kw):
        if seconds["on"] and event in COMPILE_EVENTS:
            seconds["events"].append((time.perf_counter() - t0, secs))  # (when it ended, how long), from the start

    jax.monitoring.register_event_duration_secs_listener(listen)
    seconds["on"], t0 = True, time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its verdict is kept in info
        res = steinax.sample(target, rng_key=rng_key, init=init, progress=False, **kwargs)
    wall, seconds["on"] = time.perf_counter() - t0, False

    g, s, st = res.gradient_evaluations, res.seconds, res.stages
    rows, grads, seq, secs = [], [], [], []
    spent = {"grads": 0.0, "seq": 0.0, "secs": 0.0}

    def spend(gr, sq, sec):
        spent["grads"] += gr
        spent["seq"] += sq
        spent["secs"] += sec

    def checkpoint(row):
        rows.append(row)
        grads.append(spent["grads"])
        seq.append(spent["seq"])
        secs.append(spent["secs"] - sum(c for end, c in seconds["events"] if end <= spent["secs"]))

    spend(g.get("arguments", 0), 1, 0.0)  # the starting points' log-densities, checked before any stage
    if "warm_start" in res.stage_draws:
        # LaplaceStart's L-BFGS runs one start after another (lax.map): its sequential steps are their sum
        spend(g["warm_start"], sum(st["warm_start"]["lbfgs_iterations"]), s["warm_start"])
        checkpoint(_row(res.stage_draws["warm_start"], moments))
    if "particles" in res.stage_draws:
        spend(g["particles"], st["particles"]["steps"], s["particles"])
        checkpoint(_row(res.stage_draws["particles"], moments))
    spend(g.get("checks", 0), 1, s.get("checks", 0.0))
    if res.chains is not None:
        c = st["correction"]
        run_s = c["seconds"]["sampling"]
        per_round = run_s / max(1, len(c["rounds"]["kept"]))
        spend(c["gradient_evaluations"]["start"] + c["gradient_evaluations"]["warmup"], c["sequential_steps"]["warmup"],
              c["seconds"]["warmup"])
        last = len(c["rounds"]["kept"]) - 1
        for i, (gr, sq, kept) in enumerate(zip(c["rounds"]["gradient_evaluations"], c["rounds"]["sequential_steps"],
                                               c["rounds"]["kept"])):
            spend(gr, sq, per_round)
            weighted = res.weights is not None and i == last  # the modes' weights: the answer at the end
            if weighted:
                spend(c["gradient_evaluations"]["bridge"], 1, 0.0)  # log-densities, counted as gradient evaluations
            checkpoint(_row(res.chains[:, :kept], moments, chains=res.chains[:, :kept],
                            weights=res.weights if weighted else None))
    biases = {name: np.asarray([r[name] for r in rows], np.float64) for name in BIASES}
    return Trace(sampler="steinax.sample", chains=int(np.shape(init)[0]), biases=biases,
                 gradient_evaluations=np.asarray(grads), sequential_steps=np.asarray(seq),
                 seconds=np.maximum.accumulate(np.maximum(np.asarray(secs), 0.0)),  # stage clocks and compile events
                 # are read apart: a stage that was all compilation must not give time back
                 tuning={"gradient_evaluations": 0.0, "sequential_steps": 0.0, "seconds": 0.0},
                 compile_seconds=sum(c for _, c in seconds["events"]),
                 info={"ok": bool(res.ok), "message": res.message, "wall": wall, "start": st["checks"].get("start")})
