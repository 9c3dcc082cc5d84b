"""The trainers: DUSVGD (the paper's Algorithm 2, incremental) and C-DUSVGD (the Chebyshev schedule's two
parameters), with checkpoints, progress and Ctrl-C through the run loop's services."""

from __future__ import annotations

import math
import os
import time
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.progress import progress_bar
from steinax.unfold.schedule import Schedule, TrainingDivergedError, TrainingLog, _check_horizon, chebyshev_steps
from steinax.unfold.unroll import Problem, _default_method, unroll



def _problem_sampler(problems):
    """``sample(key, batch_size) -> batched Problem`` from a callable or a stacked :class:`Problem`."""
    if callable(problems) and not isinstance(problems, Problem):
        return lambda key, b: jax.vmap(problems)(jax.random.split(key, b))
    if isinstance(problems, Problem):
        count = jnp.shape(problems.particles)[0] if jnp.ndim(problems.particles) == 3 else None
        if count is None:
            raise ValueError(
                "`problems` as a Problem must stack problems along a leading axis (particles [P, n, d]); "
                f"received particles of shape {jnp.shape(problems.particles)}"
            )

        def sample(key, b):
            if b > count:
                raise ValueError(f"`batch_size` ({b}) exceeds the number of stacked problems ({count})")
            idx = jax.random.choice(key, count, (b,), replace=False)
            return jax.tree.map(lambda a: a[idx], problems)

        return sample
    raise TypeError(
        "`problems` must be a function key -> Problem or a Problem stacked along a leading axis; "
        f"received {type(problems).__name__}"
    )


def _batch_loss(steps, problems, loss, method, target, key, num_steps, remat):
    """Mean loss over a batch of problems after ``num_steps`` unrolled iterations."""
    b = jnp.shape(problems.particles)[0]

    def one(problem, k):
        tgt = target if problem.target is None else problem.target
        x = unroll(steps, method, tgt, problem.particles, k, num_steps=num_steps, remat=remat)
        return loss(x, problem)

    return jnp.mean(jax.vmap(one)(problems, jax.random.split(key, b)))


def _check_loss(loss, problems_batch, target):
    if not callable(loss):
        raise TypeError(f"`loss` must be a function (particles, problem) -> scalar; received {type(loss).__name__}")
    problem = jax.tree.map(lambda a: a[0], problems_batch)
    tgt = target if problem.target is None else problem.target
    if tgt is None:
        raise ValueError("no target: pass `target=` or give each Problem its own `target`")
    out = jax.eval_shape(lambda p: loss(p.particles, p), problem)
    if not hasattr(out, "shape") or out.shape != ():
        shape = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"`loss` must return a scalar; it returned {shape}")


def _check_optimizer(optimizer, default_lr):
    if optimizer is None:
        return optax.adam(default_lr)
    if isinstance(optimizer, (int, float)) and not isinstance(optimizer, bool):
        return optax.adam(float(optimizer))
    if not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(
            f"`optimizer` must be an optax GradientTransformation or a learning rate for Adam; received {optimizer!r}"
        )
    return optimizer


def _check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1; received {value!r}")
    return int(value)


def _check_training(T, epochs, batch_size, method, optimizer, default_lr, rng_key):
    """The trainers' shared arguments, checked and defaulted."""
    return (
        _check_horizon(T),
        _check_positive_int(epochs, "epochs"),
        _check_positive_int(batch_size, "batch_size"),
        _default_method() if method is None else method,
        _check_optimizer(optimizer, default_lr),
        jax.random.key(0) if rng_key is None else rng_key,
    )


def _training_fingerprint(name, params, stages, epochs, batch_size, method, target, opt_state, rng_key) -> dict:
    """What must match for a checkpoint to be resumed: the trainer, its settings, the initial parameters, the
    method and target (as pytrees), the optimizer state's structure and the key; the optimizer's hyperparameters, the
    problems' initial particles and the loss by behaviour (:func:`_training_probe`)."""
    from steinax.runtime.checkpoint import computation_fingerprint, fingerprint_tree

    return {"kind": name, "stages": list(map(int, stages)), "epochs": int(epochs), "batch_size": int(batch_size),
            "initial": fingerprint_tree(params), **computation_fingerprint(method, target, opt_state, rng_key)}


_TRAINING_LABELS = {"particles": "the problems' initial particles (the first problem of the fixed probe batch)",
                    "loss": "the loss at those particles (the problems' data, or the loss function)"}


