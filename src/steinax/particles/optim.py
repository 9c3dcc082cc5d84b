"""Optax glue: Liu & Wang's AdaGrad-with-momentum as an optax transformation.

All optimizers in steinax are optax ``GradientTransformation``\\ s. Particle
methods produce an ascent direction ``phi``; the run loop feeds ``-phi`` to the
optimizer as the "gradient" (optax minimises), so ``optax.sgd(eps)`` gives
``x <- x + eps * phi``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["ScaleByAdagradMomentumState", "scale_by_adagrad_momentum", "adagrad_momentum", "refuse_value_optimizers",
           "default_optimizer", "DEFAULT_LEARNING_RATE", "ScaleByIsotropicAdamState", "scale_by_isotropic_adam",
           "isotropic_adam"]

DEFAULT_LEARNING_RATE = 0.05
"""The default optimizer's learning rate (:func:`default_optimizer`)."""


class ScaleByAdagradMomentumState(NamedTuple):
    """State of :func:`scale_by_adagrad_momentum` (optax's NamedTuple state convention)."""

    count: jax.Array
    accumulator: optax.Updates


def scale_by_adagrad_momentum(alpha: float = 0.9, eps: float = 1e-6) -> optax.GradientTransformation:
    """Rescale updates by Liu & Wang's "AdaGrad with momentum" (``svgd.py``; ALGORITHMS.md section 0).

    .. math::

        G_1 = g_1^2, \\qquad G_t = \\alpha G_{t-1} + (1 - \\alpha) g_t^2 \\; (t > 1), \\qquad
        u_t = g_t / (\\epsilon + \\sqrt{G_t}).

    Note ``eps + sqrt(G)`` (not ``sqrt(G + eps)``), as in the reference code.
    Despite its name this is an RMSProp-like exponential average with a
    first-step initialisation, not AdaGrad's running sum.

    Args:
        alpha: the ``auto_corr`` decay of the reference code.
        eps: the ``fudge_factor`` of the reference code.
    """

    def init_fn(params):
        return ScaleByAdagradMomentumState(
            count=jnp.zeros((), jnp.int32), accumulator=jax.tree_util.tree_map(jnp.zeros_like, params)
        )

    def update_fn(updates, state, params=None):
        del params
        first = state.count == 0
        acc = jax.tree_util.tree_map(
            lambda g, a: jnp.where(first, g * g, alpha * a + (1.0 - alpha) * g * g), updates, state.accumulator
        )
        updates = jax.tree_util.tree_map(lambda g, a: g / (eps + jnp.sqrt(a)), updates, acc)
        return updates, ScaleByAdagradMomentumState(count=state.count + 1, accumulator=acc)

    return optax.GradientTransformation(init_fn, update_fn)


def adagrad_momentum(learning_rate: optax.ScalarOrSchedule, alpha: float = 0.9, eps: float = 1e-6):
    """Liu & Wang's optimizer: ``x <- x + lr * phi / (eps + sqrt(G))``.

    Example:
        >>> import steinax
        >>> opt = steinax.adagrad_momentum(0.1)   # as in svgd.py's update(stepsize=0.1)
    """
    return optax.chain(scale_by_adagrad_momentum(alpha, eps), optax.scale_by_learning_rate(learning_rate))


def refuse_value_optimizers(optimizer, name: str = "optimizer") -> None:
    """Refuse optax optimizers that need the objective's value (``optax.lbfgs``, ``reduce_on_plateau``, ...).

    A particle method has an update direction ``phi`` but no objective value: SVGD's direction
    is not the gradient of a function of the particles that steinax could evaluate. An update
    is traced once (``jax.eval_shape``, no computation) at a small input; an optimizer whose
    ``update`` asks for ``value`` / ``value_fn`` is refused by name.

    Raises:
        TypeError: naming ``name``, the missing arguments and what works instead.
    """
    params = jnp.zeros((2, 1), jnp.float32)
    try:
        jax.eval_shape(lambda p: optimizer.update(p, optimizer.init(p), p), params)
    except TypeError as exc:
        text = str(exc)
        if "required keyword-only argument" in text and ("'value'" in text or "'value_fn'" in text):
            raise TypeError(
                f"`{name}` needs the objective's value ({text.split(': ', 1)[-1].strip()}), as optax.lbfgs and "
                "reduce_on_plateau do; particle methods have a direction, not a value to minimise. Use an optimizer "
                "of the gradient alone: steinax.adagrad_momentum, optax.adam, optax.sgd, optax.rmsprop"
            ) from None
    except Exception:  # anything else surfaces where the optimizer is used, with its own message
        pass


