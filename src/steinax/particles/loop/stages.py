"""Stages: the steps of a pipeline around the particle loop (a warm start before it, a correction after it,
diagnostics between), each usable alone, chained by :class:`Chain`.

A stage is an ``equinox.Module`` with ``__call__(target, start, rng_key) -> Staged``: it takes a target and where the
previous stage left off (a :class:`Staged`, or plain ``[n, d]`` particles) and returns where the next one starts (the
particles, and the loop's state where it can be resumed) plus what it learnt (a preconditioner, a step size, a run's
result, a diagnostic), under its ``name``. Stages hold their settings as fields; what they learn is returned, never
stored in them, so a stage object can be reused and its call is a function of its inputs.

:class:`ParticleLoop` is :func:`steinax.run` as a stage. A stage that needs more of the library than the loop (a
warm start from a baseline, a correction from the tools for draws) lives in that layer and subclasses
:class:`AbstractStage` (the layers of docs/design.md: this module is below them).
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax

from steinax.particles.base import AbstractParticleMethod, ParticleState
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.stopping import as_stopping_rule

__all__ = ["Staged", "AbstractStage", "ParticleLoop", "Chain", "as_staged", "StageInterrupted"]


class StageInterrupted(KeyboardInterrupt):
    """Ctrl-C during a stage (the one interrupt scope, :mod:`steinax.particles.loop.interrupt`, seen between its
    compiled pieces): ``.stage`` its name, ``.where`` how far it got (a sentence), ``.particles`` ``[n, d]`` where it
    stopped, in the target's own space, ``.learnt`` what it learnt up to there (its ``"evaluations"`` included)."""

    def __init__(self, message: str, stage: str, where: str, particles, learnt: dict):
        super().__init__(message)
        self.stage, self.where, self.particles, self.learnt = stage, where, particles, learnt


class Staged(eqx.Module):
    """Where a stage left off.

    Attributes:
        particles: ``[n, d]``, where the next stage starts.
        state: the particle loop's state at ``particles`` (``None`` where no loop ran), for a stage that resumes it.
        learnt: what each stage learnt, by stage name (``{"loop": {"result": RunResult}, ...}``).
    """

    particles: jax.Array
    state: ParticleState | None = None
    learnt: dict = eqx.field(default_factory=dict)


def as_staged(start) -> Staged:
    """``start`` as a :class:`Staged`: particles ``[n, d]`` stand for a start with nothing learnt yet."""
    return start if isinstance(start, Staged) else Staged(particles=start)


class AbstractStage(eqx.Module):
    """A step of a pipeline (module docstring). Subclasses set ``name`` and implement :meth:`apply`."""

    name: ClassVar[str] = "stage"

    @abc.abstractmethod
    def apply(self, target, start: Staged, rng_key) -> Staged:
        """Where the next stage starts and, under ``self.name`` in ``learnt``, what this one learnt."""

    def __call__(self, target, start, rng_key) -> Staged:
        return self.apply(target, as_staged(start), rng_key)


class ParticleLoop(AbstractStage):
    """:func:`steinax.run` as a stage: ``method`` from the start's particles (a fresh state: the previous stage's
    optimizer need not be this one's), with ``steps`` (an integer, ``None`` until settled, or a stopping rule),
    ``optimizer`` and the run's ``options``. Learns ``{"result": RunResult}``."""

    name: ClassVar[str] = "loop"
    method: AbstractParticleMethod
    steps: object = None
    optimizer: object = None
    options: RunOptions = RunOptions()

    def apply(self, target, start: Staged, rng_key) -> Staged:
        result = as_stopping_rule(self.steps).run(self.method, target, start.particles, optimizer=self.optimizer,
                                                  rng_key=rng_key, initial_state=None, options=self.options)
        return Staged(particles=result.particles, state=result.state, learnt={**start.learnt, self.name: {"result": result}})


class Chain(AbstractStage):
    """Stages run in order, stage ``i`` with the key ``fold_in(rng_key, i)``, each from where the last left off and
    seeing what the earlier ones learnt (a whitened stage reads the warm start's map); what each learnt is kept under
    its name (a repeated name gets ``:i`` appended, and a later stage reading the name sees the first)."""

    name: ClassVar[str] = "chain"
    stages: tuple

    def __init__(self, *stages: AbstractStage):
        bad = [type(s).__name__ for s in stages if not isinstance(s, AbstractStage)]
        if bad or not stages:
            raise TypeError(f"`stages` must be one or more steinax stages (AbstractStage); received {bad or 'none'}")
        self.stages = tuple(stages)

    def apply(self, target, start: Staged, rng_key) -> Staged:
        for i, stage in enumerate(self.stages):
            before = start.learnt
            out = stage.apply(target, start, jax.random.fold_in(rng_key, i))  # a stage reads what earlier ones learnt
            learnt = dict(before)
            learnt[stage.name if stage.name not in before else f"{stage.name}:{i}"] = out.learnt.get(stage.name)
            start = Staged(particles=out.particles, state=out.state, learnt=learnt)
        return start
