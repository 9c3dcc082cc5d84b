"""A run of a fixed number of steps, composed of the loop's parts.

:func:`run_fixed` is what :func:`steinax.run` does for ``steps=n``: check the arguments (:func:`prepare`), make or
resume the state (:func:`start_state`), open the checkpoint service (:func:`~steinax.particles.loop.checkpointing.open_checkpoint`),
record the trace's first point (:func:`first_trace`), run compiled segments until the end, a non-finite step or a
Ctrl-C, under the progress and interrupt services (:func:`drive`), and turn the outcome into a result, an error or a
warning (:func:`finish`). Each part is a function of its inputs; the run is their sequence.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from steinax._validation import check_key, check_particles
from steinax.runtime.checkpoint import CheckpointMismatchError
from steinax.kernels.base import IMQ, as_kernel
from steinax.particles.base import AbstractParticleMethod, check_optimizer_state, check_origin
from steinax.particles.loop.checkpointing import open_checkpoint, stored_trace_every
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.options import MAX_STEPS, RunOptions, as_state, positive_int
from steinax.particles.loop.progress import progress_bar
from steinax.particles.loop.result import NonFiniteError, NonFiniteStart, RunInterrupted, RunResult, Trace
from steinax.particles.loop.segment import compiled_segment, diagnostic_count, initial_record
from steinax.particles.loop.settle import (particle_moments, settle_window_start, settled_over, warn_if_diverging,
                                           warn_if_unsettled)
from steinax.particles.optim import refuse_value_optimizers
from steinax.targets.base import as_target, check_target

__all__ = ["run_fixed", "prepare", "start_state", "first_trace", "drive", "finish", "trace_spacing"]


def run_fixed(method, target, particles=None, *, steps: int, optimizer=None, rng_key, initial_state=None,
              options: RunOptions = RunOptions()) -> RunResult:
    """:func:`steinax.run` with a fixed ``steps`` (its docstring; the module docstring for the parts)."""
    t0 = time.perf_counter()
    method, target, optimizer, steps, trace_every, diag_kernel = prepare(method, target, optimizer, steps, rng_key,
                                                                         options)
    state, particles = start_state(method, target, particles, initial_state, optimizer)
    end_step = int(state.step) + steps
    if end_step > MAX_STEPS:
        raise ValueError(f"`steps` = {steps} from step {int(state.step)} passes step {MAX_STEPS}, the most a run "
                         "counts (a 32-bit step counter); ask for fewer steps")
    check_target(target, rng_key, particles)
    saver, state, prior_trace = open_checkpoint(
        options.checkpoint, options.checkpoint_every, (method, target, optimizer, rng_key, steps, trace_every, diag_kernel),
        state, options.diagnostic_points, end_step)
    particles = state.particles if prior_trace is not None else particles
    diag_kernel = diag_kernel.resolve(particles)
    points = None if options.diagnostic_points is None else positive_int(options.diagnostic_points, "diagnostic_points")
    layout = (options.diagnostic_block_size, points)
    trace = first_trace(method, target, diag_kernel, particles, rng_key, layout, state, prior_trace, options.checkpoint)
    segment = (method, target, optimizer, diag_kernel, rng_key, trace_every, layout)
    step0, records0 = int(state.step), int(trace.step.shape[0])
    state, trace, failed, stopped, snapshot = drive(segment, state, trace, end_step, steps, saver, options.progress)
    n = int(particles.shape[0])  # RunResult.evaluations: the first record's n, n per step, the points at each record
    evaluations = n * (1 + int(state.step) - step0) + diagnostic_count(n, points) * (int(trace.step.shape[0]) - records0)
    result = RunResult(particles=state.particles, samples=target.postprocess(state.particles), trace=trace,
                       state=state, wall_time=time.perf_counter() - t0, labels=getattr(target, "labels", None),
                       evaluations=evaluations)
    return finish(result, failed, stopped, snapshot, end_step)


def prepare(method, target, optimizer, steps, rng_key, options: RunOptions):
    """The checked ``(method, target, optimizer, steps, trace_every, diagnostic kernel)`` of a fixed-length run: the
    method's default optimizer where none is given, the target as a steinax target."""
    if not isinstance(method, AbstractParticleMethod):
        raise TypeError(f"`method` must be a steinax particle method (e.g. steinax.svgd()); received {type(method).__name__}")
    optimizer = method.default_optimizer() if optimizer is None else optimizer
    target = as_target(target)
    if not (isinstance(optimizer, optax.GradientTransformation) or hasattr(optimizer, "update")):
        raise TypeError(f"`optimizer` must be an optax GradientTransformation; received {type(optimizer).__name__}")
    steps = positive_int(steps, "steps")
    trace_every = trace_spacing(steps, options)
    check_key(rng_key, "rng_key")
    refuse_value_optimizers(optimizer)
    return method, target, optimizer, steps, trace_every, as_kernel(options.diagnostic_kernel, IMQ(), "diagnostic_kernel")