def default_optimizer(learning_rate: float = DEFAULT_LEARNING_RATE) -> optax.GradientTransformation:
    """Adam with an injectable learning rate (the stopping rule halves it on a plateau)."""
    return optax.inject_hyperparams(optax.adam)(learning_rate=learning_rate)


class ScaleByIsotropicAdamState(NamedTuple):
    """State of :func:`scale_by_isotropic_adam`: the step count, the first moment (as the updates) and the second
    (one scalar per particle: the updates' shape with the last axis of length 1)."""

    count: jax.Array
    mu: optax.Updates
    nu: optax.Updates


def scale_by_isotropic_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> optax.GradientTransformation:
    """Adam with one second moment per particle: the mean over its coordinates of the squared update.

    .. math::

        m_t = b_1 m_{t-1} + (1 - b_1) g_t, \\qquad
        v_t = b_2 v_{t-1} + (1 - b_2) \\tfrac{1}{d} \\lVert g_{t,i} \\rVert^2, \\qquad
        u_t = \\frac{m_t / (1 - b_1^t)}{\\sqrt{v_t / (1 - b_2^t)} + \\epsilon}

    (Adam's bias-corrected moments, Kingma & Ba 2015, Algorithm 1, with ``v`` pooled over each row). Adam's
    coordinate-wise ``v`` makes a step depend on the coordinate axes: on particles rotated by an orthogonal ``Q``
    it does not move them by the rotated steps. This one does (``u(g Q) = u(g) Q``), so a particle method in whitened
    coordinates, where the whitening is known only up to a rotation, gives the same answer in any parameterisation
    (:class:`steinax.pipeline.WhitenedParticles`). Each particle keeps its own scale, as under Adam.

    Leaves are ``[..., d]`` (the last axis is the particle's coordinates).
    """

    def init_fn(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        nu = jax.tree_util.tree_map(lambda p: jnp.zeros(jnp.shape(p)[:-1] + (1,), jnp.result_type(p)), params)
        return ScaleByIsotropicAdamState(count=jnp.zeros((), jnp.int32), mu=zeros, nu=nu)

    def update_fn(updates, state, params=None):
        del params
        count = state.count + 1
        mu = jax.tree_util.tree_map(lambda g, m: b1 * m + (1.0 - b1) * g, updates, state.mu)
        nu = jax.tree_util.tree_map(lambda g, v: b2 * v + (1.0 - b2) * jnp.mean(g * g, axis=-1, keepdims=True),
                                    updates, state.nu)
        c1, c2 = 1.0 - b1 ** count, 1.0 - b2 ** count
        updates = jax.tree_util.tree_map(lambda m, v: (m / c1.astype(m.dtype)) / (jnp.sqrt(v / c2.astype(v.dtype)) + eps),
                                         mu, nu)
        return updates, ScaleByIsotropicAdamState(count=count, mu=mu, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def _isotropic_adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8):
    return optax.chain(scale_by_isotropic_adam(b1, b2, eps), optax.scale_by_learning_rate(learning_rate))


def isotropic_adam(learning_rate: float = DEFAULT_LEARNING_RATE, b1: float = 0.9, b2: float = 0.999,
                   eps: float = 0.05) -> optax.GradientTransformation:
    """:func:`scale_by_isotropic_adam` at ``learning_rate``, injectable as :func:`default_optimizer` is (the
    stopping rule halves it on a plateau); the default of :class:`steinax.pipeline.WhitenedParticles`.

    **Decided here:** ``eps = 0.05``, not Adam's ``1e-8``: this optimizer is meant for whitened coordinates, where
    the target's scale is 1, and there a direction much smaller than ``eps`` is stepped as by SGD with step
    ``learning_rate / eps`` (about 1) instead of being normalised. Normalising a direction that has settled to
    rounding (a run restarted at equilibrium, as a refit does) amplifies the rounding to a step of ``learning_rate``:
    measured on ``tests/pipeline/test_affine_invariance.py``'s banana, two parameterisations differed by
    ``2.6e-4`` sd after a refit with ``1e-8`` and ``7e-11`` with ``0.05``, and the settle rule stopped at the same
    steps."""
    return optax.inject_hyperparams(_isotropic_adam)(learning_rate=learning_rate, b1=b1, b2=b2, eps=eps)
