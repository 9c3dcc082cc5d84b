"""The run loop, as parts that compose (docs/design.md, "The run loop").

* :mod:`~steinax.particles.loop.segment`: the compiled segment, ``lax.scan`` over ``method.step`` with the trace's
  recorder;
* :mod:`~steinax.particles.loop.stopping`: when a run ends, :class:`FixedSteps` (:mod:`~steinax.particles.loop.fixed`)
  or :class:`UntilSettled` (:mod:`~steinax.particles.loop.until_settled`; the rule: :mod:`~steinax.particles.loop.settle`);
* services: :mod:`~steinax.particles.loop.checkpointing`, :mod:`~steinax.particles.loop.progress`,
  :mod:`~steinax.particles.loop.interrupt`;
* :mod:`~steinax.particles.loop.stages`: the stage protocol (a warm start, the loop, a correction, chained);
* :mod:`~steinax.particles.loop.result`: what a run returns and raises; :mod:`~steinax.particles.loop.options`: its
  grouped options; :mod:`~steinax.particles.loop.run`: :func:`run`, the entry point.

``steinax.particles.run`` and ``steinax.particles.converge``, the modules before this package, are aliases of it.
"""

from steinax.particles.loop.fixed import run_fixed
from steinax.particles.loop.interrupt import INTERRUPT_CHECK_EVERY, InterruptScope, interrupt_scope
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.result import PARTICLE_NOTE, NonFiniteError, RunInterrupted, RunResult, Trace
from steinax.particles.loop.run import run
from steinax.particles.loop.settle import (DEFAULT_CHECK_EVERY, DEFAULT_MAX_STEPS, DEFAULT_TOL, DIVERGENCE_FACTOR,
                                           SETTLE_WINDOW, STEIN_IDENTITY_LIMIT, UNSETTLED_FACTOR, ConvergenceWarning,
                                           DivergenceWarning, moment_change, particle_moments, settle_window_start,
                                           settled_over, stein_identity, warn_if_diverging, warn_if_unsettled)
from steinax.particles.loop.stages import AbstractStage, Chain, ParticleLoop, Staged, as_staged
from steinax.particles.loop.stopping import FixedSteps, StoppingRule, UntilSettled
from steinax.particles.loop.until_settled import run_until_converged
from steinax.particles.optim import DEFAULT_LEARNING_RATE, default_optimizer

__all__ = ["AbstractStage", "Chain", "ParticleLoop", "Staged", "as_staged", "run", "run_fixed", "run_until_converged", "RunOptions", "RunResult", "Trace", "NonFiniteError",
           "RunInterrupted", "ConvergenceWarning", "DivergenceWarning", "StoppingRule", "FixedSteps", "UntilSettled",
           "InterruptScope", "interrupt_scope", "INTERRUPT_CHECK_EVERY", "PARTICLE_NOTE", "default_optimizer",
           "moment_change", "particle_moments", "settle_window_start", "settled_over", "stein_identity",
           "warn_if_diverging", "warn_if_unsettled", "DEFAULT_LEARNING_RATE", "DEFAULT_MAX_STEPS",
           "DEFAULT_CHECK_EVERY", "DEFAULT_TOL", "SETTLE_WINDOW", "STEIN_IDENTITY_LIMIT", "UNSETTLED_FACTOR",
           "DIVERGENCE_FACTOR"]