def trace_spacing(steps: int, options: RunOptions) -> int:
    """The steps between trace records: ``options.trace_every``, else the spacing of the checkpoint being resumed or
    extended (the default depends on ``steps``, which an extension changes: the user never chose it), else
    ``max(20, steps // 100)`` shrunk to divide ``checkpoint_every`` (a resumed trace must equal an uninterrupted
    one); at most ``steps``."""
    every = options.trace_every
    if every is None and options.checkpoint is not None and os.path.isfile(options.checkpoint):
        every = stored_trace_every(options.checkpoint)
    if every is None:
        every = max(20, steps // 100)
        if options.checkpoint is not None and options.checkpoint_every is not None:
            every = math.gcd(every, positive_int(options.checkpoint_every, "checkpoint_every"))
    else:
        every = positive_int(every, "trace_every")
    return min(every, steps)


def start_state(method, target, particles, initial_state, optimizer):
    """``(state, particles)``: ``method.init`` of the checked (and, with a mesh, sharded) ``particles``, or the state
    resumed from ``initial_state`` (a ``ParticleState`` or ``RunResult``) made by the same optimizer."""
    if initial_state is None:
        if particles is None:
            raise ValueError("`particles` is required unless `initial_state` is given")
        particles = check_particles(particles)
        mesh = getattr(method, "mesh", None)
        if mesh is not None:
            from steinax.runtime.sharding import shard_particles

            particles = shard_particles(particles, mesh)
        dim = getattr(target, "dim", None)
        if isinstance(dim, int) and particles.shape[1] != dim:
            raise ValueError(f"`particles` must have shape [n, {dim}] for this target; received shape {tuple(particles.shape)}")
        return method.init(particles, optimizer, target), particles
    state = as_state(initial_state)
    if particles is not None and (np.shape(particles) != state.particles.shape or not np.array_equal(
            np.asarray(particles), np.asarray(state.particles))):
        raise ValueError("`particles` and `initial_state` were both given and differ; `initial_state` resumes from "
                         "its own particles. Give one of them")
    particles = check_particles(state.particles, "initial_state.particles")
    check_optimizer_state(optimizer, state)
    check_origin(optimizer, state)
    return state, particles


def first_trace(method, target, diag_kernel, particles, rng_key, layout, state, prior_trace, checkpoint) -> Trace:
    """The trace before the run's first step: the record at the initial particles (which must be finite under the
    target), or the trace a resumed checkpoint holds."""
    k0, info0, bad_rows, max0 = initial_record(method, target, diag_kernel, particles, rng_key, layout)
    from steinax.runtime.sharding import gather

    bad_rows = gather(bad_rows)
    if bad_rows.any():
        rows = np.nonzero(bad_rows)[0]
        raise NonFiniteStart(
            "the target's log-density or score is not finite at the initial `particles`, rows "
            f"{rows[:10].tolist()}{' ...' if rows.size > 10 else ''}; expected finite values at every initial particle",
            rows)
    method_info = jax.tree_util.tree_map(lambda a: a[None], info0)
    if prior_trace is None:
        return Trace(step=state.step[None], ksd=k0[None], direction_norm=jnp.full((1,), jnp.nan, k0.dtype),
                     method=method_info, max_abs=max0[None])
    structure = jax.tree_util.tree_structure(Trace(step=state.step[None], ksd=k0[None], direction_norm=k0[None],
                                                   method=method_info, max_abs=max0[None]))
    if structure.num_leaves != len(prior_trace):
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint!r} holds a trace of {len(prior_trace)} arrays, this steinax records "
            f"{structure.num_leaves} (written by another version); use another path or delete the file")
    return jax.tree_util.tree_unflatten(structure, [jnp.asarray(a) for a in prior_trace])


