"""Complete-conditional SVGD (CC-SVGD; Singhal, Lahlou & Ranganath, arXiv 1904.04478, Lemma 3 / Algorithm 1).

Each coordinate ``i`` moves by a univariate kernel on that coordinate with the
**joint** score (ALGORITHMS.md section B):

.. math::

    \\phi_i(x) = \\frac{1}{n} \\sum_l \\left[ k(x_{l,i}, x_i)\\, \\partial_i \\log p(x_l)
                 + \\partial_{x_{l,i}} k(x_{l,i}, x_i) \\right],

which is SVGD with the diagonal matrix-valued kernel ``diag_i k(x_i, x'_i)``.
Coordinate ``i`` is therefore exactly the one-dimensional SVGD direction of
column ``i`` with score column ``i``; steinax computes it with the SVGD
engine (:func:`steinax.particles.svgd.stein_direction_rows`), one coordinate at
a time (:func:`steinax.kernels.base.map_coordinates`, shared with KCC-SD), so
memory is one ``[n, n]`` matrix, or ``d`` of them batched while ``n^2 d`` is small.

The kernel is resolved **per coordinate**: a median rule reads only that
coordinate's values. The default ``RBF("per_dimension")`` gives Pyro's
``h_i = median_{a<b} (x_{a,i} - x_{b,i})^2 / log(n + 1)`` (its ``mode="univariate"``).
A fixed bandwidth (a float, or a ``[d]`` vector) is used as given.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel, as_kernel, map_coordinates
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.svgd import _svgd, kernel_info

__all__ = ["cc_svgd_direction", "CCSVGD", "cc_svgd"]


@eqx.filter_jit
def _cc_svgd(particles, scores, kernel, block_size=None):
    def one(col, score_col, kernel_i):
        phi, k = _svgd(col, score_col, kernel_i, block_size)
        return phi[:, 0], kernel_info(k).get("bandwidth", jnp.zeros((), particles.dtype))

    phi_t, bandwidths = map_coordinates(one, particles, scores, kernel)
    return phi_t.T, bandwidths


def cc_svgd_direction(
    particles: jax.Array, scores: jax.Array, kernel: AbstractKernel | None = None, *, block_size: int | None = None
) -> jax.Array:
    """CC-SVGD direction (KCC-SD paper, Lemma 3), ``[n, d]``; default kernel ``RBF("per_dimension")``.

    ``block_size`` bounds each coordinate's pairwise work to O(block_size * n) memory.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_block_size(block_size)
    return _cc_svgd(particles, scores, as_kernel(kernel, RBF("per_dimension")), block_size)[0]


class CCSVGD(AbstractParticleMethod):
    """CC-SVGD as a particle method (see :func:`cc_svgd`)."""

    kernel: AbstractKernel
    block_size: int | None = None

    def __check_init__(self):
        as_kernel(self.kernel, None)
        check_block_size(self.block_size)

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        phi, bandwidths = _cc_svgd(particles, scores, self.kernel, self.block_size)
        return phi, aux, {"bandwidth": jnp.mean(bandwidths)}


def cc_svgd(kernel: AbstractKernel | None = None, *, block_size: int | None = None) -> CCSVGD:
    """Complete-conditional SVGD with a univariate kernel per coordinate.

    Args:
        kernel: the univariate base kernel: ``RBF("per_dimension")`` (default,
            per-coordinate median), ``RBF(h)`` with a float or a ``[d]`` vector of
            fixed bandwidths, any median rule (applied per coordinate), or ``IMQ``.
        block_size: rows per block in each coordinate's pairwise work (large ``n``).
    """
    return CCSVGD(kernel=as_kernel(kernel, RBF("per_dimension")), block_size=block_size)
