"""Stopping rules: when a run ends, one interface for a fixed length and for settling.

A stopping rule is a small frozen object with ``run(method, target, particles, *, optimizer, rng_key,
initial_state, options) -> RunResult``. :func:`steinax.run` takes one as ``steps`` (an integer stands for
:class:`FixedSteps`, ``None`` for :class:`UntilSettled` with its defaults). A new rule (a budget of gradient
evaluations, a target KSD) is a new class here, composed from :func:`~steinax.particles.loop.fixed.run_fixed` the way
:class:`UntilSettled` is.
"""

from __future__ import annotations

import abc
import dataclasses

from steinax.particles.loop.fixed import run_fixed
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.result import RunResult
from steinax.particles.loop.settle import DEFAULT_CHECK_EVERY, DEFAULT_MAX_STEPS, DEFAULT_TOL
from steinax.particles.loop.until_settled import run_until_converged

__all__ = ["StoppingRule", "FixedSteps", "UntilSettled", "as_stopping_rule"]


class StoppingRule(abc.ABC):
    """When a run ends (module docstring)."""

    @abc.abstractmethod
    def run(self, method, target, particles, *, optimizer, rng_key, initial_state, options: RunOptions) -> RunResult:
        """Run ``method`` on ``target`` from ``particles`` (or ``initial_state``) until this rule says stop."""


@dataclasses.dataclass(frozen=True)
class FixedSteps(StoppingRule):
    """Exactly ``steps`` steps (:func:`~steinax.particles.loop.fixed.run_fixed`); judged afterwards by the settle rule
    over its last window (``result.converged``)."""

    steps: int

    def run(self, method, target, particles, *, optimizer, rng_key, initial_state, options: RunOptions) -> RunResult:
        return run_fixed(method, target, particles, steps=self.steps, optimizer=optimizer, rng_key=rng_key,
                         initial_state=initial_state, options=options)


@dataclasses.dataclass(frozen=True)
class UntilSettled(StoppingRule):
    """Segments of ``check_every`` steps until the particles' moments move less than ``tol`` over one, at most
    ``max_steps`` (:func:`~steinax.particles.loop.until_settled.run_until_converged`)."""

    tol: float = DEFAULT_TOL
    check_every: int = DEFAULT_CHECK_EVERY
    max_steps: int = DEFAULT_MAX_STEPS

    def run(self, method, target, particles, *, optimizer, rng_key, initial_state, options: RunOptions) -> RunResult:
        return run_until_converged(method, target, particles, rng_key=rng_key, optimizer=optimizer,
                                   max_steps=self.max_steps, check_every=self.check_every, tol=self.tol,
                                   initial_state=initial_state, **dataclasses.asdict(options))


def as_stopping_rule(steps) -> StoppingRule:
    """``steps`` as a rule: an integer is :class:`FixedSteps` (checked when the run starts), ``None``
    :class:`UntilSettled` with its defaults, a rule itself."""
    if steps is None:
        return UntilSettled()
    return steps if isinstance(steps, StoppingRule) else FixedSteps(steps)