def _training_probe(problem_batch, loss, signature, resume_update) -> dict:
    """What a trainer's checkpoint stores to be compared by behaviour on resume: the optimizer's signature and update
    from the state (:func:`steinax.runtime.checkpoint.optimizer_signature`), and the first problem of a fixed batch with the
    loss at its initial particles (another ``x0``, other data or another loss)."""
    problem = jax.tree.map(lambda a: a[0], problem_batch)
    return {"loss": jnp.asarray(loss(problem.particles, problem)), "particles": problem.particles,
            "resume_update": resume_update, "update": signature}


def _check_training_probe(path, stored_leaves, now: dict) -> None:
    """Refuse a trainer's checkpoint whose probe (:func:`_training_probe`) behaves differently now, naming what."""
    from steinax.runtime.checkpoint import OPTIMIZER_LABELS, CheckpointMismatchError, compare_behaviour

    structure = jax.tree_util.tree_structure(now)  # a dict's leaves flatten in key order
    if len(stored_leaves) != structure.num_leaves:
        raise CheckpointMismatchError(f"checkpoint {path!r} holds another probe (written by another version); use "
                                      "another path or delete it")
    stored = jax.tree_util.tree_unflatten(structure, stored_leaves)
    diffs = compare_behaviour(stored, now, {**_TRAINING_LABELS, **OPTIMIZER_LABELS})
    if diffs:
        raise CheckpointMismatchError(f"checkpoint {path!r} was written by another training and is not resumed: "
                                      + "; ".join(diffs) + ". Use another checkpoint path, or delete the file to start "
                                      "afresh.")


def _check_checkpoint_args(checkpoint, checkpoint_every):
    if isinstance(checkpoint, bool):
        raise TypeError(f"`checkpoint` is a file path for resumable training (as in steinax.run); received {checkpoint!r}. "
                        "The rematerialisation flag that held this name is now `remat`")
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"`checkpoint` must be a file path or None; received {type(checkpoint).__name__}")
    return _check_positive_int(checkpoint_every, "checkpoint_every")


