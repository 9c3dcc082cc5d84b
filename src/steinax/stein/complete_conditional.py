"""Kernelized complete-conditional Stein discrepancy (KCC-SD; Singhal, Lahlou & Ranganath, arXiv 1904.04478).

The v1 text lost its equations; the construction is rebuilt in ALGORITHMS.md
section B and decided here. The Stein set holds ``f = (f_1, ..., f_d)`` with each
``f_i`` a **univariate** function of ``x_i`` in the RKHS of a 1-D kernel ``k``, and the
operator uses the **joint** score ``s = nabla log p``. Its per-coordinate Stein kernel

.. math::

    k_{cc}^i(x, y) = s_i(x) s_i(y) k(x_i, y_i) + s_i(x) \\partial_{y_i} k + s_i(y) \\partial_{x_i} k
                     + \\partial_{x_i} \\partial_{y_i} k

is exactly the one-dimensional Langevin Stein kernel of column ``i`` with score
column ``i`` (:func:`steinax.stein.stein_kernel_matrix` on ``[n, 1]`` inputs), so

.. math::

    \\mathrm{KCC\\text{-}SD}^2(q, p) = \\sum_i \\mathbb E_{x, y \\sim q}\\, k_{cc}^i(x, y).

Conventions (the same as :func:`steinax.ksd`): :func:`kcc_sd` returns the
**squared** sum, as a V-statistic (default) or U-statistic; ``squared=False``
gives its square root, the paper's L2 combination ``||(w_1, ..., w_d)||_2`` with
``w_i = sqrt(E k_cc^i)`` (V-statistic only). The kernel acts per coordinate
(:func:`steinax.kernels.base.map_coordinates`): a ``[d]`` bandwidth is sliced,
median rules read one coordinate.

**Blind spot** (ALGORITHMS.md section B, not stated in the paper): each ``k_cc^i``
sees ``q`` only through the pairs ``(x_i, s_i(x))``; when ``p``'s coordinates are
independent, KCC-SD is zero at the population level for every ``q`` with ``p``'s
marginals, e.g. ``q = N(0, [[1, rho], [rho, 1]])`` against ``p = N(0, I)``. Use
:func:`steinax.ksd`, or :func:`kcc_sd_conditional` when ``q``'s complete
conditionals can be sampled. For the same reason the paper's Theorem 3
(KCC-SD >= KSD) does not hold for this construction in general.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_block_size, check_finite_statistic, check_particles, check_scores
from steinax.kernels.base import IMQ, RBF, AbstractKernel, as_kernel, map_coordinates
from steinax.kernels.interpolation import by_degree, check_sums, coordinate_bandwidths, fill_uncovered, interpolated_rbf_forms, interpolates, scaled_coordinates
from steinax.stein.ksd import _ksd, _stein_kernel_diagonal, check_estimator, stein_kernel_pairs

__all__ = ["complete_conditional_scores", "kcc_sd", "kcc_sd_conditional", "kcc_sd_coordinates"]


def kcc_sd_coordinates(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel,
    estimator: str = "v",
    *,
    block_size: int | None = None,
    sums: str = "auto",
) -> jax.Array:
    """The ``d`` per-coordinate terms ``E k_cc^i`` of :func:`kcc_sd` (squared, ``[d]``)."""
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_estimator(estimator, particles.shape[0])
    check_block_size(block_size)
    check_sums(sums)
    kernel = as_kernel(kernel, IMQ())
    return _kcc_coordinates(particles, scores, kernel, estimator, block_size, sums)


@eqx.filter_jit
def _kcc_coordinates(particles, scores, kernel, estimator, block_size, sums="auto"):
    n = particles.shape[0]
    if interpolates(kernel, n, sums):
        h = coordinate_bandwidths(kernel, particles)
        totals = _kcc_interpolated_totals(particles, scores, h, block_size)
        if estimator == "v":
            return totals / float(n * n)
        diagonal = jax.vmap(lambda col, s_col, h_i: jnp.sum(_stein_kernel_diagonal(col[:, None], s_col[:, None], RBF(h_i))))
        return (totals - diagonal(particles.T, scores.T, h)) / float(n * (n - 1))
    return map_coordinates(lambda col, s_col, k_i: _ksd(col, s_col, k_i, estimator, block_size), particles, scores, kernel)


def _kcc_interpolated_totals(particles, scores, h, block_size):
    """``sum_{a, b} k_cc^i(x_a, x_b)`` for every coordinate ``i`` (``[d]``), the 1-D RBF kernel interpolated.

    With ``k = exp(-(x_a - x_b)^2 / h)``, ``g = (x_a - x_b) k / sqrt(h)`` and
    ``g2 = (x_a - x_b)^2 k / h``, the module docstring's kernel sums to

    .. math::

        \\sum_{a,b} s_a s_b k + \\frac{4}{\\sqrt h} \\sum_{a,b} s_a g + \\frac{2}{h} \\sum_{a,b} k
          - \\frac{4}{h} \\sum_{a,b} g_2

    (``s_a \\partial_b k + s_b \\partial_a k = 2 (x_a - x_b) k (s_a - s_b) / h``, whose sum is
    twice its ``s_a`` half; ``\\partial_a \\partial_b k = (2/h - 4 (x_a - x_b)^2 / h^2) k``).
    The four double sums are one bilinear form of the interpolant
    (:func:`~steinax.kernels.interpolation.interpolated_rbf_forms`), exact to unit roundoff
    per kernel value; a coordinate that no degree covers is summed directly.
    """
    n = particles.shape[0]
    t, omega = scaled_coordinates(particles, h)
    coef = jnp.stack([jnp.ones_like(h), 4.0 / jnp.sqrt(h), 2.0 / h, -4.0 / h], axis=1)
    totals, covered = by_degree(interpolated_rbf_forms, t, omega, scores.T, coef, second=True)

    return fill_uncovered(covered, totals, lambda col, s_col, k: _ksd(col, s_col, k, "v", block_size) * float(n * n),
                          particles, scores, h)


def kcc_sd(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel,
    estimator: str = "v",
    *,
    block_size: int | None = None,
    squared: bool = True,
    sums: str = "auto",
) -> jax.Array:
    """Squared KCC-SD ``sum_i E_{x, y ~ q} k_cc^i(x, y)`` (see the module docstring).

    Args:
        particles: ``[n, d]`` samples of ``q``.
        scores: ``[n, d]`` joint scores ``nabla log p`` at ``particles``.
        kernel: the univariate base kernel (RBF with a float, a ``[d]`` vector or a
            median rule applied per coordinate; IMQ).
        estimator: ``"v"`` (default) or ``"u"``.
        block_size: row blocks per coordinate, memory O(block_size * n).
        squared: ``False`` returns the square root (V-statistic only).
        sums: ``"auto"`` (default) sums an RBF kernel with a fixed bandwidth or the
            ``"per_dimension"`` rule by Chebyshev interpolation when ``n >= 128``, to
            unit roundoff per kernel value (as :func:`steinax.cc_svgd` does);
            ``"direct"`` always sums all pairs.

    In ``d = 1`` this is :func:`steinax.ksd` with the same kernel.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_estimator(estimator, particles.shape[0], squared)
    check_block_size(block_size)
    check_sums(sums)
    kernel = as_kernel(kernel, IMQ())
    value = jnp.sum(_kcc_coordinates(particles, scores, kernel, estimator, block_size, sums))
    check_finite_statistic(value, "the squared KCC-SD", scores)
    return value if squared else jnp.sqrt(value)


