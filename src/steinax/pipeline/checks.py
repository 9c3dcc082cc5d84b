"""The checks between the particle stage and the correction, as a stage of :func:`steinax.sample`.

:class:`HandoffChecks` reads what the earlier stages handed on and decides what the correction starts from:

* **the start**: where both a warm start and the particle stage ran, the one of their point sets with the smaller
  KSD in the warm start's whitened coordinates (:func:`~steinax.pipeline.choose_start`);
* **stragglers**: points far below the bulk's log-density (:func:`~steinax.pipeline.find_stragglers`);
* **the particles' own checks** where a correction may not run (``correction`` not ``"always"``):
  :func:`steinax.diagnostics.sample_quality` with ``spread=True``;
* **whether the correction runs** (``"always"``, or ``"auto"`` when the checks flag the points or name a straggler),
  **with how many chains** (:func:`~steinax.pipeline.sizing.correction_chains`) and **from which transition it judges
  them** (:data:`~steinax.pipeline.sizing.HEAVY_MIN_STEPS` where the tail probe found heavy tails, or a
  log-density that rises again far out).

Every decision is recorded with its evidence in ``learnt["checks"]``; the points it hands on are the chosen start,
as many rows as chains. Where the warm start's draws are chosen, what later stages read is the warm start's (its map,
not the particle stage's): the correction continues from that stage.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from steinax.particles.loop.stages import AbstractStage, Staged
from steinax.pipeline.handoff import choose_start
from steinax.pipeline.sizing import HEAVY_MIN_STEPS, correction_chains
from steinax.pipeline.stragglers import find_stragglers

__all__ = ["HandoffChecks"]


class HandoffChecks(AbstractStage):
    """The checks and the correction's sizing (module docstring).

    Attributes:
        correction: ``"always"``, ``"auto"`` or ``"never"`` (:func:`steinax.sample`'s).
        platform: where the correction's chains run (``"cpu"``, ``"gpu"``, ...), for their number.
        devices: the devices the chains are split over (their number is a multiple of it).
        min_steps, max_steps: the correction's own, raised to :data:`~steinax.pipeline.sizing.HEAVY_MIN_STEPS`
            (at most ``max_steps``) where the tails are heavy.

    Learns ``{"start", "start_ksd" (where two candidates), "stragglers", "collapsed", "flagged", "ksd" (where the
    particles' own checks ran), "flagged_any" (a straggler named or the checks flagged the points), "correct"
    (whether the correction runs), "chains" and "min_steps" (its sizing, with why), "evaluations"}``.
    """

    name: ClassVar[str] = "checks"
    correction: str = "always"
    platform: str = "cpu"
    devices: int = 1
    min_steps: int = 0
    max_steps: int = 2000

    def apply(self, target, start: Staged, rng_key) -> Staged:
        from steinax.targets.base import as_target, logdensities

        tgt = as_target(target)
        learnt, out, spent = start.learnt, {}, 0
        particles = learnt.get("particles") or {}
        candidates = {"particles": start.particles}
        if "start_points" in particles and "warm_start" in learnt:  # both ran: the hand-off with the smaller KSD
            candidates = {"warm_start": particles["start_points"], "particles": start.particles}
            chosen, ksds = choose_start(tgt, candidates, learnt["warm_start"]["affine"])
            out.update(start=chosen, start_ksd=ksds)
            spent += sum(int(x.shape[0]) for x in candidates.values())
        points = start.particles
        dim = int(points.shape[1])
        logd = np.asarray(logdensities(tgt, points))
        named = find_stragglers(logd, dim).tolist()
        out["stragglers"] = named
        spent += int(logd.size)
        flagged = bool(named)
        if self.correction != "always":  # no correction may run: the answer's own checks
            from steinax.diagnostics.quality import sample_quality

            quality = sample_quality(points, tgt, spread=True, rng_key=rng_key)
            out.update(collapsed=bool(quality.collapsed), flagged=bool(quality.flagged), ksd=float(quality.discrepancy))
            spent += quality_evaluations(quality, int(points.shape[0]))
            flagged = flagged or bool(quality.flagged)
        out["flagged_any"] = flagged
        out["correct"] = self.correction == "always" or (self.correction == "auto" and flagged)
        handed = start
        if out["correct"]:
            if out.get("start") == "warm_start":  # the correction continues from the warm start (its map too)
                handed = Staged(particles=candidates["warm_start"], state=None,
                                learnt={k: v for k, v in learnt.items() if k != "particles"})
            sized = correction_chains(int(handed.particles.shape[0]), dim, "start_points" in particles, self.platform,
                                      self.devices)
            out["chains"] = sized
            tails = (learnt.get("sizing") or {}).get("tails")
            if tails is not None and (tails["heavy"] or tails.get("rising")) and self.min_steps < HEAVY_MIN_STEPS:
                out["min_steps"] = {"min_steps": min(HEAVY_MIN_STEPS, self.max_steps),
                                    "why": "heavy tails or a rising log-density far out (stages['sizing'])"}
            if sized["chains"] < handed.particles.shape[0]:  # draws of one normal: the first rows are as good as any
                handed = Staged(particles=handed.particles[: sized["chains"]], state=handed.state, learnt=handed.learnt)
        out["evaluations"] = spent
        return Staged(particles=handed.particles, state=handed.state, learnt={**handed.learnt, self.name: out})


def quality_evaluations(quality, n: int) -> int:
    """:func:`steinax.diagnostics.sample_quality`'s evaluations: the draws once, then what its collapse and mode
    checks report they made."""
    return n + sum(int(getattr(check, "evaluations", 0)) for check in (quality.relaxation, quality.modes)
                   if check is not None)
