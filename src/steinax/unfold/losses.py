"""Training losses of the final particles: MMD to reference samples, and the cross-entropy or squared error of a
model's predictions averaged over the particles."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp




def mmd_loss(bandwidth: float = 2.0) -> Callable:
    """Loss ``MMD^2`` (V-statistic, :func:`steinax.metrics.mmd2`) between the particles and ``problem.data``.

    The kernel is ``exp(-||x - x'||^2 / bandwidth)``; the paper's
    ``k'(x, x') = exp(-||x - x'||^2 / 2)`` (eq. 14-15) is the default ``bandwidth=2``.
    """
    from steinax.metrics import mmd2

    def loss(particles, problem):
        return mmd2(particles, problem.data, bandwidth)

    return loss


def cross_entropy_loss(logits: Callable) -> Callable:
    """Loss: cross-entropy of the particle-averaged predictive probability on ``problem.data = (X, y)`` (eq. 21).

    ``logits(theta, X) -> [N]`` for one particle (e.g. ``LogisticRegression(...).logits``);
    ``y`` in {0, 1}. ``p(y | x) = mean_i sigma(+-z_i(x))`` is averaged in log space
    (logsumexp), so a confident wrong particle does not give ``log 0``.
    """

    def loss(particles, problem):
        X, y = problem.data
        sign = 2.0 * jnp.asarray(y, particles.dtype) - 1.0
        log_terms = jax.vmap(lambda t: jax.nn.log_sigmoid(sign * logits(t, X)))(particles)
        log_p = jax.scipy.special.logsumexp(log_terms, axis=0) - jnp.log(particles.shape[0])
        return -jnp.mean(log_p)

    return loss


def mse_loss(predict: Callable) -> Callable:
    """Loss: mean squared error of the particle-averaged prediction on ``problem.data = (X, y)``.

    ``predict(theta, X) -> [N]`` for one particle (e.g. ``BNNRegression(...).predict``).
    """

    def loss(particles, problem):
        X, y = problem.data
        pred = jnp.mean(jax.vmap(lambda t: predict(t, X))(particles), axis=0)
        return jnp.mean((pred - y) ** 2)

    return loss


# --------------------------------------------------------------------------- the unrolled loop