def complete_conditional_scores(logdensity: Callable, particles: jax.Array, conditional_samples: jax.Array) -> jax.Array:
    """``t[a, i] = d_i log p`` at ``x_a`` with coordinate ``i`` replaced by ``conditional_samples[a, i]``.

    ``n * d`` gradient evaluations (one per modified point), batched with ``vmap``.
    """
    particles = check_particles(particles)
    conditional_samples = check_scores(conditional_samples, particles, name="conditional_samples")
    grad = jax.grad(logdensity)
    d = particles.shape[1]

    def one(x, y):
        return jax.vmap(lambda i, yi: grad(x.at[i].set(yi))[i])(jnp.arange(d), y)

    return jax.vmap(one)(particles, conditional_samples)


def kcc_sd_conditional(
    particles: jax.Array,
    scores: jax.Array,
    conditional_samples: jax.Array,
    conditional_scores: jax.Array,
    kernel: AbstractKernel,
) -> jax.Array:
    """Conditional KCC-SD, for samplers whose complete conditionals ``q(x_i | x_-i)`` can be sampled.

    .. math::

        \\mathrm{KCC\\text{-}SD}_{cond}^2 = \\sum_i \\mathbb E_{x \\sim q,\\; y_i \\sim q(\\cdot \\mid x_{-i})}
            k_{cc}^i\\big(x, (y_i, x_{-i})\\big)

    (ALGORITHMS.md section B, item 3): the 1-D KSD between ``q(. | x_-i)`` and
    ``p(. | x_-i)`` averaged over ``x_-i``, so it is zero only when every
    complete conditional matches, and it sees dependence between coordinates
    that :func:`kcc_sd` misses. Estimated without bias in O(n d) by pairing each
    ``x_a`` with one conditional draw per coordinate.

    Args:
        particles, scores: ``[n, d]`` samples of ``q`` and ``nabla log p`` there.
        conditional_samples: ``[n, d]``; entry ``(a, i)`` is a draw from ``q(x_i | x_{a,-i})``
            (e.g. one more Gibbs update of coordinate ``i`` from ``x_a``).
        conditional_scores: ``[n, d]``; entry ``(a, i)`` is ``d_i log p`` at ``x_a`` with
            coordinate ``i`` replaced (:func:`complete_conditional_scores`).
        kernel: univariate base kernel; median rules are resolved per coordinate on ``particles``.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    y = check_scores(conditional_samples, particles, name="conditional_samples")
    t = check_scores(conditional_scores, particles, name="conditional_scores")
    kernel = as_kernel(kernel, IMQ())

    def one(col, s_col, k_i, y_col, t_col):
        k_i = k_i.resolve(col)  # a median rule reads this coordinate only
        return jnp.mean(stein_kernel_pairs(col, s_col, y_col, t_col, k_i))  # pairs (x_a, (y_ai, x_a,-i))

    return jnp.sum(map_coordinates(one, particles, scores, kernel, y, t))
