"""The run loop: a whole particle-method run compiled as one ``lax.scan``.

``run(method, target, particles, steps=..., optimizer=..., rng_key=...)``

* Step ``t`` (1-based) uses the key ``fold_in(rng_key, t - 1)``, so a run is
  deterministic for a given key and a resumed run (``initial_state=``)
  reproduces an uninterrupted one exactly.
* Every ``trace_every`` steps (default: every 20th step or rarer, so the trace
  costs about a twentieth of the run; and at steps 0 and ``steps``) the trace
  records the squared V-statistic KSD of the particles (of at most
  ``diagnostic_points`` = 2000 evenly strided ones) with a fixed diagnostic kernel
  (IMQ, ``c = 1``, ``beta = -1/2``, the same for every method so traces
  compare across methods), plus the last step's direction norm and the
  method's diagnostics (e.g. the bandwidth). The diagnostic costs one extra
  score evaluation per trace point.
* A step whose log-densities, scores, direction or new particles are not
  finite stops the run: later steps leave the state unchanged, and
  :class:`NonFiniteError` reports the step and carries the result of the last
  finite step.
* Progress (``tqdm``) is reported from inside the compiled loop with an
  ordered ``jax.debug.callback`` at each trace point.
* The compiled loop is cached: a second run with the same method, target and
  optimizer objects and the same step counts does not recompile.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from steinax._io import check_writable
from steinax._platform import on_cpu_else
from steinax._validation import check_key, check_particles
from steinax.checkpoint import (OPTIMIZER_LABELS, CheckpointMismatchError, compare_behaviour, computation_fingerprint,
                                fingerprint_tree, load_checkpoint, optimizer_signature, save_checkpoint, update_from,
                                without_addresses)
from steinax.kernels.base import IMQ, AbstractKernel, as_kernel
from steinax.particles.base import AbstractParticleMethod, ParticleState, check_optimizer_state, check_origin
from steinax.particles.converge import particle_moments, settle_window_start
from steinax.particles.interrupt import INTERRUPT_CHECK_EVERY, interrupt_scope, interrupted
from steinax.particles.optim import refuse_value_optimizers
from steinax.stein.ksd import ksd
from steinax.targets.base import as_target, check_target, evaluate

__all__ = ["run", "RunResult", "Trace", "NonFiniteError", "RunInterrupted", "DivergenceWarning"]


class Trace(eqx.Module):
    """Diagnostics recorded every ``trace_every`` steps (arrays of length ``T``).

    Attributes:
        step: number of completed steps at each record (0 = initial particles).
        ksd: squared V-statistic KSD with the IMQ(1, -1/2) diagnostic kernel.
        direction_norm: RMS ``||phi(x_i)||`` of the last step before the record (NaN at step 0).
        method: the method's diagnostics of that step, e.g. ``{"bandwidth": ...}`` (NaN at step 0).
        max_abs: the largest ``|x_id|`` of the particles (a run whose particles explode while
            staying finite is reported from it: :class:`DivergenceWarning`).
    """

    step: jax.Array
    ksd: jax.Array
    direction_norm: jax.Array
    method: dict
    max_abs: jax.Array | None = None

    def __getitem__(self, idx) -> "Trace":
        return jax.tree_util.tree_map(lambda a: a[idx], self)


PARTICLE_NOTE = ("particles of a Stein method, not a Markov chain: R-hat, ESS and MCSE do not apply (R-hat is NaN for "
                 "one chain; ESS and MCSE read the particles' order as time). Use arviz_stats.summary(tree, "
                 "kind='stats') for means, sds and intervals, and steinax.diagnostics.sample_quality(tree, target, "
                 "spread=True) for whether they are the posterior")


class RunResult(eqx.Module):
    """What :func:`run` returns.

    Attributes:
        particles: ``[n, d]`` final particles (in the target's space).
        samples: the particles mapped by ``target.postprocess`` (NumPyro: dict of constrained sites).
        trace: a :class:`Trace`.
        state: the final :class:`~steinax.particles.ParticleState` (pass as ``initial_state`` to resume).
        wall_time: seconds for the whole call, compilation included when it happened.
        converged: whether the particles settled: for ``steps=None`` runs the stopping rule; for fixed-length
            runs the same moment rule over the last 500 steps (at most half the run;
            :func:`steinax.particles.converge.settled_over`); ``None`` for runs of fewer than 100 steps, and
            where no window was left to judge (a resumed run that was already finished).
        convergence: ``{"steps", "delta", "learning_rate", "stein_identity"}`` (``steps=None``) or
            ``{"steps", "delta", "window", "tolerance"}`` (fixed length) at the end.
        labels: the model's ``{"coords", "dims"}`` for :meth:`to_datatree` (PyMC models), else ``None``.
    """

    particles: jax.Array
    samples: object
    trace: Trace
    state: ParticleState
    wall_time: float = eqx.field(static=True)
    converged: bool | None = eqx.field(static=True, default=None)
    convergence: dict | None = eqx.field(static=True, default=None)
    labels: dict | None = eqx.field(static=True, default=None)

    def to_datatree(self, var_name: str = "x"):
        """The samples as an ArviZ ``DataTree`` (one chain, particles as draws); needs ``arviz-base``.

        The posterior group carries the attribute ``steinax_particles = 1``: the draws are
        exchangeable particles, not a Markov chain, so :func:`steinax.diagnostics.sample_quality`
        tests them with the i.i.d. bootstrap. Its attribute ``steinax_diagnostics`` says that MCMC
        diagnostics do not apply: R-hat, ESS and MCSE (``arviz_stats.summary``'s defaults) assume
        chains; use ``arviz_stats.summary(tree, kind="stats")`` and ``sample_quality(..., spread=True)``. A PyMC model's draws carry its ``dims`` and ``coords``
        (the names ``pm.sample`` gives).
        """
        try:
            from arviz_base import from_dict
        except ImportError as exc:  # pragma: no cover
            raise ImportError("to_datatree needs arviz-base: pip install arviz-base h5netcdf "
                              "(the steinax `arviz` extra)") from exc
        samples = self.samples if isinstance(self.samples, dict) else {var_name: self.samples}
        labels = self.labels or {}
        return from_dict({"posterior": {k: np.asarray(v)[None] for k, v in samples.items()}},
                         attrs={"posterior": {"steinax_particles": 1, "steinax_diagnostics": PARTICLE_NOTE}},
                         coords=labels.get("coords"),
                         dims=labels.get("dims"))


class NonFiniteError(FloatingPointError):
    """A run met a non-finite value; ``.step`` is the failing step, ``.result`` the last finite state."""

    def __init__(self, message: str, step: int, result: RunResult):
        super().__init__(message)
        self.step = step
        self.result = result


# ---------------------------------------------------------------- progress

_BARS: dict[int, object] = {}
_RUN_IDS = itertools.count()


def _progress_update(run_id, n_steps):
    bar = _BARS.get(int(run_id))
    if bar is not None:
        bar.update(int(n_steps))


def _make_bar(progress, total):
    if progress == "auto":
        progress = total >= 1000 and sys.stderr.isatty()
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc="steinax", unit="step")


# ---------------------------------------------------------------- compiled loop


def _where_tree(pred, new, old):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


def _diagnostic_subset(particles, points):
    """At most ``points`` evenly strided particles (all of them when ``points`` is None or >= n)."""
    n = particles.shape[0]
    if points is None or points >= n:
        return particles
    return particles[: (n // points) * points : n // points][:points]


def _diagnostics(target, diag_kernel, particles, key, ksd_block):
    block, points = ksd_block
    particles = _diagnostic_subset(particles, points)
    _, scores = evaluate(target, key, particles)
    return ksd(particles, scores, diag_kernel, "v", block_size=block)


@eqx.filter_jit
def _loop(method, target, optimizer, diag_kernel, state, rng_key, run_id, interrupt_id, n_chunks, every, remainder,
          ksd_block, progress, interruptible, snapshot, window_start):
    key_steps, key_diag = jax.random.split(rng_key)

    def step_of(state):
        return method.step(jax.random.fold_in(key_steps, state.step), state, target, optimizer)

    info_shape = jax.eval_shape(step_of, state)[1]

    def skip(state):  # after a non-finite step or Ctrl-C: the rest of the segment costs nothing
        return state, jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), info_shape)

    def one_step(carry, _):
        state, failed, stopped = carry
        active = (failed < 0) & ~stopped
        new, info = jax.lax.cond(active, step_of, skip, state)
        failed = jnp.where(active & ~info.finite, state.step + 1, failed)
        state = _where_tree(active & info.finite, new, state)
        if interruptible:
            look = active & (state.step % INTERRUPT_CHECK_EVERY == 0)
            # a look at Ctrl-C from inside the loop on the CPU only; on accelerators the loop holds no host
            # round-trip and Ctrl-C is seen between segments (the host's loop below)
            stopped = stopped | on_cpu_else(
                lambda: jax.lax.cond(
                    look, lambda: jax.pure_callback(interrupted, jax.ShapeDtypeStruct((), jnp.bool_), interrupt_id),
                    lambda: jnp.asarray(False)),
                lambda: jnp.asarray(False))
        return (state, failed, stopped), info

    def record(carry, infos, n_done):
        state = carry[0]
        last = jax.tree_util.tree_map(lambda a: a[-1], infos)
        k = _diagnostics(target, diag_kernel, state.particles, jax.random.fold_in(key_diag, state.step), ksd_block)
        if progress:
            jax.debug.callback(_progress_update, run_id, n_done, ordered=True)
        return state.step, k, last.direction_norm, last.method, jnp.max(jnp.abs(state.particles))

    def chunk(outer, _):
        carry, snap = outer
        carry, infos = jax.lax.scan(one_step, carry, None, length=every)
        return (carry, _take_snapshot(snap, carry[0], window_start)), record(carry, infos, every)

    carry = (state, jnp.asarray(-1, jnp.int32), jnp.asarray(False))
    records = []
    if n_chunks:
        (carry, snapshot), rec = jax.lax.scan(chunk, (carry, snapshot), None, length=n_chunks)
        records.append(rec)
    if remainder:
        carry, infos = jax.lax.scan(one_step, carry, None, length=remainder)
        snapshot = _take_snapshot(snapshot, carry[0], window_start)
        records.append(jax.tree_util.tree_map(lambda a: a[None], record(carry, infos, remainder)))
    stacked = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *records)
    return carry[0], carry[1], carry[2], stacked, snapshot


def _take_snapshot(snapshot, state, window_start):
    """The particles' ``(step, mean, sd)`` at the latest record at or before ``window_start`` (the start of the
    window over which a fixed-length run's settling is judged, :func:`steinax.particles.converge.settled_over`)."""
    take = state.step <= window_start
    new = (state.step, *particle_moments(state.particles))
    return jax.tree_util.tree_map(lambda a, b: jnp.where(take, a, b), new, snapshot)


@eqx.filter_jit
def _initial_record(method, target, diag_kernel, particles, rng_key, ksd_block):
    _, key_diag = jax.random.split(rng_key)
    logd, scores = evaluate(target, jax.random.fold_in(key_diag, 0), particles)
    # the same strided rows of the particles and of the scores already evaluated (no second evaluation)
    k = ksd(_diagnostic_subset(particles, ksd_block[1]), _diagnostic_subset(scores, ksd_block[1]),
            diag_kernel, "v", block_size=ksd_block[0])

    def info_of():  # the structure of the method's info, without computing a direction
        key = jax.random.key(0)
        _, s, curv = method.evaluate_target(key, target, particles)
        return method.direction(key, particles, s, method.init_aux(particles, target), curv)[2]

    info = jax.eval_shape(info_of)
    bad_rows = ~jnp.all(jnp.isfinite(scores), axis=1)
    if logd is not None:
        bad_rows = bad_rows | ~jnp.isfinite(logd)
    return k, jax.tree_util.tree_map(lambda a: jnp.full(a.shape, jnp.nan, a.dtype), info), bad_rows, jnp.max(jnp.abs(particles))


def run(
    method: AbstractParticleMethod,
    target,
    particles: jax.Array | None = None,
    *,
    steps: int | None = None,
    optimizer: optax.GradientTransformation | None = None,
    rng_key: jax.Array,
    trace_every: int | None = None,
    diagnostic_kernel: AbstractKernel | None = None,
    diagnostic_block_size: int | None = None,
    diagnostic_points: int | None = 2000,
    initial_state: ParticleState | None = None,
    progress: bool | str = "auto",
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Run a particle method for ``steps`` steps, compiled as one loop.

    Args:
        method: a particle method, e.g. ``steinax.svgd()``.
        target: a log-density function ``logdensity(x)`` of one ``[d]`` point, or
            any :class:`~steinax.targets.AbstractTarget` (minibatch or keyed scores,
            NumPyro models via :func:`steinax.targets.from_numpyro`).
        particles: ``[n, d]`` initial particles (float32 or float64, finite).
        steps: number of steps (``>= 1``); ``None`` runs until the particles settle
            (:func:`steinax.run_until_converged`: segments of 500 steps, at most 20000, the
            stopping rule of :mod:`steinax.particles.converge`; ``result.converged`` says whether
            it held, and a run that ends unconverged warns).
        optimizer: any optax optimizer; it receives ``-phi`` as the gradient
            (``optax.sgd(eps)`` gives ``x + eps * phi``; see also
            :func:`steinax.adagrad_momentum`). Default: the method's ``default_optimizer()``: Adam
            at 0.05 with an injectable learning rate
            (:func:`steinax.particles.converge.default_optimizer`), except sliced SVGD's clipped SGD.
        rng_key: a JAX PRNG key; the run is deterministic given it.
        trace_every: record the trace every this many steps (default ``max(20, steps // 100)``,
            reduced to a divisor of ``checkpoint_every`` when that is given,
            at most ``steps``: a trace point costs about one SVGD step (the IMQ Stein kernel
            and one score evaluation; 4.2 ms against a 4.9 ms step at n = 1000, d = 100 on
            2 CPU cores), so by default the trace takes about 5% of the run).
        diagnostic_kernel: the trace's KSD kernel (default ``IMQ(1, -1/2)``; keep the
            default to compare traces across methods).
        diagnostic_block_size: row-block size for the trace's KSD (default automatic).
        diagnostic_points: the trace's KSD is that of at most this many evenly strided
            particles (rows ``0, s, 2s, ...``; default 2000), so at large ``n`` a trace
            point costs O(2000^2 d), not O(n^2 d); ``None`` uses every particle.
        initial_state: resume from a previous ``result.state`` (or the ``RunResult`` itself); ``particles``, if
            also given, must equal its particles (a different ``x0`` is refused, not ignored).
        progress: ``True``, ``False`` or ``"auto"`` (a bar for runs of >= 1000 steps on a terminal).
        checkpoint: a ``.npz`` path (schema: :mod:`steinax.checkpoint`). Every
            ``checkpoint_every`` steps the state (particles, optimizer state, method
            state, step), the trace so far and the key are written atomically. If the
            file exists, the run **resumes** from it, bit for bit as if never interrupted;
            a finished run returns its result without computing; a larger ``steps`` extends it (the
            trace keeps the checkpoint's spacing unless ``trace_every`` says otherwise). A checkpoint
            written by a different method, target, initial particles, particle shape, dtype, optimizer
            (its state, and its update at steps 0 to 10^6 and at the step resumed from), key or trace
            spacing is refused (:class:`~steinax.checkpoint.CheckpointMismatchError`, naming what differs).
        checkpoint_every: steps between checkpoints, a multiple of ``trace_every``
            (default: about a tenth of the run). At most this many steps are lost.

    Returns:
        A :class:`RunResult`.

    Raises:
        NonFiniteError: a step produced NaN/inf; ``err.step`` says which,
            ``err.result`` holds the particles of the last finite step.
        RunInterrupted: Ctrl-C (a ``KeyboardInterrupt``); the loop stops within
            ``INTERRUPT_CHECK_EVERY`` = 100 steps and ``err.result`` holds the particles there.
        CheckpointMismatchError: the checkpoint was written by another run (named differences).

    Warns:
        DivergenceWarning: the trace's KSD is not finite, or the particles' largest coordinate grew
            more than ``DIVERGENCE_FACTOR`` = 1e6 times its start (finite but exploding particles).
        ConvergenceWarning: the particles' means or sds still moved over the run's last 500 steps
            (``result.converged`` is False), the final trace KSD is 5 or more times the run's own
            minimum (the optimizer does not settle), or a run with ``steps=None`` ended unconverged.
    """
    from steinax.particles.converge import run_until_converged, settled_over, warn_if_unsettled

    if steps is None:
        return run_until_converged(
            method, target, particles, rng_key=rng_key, optimizer=optimizer, trace_every=trace_every,
            diagnostic_kernel=diagnostic_kernel, diagnostic_block_size=diagnostic_block_size,
            diagnostic_points=diagnostic_points, initial_state=initial_state, progress=progress, checkpoint=checkpoint,
            checkpoint_every=checkpoint_every)
    t0 = time.perf_counter()
    if not isinstance(method, AbstractParticleMethod):
        raise TypeError(f"`method` must be a steinax particle method (e.g. steinax.svgd()); received {type(method).__name__}")
    optimizer = method.default_optimizer() if optimizer is None else optimizer
    target = as_target(target)
    if not (isinstance(optimizer, optax.GradientTransformation) or hasattr(optimizer, "update")):
        raise TypeError(f"`optimizer` must be an optax GradientTransformation; received {type(optimizer).__name__}")
    steps = _positive_int(steps, "steps")
    if trace_every is None and checkpoint is not None and os.path.isfile(checkpoint):
        # a resumed or extended run keeps the spacing its checkpoint was written with (the default depends on
        # `steps`, which an extension changes: the user never chose it)
        trace_every = _stored_trace_every(checkpoint)
    if trace_every is None:
        trace_every = max(20, steps // 100)
        if checkpoint is not None and checkpoint_every is not None:
            # the default spacing shrinks to divide the checkpoints (a resumed trace must equal an uninterrupted one)
            trace_every = math.gcd(trace_every, _positive_int(checkpoint_every, "checkpoint_every"))
    else:
        trace_every = _positive_int(trace_every, "trace_every")
    trace_every = min(trace_every, steps)
    check_key(rng_key, "rng_key")
    refuse_value_optimizers(optimizer)
    diag_kernel = as_kernel(diagnostic_kernel, IMQ(), "diagnostic_kernel")

    if initial_state is None:
        if particles is None:
            raise ValueError("`particles` is required unless `initial_state` is given")
        particles = check_particles(particles)
        mesh = getattr(method, "mesh", None)
        if mesh is not None:
            from steinax.sharding import shard_particles

            particles = shard_particles(particles, mesh)
        dim = getattr(target, "dim", None)
        if isinstance(dim, int) and particles.shape[1] != dim:
            raise ValueError(f"`particles` must have shape [n, {dim}] for this target; received shape {tuple(particles.shape)}")
        state = method.init(particles, optimizer, target)
    else:
        state = _as_state(initial_state)
        if particles is not None and (np.shape(particles) != state.particles.shape or not np.array_equal(
                np.asarray(particles), np.asarray(state.particles))):
            raise ValueError("`particles` and `initial_state` were both given and differ; `initial_state` resumes from "
                             "its own particles. Give one of them")
        particles = check_particles(state.particles, "initial_state.particles")
        check_optimizer_state(optimizer, state)
        check_origin(optimizer, state)
    start_step = int(state.step)
    end_step = start_step + steps
    if end_step > MAX_STEPS:
        raise ValueError(f"`steps` = {steps} from step {start_step} passes step {MAX_STEPS}, the most a run counts "
                         "(a 32-bit step counter); ask for fewer steps")

    check_target(target, rng_key, particles)
    prior_trace = None
    if checkpoint is not None:
        checkpoint = os.fspath(checkpoint)
        if checkpoint_every is None:
            checkpoint_every = trace_every * max(1, (steps // 10) // trace_every)
        checkpoint_every = _positive_int(checkpoint_every, "checkpoint_every")
        if checkpoint_every % trace_every:
            raise ValueError(
                f"`checkpoint_every` must be a multiple of `trace_every` = {trace_every} (so a resumed trace equals an "
                f"uninterrupted one); received {checkpoint_every}"
            )
        fingerprint = _run_fingerprint(method, target, state, optimizer, rng_key, trace_every, diag_kernel, start_step)
        fingerprint["diagnostic_points"] = diagnostic_points
        fingerprint["initial_particles"] = fingerprint_tree(state.particles)  # a new x0 of the same shape is refused
        check_writable(checkpoint, _tree_bytes(state))  # before any work: a late failure would lose it
        if os.path.exists(checkpoint):
            state, prior_trace, probe = _load_run(checkpoint, state, fingerprint, target, optimizer)
            particles = state.particles
            if int(state.step) > end_step:
                raise CheckpointMismatchError(
                    f"checkpoint {checkpoint!r} holds step {int(state.step)}, beyond the {end_step} steps asked for; "
                    f"ask for steps >= {int(state.step) - start_step} or use another path"
                )
        else:
            probe = _probe(target, optimizer, state.particles[: _PROBE_POINTS])
    else:
        if checkpoint_every is not None:
            raise ValueError("`checkpoint_every` needs `checkpoint` (a file path)")
        checkpoint_every = steps
    diag_kernel = diag_kernel.resolve(particles)

    if diagnostic_points is not None:
        diagnostic_points = _positive_int(diagnostic_points, "diagnostic_points")
    ksd_layout = (diagnostic_block_size, diagnostic_points)
    k0, info0, bad_rows, max0 = _initial_record(method, target, diag_kernel, particles, rng_key, ksd_layout)
    from steinax.sharding import gather

    bad_rows = gather(bad_rows)
    if bad_rows.any():
        rows = np.nonzero(bad_rows)[0]
        raise ValueError(
            "the target's log-density or score is not finite at the initial `particles`, rows "
            f"{rows[:10].tolist()}{' ...' if rows.size > 10 else ''}; expected finite values at every initial particle"
        )
    if prior_trace is None:
        trace = Trace(step=state.step[None], ksd=k0[None], direction_norm=jnp.full((1,), jnp.nan, k0.dtype),
                      method=jax.tree_util.tree_map(lambda a: a[None], info0), max_abs=max0[None])
    else:
        template = Trace(step=state.step[None], ksd=k0[None], direction_norm=k0[None],
                         method=jax.tree_util.tree_map(lambda a: a[None], info0), max_abs=max0[None])
        structure = jax.tree_util.tree_structure(template)
        if structure.num_leaves != len(prior_trace):
            raise CheckpointMismatchError(
                f"checkpoint {checkpoint!r} holds a trace of {len(prior_trace)} arrays, this steinax records "
                f"{structure.num_leaves} (written by another version); use another path or delete the file")
        trace = jax.tree_util.tree_unflatten(structure, [jnp.asarray(a) for a in prior_trace])

    run_id = next(_RUN_IDS)
    if getattr(method, "mesh", None) is not None:
        progress = False  # an ordered host callback would have to run on every device of the mesh
    bar = _make_bar(progress, max(0, end_step - int(state.step)))
    if bar is not None:
        _BARS[run_id] = bar
    failed, stopped = -1, False
    # settling is judged from the particles' moments at the last trace record before the window (carried through the
    # compiled loop: no host round-trip)
    window_start = settle_window_start(end_step, steps)
    snapshot = (state.step, *particle_moments(state.particles))
    interruptible = getattr(method, "mesh", None) is None  # a host callback would run on every device of a mesh
    try:
        with interrupt_scope() as scope:  # joins the scope of an enclosing run (steps=None): one Ctrl-C for all
            while int(state.step) < end_step and failed < 0 and not stopped:
                if scope.requested:  # pressed during compilation, or between the segments of an enclosing run
                    stopped = True
                    break
                segment = min(checkpoint_every, end_step - int(state.step))
                n_chunks, remainder = divmod(segment, trace_every)
                out = _loop(
                    method, target, optimizer, diag_kernel, state, rng_key, jnp.asarray(run_id), jnp.asarray(scope.id),
                    n_chunks, trace_every, remainder, ksd_layout, bar is not None, interruptible,
                    snapshot, jnp.asarray(window_start, state.step.dtype),
                )
                jax.block_until_ready(out)
                state, failed, stopped, rec, snapshot = out
                failed, stopped = int(failed), bool(stopped) or scope.requested
                trace = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), trace, Trace(*rec))
                if checkpoint is not None and failed < 0 and not stopped:
                    _save_run(checkpoint, state, trace, rng_key, fingerprint, end_step, probe, optimizer)
            stopped = stopped or (failed < 0 and scope.requested)
            scope.honoured = stopped
        if bar is not None:
            jax.effects_barrier()
    finally:
        if bar is not None:
            bar.close()
            _BARS.pop(run_id, None)
    if failed >= 0 or stopped:
        # the records after the stop repeat the last state: keep each step once
        steps = np.asarray(trace.step)
        trace = trace[np.nonzero(np.r_[True, steps[1:] > steps[:-1]])[0]]
    result = RunResult(
        particles=state.particles,
        samples=target.postprocess(state.particles),
        trace=trace,
        state=state,
        wall_time=time.perf_counter() - t0,
        labels=getattr(target, "labels", None),
    )
    if failed >= 0:
        raise NonFiniteError(
            f"non-finite values (log-density, score, direction or particles) appeared at step {failed} "
            f"of {end_step}; the run stopped and `err.result` holds the particles after step {failed - 1}",
            failed,
            result,
        )
    if stopped:
        raise RunInterrupted(
            f"interrupted (Ctrl-C) after step {int(state.step)} of {end_step}; `err.result` holds the particles "
            f"there (resume with initial_state=err.result.state)", int(state.step), result)
    _warn_if_diverging(trace)
    warn_if_unsettled(trace)
    settled = settled_over(snapshot, state, end_step)
    if settled is not None:
        result = dataclasses.replace(result, converged=settled[0], convergence=settled[1])
    return result


DIVERGENCE_FACTOR = 1e6


class DivergenceWarning(RuntimeWarning):
    """A run whose particles stayed finite but exploded, or whose trace's KSD is not finite."""


def _warn_if_diverging(trace: Trace) -> None:
    """Warn, naming the first step, when the trace's KSD is not finite or the particles' largest coordinate grew
    more than ``DIVERGENCE_FACTOR`` times beyond ``max(1, its initial value)`` (finite particles can still diverge:
    a heavy-tailed prior sent a coordinate to 1.9e19 while every step was finite)."""
    import warnings

    steps = np.asarray(trace.step)
    ksd_bad = np.flatnonzero(~np.isfinite(np.asarray(trace.ksd)))
    if ksd_bad.size:
        warnings.warn(f"the run's trace KSD is not finite from step {int(steps[ksd_bad[0]])} on (value "
                      f"{float(np.asarray(trace.ksd)[ksd_bad[0]])}): the particles diverge or the score overflows; "
                      "lower the step size, or use float64", DivergenceWarning, stacklevel=3)
        return
    if trace.max_abs is None:
        return
    sizes = np.asarray(trace.max_abs, np.float64)
    limit = DIVERGENCE_FACTOR * max(1.0, float(sizes[0]))
    grown = np.flatnonzero(sizes > limit)
    if grown.size:
        i = int(grown[0])
        warnings.warn(f"the particles diverge: their largest coordinate is {sizes[i]:.3g} at step {int(steps[i])}, "
                      f"over {DIVERGENCE_FACTOR:g} times max(1, {sizes[0]:.3g}) at the start; the result is not a sample "
                      "of the target. Lower the step size or check the model", DivergenceWarning, stacklevel=3)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run`: ``.step`` is the last completed step, ``.result`` the run up to it."""

    def __init__(self, message: str, step: int, result: RunResult):
        super().__init__(message)
        self.step = step
        self.result = result


def _as_state(initial_state) -> ParticleState:
    """``initial_state`` as a :class:`ParticleState`: a :class:`RunResult` stands for its ``.state``."""
    if isinstance(initial_state, RunResult):
        return initial_state.state
    if not isinstance(initial_state, ParticleState):
        raise TypeError(f"`initial_state` must be a ParticleState (a previous `result.state`) or a RunResult; received "
                        f"{type(initial_state).__name__}")
    return initial_state


def _stored_trace_every(path) -> int | None:
    """The trace spacing a run's checkpoint at ``path`` was written with (None for another kind of file: the
    fingerprint check then names what differs)."""
    from steinax.checkpoint import read_meta

    meta = read_meta(path)
    value = meta.get("trace_every") if meta.get("kind") == "steinax.run" else None
    return int(value) if isinstance(value, int) and value >= 1 else None


MAX_STEPS = 2**31 - 2  # the step counter is int32


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
    if value > MAX_STEPS:
        raise ValueError(f"`{name}` must be at most {MAX_STEPS} (the step counter is a 32-bit integer); received {value!r}")
    return int(value)


# ---------------------------------------------------------------- checkpoints


def _run_fingerprint(method, target, state, optimizer, rng_key, trace_every, diag_kernel, start_step) -> dict:
    """What a checkpoint of :func:`run` must match to be resumed (see :mod:`steinax.checkpoint`).

    Readable entries (the method's configuration, the x64 flag, the mesh) name what differs;
    what a hash cannot see (a plain function's code, its closure, module globals, data,
    an optax optimizer's hyperparameters, which live in closures) is checked by behaviour:
    :func:`_probe`.
    """
    del optimizer  # optax optimizers are closures: the probe compares their behaviour
    mesh = getattr(method, "mesh", None)
    return {
        "kind": "steinax.run",
        "method": type(method).__name__,
        "method_config": without_addresses(repr(method)),
        **computation_fingerprint(method, target, state.opt_state, rng_key),
        "target": type(target).__name__,
        "particles": list(state.particles.shape),
        "dtype": str(state.particles.dtype),
        "mesh": None if mesh is None else f"{dict(mesh.shape)} over {mesh.devices.size} {mesh.devices.flat[0].platform} devices",
        "trace_every": trace_every,
        "diagnostic_kernel": fingerprint_tree(diag_kernel),
        "start_step": start_step,
    }


_PROBE_POINTS = 3


@eqx.filter_jit
def _probe(target, optimizer, points) -> dict:
    """How the target and the optimizer behave at fixed inputs: the log-density (NaN for a score-only
    target) and score at ``points`` (a few initial particles; key 0 for a stochastic target) and the
    optimizer's :func:`~steinax.checkpoint.optimizer_signature` there. Stored in the checkpoint and recomputed
    at the stored points on resume: an edited log-density, other data, a changed closure or global, or other
    optimizer hyperparameters (a schedule included) behave differently."""
    logd, scores = evaluate(target, jax.random.key(0), points)
    logd = jnp.full(points.shape[:1], jnp.nan, points.dtype) if logd is None else logd
    return {"points": points, "logdensity": logd, "score": scores, "update": optimizer_signature(optimizer, points)}


_resume_update = eqx.filter_jit(update_from)

_PROBE_LABELS = {"logdensity": "the target's log-density", "score": "the target's score", **OPTIMIZER_LABELS}


def _check_probe(path, stored: dict, target, optimizer, state) -> None:
    now = dict(_probe(target, optimizer, jnp.asarray(stored["points"])),
               resume_update=_resume_update(optimizer, state.particles, state.opt_state))
    diffs = compare_behaviour(stored, now, _PROBE_LABELS)
    if diffs:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} was written by a run that behaves differently and is not resumed (compared at "
            "its probe points): " + "; ".join(diffs)
            + " (the code, data, closure or globals of the target, or the optimizer's settings changed). "
            "Use another checkpoint path, or delete the file to start afresh."
        )


def _tree_bytes(tree) -> int:
    return sum(int(np.prod(np.shape(a))) * jnp.dtype(a.dtype).itemsize for a in jax.tree_util.tree_leaves(tree)
               if hasattr(a, "dtype") and not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key))


def _save_run(path, state, trace, rng_key, fingerprint, end_step, probe, optimizer):
    meta = dict(fingerprint, step=int(state.step), end_step=end_step)
    probe = dict(probe, resume_update=_resume_update(optimizer, state.particles, state.opt_state))
    save_checkpoint(path, {"state": state, "trace": trace, "rng_key": rng_key, "probe": probe}, meta)


_PROBE_NAMES = ("logdensity", "points", "resume_update", "score", "update")  # a dict's leaves flatten in key order


def _load_run(path, template_state, fingerprint, target, optimizer):
    trees, _ = load_checkpoint(path, {"state": template_state, "trace": None, "probe": None}, fingerprint)
    if len(trees["probe"]) != len(_PROBE_NAMES):
        raise CheckpointMismatchError(f"checkpoint {path!r} holds a probe of {len(trees['probe'])} arrays, this steinax "
                                      f"stores {len(_PROBE_NAMES)} (written by another version); use another path or "
                                      "delete it")
    stored = dict(zip(_PROBE_NAMES, trees["probe"]))
    _check_probe(path, stored, target, optimizer, trees["state"])
    del stored["resume_update"]  # recomputed at every save
    return trees["state"], trees["trace"], stored
