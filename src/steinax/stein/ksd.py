"""The Langevin Stein kernel and the kernel Stein discrepancy (KSD).

Convention (decided once, here): :func:`ksd` returns the **squared**
discrepancy ``S(q || p)`` of eq. 14 of the MK-SVGD paper (Ai et al.,
arXiv 2107.09338), i.e. ``E_{x, x' ~ q} u_p(x, x')``, estimated from samples
by a V-statistic (default, always ``>= 0``, equal to ``||phi_hat||_H^2`` for the
empirical measure) or a U-statistic (diagonal excluded, unbiased, can be
negative). Take ``jnp.sqrt`` of the V-statistic for the unsquared discrepancy.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_block_size, check_finite_statistic, check_particles, check_scores
from steinax.kernels.base import IMQ, AbstractKernel, as_kernel, imq_fast_path
from steinax.kernels.fused import check_engine, fused_stein_row_sums, products_at, with_engine
from steinax.kernels.pairwise import fold_row_blocks, pairwise_plan, squared_distances

__all__ = ["block_ksd", "stein_kernel_pairs", "SteinTerms", "stein_terms", "stein_kernel_from_terms", "stein_kernel_from_profile", "stein_kernel_matrix", "stein_kernel_row_sums", "ksd", "ESTIMATORS"]

ESTIMATORS = ("u", "v")


class SteinTerms(eqx.Module):
    """Kernel-independent pieces of the Langevin Stein kernel on a block of pairs.

    For points ``x_i``, ``y_j`` with scores ``s``, and a scale ``h``:
    ``sqdist = sum_d (x_d - y_d)^2 / h_d``, ``gram = s(x_i)^T s(y_j)``,
    ``cross = ((x_i - y_j)/h)^T (s(y_j) - s(x_i))``,
    ``sq_over_h2 = sum_d (x_d - y_d)^2 / h_d^2`` and ``inv_h_sum = sum_d 1/h_d``.
    Computed once (with ``h = 1``), they serve every kernel with a scalar scale
    through :meth:`rescale`: MKSD and MK-SVGD share them across kernels.
    """

    sqdist: jax.Array
    gram: jax.Array
    cross: jax.Array
    sq_over_h2: jax.Array
    inv_h_sum: jax.Array

    def rescale(self, h) -> "SteinTerms":
        """Terms for a scalar scale ``h`` from terms computed with ``h = 1``."""
        if h is None:
            return self
        return SteinTerms(self.sqdist / h, self.gram, self.cross / h, self.sq_over_h2 / (h * h), self.inv_h_sum / h)

    def coefficients(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(G, C1, C2)`` with ``u = kappa G + kappa' C1 + kappa'' C2`` (the Stein kernel, linear in the profile).

        ``G = s_x^T s_y``, ``C1 = 2 cross - 2 sum_d 1/h_d`` and ``C2 = -4 sum_d (x_d - y_d)^2 / h_d^2``
        (:func:`stein_kernel_matrix`). For terms rescaled to a scalar ``h`` from ``h = 1``
        (:meth:`rescale`) they are ``(G, C1 / h, C2 / h^2)``: multiple-kernel sums use that.
        """
        return self.gram, 2.0 * (self.cross - self.inv_h_sum), -4.0 * self.sq_over_h2


def _scaled_distances(x, y, scale, sqdist=None, row_index=None):
    """``(sum_d (x_d - y_d)^2 / h_d, sum_d (x_d - y_d)^2 / h_d^2, 1 / h (per coordinate), sum_d 1 / h_d)``.

    ``scale``: ``None`` (``h = 1``), a scalar or a ``[d]`` vector; ``sqdist``: optional
    unscaled squared distances (scalar scales only rescale them).
    """
    d = x.shape[1]
    if scale is None or jnp.ndim(scale) == 0:
        h = jnp.ones((), x.dtype) if scale is None else scale
        d2 = squared_distances(x, y, row_index=row_index) if sqdist is None else sqdist
        return d2 / h, d2 / (h * h), 1.0 / h, d / h
    sq = squared_distances(x, y, scale, row_index=row_index)
    sq2 = squared_distances(x, y, scale * scale, row_index=row_index)
    return sq, sq2, (1.0 / scale)[None, :], jnp.sum(1.0 / scale)


