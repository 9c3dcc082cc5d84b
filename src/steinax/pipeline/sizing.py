"""How much of each stage :func:`steinax.sample` runs, decided from what the earlier stages measured (issue 58).

A stage that is run in full whatever the posterior pays a fixed price: the particle stage is 1000 steps of ``n``
scores (about 10^5 gradient evaluations at 100 particles), and on posteriors where the warm start's normal is
already close it buys nothing the correction would not do anyway (measured, issue 58: the particles improved on the
warm start on 26 suite runs, made it worse on 8 and changed little on the rest, and were run in full every time).
Each decision here is a pure function of the evidence, and returns the evidence with the choice, so that
:attr:`steinax.SampleResult.stages` says what was chosen and why.

**Decided here: the particle stage** (``particles="auto"``, the default) is skipped where the warm start's normals
are a good importance proposal for the target: the Laplace warm start (:class:`~steinax.pipeline.LaplaceStart`)
measured the Pareto k-hat of ``p / q`` over its draws (:func:`~steinax.diagnostics.pareto.importance_khat`; the
draws' log-densities are made anyway, to check them) and it is below PSIS's reliability threshold for that many
draws (:func:`~steinax.diagnostics.pareto.khat_threshold`: ``min(1 - 1 / log10 S, 0.7)``, 0.62 at 400 draws;
Vehtari et al. 2024, sec. 3.2.4): below it ``q`` serves as an importance sampler for the target, so it covers the
target's bulk and tails, and chains started from its draws start in the typical set. Measured at seed 0 (warm start
alone, models as written): 0.10-0.46 on the regressions, German credit, item response and the GP classifier;
0.57-0.59 on mtcars, quine and faithful; 0.62-0.74 on epil, varying intercept, mcycle's GP and stackloss; above 1
on eight schools (both), Brownian motion, GARCH and the heteroscedastic GP; 37 on the horseshoe. Where the warm start fell back (Pathfinder: a funnel has
no mode), found several optima, or did not measure the ratio, the particles run. ``particles=True`` always runs
them, ``False`` never.

**Decided here: heavy tails turn the shortcuts off** (:func:`tail_probe`). An importance k-hat from a few hundred
draws of a normal cannot see a target whose tails are polynomial: the normal's draws rarely reach where the weights
explode (measured: 0.22 over 400 draws on a Student t with 1.5 degrees of freedom, 0.16 on t3), and short chains
started from those draws do not reach the tails either, so the draws' own k-hat, which ``ok`` reads, stayed below
1/2 on t1.5 after 40-520 transitions (the variance does not exist; ``ok`` was true). The log-density itself says
it: along rays from the warm start's centre, at 8, 16, 32 and 64 of its whitened sds, a Gaussian's ``-log p``
grows 16 times faster (per doubling of the radius) between 32 and 64 than between 8 and 16, an exponential tail's 4
times, a polynomial one's about once. Where some ray's growth ratio is below 2, the tails are treated as heavy:
the particles run, every particle continues as a chain, and the correction judges no draws before
:data:`HEAVY_MIN_STEPS` transitions (issue 56's setting, under which t1.5 and the Cauchy were called not ok).

**Decided here: the correction's chains.** Where the particles ran, every particle continues as a chain (the hard
posteriors: the chains need the whole cloud, and the rule its superchains). Where they were skipped, the chains are
draws of the warm start's normal, as many as serve: on an accelerator chains run side by side, so all ``n``; on a
CPU every chain's warm-up is paid in full (ChEES's 200 transitions each, measured as 70% of the correction's
gradient evaluations on easy posteriors at 100 chains, issue 58), so ``max(CPU_CHAINS, d)`` of them, at most ``n``:
enough for ChEES's ensemble averages and for the metric, refitted from the chains' pooled draws in ``d``
dimensions, and for four superchains of the rule (:meth:`~steinax.pipeline.HMCCorrection.superchains_of`). The
bulk ESS the rule asks for is pooled over chains, so fewer chains cost no more draws to reach it.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np

from steinax.diagnostics.pareto import khat_threshold
from steinax.particles.loop.result import NonFiniteError, NonFiniteStart
from steinax.particles.loop.settle import ConvergenceWarning
from steinax.particles.loop.stages import AbstractStage, Staged

__all__ = ["particle_stage", "correction_chains", "tail_probe", "TailProbe", "SizedParticles", "PARTICLE_SETTINGS",
           "CPU_CHAINS", "HEAVY_MIN_STEPS", "NO_VARIANCE_EXPONENT"]

HEAVY_MIN_STEPS = 100
"""Transitions per chain before the correction's first check where the tails look heavy (module docstring)."""

