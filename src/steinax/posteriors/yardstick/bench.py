"""One run of one sampler on one suite posterior on the yardstick, as a results row (and its trace): what the
experiment ``experiments/posteriors/yardstick.py`` tabulates.

Settings, the same for every posterior (none tuned per posterior): float64; ``chains`` chains (or particles) from
the posterior's own initialiser; the MCMC peers ``warmup`` adaptation steps and then ``steps`` transitions (the per-run
cap: a sampler whose squared bias is not below 0.01 at the end has its cost reported as ``inf``, "not reached
within the cap"); ``steinax.sample`` with its defaults.
"""

from __future__ import annotations

import jax
import numpy as np

from steinax.metrics.posterior import reference_moments
from steinax.posteriors.yardstick.mcmc import chees, meads, numpyro_nuts, nuts
from steinax.posteriors.yardstick.pipeline import steinax_sample
from steinax.posteriors.yardstick.trace import Trace

__all__ = ["SAMPLERS", "FIELDS", "run_one", "trace_row"]

SAMPLERS = {"steinax.sample": steinax_sample, "numpyro_nuts": numpyro_nuts, "nuts": nuts, "chees": chees,
            "meads": meads}
"""The samplers by name: ``(target or log-density, init, key, moments, steps, warmup) -> Trace``."""

FIELDS = ("posterior", "d", "chains", "sampler", "seed", "steps", "warmup", "grads_total", "grads_tuning",
          "sequential_total", "seconds_total", "compile_seconds",
          "grads_to_x2_max", "grads_to_x2_mean", "grads_to_x_max", "sequential_to_x2_max", "seconds_to_x2_max",
          "chain_grads_to_x2_mean", "chain_grads_to_x2_max", "x2_max_end", "x2_mean_end", "chain_x2_max_end", "note")


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
        return SAMPLERS[sampler](model, init, key_run, moments, steps, warmup)


def trace_row(trace: Trace, name: str, d: int, seed: int, steps: int, warmup: int, note: str = "") -> dict:
    """The results row of ``trace`` (:data:`FIELDS`): totals with tuning, costs to 0.01 with tuning (pooled
    estimates), per-chain costs without tuning (the published single-chain figures' convention), and the biases at
    the end of the run."""
    t = trace.tuning
    return {"posterior": name, "d": d, "chains": trace.chains, "sampler": trace.sampler, "seed": seed, "steps": steps,
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
            "chain_x2_max_end": float(trace.biases["chain_x2_max"][-1]), "note": note}
