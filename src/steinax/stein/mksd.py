"""Multiple-kernel Stein discrepancy (MKSD) and the closed-form kernel weights.

MK-SVGD paper (Ai et al., arXiv 2107.09338), Definition 1 and eq. 14-15, 20-21.
Conventions are those of :func:`steinax.stein.ksd`: every per-kernel
discrepancy ``S_i`` is **squared**.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from steinax._validation import check_particles, check_scores
from steinax.kernels.base import AbstractKernel
from steinax.kernels.pairwise import squared_distances
from steinax.stein.ksd import ESTIMATORS, _stein_kernel_diagonal, stein_kernel_from_terms, stein_terms

__all__ = ["WEIGHT_RULES", "check_kernels", "stack_kernels", "kernel_ksds", "mk_weights", "mksd"]

WEIGHT_RULES = ("eq21", "normalized")


def check_kernels(kernels) -> tuple:
    """Validate a non-empty list of kernels of one kind; return it as a tuple."""
    if isinstance(kernels, AbstractKernel):
        raise TypeError("`kernels` must be a list of kernels; received a single kernel (wrap it in a list)")
    kernels = tuple(kernels)
    if not kernels:
        raise ValueError("`kernels` must hold at least one kernel; received an empty list")
    bad = [type(k).__name__ for k in kernels if not isinstance(k, AbstractKernel)]
    if bad:
        raise TypeError(f"`kernels` must hold steinax kernels; received {bad}")
    kinds = sorted({type(k).__name__ for k in kernels})
    if len(kinds) > 1:
        raise TypeError(f"`kernels` must all be of one kind (one profile, different scales); received kinds {kinds}")
    return kernels


def stack_kernels(kernels):
    """Stack resolved kernels of one kind into one pytree with a leading kernel axis (for ``jax.vmap``)."""
    dtypes = {leaf.dtype for k in kernels for leaf in jax.tree_util.tree_leaves(k)}
    dtype = jnp.result_type(*dtypes) if dtypes else None
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack([jnp.asarray(l, dtype) for l in leaves]), *kernels)


def _check_scalar_scales(kernels):
    for k in kernels:
        if k.scale is not None and jnp.ndim(k.scale) != 0:
            raise ValueError(
                "multiple-kernel quantities need kernels with scalar scales; received a kernel with a "
                f"per-dimension bandwidth of shape {jnp.shape(k.scale)}"
            )


def kernel_ksds(particles, scores, kernels, estimator: str = "v", *, sqdist=None) -> jax.Array:
    """Squared KSD ``S_i`` of every kernel in ``kernels``, sharing one distance and score computation.

    The kernel-independent terms (squared distances, ``s s^T``, the cross term)
    are computed once (:class:`~steinax.stein.ksd.SteinTerms`) and the kernels
    are evaluated together under ``jax.vmap``: each further kernel costs only
    elementwise work on ``[n, n]`` matrices. Kernels must be resolved, of one
    kind, with scalar scales.

    Returns:
        ``[m]`` array of squared discrepancies (V- or U-statistics).
    """
    _check_scalar_scales(kernels)
    n = particles.shape[0]
    terms = stein_terms(particles, scores, particles, scores, None, sqdist)

    def one(k):
        total = jnp.sum(stein_kernel_from_terms(k, terms.rescale(k.scale)))
        if estimator == "u":
            return (total - jnp.sum(_stein_kernel_diagonal(particles, scores, k))) / (n * (n - 1))
        return total / (n * n)

    return jax.vmap(one)(stack_kernels(kernels))


def mk_weights(ksds: jax.Array, rule: str = "eq21") -> jax.Array:
    """Closed-form kernel weights from the per-kernel squared KSDs ``S``.

    ``"eq21"`` (the paper's eq. 21): ``w_i = sqrt(S_i / sum_j S_j)``, i.e.
    ``||phi_i|| / sqrt(sum_j ||phi_j||^2)``; unit 2-norm.
    ``"normalized"``: ``w = S / ||S||_2``, the exact maximiser of ``sum_i w_i S_i``
    over ``w >= 0, ||w||_2 = 1`` (eq. 20; ALGORITHMS.md section A).

    Negative ``S_i`` (possible for U-statistics) are clipped to 0; if all are 0
    the weights are uniform with unit norm.
    """
    if rule not in WEIGHT_RULES:
        raise ValueError(f"`rule` must be one of {WEIGHT_RULES}; received {rule!r}")
    s = jnp.maximum(ksds, 0.0)
    m = s.shape[0]
    uniform = jnp.full_like(s, 1.0 / jnp.sqrt(jnp.asarray(m, s.dtype)))
    if rule == "eq21":
        total = jnp.sum(s)
        w = jnp.sqrt(s / jnp.where(total > 0, total, 1.0))
        return jnp.where(total > 0, w, uniform)
    norm = jnp.sqrt(jnp.sum(s * s))
    return jnp.where(norm > 0, s / jnp.where(norm > 0, norm, 1.0), uniform)


def mksd(particles, scores, kernels, weights=None, estimator: str = "v") -> jax.Array:
    """Multiple-kernel Stein discrepancy ``sum_i w_i S_i`` (MK-SVGD paper eq. 14), squared.

    Args:
        particles, scores: ``[n, d]``.
        kernels: a list of kernels of one kind (resolved on ``particles`` here).
        weights: ``[m]`` non-negative weights, or a rule of :func:`mk_weights`
            (``"eq21"`` or ``"normalized"``; the latter gives maxMKSD, eq. 15).
            Default ``"normalized"``.
        estimator: ``"v"`` or ``"u"``.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    kernels = check_kernels(kernels)
    if estimator not in ESTIMATORS:
        raise ValueError(f"`estimator` must be one of {ESTIMATORS}; received {estimator!r}")
    sqdist = squared_distances(particles, particles)
    resolved = [k.resolve(particles, sqdist) for k in kernels]
    s = kernel_ksds(particles, scores, resolved, estimator, sqdist=sqdist)
    if weights is None:
        weights = "normalized"
    if isinstance(weights, str):
        weights = mk_weights(s, weights)
    weights = jnp.asarray(weights, s.dtype)
    if weights.shape != s.shape:
        raise ValueError(f"`weights` must have shape ({len(kernels)},); received {weights.shape}")
    return jnp.sum(weights * s)
