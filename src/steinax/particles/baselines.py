"""Baselines on the particle interface: an ensemble of independent MAP (maximum a posteriori) ascents.

``map_ascent()`` moves every particle along its own score, ``phi(x_i) = nabla log p(x_i)``:
SVGD's direction without the kernel (its self term with a bandwidth going to 0, times n).
With any optax optimizer it is an ensemble of independent MAP fits, the "MAP" row of the
papers' tables, run through the same loop, trace and checkpoints as the Stein methods.
"""

from __future__ import annotations

import jax.numpy as jnp

from steinax.particles.base import AbstractParticleMethod

__all__ = ["MAPAscent", "map_ascent"]


class MAPAscent(AbstractParticleMethod):
    """Independent gradient ascent of the log-density for each particle (see :func:`map_ascent`)."""

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key, particles
        return scores, aux, {"score_norm": jnp.sqrt(jnp.mean(jnp.sum(scores * scores, axis=1)))}


def map_ascent() -> MAPAscent:
    """An ensemble of MAP fits: ``phi(x_i) = nabla log p(x_i)`` (no interaction between particles).

    Example:
        >>> import jax, jax.numpy as jnp, optax, steinax
        >>> res = steinax.run(steinax.map_ascent(), lambda x: -0.5 * jnp.sum((x - 2.0) ** 2),
        ...                   jnp.zeros((3, 2)), steps=200, optimizer=optax.sgd(0.1), rng_key=jax.random.key(0))
        >>> bool(jnp.allclose(res.particles, 2.0, atol=1e-4))
        True
    """
    return MAPAscent()
