"""A run until the particles settle: fixed-length segments and the settle rule between them.

:func:`run_until_converged` is what :func:`steinax.run` does for ``steps=None``: segments of ``check_every`` steps
(:func:`~steinax.particles.loop.fixed.run_fixed`; segment ``k`` with the key ``fold_in(rng_key, k)``), each from the
last one's state, until the particles' moments move less than ``tol`` over a segment (the rule and its step-halving
on a plateau: :mod:`steinax.particles.loop.settle`) or ``max_steps``. One Ctrl-C scope covers every segment and the
host work between them; an interrupted run raises with the whole run's trace and its global step. A settled run is
checked against Stein's identity before it is called converged.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import user_stacklevel
from steinax.particles.loop.fixed import run_fixed
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.options import RunOptions, positive_int
from steinax.particles.loop.result import NonFiniteError, RunInterrupted, RunResult
from steinax.particles.loop.settle import (DEFAULT_CHECK_EVERY, DEFAULT_MAX_STEPS, DEFAULT_TOL, MIN_LEARNING_RATE_FACTOR,
                                           STEIN_IDENTITY_LIMIT, ConvergenceWarning, _halve_learning_rate, _moments,
                                           _plateaued, _sds, moment_change, stein_identity)
from steinax.particles.optim import DEFAULT_LEARNING_RATE, default_optimizer

__all__ = ["run_until_converged"]


def run_until_converged(method, target, particles, *, rng_key, optimizer=None, max_steps: int = DEFAULT_MAX_STEPS,
                        check_every: int = DEFAULT_CHECK_EVERY, tol: float = DEFAULT_TOL, **run_kwargs):
    """:func:`steinax.run` in segments of ``check_every`` steps until the stopping rule holds (module docstring).

    ``run_kwargs``: ``initial_state`` and :func:`steinax.run`'s trace and progress options. Returns the
    :class:`~steinax.RunResult` of the whole run (its trace joined across segments) with ``converged``,
    ``convergence`` (``{"steps", "delta", "learning_rate"}``, and ``"stein_identity"`` when settled) filled in.
    """
    max_steps, check_every = positive_int(max_steps, "max_steps"), positive_int(check_every, "check_every")
    if not 0.0 < float(tol):
        raise ValueError(f"`tol` must be positive; received {tol!r}")
    initial_state = run_kwargs.pop("initial_state", None)
    options = RunOptions(**run_kwargs)
    if options.checkpoint is not None:
        raise ValueError("`checkpoint` needs a fixed `steps` (a run until convergence has no end to resume to)")
    if optimizer is None:  # the method's own (a non-method gets run's TypeError below, not an AttributeError here)
        optimizer = getattr(method, "default_optimizer", default_optimizer)()
    joined = _Joined(method, target, optimizer, rng_key, check_every, options, max_steps)
    with interrupt_scope():  # one Ctrl-C scope for every segment and for the host work between them
        before = _moments(particles if particles is not None else initial_state.particles)
        result = joined.segment(particles, initial_state)
        while True:
            after = _moments(result.particles)
            delta = moment_change(before, after)
            if delta < tol or joined.count * check_every >= max_steps:
                break
            state = result.state
            if _plateaued(result.trace.ksd):
                state = _halve_learning_rate(state, MIN_LEARNING_RATE_FACTOR * DEFAULT_LEARNING_RATE)
            before, result = after, joined.segment(None, state)
    return _verdict(target, joined.whole(result), delta, tol, check_every, joined.count * check_every)


class _Joined:
    """The segments run so far, as one run: each segment's trace once (a segment's first record repeats the last
    one's), the wall times summed; an interrupted segment re-raised with the whole run and its global step."""

    def __init__(self, method, target, optimizer, rng_key, check_every, options, max_steps):
        self.run = (method, target, optimizer, rng_key, check_every, options)
        self.max_steps, self.count, self.traces, self.wall, self.evaluations = max_steps, 0, [], 0.0, 0

    def segment(self, particles, initial_state) -> RunResult:
        """The next segment's own result (the settle rule reads its own trace); its trace joins the whole run's."""
        method, target, optimizer, rng_key, check_every, options = self.run
        try:
            with warnings.catch_warnings():  # a segment's own settling is judged by the rule here, not by run's check
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = run_fixed(method, target, particles, steps=check_every, optimizer=optimizer,
                                   rng_key=jax.random.fold_in(rng_key, self.count), initial_state=initial_state,
                                   options=options)
        except NonFiniteError as err:  # the whole run's result (its evaluations included), the segment's message
            self._add(err.result)
            raise NonFiniteError(str(err), err.step, self.whole(err.result)) from None
        except RunInterrupted as err:  # the whole run's result and its global step, not the segment's
            self._add(err.result)
            raise RunInterrupted(
                f"interrupted (Ctrl-C) after step {err.step} of a run until settled (at most {self.max_steps} steps); "
                "`err.result` holds the particles there (resume with steps=None, initial_state=err.result.state)",
                err.step, self.whole(err.result)) from None
        self.count += 1
        self._add(result)
        return result

    def _add(self, last: RunResult) -> None:
        self.traces.append(last.trace if not self.traces else last.trace[1:])  # each record once
        self.wall += last.wall_time
        self.evaluations += last.evaluations or 0

    def whole(self, last: RunResult) -> RunResult:
        """``last`` (the latest segment's result) with the whole run's trace and summed wall time."""
        trace = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *self.traces)
        return dataclasses.replace(last, trace=trace, wall_time=self.wall, evaluations=self.evaluations)


def _verdict(target, result: RunResult, delta: float, tol: float, check_every: int, steps: int) -> RunResult:
    """The run's result with ``converged`` and ``convergence``: settled (``delta < tol``) and true to Stein's
    identity in every coordinate (a non-finite value fails too: never a silent pass), else a warning saying which."""
    hyper = getattr(result.state.opt_state, "hyperparams", {})
    lr = float(hyper["learning_rate"]) if isinstance(hyper, dict) and "learning_rate" in hyper else None
    converged = delta < tol
    info = {"steps": steps, "delta": delta, "learning_rate": lr}
    if converged:
        identity = stein_identity(target, result.particles)
        result = dataclasses.replace(result, evaluations=(result.evaluations or 0) + int(result.particles.shape[0]))
        info["stein_identity"] = [float(v) for v in identity]
        worst = int(np.argmax(np.where(np.isfinite(identity), identity, np.inf)))
        if not identity[worst] <= STEIN_IDENTITY_LIMIT:
            converged = False
            warnings.warn(f"the particles stopped moving but do not fit the target: in coordinate {worst} the mean of "
                          f"score x (x - mean) is {identity[worst]:.3g}, where a sample of any proper target gives -1 "
                          f"(Stein's identity; a settled run is accepted below {STEIN_IDENTITY_LIMIT}). The target is "
                          "flat or improper in that direction (a missing prior?), or the particles span under a fifth "
                          "of its variance there (a scale far from the start's: standardise, or start wider)",
                          ConvergenceWarning, stacklevel=user_stacklevel())
    else:
        warnings.warn(f"not converged after {steps} steps (max_steps): over the last {check_every} steps a particle "
                      f"mean or sd still moved by {_sds(delta)} (tolerance {tol}); the particles are not a settled "
                      "approximation. Raise max_steps, lower the learning rate, or check with "
                      "steinax.diagnostics.sample_quality(..., spread=True)", ConvergenceWarning,
                      stacklevel=user_stacklevel())
    return dataclasses.replace(result, converged=converged, convergence=info)
