"""``steinax.sample`` on the posterior suite, beside NumPyro NUTS run to a bulk ESS of 1000 (issue 49's table).

:func:`sample_rows` runs :func:`steinax.sample` with its defaults on one posterior and scores every stage's answer
against the reference: the warm start's draws alone, the particles (warm start and particle method, no correction)
and the corrected draws, each with its cumulative gradient evaluations and wall time (compilation included).
:func:`nuts_row` runs NumPyro NUTS (4 chains, 1000 warm-up, then blocks of 1000 kept draws until the minimum bulk ESS
over coordinates reaches 1000) on the same posterior: the wall time a practitioner waits for usable draws, measured,
not extrapolated. Both run in float64, as real-data posteriors need (the suite's references are float64 runs).
"""

from __future__ import annotations

import contextlib
import time

import jax
import numpy as np

__all__ = ["sample_rows", "nuts_row", "nuts_fixed_row", "nutpie_row", "STAGES", "scores"]

STAGES = ("warm_start", "particles", "sample")
"""The rows of one ``steinax.sample`` run: Pathfinder alone, with the particle method, with the correction."""

_SINKHORN_ROWS = 2000


def scores(x, reference) -> dict:
    """Mean errors and sd ratios of all of ``x`` against ``reference`` (float64); the Sinkhorn divergence on at most
    2000 evenly thinned rows (its cost is quadratic), in float32 as in every other suite row."""
    from steinax.metrics.posterior import posterior_errors

    x = np.asarray(x, np.float64)
    with jax.enable_x64(False):  # the suite's Sinkhorn runs in float32, as every other suite row's (OTT's solver
        out = posterior_errors(x[:: max(1, x.shape[0] // _SINKHORN_ROWS)], reference)  # mixes dtypes in x64 here)
    err = np.abs(x.mean(0) - reference.mean) / reference.sd
    ratio = x.std(0, ddof=1) / reference.sd
    out.update(mean_error_max=float(err.max()), mean_error_median=float(np.median(err)),
               sd_ratio_median=float(np.median(ratio)), sd_ratio_min=float(ratio.min()), sd_ratio_max=float(ratio.max()))
    return out


def sample_rows(name: str, seed: int, num_particles: int = 100, keep: dict | None = None, **kwargs) -> list[dict]:
    """One :func:`steinax.sample` run on posterior ``name``: a row per stage (:data:`STAGES`), with its cumulative
    gradient evaluations and seconds, and the run's verdict (``ok``, ``message``) on the last; ``keep`` (a dict), if
    given, receives the :class:`~steinax.SampleResult` under ``"result"`` and the reference under ``"reference"``."""
    import steinax
    from steinax.posteriors import get

    post = get(name)
    ref = post.reference()
    with compile_seconds() as compiled:
        t0 = time.perf_counter()
        res = steinax.sample(post.target, rng_key=jax.random.key(seed), num_particles=num_particles, progress=False,
                             **kwargs)
        wall = time.perf_counter() - t0
    if keep is not None:
        keep.update(result=res, reference=ref)
    g, s = res.gradient_evaluations, res.seconds
    base = {"posterior": name, "d": post.dim, "seed": seed, "n": num_particles}
    rows = []
    for stage in STAGES:
        if stage == "sample":
            x, grads, secs = res.draws, g["total"], wall
            extra = {"ok": res.ok, "message": res.message, "correction_steps": res.stages.get("correction", {}).get("steps"),
                     "rhat": res.stages.get("correction", {}).get("rhat"),
                     "ess_bulk": res.stages.get("correction", {}).get("ess_bulk"),
                     "grads_by_stage": ";".join(f"{k}={v}" for k, v in g.items() if k != "total"),
                     "decisions": decisions(res.stages), "compile_s": round(compiled["seconds"], 2),
                     "programs": compiled["programs"]}
        elif stage in res.stage_draws:
            upto = STAGES[: STAGES.index(stage) + 1]
            x = res.stage_draws[stage]
            grads, secs = sum(g.get(k, 0) for k in upto), sum(s.get(k, 0.0) for k in upto)
            extra = {}
        else:
            continue
        rows.append({**base, "method": f"sample:{stage}", "gradient_evaluations": int(grads), "wall_s": round(secs, 2),
                     **scores(x, ref), **extra})
    return rows


def decisions(stages: dict) -> str:
    """What ``steinax.sample``'s sizing decided on one run, in one cell: the particle stage run or skipped and why
    (k-hat of the warm start's normal as an importance proposal, tails), the correction's chains, its checks
    (transitions per chain at each) and why it stopped."""
    parts = []
    decision = stages.get("particles", {}).get("decision") or {}
    if decision:
        khat = (decision.get("evidence") or {}).get("khat")
        reason = f"k-hat {khat:.2f}" if khat is not None and np.isfinite(khat) else decision.get("why", "")[:40]
        if (stages.get("sizing") or {}).get("tails", {}).get("heavy"):
            reason += " heavy tails"
        parts.append(f"particles {'run' if decision.get('run') else 'skipped'} ({reason})")
    chains = (stages.get("checks") or {}).get("chains") or {}
    if chains:
        parts.append(f"chains {chains.get('chains')}")
    correction = stages.get("correction") or {}
    if correction:
        checks = " ".join(str(c.get("steps")) for c in correction.get("checks", []))
        parts.append(f"checks at {checks}: {correction.get('stopped')}")
    return "; ".join(parts).replace(",", " ")


@contextlib.contextmanager
def compile_seconds():
    """Within the block: ``{"seconds": JAX's compilation time (tracing, lowering, XLA's compile), "programs": XLA
    programs compiled}`` from ``jax.monitoring`` (the listener stays registered; it counts only inside a block)."""
    out = {"seconds": 0.0, "programs": 0}
    _ACTIVE.append(out)
    if not _LISTENING:
        jax.monitoring.register_event_duration_secs_listener(_listen)
        _LISTENING.append(True)
    try:
        yield out
    finally:
        _ACTIVE.remove(out)


_ACTIVE: list = []
_LISTENING: list = []


def _listen(event, secs, **kwargs):
    from steinax.posteriors.yardstick.pipeline import COMPILE_EVENTS

    for out in _ACTIVE:
        if event in COMPILE_EVENTS:
            out["seconds"] += secs
            out["programs"] += event == COMPILE_EVENTS[-1]


def nuts_row(name: str, seed: int, min_ess: float = 1000.0, warmup: int = 1000, block: int = 1000,
             max_samples: int = 20_000) -> dict:
    """NumPyro NUTS, 4 chains from the model's initialiser, ``warmup`` warm-up draws, then blocks of ``block`` kept
    draws per chain until the minimum bulk ESS reaches ``min_ess`` or ``max_samples`` draws per chain are kept
    (:func:`steinax.baselines.mcmc.nuts`): its wall time (compilation included), gradient evaluations, divergences,
    R-hat and errors. The cap matters: a chain whose warm-up collapsed its step size (Lake Huron, seed 1: 3 leapfrog
    steps a transition, 15.7 sd off) never brings the ESS up, and a hundred blocks ran the process out of memory."""
    return _nuts_row(name, seed, "nuts", fixed=False, min_ess=min_ess, warmup=warmup, block=block,
                     max_samples=max_samples)


def nuts_fixed_row(name: str, seed: int, min_ess: float = 1000.0, warmup: int = 1000, block: int = 1000,
                   max_samples: int = 20_000, target_accept: float | None = None) -> dict:
    """NumPyro NUTS after a practitioner's usual fixes (issue 57's "NUTS after its usual fixes"), otherwise as
    :func:`nuts_row`: every hierarchical location-scale site non-centred (:func:`steinax.targets.reparam.reparameterise`
    with ``centred=0``, on NumPyro posteriors that have such sites; the coal GP whitened; the draws mapped back to the
    posterior's coordinates: :func:`steinax.posteriors.reference.fixed_target`) and the step size adapted to a mean
    acceptance of ``target_accept`` (default: the reference's, :data:`steinax.posteriors.reference.TARGET_ACCEPT`, and
    at least 0.95; NumPyro's default is 0.8). The row's ``message`` names the fixes applied."""
    from steinax.posteriors.reference import TARGET_ACCEPT

    target_accept = max(0.95, TARGET_ACCEPT.get(name, 0.0)) if target_accept is None else target_accept
    return _nuts_row(name, seed, "nuts_fixed", fixed=True, min_ess=min_ess, warmup=warmup, block=block,
                     max_samples=max_samples, target_accept=target_accept)


def _nuts_row(name, seed, method, *, fixed: bool, min_ess, warmup, block, max_samples, target_accept=0.8) -> dict:
    from steinax.baselines.mcmc import nuts
    from steinax.posteriors.reference import fixed_target

    def run(post, key_init, key_run):
        target, back, fixes = fixed_target(name) if fixed else (post.target, None, "")
        init = getattr(target, "init_particles", None)
        x0 = init(key_init, 4) if init is not None else post.init(key_init, 4)
        draws, info = nuts(target, x0, num_warmup=warmup, num_samples=block, rng_key=key_run, return_info=True,
                           min_ess=min_ess, max_samples=max_samples, target_accept_prob=target_accept)
        draws = np.asarray(draws, np.float64)
        if back is not None:
            draws = np.asarray(back(draws), np.float64)
        message = f"{fixes}; target_accept {target_accept:g}" if fixed else ""
        return draws, int(np.sum(np.asarray(info["num_steps"]))), int(np.sum(np.asarray(info["diverging"]))), message

    return _mcmc_row(name, seed, method, run)


def nutpie_row(name: str, seed: int, flow: bool = False, tune: int = 1000, draws: int = 1000) -> dict:
    """nutpie (:func:`steinax.baselines.nutpie.nutpie`), 4 chains from the model's initialiser, ``tune`` warm-up and
    ``draws`` kept draws each, on the posterior's log-density; with ``flow``, its normalizing-flow adaptation (row
    ``nutpie_flow``). Scored as :func:`nuts_row`; the gradient evaluations are nutpie's leapfrog steps, warm-up
    included."""
    from steinax.baselines.nutpie import nutpie

    def run(post, key_init, key_run):
        init = getattr(post.target, "init_particles", None)
        x0 = init(key_init, 4) if init is not None else post.init(key_init, 4)
        x, info = nutpie(post.target, x0, tune=tune, draws=draws, seed=seed, flow=flow)
        return x, info["num_steps"], int(np.sum(info["diverging"])), ""

    return _mcmc_row(name, seed, "nutpie_flow" if flow else "nutpie", run)


def _mcmc_row(name: str, seed: int, method: str, run) -> dict:
    """One row of an MCMC peer: ``run(post, key_init, key_run) -> (draws [chains, m, d], gradient evaluations,
    divergences, message)`` timed (model building and compilation included) and scored against the reference."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    from steinax.posteriors import get

    post = get(name)
    ref = post.reference()
    key_init, key_run = jax.random.split(jax.random.key(seed))
    t0 = time.perf_counter()
    draws, grads, divergences, message = run(post, key_init, key_run)
    wall = time.perf_counter() - t0
    return {"posterior": name, "d": post.dim, "seed": seed, "n": draws.shape[0], "method": method,
            "gradient_evaluations": int(grads), "wall_s": round(wall, 2),
            **scores(draws.reshape(-1, post.dim), ref), "ess_bulk": float(np.min(effective_sample_size(draws))),
            "rhat": float(np.max(split_gelman_rubin(draws))), "divergences": divergences,
            "draws_per_chain": int(draws.shape[1]), "message": message}
