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
a time under ``lax.map``, so memory is one ``[n, n]`` matrix (when ``n^2 d``
is below 2^24 elements the coordinates are batched with ``vmap`` instead, which
is faster and still small).

The kernel is resolved **per coordinate**: a median rule reads only that
coordinate's values. The default ``RBF("per_dimension")`` gives Pyro's
``h_i = median_{a<b} (x_{a,i} - x_{b,i})^2 / log(n + 1)`` (its ``mode="univariate"``).
A fixed bandwidth (a float, or a ``[d]`` vector) is used as given.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from steinax._validation import check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.svgd import _svgd, kernel_info

__all__ = ["cc_svgd_direction", "CCSVGD", "cc_svgd"]


_VMAP_ELEMENTS = 2**24  # 64 MiB of float32 per [d, n, n] intermediate


def _cc_svgd(particles, scores, kernel):
    d = particles.shape[1]
    if isinstance(kernel, RBF) and kernel.rule == "per_dimension":
        # the per-coordinate medians of all coordinates at once, then fixed per-coordinate kernels
        kernel = kernel.resolve(particles)
    scale = kernel.scale if kernel.is_resolved else None
    if scale is not None and jnp.ndim(scale) == 1 and scale.shape[0] != d:
        raise ValueError(f"a per-coordinate bandwidth must have length d = {d}; received shape {scale.shape}")

    def one(args):
        i, col, score_col = args
        phi, k = _svgd(col[:, None], score_col[:, None], kernel.coordinate(i), None)
        return phi[:, 0], kernel_info(k).get("bandwidth", jnp.zeros((), particles.dtype))

    args = (jnp.arange(d), particles.T, scores.T)
    n = particles.shape[0]
    if n * n * d <= _VMAP_ELEMENTS and not (isinstance(kernel, RBF) and kernel.rule is not None):
        phi_t, bandwidths = jax.vmap(one)(args)  # all coordinates at once while n*n*d stays small
    else:
        phi_t, bandwidths = jax.lax.map(one, args)  # one [n, n] matrix at a time
    return phi_t.T, bandwidths


def cc_svgd_direction(particles: jax.Array, scores: jax.Array, kernel: AbstractKernel | None = None) -> jax.Array:
    """CC-SVGD direction (KCC-SD paper, Lemma 3), ``[n, d]``; default kernel ``RBF("per_dimension")``."""
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    return _cc_svgd(particles, scores, RBF("per_dimension") if kernel is None else kernel)[0]


class CCSVGD(AbstractParticleMethod):
    """CC-SVGD as a particle method (see :func:`cc_svgd`)."""

    kernel: AbstractKernel

    def direction(self, rng_key, particles, scores, aux):
        del rng_key
        phi, bandwidths = _cc_svgd(particles, scores, self.kernel)
        return phi, aux, {"bandwidth": jnp.mean(bandwidths)}


def cc_svgd(kernel: AbstractKernel | None = None) -> CCSVGD:
    """Complete-conditional SVGD with a univariate kernel per coordinate.

    Args:
        kernel: the univariate base kernel: ``RBF("per_dimension")`` (default,
            per-coordinate median), ``RBF(h)`` with a float or a ``[d]`` vector of
            fixed bandwidths, any median rule (applied per coordinate), or ``IMQ``.
    """
    if kernel is not None and not isinstance(kernel, AbstractKernel):
        raise TypeError(f"`kernel` must be a steinax.kernels.AbstractKernel; received {type(kernel).__name__}")
    return CCSVGD(kernel=RBF("per_dimension") if kernel is None else kernel)
