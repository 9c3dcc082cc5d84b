"""A BlackJAX-style ``init``/``step`` pair, for users who write their own loops.

:func:`steinax.run` compiles the whole loop, traces diagnostics and checks finiteness; a user
who wants the loop in their own hands (to interleave a schedule, log their own metrics, or stop
on their own rule) gets the same update as a pair of pure functions with a target and an
optimizer bound, BlackJAX's ``SamplingAlgorithm`` convention::

    algo = steinax.sampling_algorithm(steinax.svgd(), target, optax.adam(0.05))
    state = algo.init(particles)
    state, info = algo.step(rng_key, state)      # jit-able; info.direction_norm, info.finite

``step`` is :meth:`~steinax.particles.AbstractParticleMethod.step` itself: with the keys of
:func:`steinax.run` (step ``t`` uses ``fold_in(split(rng_key)[0], t - 1)``) the particles are
``run``'s to rounding. The state ``init`` makes carries its optimizer's signature (``state.origin``,
:func:`steinax.runtime.checkpoint.optimizer_signature`): ``step`` refuses a state of another optimizer, by
its shapes when tracing and by its behaviour (another learning rate or schedule) when run
(``eqx.error_if``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import equinox as eqx
import jax

from steinax.particles.base import (ORIGIN_MESSAGE, AbstractParticleMethod, ParticleState, check_optimizer_state,
                                    origin_differs, origin_of)
from steinax.targets.base import as_target

__all__ = ["SamplingAlgorithm", "sampling_algorithm"]


class SamplingAlgorithm(NamedTuple):
    """``init(particles) -> ParticleState`` and ``step(rng_key, state) -> (ParticleState, StepInfo)``."""

    init: Callable
    step: Callable


def sampling_algorithm(method: AbstractParticleMethod, target, optimizer) -> SamplingAlgorithm:
    """The ``init``/``step`` pair of ``method`` on ``target`` with ``optimizer`` (module docstring).

    Args:
        method: a particle method (``steinax.svgd()``, ...).
        target: a log-density of one ``[d]`` point or a steinax target.
        optimizer: an optax optimizer of the direction (``steinax.adagrad_momentum(0.05)``, ``optax.adam``).

    Example:
        >>> import jax, jax.numpy as jnp, optax, steinax
        >>> algo = steinax.sampling_algorithm(steinax.svgd(), lambda x: -0.5 * jnp.sum(x**2), optax.adam(0.1))
        >>> state = algo.init(jax.random.normal(jax.random.key(0), (50, 2)) + 3.0)
        >>> step = jax.jit(algo.step)
        >>> for t in range(200):
        ...     state, info = step(jax.random.key(t), state)
        >>> bool(jnp.abs(state.particles.mean(0)).max() < 0.3)
        True
    """
    if not isinstance(method, AbstractParticleMethod):
        raise TypeError(f"`method` must be a steinax particle method (steinax.svgd(), ...); received "
                        f"{type(method).__name__}")
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"`optimizer` must be an optax GradientTransformation; received {type(optimizer).__name__}")
    tgt = as_target(target)

    def init(particles: jax.Array):
        state = method.init(particles, optimizer, tgt)
        return dataclasses.replace(state, origin=origin_of(optimizer, state.particles))

    def step(rng_key: jax.Array, state):
        if not isinstance(state, ParticleState):
            raise TypeError(f"`state` must be the ParticleState of `init` or of a previous `step`; received "
                            f"{type(state).__name__}")
        check_optimizer_state(optimizer, state, "state")  # shapes: at trace time, before optax's own errors
        state = eqx.error_if(state, origin_differs(optimizer, state), f"`state`: {ORIGIN_MESSAGE}")
        return method.step(rng_key, state, tgt, optimizer)

    return SamplingAlgorithm(init=init, step=step)
