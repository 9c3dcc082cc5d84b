"""Checkpoints of a fixed-length run, as a service: open (start or resume, refusing another run's file), save.

:class:`RunCheckpoint` is what :func:`steinax.particles.loop.fixed.run_fixed` composes with. What a checkpoint must
match to be resumed is in two parts (see :mod:`steinax.runtime.checkpoint`): a readable fingerprint (:func:`run_fingerprint`:
the method's configuration, the target's type, the particles' shape and dtype, the key, the trace spacing, the x64
mode, the mesh, the initial particles) and a behaviour probe (:func:`probe`: the target's log-density and score and
the optimizer's update at fixed points), compared on resume within rounding. :class:`NoCheckpoint` stands in when
there is no file, so the loop saves the same way in both cases.
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._io import check_writable
from steinax.runtime.checkpoint import (OPTIMIZER_LABELS, CheckpointMismatchError, compare_behaviour, computation_fingerprint,
                                fingerprint_tree, load_checkpoint, optimizer_signature, save_checkpoint, update_from,
                                without_addresses)
from steinax.particles.loop.options import positive_int
from steinax.targets.base import evaluate

__all__ = ["RunCheckpoint", "NoCheckpoint", "open_checkpoint", "run_fingerprint", "probe", "stored_trace_every"]


class NoCheckpoint:
    """No checkpoint file: the run is one segment of ``every`` (= its length) steps, and saving does nothing."""

    def __init__(self, every: int):
        self.every = every

    def save(self, state, trace, rng_key, end_step, optimizer) -> None:
        del state, trace, rng_key, end_step, optimizer


class RunCheckpoint:
    """A run's checkpoint file (module docstring): segments of ``every`` steps, each ended by :meth:`save`."""

    def __init__(self, path: str, every: int, fingerprint: dict, stored_probe: dict):
        self.path, self.every, self.fingerprint, self.probe = path, every, fingerprint, stored_probe

    def save(self, state, trace, rng_key, end_step, optimizer) -> None:
        """Write the state, the trace so far, the key and the probe atomically (:mod:`steinax.runtime.checkpoint`)."""
        _save_run(self.path, state, trace, rng_key, self.fingerprint, end_step, self.probe, optimizer)


def open_checkpoint(path, every, run, state, diagnostic_points, end_step):
    """``(service, state, prior_trace)``: a :class:`NoCheckpoint` without ``path``; else a :class:`RunCheckpoint`
    started afresh (writability checked before any work: a late failure would lose the run) or resumed from the file,
    whose fingerprint and probe must match (:class:`~steinax.runtime.checkpoint.CheckpointMismatchError` names what differs).

    ``run`` is ``(method, target, optimizer, rng_key, steps, trace_every, diag_kernel)``; ``every`` the steps between
    checkpoints (default: about a tenth of the run, a multiple of ``trace_every``)."""
    method, target, optimizer, rng_key, steps, trace_every, diag_kernel = run
    if path is None:
        if every is not None:
            raise ValueError("`checkpoint_every` needs `checkpoint` (a file path)")
        return NoCheckpoint(steps), state, None
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`checkpoint` must be a file path (str or os.PathLike) or None; received "
                        f"{type(path).__name__} {path!r}")
    path = os.fspath(path)
    every = positive_int(trace_every * max(1, (steps // 10) // trace_every) if every is None else every,
                         "checkpoint_every")
    if every % trace_every:
        raise ValueError(f"`checkpoint_every` must be a multiple of `trace_every` = {trace_every} (so a resumed trace "
                         f"equals an uninterrupted one); received {every}")
    fingerprint = run_fingerprint(method, target, state, optimizer, rng_key, trace_every, diag_kernel, int(state.step))
    fingerprint["diagnostic_points"] = diagnostic_points
    fingerprint["initial_particles"] = fingerprint_tree(state.particles)  # a new x0 of the same shape is refused
    check_writable(path, _tree_bytes(state))  # before any work: a late failure would lose it
    if not os.path.exists(path):
        return RunCheckpoint(path, every, fingerprint, probe(target, optimizer, state.particles[:_PROBE_POINTS])), \
            state, None
    state, prior_trace, stored = _load_run(path, state, fingerprint, target, optimizer)
    if int(state.step) > end_step:
        raise CheckpointMismatchError(f"checkpoint {path!r} holds step {int(state.step)}, beyond the {end_step} steps "
                                      f"asked for; ask for steps >= {int(state.step) - int(fingerprint['start_step'])} "
                                      "or use another path")
    return RunCheckpoint(path, every, fingerprint, stored), state, prior_trace


def run_fingerprint(method, target, state, optimizer, rng_key, trace_every, diag_kernel, start_step) -> dict:
    """What a checkpoint of :func:`run` must match to be resumed (see :mod:`steinax.runtime.checkpoint`).

    Readable entries (the method's configuration, the x64 flag, the mesh) name what differs;
    what a hash cannot see (a plain function's code, its closure, module globals, data,
    an optax optimizer's hyperparameters, which live in closures) is checked by behaviour:
    :func:`probe`.
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
def probe(target, optimizer, points) -> dict:
    """How the target and the optimizer behave at fixed inputs: the log-density (NaN for a score-only
    target) and score at ``points`` (a few initial particles; key 0 for a stochastic target) and the
    optimizer's :func:`~steinax.runtime.checkpoint.optimizer_signature` there. Stored in the checkpoint and recomputed
    at the stored points on resume: an edited log-density, other data, a changed closure or global, or other
    optimizer hyperparameters (a schedule included) behave differently."""
    logd, scores = evaluate(target, jax.random.key(0), points)
    logd = jnp.full(points.shape[:1], jnp.nan, points.dtype) if logd is None else logd
    return {"points": points, "logdensity": logd, "score": scores, "update": optimizer_signature(optimizer, points)}


_resume_update = eqx.filter_jit(update_from)

_PROBE_LABELS = {"logdensity": "the target's log-density", "score": "the target's score", **OPTIMIZER_LABELS}


def _check_probe(path, stored: dict, target, optimizer, state) -> None:
    now = dict(probe(target, optimizer, jnp.asarray(stored["points"])),
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


def _save_run(path, state, trace, rng_key, fingerprint, end_step, stored_probe, optimizer):
    meta = dict(fingerprint, step=int(state.step), end_step=end_step)
    stored_probe = dict(stored_probe, resume_update=_resume_update(optimizer, state.particles, state.opt_state))
    save_checkpoint(path, {"state": state, "trace": trace, "rng_key": rng_key, "probe": stored_probe}, meta)


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


def stored_trace_every(path) -> int | None:
    """The trace spacing a run's checkpoint at ``path`` was written with (None for another kind of file: the
    fingerprint check then names what differs)."""
    from steinax.runtime.checkpoint import read_meta

    meta = read_meta(path)
    value = meta.get("trace_every") if meta.get("kind") == "steinax.run" else None
    return int(value) if isinstance(value, int) and value >= 1 else None