def stein_terms(x, score_x, y, score_y, scale=None, sqdist=None, *, for_sums=False, row_index=None) -> SteinTerms:
    """Build :class:`SteinTerms` with matrix products (no ``n x m x d`` tensor).

    ``sqdist`` are optional unscaled squared distances of ``x`` and ``y``;
    ``row_index`` the indices of ``x``'s rows in ``y`` when ``x`` is a row block
    of ``y`` (self-distances exactly 0, :func:`~steinax.kernels.squared_distances`).

    ``for_sums=True`` is for callers that only need the sum of the Stein kernel
    over **all** ordered pairs of one sample (``x`` a row block of ``y``, every
    row visited once, a symmetric kernel). Since ``k`` is symmetric,
    ``sum_ab k_ab (x_b^T s_a - x_b^T s_b) = sum_ab k_ab (x_a^T s_b - x_a^T s_a)``, so the
    cross term may be replaced by ``2 x_a^T (s_b - s_a) / h`` (centred), which needs
    one ``n x n x d`` product instead of two. The total (and the zero diagonal)
    are unchanged; individual entries are not the Stein kernel's.
    """
    sq, sq2, inv_row, inv_sum = _scaled_distances(x, y, scale, sqdist, row_index)
    # (x_i - y_j)^T ((s(y_j) - s(x_i)) / h) is translation invariant in x: centre first
    centre = jnp.mean(y, axis=0, keepdims=True)
    xc, yc = x - centre, y - centre
    sx_h, sy_h = score_x * inv_row, score_y * inv_row
    xs = xc @ sy_h.T
    if for_sums:
        cross = 2.0 * (xs - jnp.sum(xc * sx_h, axis=1)[:, None])
    else:
        # when x and y are the same set, sx_h @ yc^T is the transpose of xc @ sy_h^T: one product
        sx = xs.T if (x is y and score_x is score_y) else sx_h @ yc.T
        cross = xs - jnp.sum(xc * sx_h, axis=1)[:, None] - jnp.sum(yc * sy_h, axis=1)[None, :] + sx
    return SteinTerms(sq, score_x @ score_y.T, cross, sq2, jnp.asarray(inv_sum, x.dtype))


def stein_kernel_from_terms(kernel: AbstractKernel, terms: SteinTerms) -> jax.Array:
    """The Langevin Stein kernel (MK-SVGD paper, eq. 14) from its terms; see :func:`stein_kernel_matrix`.

    ``u = kappa s_x^T s_y + 2 kappa' ((x - y)/h)^T (s_y - s_x) - 2 kappa' sum_d 1/h_d - 4 kappa'' sum_d (x_d - y_d)^2/h_d^2``.
    """
    ratios = _ratios(kernel)
    kap = kernel.profile(terms.sqdist)[0] if ratios else None
    return stein_kernel_from_profile(kernel.profile(terms.sqdist) if kap is None else (kap, None, None), terms, ratios)


def _ratios(kernel):
    r1, r2 = kernel.derivative_ratio, kernel.second_derivative_ratio
    return None if r1 is None or r2 is None else (r1, r2)


def stein_kernel_from_profile(profile, terms: SteinTerms, ratios=None) -> jax.Array:
    """The Stein kernel from precomputed ``(kappa, kappa', kappa'')`` at ``terms.sqdist``.

    ``u = kappa G + kappa' C1 + kappa'' C2`` with :meth:`SteinTerms.coefficients`.
    With ``ratios = (r1, r2)`` (``kappa' = r1 kappa``, ``kappa'' = r2 kappa``, as for the
    RBF kernel) only ``kappa`` is read: ``u = kappa (G + r1 C1 + r2 C2)``.
    """
    g, c1, c2 = terms.coefficients()
    if ratios is not None:
        r1, r2 = ratios
        return profile[0] * (g + r1 * c1 + r2 * c2)
    kap, d1, d2 = profile
    return kap * g + d1 * c1 + d2 * c2


