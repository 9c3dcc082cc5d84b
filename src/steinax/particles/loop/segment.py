"""The compiled segment: ``lax.scan`` over ``method.step``, with a recorder of the trace, in one XLA program.

:func:`compiled_segment` runs ``n_chunks * every + remainder`` steps from a state. Step ``t`` (1-based) uses the
key ``fold_in(split(rng_key)[0], t - 1)``. A step whose log-densities, scores, direction or new particles are not
finite is not taken: the rest of the segment leaves the state unchanged (``failed`` holds the step). Every ``every``
steps, and at the end of a remainder, the recorder appends a trace record (:func:`record`): the squared V-statistic
KSD of at most ``points`` evenly strided particles with the diagnostic kernel (one more score evaluation), the last
step's direction norm and the method's diagnostics, the particles' largest coordinate; and it advances the progress
bar (:mod:`steinax.particles.loop.progress`) through an ordered host callback. On the CPU the segment looks at the
run's Ctrl-C flag every :data:`~steinax.particles.loop.interrupt.INTERRUPT_CHECK_EVERY` steps
(:mod:`steinax.particles.loop.interrupt`). The particles' moments at the last record before ``window_start`` are
carried out (the settle rule's snapshot, :func:`steinax.particles.loop.settle.settled_over`): no host round-trip.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._platform import on_cpu_else
from steinax.particles.loop.interrupt import INTERRUPT_CHECK_EVERY, interrupted
from steinax.particles.loop.progress import advance
from steinax.particles.loop.settle import particle_moments
from steinax.stein.ksd import ksd
from steinax.targets.base import evaluate

__all__ = ["compiled_segment", "initial_record"]


def _where_tree(pred, new, old):
    return jax.tree_util.tree_map(lambda a, b: jnp.where(pred, a, b), new, old)


def diagnostic_count(n: int, points: int | None) -> int:
    """How many particles a trace record evaluates (:func:`_diagnostic_subset`)."""
    return n if points is None or points >= n else len(range(0, (n // points) * points, n // points)[:points])


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
def compiled_segment(method, target, optimizer, diag_kernel, state, rng_key, run_id, interrupt_id, n_chunks, every, remainder,
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
            jax.debug.callback(advance, run_id, n_done, ordered=True)
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
def initial_record(method, target, diag_kernel, particles, rng_key, ksd_block):
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
