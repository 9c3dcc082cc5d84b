"""The unrolled loop: a particle method's own step with ``optax.sgd`` driven by the trainable steps, inside
``lax.scan`` (rematerialised in the backward pass by default); the training problem."""

from __future__ import annotations

from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from steinax.unfold.schedule import _check_horizon



class Problem(eqx.Module):
    """One training problem: initial particles ``[n, d]``, optionally its own target and data for the loss.

    ``target=None`` uses the trainer's ``target``. ``data`` is whatever the loss
    reads: reference samples for :func:`mmd_loss`, ``(X, y)`` for
    :func:`cross_entropy_loss` and :func:`mse_loss`.
    """

    particles: jax.Array
    target: Any = None
    data: Any = None




def _default_method():
    from steinax.particles import svgd

    return svgd()


def trajectory(
    method,
    target,
    particles: jax.Array,
    optimizer: optax.GradientTransformation,
    rng_key: jax.Array,
    num_steps: int,
    *,
    record: Callable | None = None,
    remat: bool = False,
):
    """``num_steps`` iterations of ``method`` with ``optimizer`` in one ``lax.scan`` (pure, differentiable).

    The loop of :func:`unroll`, for any optax optimizer (the RMSProp and
    fixed-step baselines of the experiments use it too). Returns the final
    particles, and ``[num_steps, ...]`` of ``record(particles)`` after each step
    when ``record`` is given.
    """
    from steinax.targets.base import as_target

    num_steps = _check_horizon(num_steps, "num_steps")
    target = as_target(target)  # a plain log-density function is a target, as in `steinax.run`
    state = method.init(particles, optimizer, target)

    def body(state, key):
        state, _ = method.step(key, state, target, optimizer)
        return state, (None if record is None else record(state.particles))

    if remat:
        body = jax.checkpoint(body)
    state, recorded = jax.lax.scan(body, state, jax.random.split(rng_key, num_steps))
    return state.particles if record is None else (state.particles, recorded)


def unroll(
    steps: jax.Array,
    method,
    target,
    particles: jax.Array,
    rng_key: jax.Array,
    *,
    num_steps: int | None = None,
    record: Callable | None = None,
    remat: bool = True,
):
    """Run ``num_steps`` (default ``T``) iterations ``x + steps[t mod T] phi(x)``, differentiably.

    :func:`trajectory` with ``optax.sgd`` driven by ``steps`` (``jax.checkpoint``
    on the scan body when ``remat``): ``jax.grad`` with respect to ``steps``
    backpropagates through the iterations.

    Returns:
        The final particles, or ``(final particles, [num_steps, ...] record(particles) after each step)``
        when ``record`` is given (e.g. the MMD to reference samples at every iteration).
    """
    steps = jnp.asarray(steps)
    T = steps.shape[0]
    num_steps = T if num_steps is None else num_steps
    optimizer = optax.sgd(lambda count: steps[count % T])
    return trajectory(method, target, particles, optimizer, rng_key, num_steps, record=record, remat=remat)


# --------------------------------------------------------------------------- training