def stein_kernel_row_sums(x, score_x, y, score_y, kernel: AbstractKernel, sqdist=None, row_index=None) -> jax.Array:
    """``[rows]`` sums over ``b`` of the Stein kernel of :func:`stein_kernel_from_terms`, by matrix products.

    For callers that sum over **all** ordered pairs of one sample (``x`` a row block
    of ``y``, every row visited once), as :func:`stein_terms` with ``for_sums=True``:
    the terms of ``u = kappa G + kappa' C1 + kappa'' C2`` are summed over ``b`` before
    the score products are formed. With ``K = kappa(S)``, ``K' = kappa'(S)``,
    ``xh = (x - centre) / h`` and ``C1_ab = 4 xh_a^T (s_b - s_a) - 2 sum_d 1/h_d`` (the
    symmetrised cross term of :func:`stein_terms`):

    .. math::

        \\sum_b u_{ab} = s_a^T (K S)_a + 4\\, xh_a^T (K' S)_a
          - (4\\, xh_a^T s_a + 2 \\textstyle\\sum_d 1/h_d) (K' 1)_a
          - 4 \\textstyle\\sum_b \\kappa''_{ab} \\sum_d (x_{ad} - y_{bd})^2 / h_d^2.

    Two ``n x n x d`` products besides the distances (one for the RBF kernel,
    ``kappa' = r kappa``), against three for the terms; on the CPU backend the
    product-then-reduce layout also fuses better (the trace's KSD at n = 1000,
    d = 100: 6.4 -> 4.0 ms, measured). Entry by entry these are not the Stein kernel's
    row sums (the cross term is symmetrised); their total over all rows is.
    """
    sq, sq2, inv_row, inv_sum = _scaled_distances(x, y, kernel.scale, sqdist, row_index)
    xh = (x - jnp.mean(y, axis=0, keepdims=True)) * inv_row  # the cross term is translation invariant: centre first
    ratios = _ratios(kernel)
    if ratios is not None:  # kappa' = r1 kappa, kappa'' = r2 kappa: one product
        r1, r2 = ratios
        kap = kernel.profile(sq)[0]
        ks = kap @ score_y
        d1_s, d1_rows, d2_sq = r1 * ks, r1 * jnp.sum(kap, axis=1), r2 * jnp.sum(kap * sq2, axis=1)
    else:
        kap, d1, d2 = kernel.profile(sq)
        ks, d1_s = kap @ score_y, d1 @ score_y
        d1_rows, d2_sq = jnp.sum(d1, axis=1), jnp.sum(d2 * sq2, axis=1)
    return (jnp.sum(score_x * ks, axis=1) + 4.0 * jnp.sum(xh * d1_s, axis=1)
            - (4.0 * jnp.sum(xh * score_x, axis=1) + 2.0 * inv_sum) * d1_rows - 4.0 * d2_sq)


def stein_kernel_matrix(
    x: jax.Array,
    score_x: jax.Array,
    y: jax.Array,
    score_y: jax.Array,
    kernel: AbstractKernel,
    sqdist: jax.Array | None = None,
) -> jax.Array:
    """Langevin Stein kernel ``u_p(x_i, y_j)`` as an ``[n, m]`` matrix.

    Implements the integrand of eq. 14 of the MK-SVGD paper (the ``s_q`` of
    the printed equation is a typo for ``s_p``; ALGORITHMS.md section A):

    .. math::

        u_p(x, y) = s(x)^T s(y)\\, k(x, y) + s(x)^T \\nabla_y k(x, y)
                    + \\nabla_x k(x, y)^T s(y) + \\operatorname{tr} \\nabla_x \\nabla_y k(x, y),

    with ``s = nabla log p``. For the kernels of :mod:`steinax.kernels`
    (``k = kappa(s_xy)``, ``s_xy = sum_d (x_d - y_d)^2 / h_d``) the middle two
    terms are ``2 kappa' ((x - y)/h)^T (s(y) - s(x))`` and the trace is
    ``-2 kappa' sum_d 1/h_d - 4 kappa'' sum_d (x_d - y_d)^2 / h_d^2``
    (:mod:`steinax.kernels.base`); all are evaluated with matrix products
    (:func:`stein_terms`), no ``n x m x d`` tensor is formed.

    Args:
        x, score_x: ``[n, d]`` points and their scores.
        y, score_y: ``[m, d]`` points and their scores.
        kernel: a resolved kernel (see :meth:`AbstractKernel.resolve`).
        sqdist: optional unscaled ``[n, m]`` squared distances of ``x`` and ``y``.
    """
    return stein_kernel_from_terms(kernel, stein_terms(x, score_x, y, score_y, kernel.scale, sqdist))


def stein_kernel_pairs(x, score_x, y, score_y, kernel: AbstractKernel) -> jax.Array:
    """``u_p(x_i, y_i)`` for matched rows (``[n]``), from :func:`stein_kernel_matrix` on 1 x 1 blocks."""

    def one(xi, si, yi, ti):
        return stein_kernel_matrix(xi[None], si[None], yi[None], ti[None], kernel)[0, 0]

    return jax.vmap(one)(x, score_x, y, score_y)