TAIL_RADII = (8.0, 16.0, 32.0, 64.0)
"""Whitened radii at which :func:`tail_probe` evaluates the log-density along each ray."""

NO_VARIANCE_EXPONENT = 3.0
"""A ray along which ``p`` falls like ``r^-a`` with ``a`` at most this: no finite variance there (a 1-D density
``r^-a`` has one only for ``a > 3``): ``steinax.sample``'s ``ok`` is then false, whatever the draws' own k-hat,
which chains that rarely reach the tails underestimate (measured: 0.34-0.59 on a Student t with 1.5 degrees of
freedom, true 0.67)."""

CPU_CHAINS = 32
"""The fewest correction chains on a CPU where the particle stage was skipped (module docstring)."""

PARTICLE_SETTINGS = ("auto", True, False)
"""What :func:`steinax.sample`'s ``particles`` accepts."""


def tail_probe(target, affine, max_rays: int = 32) -> dict:
    """How fast the log-density falls along rays from ``affine``'s centre (module docstring): ``{"heavy" (some ray
    falls polynomially: growth ratio below 2 while still falling), "rising" (some ray's log-density rises again
    between 32 and 64 sds: not a polynomial tail, but the normal is no proposal there either), "ratio"
    (the smallest growth ratio over the rays, ``inf`` where no ray could be measured), "exponent" (the smallest
    ``a`` with ``-log p ~ a log r`` from 32 to 64 sds over the polynomial rays, ``inf`` where none is; at most 3, the
    density along that ray falls no faster than ``r^-3``, and the marginal there, at least as heavy where the
    distribution does not narrow outward, has no finite variance: :data:`NO_VARIANCE_EXPONENT`), "ray" (its index: whitened
    axis ``ray // 2``, sign by parity), "rays", "evaluations"}``. The rays are the whitened axes, both ways, of
    the first ``max_rays // 2`` coordinates; a ray whose log-density is not finite somewhere on it (a boundary of the
    support) is not measured.

    Example:
        >>> import jax.numpy as jnp
        >>> from steinax.targets import AffineMap
        >>> centre = AffineMap.from_moments(jnp.zeros(2), jnp.eye(2))
        >>> tail_probe(lambda x: -0.5 * jnp.sum(x**2), centre)["heavy"]
        False
        >>> tail_probe(lambda x: -jnp.sum(jnp.log1p(x**2)), centre)["heavy"]  # Cauchy
        True
    """
    import jax.numpy as jnp

    from steinax.targets.base import as_target, logdensities

    tgt = as_target(target)
    d = int(affine.dim)
    axes = min(d, max(1, max_rays // 2))
    eye = np.eye(d)[:axes]
    rays = np.concatenate([eye, -eye])  # [2 axes, d], whitened directions
    radii = np.asarray(TAIL_RADII)
    z = (rays[:, None, :] * radii[None, :, None]).reshape(-1, d)
    dtype = jnp.asarray(affine.shift).dtype
    x = affine.forward(jnp.asarray(z, dtype))
    centre = np.asarray(logdensities(tgt, jnp.asarray(affine.shift, dtype)[None]), np.float64)[0]
    logp = np.asarray(logdensities(tgt, x), np.float64).reshape(len(rays), radii.size)
    drop = centre - logp  # -log p relative to the centre, growing outward
    near, far = drop[:, 1] - drop[:, 0], drop[:, 3] - drop[:, 2]
    ok = np.all(np.isfinite(logp), axis=1) & np.isfinite(centre) & (near > 0)
    ratio = np.where(ok, far / np.where(ok, near, 1.0), np.inf)
    worst = int(np.argmin(ratio))
    # a ray along which the log-density rises again between 32 and 64 sds (far < 0: a second mode, a likelihood
    # unbounded as a scale goes to 0, a mixture component's plateau) says nothing about polynomial decay: the
    # faithful mixture and the robust regression (issue 58's table: called "no finite variance", r^-(-371) and
    # r^-(-1.7), on 9 right runs). It still turns the shortcuts off (`rising`), not the verdict
    rising = ok & (far <= 0)
    heavy = (ratio < 2.0) & ~rising
    # -log p ~ a log r far out: a = far / log 2 per doubling; the smallest over the polynomial rays (a > 0)
    exponent = float(np.min(far[heavy]) / np.log(2.0)) if heavy.any() else float("inf")
    return {"heavy": bool(heavy.any()), "rising": bool(rising.any()), "ratio": float(ratio[worst]),
            "exponent": exponent, "ray": worst, "rays": len(rays), "evaluations": int(logp.size + 1)}


def particle_stage(setting, warm: dict | None, tails: dict | None = None) -> dict:
    """Whether the particle stage runs: ``{"run": bool, "why": str, "evidence": {...}}`` from ``setting`` (``"auto"``,
    ``True`` or ``False``) and what the warm start learnt (``None`` where none ran; module docstring).

    Example:
        >>> out = particle_stage("auto", {"method": "laplace", "optima": [{}], "importance": {"khat": 0.21, "draws": 400}})
        >>> evidence = out["evidence"]
        >>> out["run"], round(evidence["threshold"], 3)
        (False, 0.616)
    """
    if setting is True or setting is False:
        return {"run": setting, "why": f"particles={setting}", "evidence": {}}
    if warm is None:
        return {"run": True, "why": "no warm start ran: the particles start from the starting points", "evidence": {}}
    if tails is not None and tails["heavy"]:
        return {"run": True, "why": f"the log-density falls off polynomially along a ray (growth ratio "
                                    f"{tails['ratio']:.2f} < 2, :func:`tail_probe`): heavy tails, the particles run",
                "evidence": {"tails": tails}}
    if tails is not None and tails.get("rising"):
        return {"run": True, "why": "the log-density rises again along a ray between 32 and 64 sds of the warm start "
                                    "(:func:`tail_probe`): the normal is no proposal there, the particles run",
                "evidence": {"tails": tails}}
    importance = warm.get("importance") or {}
    khat, draws = importance.get("khat"), importance.get("draws")
    threshold = khat_threshold(draws) if draws else None
    evidence = {"khat": khat, "draws": draws, "threshold": threshold}
    if warm.get("method") != "laplace":
        return {"run": True, "why": f"the warm start found no Laplace normal ({warm.get('method')}): the particles run",
                "evidence": evidence}
    if len(warm.get("optima") or ()) > 1:
        return {"run": True, "why": f"the warm start found {len(warm['optima'])} optima: the particles run",
                "evidence": evidence}
    if khat is None or not np.isfinite(khat) or khat >= threshold:
        shown = "not measured" if khat is None else f"{khat:.2f}"
        wanted = f", wanted < {threshold:.2f}" if threshold is not None else ""
        return {"run": True, "why": f"the warm start's normal is not a good enough importance proposal (Pareto k-hat "
                                    f"{shown}{wanted}): the particles run", "evidence": evidence}
    return {"run": False, "why": f"the warm start's normal is a good importance proposal (Pareto k-hat {khat:.2f} < "
                                 f"{threshold:.2f} over {draws} draws): chains start from its draws",
            "evidence": evidence}


def correction_chains(n: int, d: int, particles_ran: bool, platform: str, devices: int = 1) -> dict:
    """How many chains the correction runs: ``{"chains", "why"}`` (module docstring); over a mesh of ``devices``
    devices, a multiple of them.

    Example:
        >>> correction_chains(100, 10, particles_ran=False, platform="cpu")["chains"]
        32
        >>> correction_chains(100, 10, particles_ran=True, platform="cpu")["chains"]
        100
    """
    if particles_ran:
        return {"chains": n, "why": "every particle continues as a chain"}
    if platform != "cpu":
        return {"chains": n, "why": f"on {platform} chains run side by side: all {n} draws of the warm start"}
    chains = min(n, max(CPU_CHAINS, d))
    chains = min(n, -(-chains // devices) * devices)  # whole chains per device (n is a multiple of devices)
    return {"chains": chains, "why": f"on a CPU each chain's warm-up is paid in full: max({CPU_CHAINS}, d = {d}) draws "
                                     f"of the warm start's normal, at most {n}"
                                     + (f", a multiple of the {devices} devices" if devices > 1 else "")}


class TailProbe(AbstractStage):
    """:func:`tail_probe` as a stage of :func:`steinax.sample`, along the rays of the warm start's map (its learnt
    ``"affine"``): learns ``{"tails": the probe, "evaluations"}``; the points pass through unchanged."""

    name: ClassVar[str] = "sizing"

    def apply(self, target, start: Staged, rng_key) -> Staged:
        tails = tail_probe(target, start.learnt["warm_start"]["affine"])
        return Staged(particles=start.particles, state=start.state,
                      learnt={**start.learnt, self.name: {"tails": tails, "evaluations": tails["evaluations"]}})


class SizedParticles(AbstractStage):
    """The particle stage (``whitened``, a :class:`~steinax.pipeline.WhitenedParticles`) where :func:`particle_stage`
    says it runs, from what the warm start and the tail probe learnt (``setting``: ``"auto"``, ``True`` or
    ``False``); ``mesh``: the points it hands on are gathered from its devices (every row on every process).

    Learns ``{"decision": particle_stage's, and where it ran "steps", "converged", "stein_identity", "start_points" (the
    points it started from), "result", "results", "affine", "evaluations", "warnings"; where skipped "skipped":
    True}``. The particle loop's :class:`~steinax.particles.ConvergenceWarning` (advice in terms of
    :func:`steinax.run`'s arguments, which :func:`steinax.sample` does not have) is kept in ``"warnings"``, not
    raised: the correction, or without one :func:`steinax.sample`'s verdict, says what the answer is worth. A run
    that stops on a non-finite value (SVGD's steps know no boundary: on a target with hard support particles step
    out) hands on the points it started from, with ``"failed"`` (the error) and ``"converged": False``, where
    ``on_failure`` is ``"continue"`` (a correction follows: its Metropolis step rejects such moves); so does one
    whose start is not finite in the whitened coordinates (:class:`~steinax.particles.loop.result.NonFiniteStart`:
    float32 rounding of a map fitted to a posterior in raw units, issue 59). With ``"raise"`` the error propagates."""

    name: ClassVar[str] = "particles"
    whitened: AbstractStage
    setting: object = "auto"
    on_failure: str = "continue"
    mesh: object = None

    def apply(self, target, start: Staged, rng_key) -> Staged:
        import jax.numpy as jnp

        from steinax.runtime.sharding import gather

        tails = (start.learnt.get("sizing") or {}).get("tails")
        decision = particle_stage(self.setting, start.learnt.get("warm_start"), tails)
        if not decision["run"]:
            return Staged(particles=start.particles, state=start.state,
                          learnt={**start.learnt, self.name: {"skipped": True, "decision": decision}})
        try:
            with warnings.catch_warnings(record=True) as caught:  # the loop's advice names run()'s arguments
                warnings.simplefilter("always", ConvergenceWarning)
                out = self.whitened(target, start, rng_key)
        except (NonFiniteError, NonFiniteStart) as err:
            if self.on_failure == "raise":
                raise
            spent = int(err.result.evaluations or 0) if isinstance(err, NonFiniteError) else int(start.particles.shape[0])
            failed = {"steps": int(getattr(err, "step", 0)), "converged": False, "failed": str(err), "decision": decision,
                      "evaluations": spent}
            return Staged(particles=start.particles, state=start.state, learnt={**start.learnt, self.name: failed})
        notes = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        for w in caught:  # anything else is the user's to see, as raised
            if not issubclass(w.category, ConvergenceWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        learnt = out.learnt[self.whitened.name]
        result = learnt["result"]
        ran = {**learnt, "steps": int(result.state.step), "converged": result.converged,
               "stein_identity": (result.convergence or {}).get("stein_identity"), "decision": decision,
               "start_points": start.particles, "warnings": notes}
        return Staged(particles=jnp.asarray(gather(out.particles)), state=out.state,
                      learnt={**out.learnt, self.name: ran})
