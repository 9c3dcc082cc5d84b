"""Multiple-kernel SVGD (MK-SVGD; Ai et al., arXiv 2107.09338, Algorithm 1).

With base kernels ``k_1..k_m`` and weights ``w`` the direction is eq. 19,

.. math::

    \\phi_w(x) = \\sum_i \\frac{w_i}{n} \\sum_j \\left[ k_i(x_j, x) \\nabla\\log p(x_j)
                 + \\nabla_{x_j} k_i(x_j, x) \\right],

i.e. SVGD with the kernel ``k_w = sum_i w_i k_i``: one product with
``K_w = sum_i w_i kappa_i`` and one with ``R_w = sum_i w_i (2/h_i) kappa_i'``,
whatever ``m`` (:func:`steinax.particles.svgd.stein_direction_rows`).

After each move the weights are recomputed from the per-kernel squared KSDs
``S_i = ||phi_i||^2_H`` of the particles the direction was computed at
(V-statistics, so the square root of eq. 21 is defined; ALGORITHMS.md
section A). ``S_i`` come from the same squared distances and score products as
the direction (:func:`steinax.stein.mksd.multi_kernel_block`): one distance computation
and one score evaluation per step, all kernels evaluated together per row block.

Weight rules (``weights=``):

* ``"eq21"`` (default): ``w_i = sqrt(S_i / sum_j S_j)`` as printed;
* ``"normalized"``: ``S / ||S||_2``, the exact maximiser of eq. 20;
* ``"fixed"``: the initial weights are kept (MK-SVGD with a fixed mixture kernel);
* ``"gradient"``: gradient ascent on ``sum_i w_i S_i`` (``dMKSD/dw_i = S_i``)
  with ``weight_optimizer`` (default ``optax.adagrad(0.05)``, the paper's
  "AdaGrad for w"), then projected onto ``w >= 0``, ``||w||_2 = 1``.

Weights start at ``1/m`` (Algorithm 1) unless ``initial_weights`` is given.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from steinax._validation import check_block_size, is_concrete
from steinax.kernels.bandwidth import median_bandwidth
from steinax.kernels.base import RBF, AbstractKernel
from steinax.kernels.pairwise import scan_row_blocks
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.svgd import stein_direction_rows
from steinax.stein.ksd import stein_terms
from steinax.stein.mksd import (
    _check_scalar_scales,
    _padding_mask,
    check_kernels,
    kernel_ksds_from_sums,
    mk_weights,
    multi_kernel_block,
)

__all__ = ["MKSVGD", "MKState", "mk_svgd", "rbf_bandwidth_grid", "MK_WEIGHT_RULES"]

MK_WEIGHT_RULES = ("eq21", "normalized", "fixed", "gradient")


def rbf_bandwidth_grid(low: int = -4, high: int = 5, base: float = 2.0) -> list[RBF]:
    """RBF kernels with bandwidths ``base**low, ..., base**high`` (default the paper's 2^-4 ... 2^5)."""
    return [RBF(float(base) ** e) for e in range(low, high + 1)]


class MKState(eqx.Module):
    """MK-SVGD's method state: the current kernel weights and the weight optimizer's state."""

    weights: jax.Array
    opt_state: optax.OptState


class MKSVGD(AbstractParticleMethod):
    """MK-SVGD as a particle method (see :func:`mk_svgd`)."""

    kernels: tuple
    weight_rule: str = eqx.field(static=True)
    initial_weights: jax.Array | None
    weight_optimizer: optax.GradientTransformation | None = eqx.field(static=True)
    median_scaled: bool = eqx.field(static=True)
    ksd_estimator: str = eqx.field(static=True, default="v")
    block_size: int | None = eqx.field(static=True, default=256)

    def __check_init__(self):
        kernels = check_kernels(self.kernels)
        if self.weight_rule not in MK_WEIGHT_RULES:
            raise ValueError(f"`weights` must be one of {MK_WEIGHT_RULES}; received {self.weight_rule!r}")
        if self.median_scaled and not all(isinstance(k, RBF) and k.rule is None for k in kernels):
            raise ValueError("`median_scaled=True` needs RBF kernels with fixed bandwidths (the multiples of the median)")
        w = self.initial_weights
        if w is not None and is_concrete(w):
            arr = np.asarray(w, dtype=float)
            if arr.shape != (len(kernels),) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(
                    f"`initial_weights` must be {len(kernels)} finite positive numbers (one per kernel); "
                    f"received {arr.tolist() if arr.ndim else arr!r}"
                )
        if self.ksd_estimator not in ("u", "v"):
            raise ValueError(f"`ksd_estimator` must be 'u' or 'v'; received {self.ksd_estimator!r}")
        if self.weight_rule == "gradient" and self.weight_optimizer is None:
            raise ValueError("`weights='gradient'` needs `weight_optimizer` (an optax optimizer)")
        check_block_size(self.block_size)

    def _weights0(self, dtype):
        m = len(self.kernels)
        if self.initial_weights is None:
            return jnp.full((m,), 1.0 / m, dtype)
        return jnp.asarray(self.initial_weights, dtype)

    def init_aux(self, particles, target=None):
        w = self._weights0(particles.dtype)
        opt_state = self.weight_optimizer.init(w) if self.weight_rule == "gradient" else None
        return MKState(weights=w, opt_state=opt_state)

    def resolved_kernels(self, particles):
        """The base kernels for this step; a median-scaled grid multiplies each scale by the median bandwidth."""
        if not self.median_scaled:
            return [k.resolve(particles, None, self.block_size) for k in self.kernels]
        h_med = median_bandwidth(particles, "liu", block_size=self.block_size)
        return [RBF(k.resolve(particles).bandwidth * h_med) for k in self.kernels]

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        n = particles.shape[0]
        kernels = self.resolved_kernels(particles)
        _check_scalar_scales(kernels)
        w = aux.weights

        def rows(acc, idx, x_rows, s_rows):
            # the kernel-independent terms of this row block, then all kernels on them at once
            terms = stein_terms(x_rows, s_rows, particles, scores, for_sums=True, row_index=idx)
            sums, (kmat, rmat) = multi_kernel_block(kernels, terms, _padding_mask(idx, n, self.block_size), w)
            return acc + sums, stein_direction_rows(kmat, rmat, x_rows, particles, scores)

        sums, phi = scan_row_blocks(rows, jnp.zeros((len(kernels),), particles.dtype), n, self.block_size, particles, scores)
        phi = phi / n
        # S_i = ||phi_i||^2 is the V-statistic; the U-statistic removes the diagonal
        ksds = kernel_ksds_from_sums(sums, particles, scores, kernels, self.ksd_estimator)
        opt_state = aux.opt_state
        if self.weight_rule in ("eq21", "normalized"):
            new_w = mk_weights(ksds, self.weight_rule)
        elif self.weight_rule == "fixed":
            new_w = w
        else:  # gradient ascent on sum_i w_i S_i, projected onto the non-negative unit sphere
            upd, opt_state = self.weight_optimizer.update(-ksds, opt_state, w)
            new_w = jnp.maximum(optax.apply_updates(w, upd), 0.0)
            norm = jnp.sqrt(jnp.sum(new_w * new_w))
            new_w = jnp.where(norm > 0, new_w / jnp.where(norm > 0, norm, 1.0), mk_weights(ksds, "normalized"))
        info = {"weights": w, "kernel_ksd": ksds}
        return phi, MKState(weights=new_w, opt_state=opt_state), info


def mk_svgd(
    kernels: list[AbstractKernel] | None = None,
    *,
    weights: str = "eq21",
    initial_weights=None,
    weight_optimizer: optax.GradientTransformation | None = None,
    median_scaled: bool = False,
    ksd_estimator: str = "v",
    block_size: int | None = 256,
) -> MKSVGD:
    """Multiple-kernel SVGD with kernel weights learned every step (Algorithm 1 of Ai et al.).

    Args:
        kernels: base kernels of one kind with fixed (or rule-based) scales;
            default :func:`rbf_bandwidth_grid` (RBF, ``h = 2^-4 ... 2^5``).
        weights: ``"eq21"`` (default), ``"normalized"``, ``"fixed"`` or ``"gradient"``
            (see the module docstring).
        initial_weights: ``[m]`` positive finite weights (default ``1/m`` each).
        weight_optimizer: optax optimizer for ``weights="gradient"`` (default ``optax.adagrad(0.05)``).
        median_scaled: treat the RBF bandwidths as multiples of Liu's median
            bandwidth, recomputed every step (a median-scaled grid).
        ksd_estimator: ``"v"`` (default; ``S_i = ||phi_i||^2`` exactly, so eq. 21's
            square root is defined) or ``"u"`` (unbiased, clipped at 0). The
            V-statistic's diagonal grows like ``2d / (n h)`` for small ``h``, so on
            wide grids it favours the smallest bandwidths; the U-statistic does not.
        block_size: rows processed together (default 256): all ``m`` kernels are
            evaluated on a row block while it is in cache, and memory stays
            O(block_size * n). ``None`` processes all rows at once.

    Example:
        >>> import steinax
        >>> method = steinax.mk_svgd()          # 10 RBF kernels, eq. 21 weights
        >>> len(method.kernels)
        10
    """
    kernels = check_kernels(rbf_bandwidth_grid() if kernels is None else kernels)
    if initial_weights is not None:
        initial_weights = jnp.asarray(initial_weights)
    if weights == "gradient" and weight_optimizer is None:
        weight_optimizer = optax.adagrad(0.05)
    return MKSVGD(
        kernels=kernels,
        weight_rule=weights,
        initial_weights=initial_weights,
        weight_optimizer=weight_optimizer if weights == "gradient" else None,
        median_scaled=median_scaled,
        ksd_estimator=ksd_estimator,
        block_size=block_size,
    )