def _stein_kernel_diagonal(x, scores, kernel):
    """``u_p(x_i, x_i)`` for every ``i``."""
    return stein_kernel_pairs(x, scores, x, scores, kernel)


def ksd(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel | None = None,
    estimator: str = "v",
    *,
    block_size: int | None = None,
    squared: bool = True,
    engine: str = "auto",
    precision: str = "default",
) -> jax.Array:
    """Squared kernel Stein discrepancy ``S(q || p)`` (MK-SVGD paper, eq. 14).

    .. math::

        \\hat S_V = \\frac{1}{n^2} \\sum_{i,j} u_p(x_i, x_j), \\qquad
        \\hat S_U = \\frac{1}{n(n-1)} \\sum_{i \\ne j} u_p(x_i, x_j).

    The result is **squared**: ``sqrt`` of the V-statistic is the discrepancy
    itself. A kernel with a median rule is resolved on ``particles`` first.

    Args:
        particles: ``[n, d]`` samples of ``q``.
        scores: ``[n, d]`` values of ``nabla log p`` at ``particles``.
        kernel: any :class:`~steinax.kernels.AbstractKernel`; default ``IMQ(1, -1/2)``.
        estimator: ``"v"`` (default) or ``"u"`` (needs ``n >= 2``).
        block_size: evaluate in row blocks of this size, memory O(block_size * n);
            default automatic (:func:`~steinax.kernels.pairwise.pairwise_plan`).
        squared: ``True`` (default) returns ``S``; ``False`` returns ``sqrt(S)`` (V-statistic only).
        engine, precision: ``"auto"``/``"xla"`` (row blocks of matrix products, the fastest
            measured) or ``"fused"`` (the Pallas kernel of :mod:`steinax.kernels.fused`, memory
            O(n d), interpreted off CUDA); the products' precision, ``"default"`` (JAX's: TF32 on
            NVIDIA tensor cores), ``"float32"`` or ``"tf32"`` (distances always float32).

    Returns:
        A scalar of the particles' dtype.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from steinax.kernels import IMQ
        >>> x = jax.random.normal(jax.random.key(0), (500, 2))
        >>> bool(abs(ksd(x, -x, IMQ(), "u")) < 0.01)   # samples of N(0, I)
        True
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_estimator(estimator, particles.shape[0], squared)
    check_block_size(block_size)
    check_engine(engine, precision)
    kernel = as_kernel(kernel, IMQ())
    value = _ksd(particles, scores, kernel, estimator, block_size, engine, precision)
    check_finite_statistic(value, "the squared KSD", scores)
    return value if squared else jnp.sqrt(value)


def check_estimator(estimator: str, n: int, squared: bool = True) -> None:
    """Validate an ``estimator`` name (and that the unsquared value is asked of the V-statistic only)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"`estimator` must be one of {ESTIMATORS}; received {estimator!r}")
    if estimator == "u" and n < 2:
        raise ValueError(f"the U-statistic needs at least 2 particles; received `particles` with n = {n}")
    if not squared and estimator != "v":
        raise ValueError("`squared=False` (the square root) is defined for the V-statistic only; the U-statistic can be negative")


