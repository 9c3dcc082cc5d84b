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

**Kernel sums** (``sums="auto"``, the default). For the RBF kernel with the
``"per_dimension"`` rule or a fixed bandwidth, a coordinate's two sums are
evaluated by Chebyshev interpolation of the univariate kernel
(:mod:`steinax.kernels.interpolation`): ``O(n D)`` work instead of ``n^2``
exponentials. The degree ``D`` is chosen at run time from a fixed ladder, the
smallest whose a-priori bound keeps every kernel value within the dtype's unit
roundoff on every coordinate; a coordinate that no degree covers (data spread over
very many bandwidths) is summed directly. The result therefore equals the direct
sums to float tolerance. The interpolation is used where it is cheaper (``D + 1 <= n / 4``);
``sums="direct"`` always sums directly. Other kernels and rules sum directly.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel, as_kernel, map_coordinates
from steinax.kernels.interpolation import by_degree, check_sums, coordinate_bandwidths, fill_uncovered, interpolated_rbf_sums, interpolates, scaled_coordinates
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.svgd import _svgd, kernel_info

__all__ = ["cc_svgd_direction", "CCSVGD", "cc_svgd"]


@eqx.filter_jit
def _cc_svgd(particles, scores, kernel, block_size=None, sums="auto"):
    """``(phi, per-coordinate bandwidths)``; the kernel sums as the module docstring says."""
    if interpolates(kernel, particles.shape[0], sums):
        h = coordinate_bandwidths(kernel, particles)
        return _cc_svgd_interpolated(particles, scores, h, block_size), h

    def one(col, score_col, kernel_i):
        phi, k = _coordinate_direction(col, score_col, kernel_i, block_size)
        return phi, kernel_info(k).get("bandwidth", jnp.zeros((), particles.dtype))

    phi_t, bandwidths = map_coordinates(one, particles, scores, kernel)
    return phi_t.T, bandwidths


def _coordinate_direction(col, score_col, kernel_i, block_size):
    """``(phi [n], resolved kernel)``: one coordinate's direction summed directly, the 1-D SVGD direction of Lemma 3."""
    phi, k = _svgd(col, score_col, kernel_i, block_size)
    return phi[:, 0], k


def _cc_svgd_interpolated(particles, scores, h, block_size, chunk=None):
    """Lemma 3 with every coordinate's sums interpolated (:func:`~steinax.kernels.interpolation.interpolated_rbf_sums`).

    Coordinate ``i``: ``sum_l k(x_li, x_mi) s_li + sum_l d/dx_li k(x_li, x_mi)``, where
    ``d/dx_l k(x_l, x_m) = (2 / sqrt(h)) g(x_m, x_l)``. Each chunk of coordinates takes
    the degree its ``omega`` needs (:func:`~steinax.kernels.interpolation.by_degree`);
    coordinates beyond the largest degree are summed directly.
    """
    n = particles.shape[0]
    t, omega = scaled_coordinates(particles, h)
    sums, covered = by_degree(interpolated_rbf_sums, t, omega, scores.T, 2 / jnp.sqrt(h), chunk=chunk)
    sums = fill_uncovered(covered, sums, lambda col, s_col, k: _coordinate_direction(col, s_col, k, block_size)[0] * n,
                          particles, scores, h)
    return sums.T / n


def cc_svgd_direction(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel | None = None,
    *,
    block_size: int | None = None,
    sums: str = "auto",
) -> jax.Array:
    """CC-SVGD direction (KCC-SD paper, Lemma 3), ``[n, d]``; default kernel ``RBF("per_dimension")``.

    ``block_size`` bounds each coordinate's direct pairwise work to O(block_size * n)
    memory. ``sums``: ``"auto"`` (interpolated kernel sums where they are accurate to
    unit roundoff, see the module docstring) or ``"direct"``.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_block_size(block_size)
    check_sums(sums)
    return _cc_svgd(particles, scores, as_kernel(kernel, RBF("per_dimension")), block_size, sums)[0]


class CCSVGD(AbstractParticleMethod):
    """CC-SVGD as a particle method (see :func:`cc_svgd`)."""

    kernel: AbstractKernel
    block_size: int | None = None
    sums: str = eqx.field(default="auto", static=True)

    def __check_init__(self):
        as_kernel(self.kernel, None)
        check_block_size(self.block_size)
        check_sums(self.sums)

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        phi, bandwidths = _cc_svgd(particles, scores, self.kernel, self.block_size, self.sums)
        return phi, aux, {"bandwidth": jnp.mean(bandwidths)}


def cc_svgd(kernel: AbstractKernel | None = None, *, block_size: int | None = None, sums: str = "auto") -> CCSVGD:
    """Complete-conditional SVGD with a univariate kernel per coordinate.

    Args:
        kernel: the univariate base kernel: ``RBF("per_dimension")`` (default,
            per-coordinate median), ``RBF(h)`` with a float or a ``[d]`` vector of
            fixed bandwidths, any median rule (applied per coordinate), or ``IMQ``.
        block_size: rows per block in each coordinate's direct pairwise work (large ``n``).
        sums: ``"auto"`` (default): RBF kernel sums by Chebyshev interpolation where
            its a-priori error bound is within unit roundoff (module docstring);
            ``"direct"``: every pair summed.
    """
    return CCSVGD(kernel=as_kernel(kernel, RBF("per_dimension")), block_size=block_size, sums=sums)