def drive(segment, state, trace, end_step: int, steps: int, saver, progress):
    """Run compiled segments (:func:`~steinax.particles.loop.segment.compiled_segment`) of ``saver.every`` steps
    until ``end_step``, a non-finite step or a Ctrl-C, saving after each finished segment; under a progress bar and
    the run's interrupt scope (joined with an enclosing run's). ``segment`` is ``(method, target, optimizer,
    diagnostic kernel, rng_key, trace_every, layout)``. Returns ``(state, trace, failed step or -1, stopped,
    snapshot)``."""
    method, target, optimizer, diag_kernel, rng_key, trace_every, layout = segment
    mesh = getattr(method, "mesh", None)  # on a mesh no host callback: it would run on every device
    failed, stopped = -1, False
    # settling is judged from the particles' moments at the last trace record before the window (carried through the
    # compiled loop: no host round-trip)
    window_start = jnp.asarray(settle_window_start(end_step, steps), state.step.dtype)
    snapshot = (state.step, *particle_moments(state.particles))
    with progress_bar(False if mesh is not None else progress, max(0, end_step - int(state.step))) as bar, \
            interrupt_scope() as scope:  # joins the scope of an enclosing run (steps=None): one Ctrl-C for all
        while int(state.step) < end_step and failed < 0 and not stopped:
            if scope.requested:  # pressed during compilation, or between the segments of an enclosing run
                stopped = True
                break
            n_chunks, remainder = divmod(min(saver.every, end_step - int(state.step)), trace_every)
            out = compiled_segment(method, target, optimizer, diag_kernel, state, rng_key, jnp.asarray(bar.id),
                                   jnp.asarray(scope.id), n_chunks, trace_every, remainder, layout, bar.shown,
                                   mesh is None, snapshot, window_start)
            jax.block_until_ready(out)
            state, failed, stopped, rec, snapshot = out
            failed, stopped = int(failed), bool(stopped) or scope.requested
            trace = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), trace, Trace(*rec))
            if failed < 0 and not stopped:
                saver.save(state, trace, rng_key, end_step, optimizer)
        stopped = stopped or (failed < 0 and scope.requested)
        scope.honoured = stopped
    return state, trace, failed, stopped, snapshot


def finish(result: RunResult, failed: int, stopped: bool, snapshot, end_step: int) -> RunResult:
    """The run's outcome: :class:`NonFiniteError` or :class:`RunInterrupted` carrying ``result`` (its trace with each
    step once), else ``result`` with the settle verdict over the run's last window, after the divergence and
    settling warnings."""
    if failed >= 0 or stopped:  # the records after the stop repeat the last state: keep each step once
        steps = np.asarray(result.trace.step)
        result = dataclasses.replace(result, trace=result.trace[np.nonzero(np.r_[True, steps[1:] > steps[:-1]])[0]])
    if failed >= 0:
        raise NonFiniteError(f"non-finite values (log-density, score, direction or particles) appeared at step {failed} "
                             f"of {end_step}; the run stopped and `err.result` holds the particles after step "
                             f"{failed - 1}", failed, result)
    if stopped:
        step = int(result.state.step)
        raise RunInterrupted(f"interrupted (Ctrl-C) after step {step} of {end_step}; `err.result` holds the particles "
                             "there (resume with initial_state=err.result.state)", step, result)
    warn_if_diverging(result.trace)
    warn_if_unsettled(result.trace)
    settled = settled_over(snapshot, result.state, end_step)
    if settled is not None:
        result = dataclasses.replace(result, converged=settled[0], convergence=settled[1])
    return result