@eqx.filter_jit
def _ksd(particles, scores, kernel, estimator, block_size, engine="auto", precision="default"):
    """Squared KSD without input checks (see :func:`ksd`).

    Layout by :func:`~steinax.kernels.pairwise.pairwise_plan`: one fused pass
    over row blocks (distances, profile and Stein terms of a block computed
    together, summed at once), after storing the distances only when a median
    rule reads them and they fit. A block's sum is taken over the Stein kernel's
    terms (:func:`stein_terms`, everything elementwise after three products) or, for
    ``d >= 32`` in blocks of at least 256 rows, by :func:`stein_kernel_row_sums`
    (the kernel matrices times the scores). Both are exact; the choice is speed,
    measured on the CPU backend: the row sums take 4.0 instead of 6.4 ms at
    n = 1000, d = 100 and 130 instead of 141 ms at n = 5000, d = 100, but at d = 10
    (n = 5000: 58 against 37 ms) or in blocks of 104 rows (n = 20,000, d = 100:
    2.87 against 2.66 s) the fused terms win. With ``engine="fused"`` and no stored
    distances, kernels that :mod:`steinax.kernels.fused` serves are summed by its
    Pallas kernel; ``precision`` sets the products' precision (its policy).
    """
    n, d = particles.shape
    plan = pairwise_plan(n, particles.dtype, block_size, store_wanted=kernel.reads_distances, arrays=6)
    sqdist = squared_distances(particles, particles) if plan.store else None
    kernel = kernel.resolve(particles, sqdist, None if plan.store else plan.rows)
    row_sums = d >= 32 and (plan.rows is None or plan.rows >= 256)

    def xla_total(kernel, fast_path=True, points=None):
        x_all, s_all = (particles, scores) if points is None else points

        def rows(acc, row_index, xr, sr, *dr):
            def block(kernel):
                if row_sums:
                    sums = stein_kernel_row_sums(xr, sr, x_all, s_all, kernel, dr[0] if dr else None, row_index)
                    return jnp.sum(jnp.where(row_index >= 0, sums, 0.0))
                terms = stein_terms(xr, sr, x_all, s_all, kernel.scale, dr[0] if dr else None, for_sums=True,
                                    row_index=row_index)
                return jnp.sum(jnp.where((row_index >= 0)[:, None], stein_kernel_from_terms(kernel, terms), 0.0))

            return acc + (imq_fast_path(kernel, block) if fast_path else block(kernel))

        extra = (sqdist,) if plan.store else ()
        return fold_row_blocks(rows, jnp.zeros((), x_all.dtype), n, plan.rows, x_all, s_all, *extra)

    if plan.store or engine != "fused":
        with products_at(precision):
            total = xla_total(kernel)
    else:
        # the fused kernel serves an IMQ once beta = -1/2 is checked at run time (imq_fast_path's branch)
        def pick(k):
            return with_engine(
                engine, precision, (particles, scores, k), d,
                lambda interpret, x, s, kk: jnp.sum(fused_stein_row_sums(x, s, kk, precision=precision,
                                                                        interpret=interpret)),
                lambda x, s, kk: xla_total(kk, fast_path=False, points=(x, s)))

        total = imq_fast_path(kernel, pick)
    if estimator == "v":
        return total / float(n * n)
    return (total - jnp.sum(_stein_kernel_diagonal(particles, scores, kernel))) / float(n * (n - 1))


def block_ksd(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel,
    *,
    block: int = 64,
    rng_key: jax.Array | None = None,
    resolve_points: int = 1000,
) -> jax.Array:
    """Linear-time squared KSD: the average of U-statistics over disjoint blocks of ``block`` samples.

    .. math::

        \\hat S_B = \\frac{1}{\\lfloor n / B \\rfloor} \\sum_{b} \\frac{1}{B (B - 1)}
                    \\sum_{i \\ne j \\in \\text{block } b} u_p(x_i, x_j),

    unbiased for i.i.d. samples like the U-statistic of :func:`ksd`, at cost
    O(n B d) instead of O(n^2 d), with variance about ``n / B`` times larger
    (``block=2`` is Liu, Lee & Jordan 2016's linear-time statistic). For n in the
    millions. Rows beyond the last full block are dropped. Pass ``rng_key`` to
    shuffle first (do so for MCMC output: consecutive draws are correlated and
    would bias within-block pairs). A kernel with a median rule is resolved on
    the first ``resolve_points`` (shuffled) samples; a fixed kernel is used as is.

    Returns:
        A scalar (squared, can be negative).
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    n = particles.shape[0]
    if not isinstance(block, int) or block < 2:
        raise ValueError(f"`block` must be an integer >= 2; received {block!r}")
    if n < block:
        raise ValueError(f"`block_ksd` needs at least `block` = {block} samples; received n = {n}")
    if rng_key is not None:
        perm = jax.random.permutation(rng_key, n)
        particles, scores = particles[perm], scores[perm]
    kernel = as_kernel(kernel, IMQ()).resolve(particles[:resolve_points])
    m = n // block
    xb = particles[: m * block].reshape(m, block, -1)
    sb = scores[: m * block].reshape(m, block, -1)

    def one(args):
        x, s = args
        u = stein_kernel_matrix(x, s, x, s, kernel)
        return (jnp.sum(u) - jnp.sum(jnp.diagonal(u))) / (block * (block - 1))

    return jnp.mean(jax.lax.map(one, (xb, sb), batch_size=256))
