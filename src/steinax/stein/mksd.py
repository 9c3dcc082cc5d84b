"""Multiple-kernel Stein discrepancy (MKSD) and the closed-form kernel weights.

MK-SVGD paper (Ai et al., arXiv 2107.09338), Definition 1 and eq. 14-15, 20-21.
Conventions are those of :func:`steinax.stein.ksd`: every per-kernel
discrepancy ``S_i`` is **squared**.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import AbstractKernel
from steinax.kernels.pairwise import fold_row_blocks, pairwise_plan, squared_distances
from steinax.stein.ksd import ESTIMATORS, SteinTerms, _ratios, _stein_kernel_diagonal, stein_terms

__all__ = [
    "WEIGHT_RULES",
    "check_kernels",
    "stack_kernels",
    "multi_kernel_block",
    "kernel_ksds",
    "kernel_ksds_from_sums",
    "mk_weights",
    "mksd",
]

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


def multi_kernel_block(kernels, terms: SteinTerms, row_mask=None, weights=None):
    """Every kernel of ``kernels`` on one block of pairs: the one multiple-kernel engine.

    With the Stein kernel linear in the profile (:meth:`SteinTerms.coefficients`,
    terms computed with ``h = 1``), kernel ``i`` with scalar scale ``h_i`` contributes

    .. math::

        \\sum_{ab} u_i = \\langle \\kappa_i, G \\rangle + \\langle \\kappa_i', C_1 \\rangle / h_i
                        + \\langle \\kappa_i'', C_2 \\rangle / h_i^2

    (for RBF, ``kappa' = -kappa`` and ``kappa'' = kappa``, so one profile per kernel).
    With ``weights`` it also returns the weighted kernel matrices of eq. 19,
    ``K_w = sum_i w_i kappa_i`` and ``R_w = sum_i w_i (2 / h_i) kappa_i'``
    (:func:`steinax.particles.svgd.stein_direction_rows`). The kernels are
    visited one after another on the same block, each adding only elementwise
    work (measured faster on CPU than materialising an ``[m, b, n]`` stack).

    Args:
        kernels: resolved kernels of one kind with scalar scales.
        terms: :class:`SteinTerms` of the block with ``h = 1``.
        row_mask: optional ``[b]`` booleans; masked rows (block padding) add nothing to the sums.
        weights: optional ``[m]`` kernel weights.

    Returns:
        ``(sums [m], (K_w, R_w) or None)``.
    """
    g, c1, c2 = terms.coefficients()
    if row_mask is not None:
        g, c1, c2 = (jnp.where(row_mask[:, None], c, 0.0) for c in (g, c1, c2))
    sums, kmat, rmat = [], None, None
    for i, k in enumerate(kernels):
        ratios = _ratios(k)
        inv_h = 1.0 if k.scale is None else 1.0 / k.scale
        kap, d1, d2 = k.profile(terms.sqdist * inv_h)
        if ratios:
            r1, r2 = ratios
            d1 = r1 * kap
            sums.append(jnp.sum(kap * (g + (r1 * inv_h) * c1 + (r2 * inv_h * inv_h) * c2)))
        else:
            sums.append(jnp.sum(kap * g + (inv_h * d1) * c1 + (inv_h * inv_h * d2) * c2))
        if weights is not None:
            kmat = weights[i] * kap if kmat is None else kmat + weights[i] * kap
            r_i = (2.0 * weights[i] * inv_h) * d1
            rmat = r_i if rmat is None else rmat + r_i
    return jnp.stack(sums), (None if weights is None else (kmat, rmat))


def _padding_mask(row_index, n, block_size):
    """Row mask for a block of :func:`~steinax.kernels.scan_row_blocks`; ``None`` when no block is padded."""
    if block_size is None or block_size >= n or n % -(-n // block_size) == 0:
        return None
    return row_index >= 0


def kernel_ksds_from_sums(sums, particles, scores, kernels, estimator: str) -> jax.Array:
    """Squared per-kernel KSDs from the sums over all ``n^2`` pairs (V: ``/n^2``; U: diagonal removed)."""
    n = particles.shape[0]
    if estimator == "v":
        return sums / float(n * n)
    diag = jax.vmap(lambda k: jnp.sum(_stein_kernel_diagonal(particles, scores, k)))(stack_kernels(kernels))
    return (sums - diag) / float(n * (n - 1))


def kernel_ksds(particles, scores, kernels, estimator: str = "v", *, sqdist=None, block_size=None) -> jax.Array:
    """Squared KSD ``S_i`` of every kernel in ``kernels``, sharing one distance and score computation.

    The kernel-independent terms (squared distances, ``s s^T``, the cross term)
    are computed once per row block (:class:`~steinax.stein.ksd.SteinTerms`) and
    all kernels are evaluated on them together (:func:`multi_kernel_block`):
    each further kernel costs only elementwise work on the block. Kernels must
    be resolved, of one kind, with scalar scales. Memory is O(m * block_size * n).

    Returns:
        ``[m]`` array of squared discrepancies (V- or U-statistics).
    """
    _check_scalar_scales(kernels)
    n = particles.shape[0]

    def block(acc, idx, xr, sr, *dr):
        terms = stein_terms(xr, sr, particles, scores, None, dr[0] if dr else None, for_sums=True, row_index=idx)
        return acc + multi_kernel_block(kernels, terms, _padding_mask(idx, n, block_size))[0]

    extra = () if sqdist is None else (sqdist,)  # stored distances are read block by block
    sums = fold_row_blocks(block, jnp.zeros((len(kernels),), particles.dtype), n, block_size, particles, scores, *extra)
    return kernel_ksds_from_sums(sums, particles, scores, kernels, estimator)


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


def mksd(particles, scores, kernels, weights=None, estimator: str = "v", *, block_size: int | None = None) -> jax.Array:
    """Multiple-kernel Stein discrepancy ``sum_i w_i S_i`` (MK-SVGD paper eq. 14), squared.

    Args:
        particles, scores: ``[n, d]``.
        kernels: a list of kernels of one kind (resolved on ``particles`` here).
        weights: ``[m]`` non-negative weights, or a rule of :func:`mk_weights`
            (``"eq21"`` or ``"normalized"``; the latter gives maxMKSD, eq. 15).
            Default ``"normalized"``.
        estimator: ``"v"`` or ``"u"``.
        block_size: evaluate in row blocks of this size (memory O(m * block_size * n));
            default automatic (:func:`~steinax.kernels.pairwise.pairwise_plan`).
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    kernels = check_kernels(kernels)
    if estimator not in ESTIMATORS:
        raise ValueError(f"`estimator` must be one of {ESTIMATORS}; received {estimator!r}")
    check_block_size(block_size)
    weights = "normalized" if weights is None else weights
    if not isinstance(weights, str) and np.shape(weights) != (len(kernels),):
        raise ValueError(f"`weights` must have shape ({len(kernels)},); received {np.shape(weights)}")
    return _mksd(particles, scores, kernels, weights, estimator, block_size)


@eqx.filter_jit
def _mksd(particles, scores, kernels, weights, estimator, block_size):
    n = particles.shape[0]
    plan = pairwise_plan(n, particles.dtype, block_size, store_wanted=any(k.reads_distances for k in kernels),
                         arrays=4 + 2 * len(kernels))
    sqdist = squared_distances(particles, particles) if plan.store else None
    resolved = [k.resolve(particles, sqdist, None if plan.store else plan.rows) for k in kernels]
    s = kernel_ksds(particles, scores, resolved, estimator, sqdist=sqdist, block_size=plan.rows)
    if isinstance(weights, str):
        weights = mk_weights(s, weights)
    return jnp.sum(jnp.asarray(weights, s.dtype) * s)