def _train(params, to_steps, T, stages, problems, loss, *, method, target, epochs, batch_size, optimizer,
           rng_key, remat, progress, name, make_schedule, checkpoint=None, checkpoint_every=50):
    """The trainers' loop: ``epochs`` optimizer updates per stage (``stages`` lists ``t'``), one compiled update.

    With ``checkpoint`` (a path) the loop state is saved every ``checkpoint_every`` epochs and at the end, and
    resumed from there when the file exists and was written by the same training (fingerprint): the resumed
    loop draws the same keys, so it returns what an uninterrupted one returns.
    """
    from steinax.runtime.checkpoint import load_checkpoint, optimizer_signature, save_checkpoint, update_from

    sample = _problem_sampler(problems)
    key_check, rng_key = jax.random.split(rng_key)
    probe_batch = sample(key_check, 1)
    _check_loss(loss, probe_batch, target)
    opt_state = optimizer.init(params)

    @eqx.filter_jit
    def update(params, opt_state, key, stage):
        # stage t' unrolls T steps with eps^(t) = 0 for t >= t': the particles stop at x^(t') (the loss is the
        # loss at x^(t')), those steps get zero gradient, and one compiled update serves every stage
        key_batch, key_run = jax.random.split(key)
        batch = sample(key_batch, batch_size)

        def stage_loss(p):
            steps = to_steps(p)
            steps = jnp.where(jnp.arange(T) < stage, steps, jnp.zeros_like(steps))
            return _batch_loss(steps, batch, loss, method, target, key_run, T, remat)

        value, grad = jax.value_and_grad(stage_loss)(params)
        updates, opt_state = optimizer.update(grad, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    losses, stage_of, done, elapsed = [], [], 0, 0.0  # done: epochs completed over all stages
    total = len(stages) * epochs
    if checkpoint is not None:
        fingerprint = _training_fingerprint(name, params, stages, epochs, batch_size, method, target, opt_state,
                                            rng_key)
        signature = optimizer_signature(optimizer, params)  # at the initial parameters, as stored
        if os.path.exists(checkpoint):
            trees, meta = load_checkpoint(checkpoint, {"params": params, "opt_state": opt_state, "rng_key": rng_key,
                                                       "losses": None, "stage_of": None, "probe": None}, fingerprint)
            params, opt_state, rng_key = trees["params"], trees["opt_state"], trees["rng_key"]
            _check_training_probe(checkpoint, trees["probe"], _training_probe(
                probe_batch, loss, signature, update_from(optimizer, params, opt_state)))
            losses = [float(v) for v in np.asarray(trees["losses"][0]).ravel()] if trees["losses"] else []
            stage_of = [int(v) for v in np.asarray(trees["stage_of"][0]).ravel()] if trees["stage_of"] else []
            done, elapsed = int(meta["epochs_done"]), float(meta["seconds"])

    def save(count, seconds):
        probe = _training_probe(probe_batch, loss, signature, update_from(optimizer, params, opt_state))
        save_checkpoint(checkpoint, {"params": params, "opt_state": opt_state, "rng_key": rng_key,
                                     "losses": np.asarray(losses, np.float64), "stage_of": np.asarray(stage_of, np.int64),
                                     "probe": probe},
                        dict(fingerprint, epochs_done=count, seconds=seconds))

    start = time.perf_counter() - elapsed
    with progress_bar(progress, total, name, leave=False, unit="epoch") as bar, interrupt_scope() as scope:
        bar.update(done)
        for i in range(done, total):
            if scope.requested:  # Ctrl-C: stop at the epoch's boundary, with every finished epoch in the checkpoint
                if checkpoint is not None and i > done:
                    save(i, time.perf_counter() - start)
                scope.honoured = True
                raise KeyboardInterrupt(f"{name}: interrupted (Ctrl-C) after {i} of {total} epochs" + (
                    f"; {checkpoint!r} holds them: the same call resumes" if checkpoint is not None else
                    " (pass `checkpoint=` to keep finished epochs across an interruption)"))
            stage, epoch = stages[i // epochs], i % epochs
            rng_key, key = jax.random.split(rng_key)
            previous = params
            params, opt_state, value = update(params, opt_state, key, jnp.asarray(stage))
            value = float(value)
            if not (math.isfinite(value) and bool(jnp.all(jnp.isfinite(to_steps(params))))):
                log = TrainingLog(np.asarray(losses), np.asarray(stage_of, np.int64), time.perf_counter() - start)
                raise TrainingDivergedError(
                    f"{name}: the loss or the step sizes became non-finite at stage t' = {stage}, epoch {epoch + 1} "
                    f"(loss {value}, steps {np.asarray(to_steps(params)).tolist()}); lower the learning rate "
                    "or the initial steps (the error's `schedule` holds the last finite one)",
                    make_schedule(previous, log),
                )
            losses.append(value)
            stage_of.append(stage)
            if checkpoint is not None and ((i + 1) % checkpoint_every == 0 or i + 1 == total):
                save(i + 1, time.perf_counter() - start)
            bar.update(1, stage=stage, loss=f"{value:.4g}")
    seconds = time.perf_counter() - start
    return params, np.asarray(losses), np.asarray(stage_of), seconds


def train_dusvgd(
    problems,
    loss: Callable,
    T: int,
    *,
    method=None,
    target=None,
    epochs: int = 10,
    batch_size: int = 1,
    optimizer: optax.GradientTransformation | float | None = None,
    init: float | jax.Array = 2.0,
    incremental: bool = True,
    rng_key: jax.Array | None = None,
    remat: bool = True,
    progress: bool = False,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 50,
) -> Schedule:
    """Learn ``T`` step sizes by backpropagating through unrolled SVGD (DUSVGD, the paper's Algorithm 2).

    Args:
        problems: a function ``key -> Problem`` (one random training problem: initial
            particles, and the data the loss reads), or a :class:`Problem` whose
            leaves stack ``P`` problems along a leading axis (minibatches drawn
            without replacement).
        loss: ``loss(final particles, problem) -> scalar`` (:func:`mmd_loss`,
            :func:`cross_entropy_loss`, :func:`mse_loss` or your own).
        T: the number of trainable steps (unrolled iterations).
        method: any steinax particle method whose direction is differentiable
            (default ``steinax.svgd()``).
        target: the target of every problem whose ``Problem.target`` is ``None``.
        epochs: ``E``, optimizer updates per stage; each draws a fresh minibatch.
        batch_size: ``B``, problems per minibatch (the loss is their mean).
        optimizer: optax optimizer of the step sizes, or a learning rate for Adam (default Adam(1e-2)).
        init: initial step size(s), a scalar or ``[T]``.
        incremental: train stage by stage, ``t' = 1 ... T`` (``E`` epochs each, the loss
            at ``x^{(t')}``); ``False``: ``E`` epochs on the loss at ``x^{(T)}`` only.
        rng_key: PRNG key (default ``jax.random.key(0)``).
        remat: rematerialise each unrolled step in the backward pass (memory O(T n d + n^2)).
        progress: show a progress bar over epochs.
        checkpoint: a file path: the training state is saved there every ``checkpoint_every`` epochs and
            at the end (atomically, :mod:`steinax.runtime.checkpoint`), and a call with the same arguments
            resumes from it and returns what an uninterrupted call returns. The fingerprint compares
            the settings, initial values, method, target, optimizer state and key, and the optimizer's
            behaviour (its update at steps 0 to 10^6 and at the epoch resumed from:
            :func:`steinax.runtime.checkpoint.optimizer_signature`; another learning rate or schedule is
            refused, naming it), and the first problem of a fixed batch with the loss at its initial
            particles (another ``x0``, other data or another loss is refused). What no probe sees: a
            change to ``problems`` or ``loss`` away from that problem. A finished training's file returns
            its schedule at once.
        checkpoint_every: epochs between saves.

    Returns:
        A :class:`Schedule` (``kind="dusvgd"``) with the training log.
    """
    T, epochs, batch_size, method, optimizer, rng_key = _check_training(T, epochs, batch_size, method, optimizer,
                                                                        1e-2, rng_key)
    checkpoint_every = _check_checkpoint_args(checkpoint, checkpoint_every)
    if jnp.shape(jnp.asarray(init)) not in ((), (T,)):
        raise ValueError(f"`init` must be a scalar or have shape ({T},); received shape {jnp.shape(jnp.asarray(init))}")
    steps0 = jnp.broadcast_to(jnp.asarray(init, jnp.result_type(float)), (T,))
    if not bool(jnp.all(jnp.isfinite(steps0))):
        raise ValueError(f"`init` must be finite; received {np.asarray(init).tolist()}")
    stages = list(range(1, T + 1)) if incremental else [T]
    params, losses, stage_of, seconds = _train(
        steps0, lambda p: p, T, stages, problems, loss, method=method, target=target, epochs=epochs,
        batch_size=batch_size, optimizer=optimizer, rng_key=rng_key, remat=remat, progress=progress,
        checkpoint=checkpoint, checkpoint_every=checkpoint_every,
        name="train_dusvgd", make_schedule=lambda p, log: Schedule(p, "dusvgd", log=log),
    )
    settings = (("T", T), ("batch_size", batch_size), ("epochs", epochs), ("incremental", incremental),
                ("init", float(np.asarray(steps0)[0])), ("method", type(method).__name__))
    return Schedule(params, "dusvgd", log=TrainingLog(losses, stage_of, seconds, settings))


def train_chebyshev(
    problems,
    loss: Callable,
    T: int,
    *,
    method=None,
    target=None,
    epochs: int = 40,
    batch_size: int = 1,
    optimizer: optax.GradientTransformation | float | None = None,
    alpha: float = 0.3,
    beta: float = 1.0,
    rng_key: jax.Array | None = None,
    remat: bool = True,
    progress: bool = False,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 50,
) -> Schedule:
    """Learn the two Chebyshev parameters ``(alpha, beta)`` of C-DUSVGD (eq. 9-12) on the loss at ``x^{(T)}``.

    Arguments (``checkpoint`` included) as :func:`train_dusvgd`; ``alpha``, ``beta`` are the initial
    parameters (the paper's Gaussian-mixture values by default) and the
    default optimizer is Adam(1e-3).

    Returns:
        A :class:`Schedule` (``kind="chebyshev"``) carrying the learned ``alpha``, ``beta`` and the training log.
    """
    T, epochs, batch_size, method, optimizer, rng_key = _check_training(T, epochs, batch_size, method, optimizer,
                                                                        1e-3, rng_key)
    checkpoint_every = _check_checkpoint_args(checkpoint, checkpoint_every)
    params0 = jnp.asarray([alpha, beta], jnp.result_type(float))
    if not bool(jnp.all(jnp.isfinite(params0))) or float(alpha) == 0.0:
        raise ValueError(f"`alpha` must be finite and non-zero and `beta` finite; received alpha={alpha!r}, beta={beta!r}")
    to_steps = lambda p: chebyshev_steps(p[0], p[1], T)  # noqa: E731
    params, losses, stage_of, seconds = _train(
        params0, to_steps, T, [T], problems, loss, method=method, target=target, epochs=epochs,
        batch_size=batch_size, optimizer=optimizer, rng_key=rng_key, remat=remat, progress=progress,
        checkpoint=checkpoint, checkpoint_every=checkpoint_every,
        name="train_chebyshev", make_schedule=lambda p, log: Schedule.chebyshev(p[0], p[1], T, log=log),
    )
    settings = (("T", T), ("batch_size", batch_size), ("epochs", epochs), ("alpha0", float(alpha)),
                ("beta0", float(beta)), ("method", type(method).__name__))
    return Schedule.chebyshev(params[0], params[1], T, log=TrainingLog(losses, stage_of, seconds, settings))
