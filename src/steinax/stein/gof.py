"""Goodness-of-fit tests with the kernel Stein discrepancies and a wild bootstrap.

``H0: the samples come from p``, tested with ``n * S`` where ``S`` is the squared
KSD (:func:`steinax.ksd`) or KCC-SD (:func:`steinax.stein.kcc_sd`), U- or
V-statistic. The null distribution is approximated by the **wild bootstrap**
of Chwialkowski, Strathmann & Gretton (2016) with Rademacher multipliers
``w in {-1, +1}^n`` (i.i.d. samples, so no autocorrelated multipliers):

.. math::

    T = \\frac{1}{n} \\sum_{a, b} H_{ab}\\;(V), \\qquad
    T^*_w = \\frac{1}{n} \\sum_{a, b} w_a w_b H_{ab},

with ``1/(n - 1)`` and the diagonal excluded for the U-statistic; ``H`` is the
Stein kernel matrix. With Rademacher multipliers ``w_a^2 = 1``, so the diagonal
adds the same constant to ``T`` and to every ``T*`` (after the same rescaling):
the U- and V-statistic tests return the same p-value and decision; both are
offered because their statistics and thresholds differ. (Liu, Lee & Jordan 2016's multinomial bootstrap does not
reproduce the degenerate null, so it is not offered.) ``p = (1 + #{T* >= T}) / (1 + B)``.

The ``B`` bootstrap statistics are computed together as ``w^T H w`` for a
``[B, n]`` multiplier matrix, one row block of ``H`` at a time (memory
O(block * n + B * n)); no Python loop over draws.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_particles, check_scores
from steinax.kernels.base import AbstractKernel, IMQ, map_coordinates
from steinax.kernels.pairwise import fold_row_blocks
from steinax.stein.ksd import check_estimator, stein_kernel_from_terms, stein_terms

__all__ = ["DISCREPANCIES", "GofResult", "gof_test", "stein_matrix_rows"]

DISCREPANCIES = ("ksd", "kcc_sd")


class GofResult(eqx.Module):
    """Result of :func:`gof_test`.

    Attributes:
        statistic: ``n * S`` (``S`` the squared discrepancy, U- or V-statistic).
        p_value: bootstrap p-value ``(1 + #{T* >= T}) / (1 + B)``.
        threshold: the ``1 - level`` quantile of the bootstrap statistics.
        reject: ``p_value <= level``.
        discrepancy: the squared discrepancy ``S`` itself.
    """

    statistic: jax.Array
    p_value: jax.Array
    threshold: jax.Array
    reject: jax.Array
    discrepancy: jax.Array
    level: float = eqx.field(static=True)
    n_bootstrap: int = eqx.field(static=True)
    estimator: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)


def stein_matrix_rows(kind: str, particles, scores, kernel: AbstractKernel):
    """``rows(row_index, x_rows, s_rows) -> H[rows, :]``, the Stein kernel matrix of ``kind`` by row blocks.

    ``"ksd"``: the Langevin Stein kernel with ``kernel`` resolved on all samples;
    ``"kcc_sd"``: the sum over coordinates of the 1-D Stein kernels, each
    coordinate's kernel resolved on that coordinate (as :func:`steinax.stein.kcc_sd`).
    """
    if kind == "ksd":
        kernel = kernel.resolve(particles)

        def rows(row_index, xr, sr):
            return stein_kernel_from_terms(kernel, stein_terms(xr, sr, particles, scores, kernel.scale, row_index=row_index))

        return rows
    kernels = map_coordinates(lambda col, s_col, k_i: k_i.resolve(col), particles, scores, kernel)
    d = particles.shape[1]

    def rows_cc(row_index, xr, sr):
        def add(acc, i):
            k_i = jax.tree_util.tree_map(lambda a: a[i], kernels)
            col = lambda a: jax.lax.dynamic_slice_in_dim(a, i, 1, axis=1)  # noqa: E731
            terms = stein_terms(col(xr), col(sr), col(particles), col(scores), k_i.scale, row_index=row_index)
            return acc + stein_kernel_from_terms(k_i, terms), None

        return jax.lax.scan(add, jnp.zeros((xr.shape[0], particles.shape[0]), particles.dtype), jnp.arange(d))[0]

    return rows_cc


def gof_test(
    samples: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel | None = None,
    *,
    rng_key: jax.Array,
    kind: str = "ksd",
    estimator: str = "v",
    level: float = 0.05,
    n_bootstrap: int = 1000,
    block_size: int | None = None,
) -> GofResult:
    """Kernel Stein goodness-of-fit test with a wild (Rademacher) bootstrap.

    Args:
        samples: ``[n, d]`` samples to test.
        scores: ``[n, d]`` values of ``nabla log p`` at ``samples``.
        kernel: default ``IMQ(1, -1/2)`` (KSD controls weak convergence with it).
        rng_key: JAX key for the bootstrap multipliers (explicit, no hidden state).
        kind: ``"ksd"`` or ``"kcc_sd"``.
        estimator: ``"v"`` (default) or ``"u"``.
        level: test level in (0, 1).
        n_bootstrap: number of bootstrap draws ``B``.
        block_size: rows of ``H`` per block (memory O(block_size * n + B * n)).

    Example:
        >>> import jax
        >>> x = jax.random.normal(jax.random.key(0), (200, 2))
        >>> res = gof_test(x, -x, rng_key=jax.random.key(1))
        >>> bool(res.reject)      # samples of N(0, I) tested against N(0, I)
        False
    """
    samples = check_particles(samples, "samples")
    scores = check_scores(scores, samples)
    n = samples.shape[0]
    check_estimator(estimator, n)
    if n < 2:
        raise ValueError(f"a test needs at least 2 samples; received `samples` with n = {n}")
    if kind not in DISCREPANCIES:
        raise ValueError(f"`kind` must be one of {DISCREPANCIES}; received {kind!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1); received {level!r}")
    if not isinstance(n_bootstrap, int) or n_bootstrap < 1:
        raise ValueError(f"`n_bootstrap` must be a positive integer; received {n_bootstrap!r}")
    kernel = IMQ() if kernel is None else kernel
    rows = stein_matrix_rows(kind, samples, scores, kernel)
    dtype = samples.dtype
    w = jax.random.rademacher(rng_key, (n_bootstrap, n), dtype)

    def block(acc, row_index, xr, sr):
        total, diag, boot = acc
        valid = row_index >= 0
        safe = jnp.where(valid, row_index, 0)
        h = jnp.where(valid[:, None], rows(row_index, xr, sr), 0.0)
        h_diag = h[jnp.arange(h.shape[0]), safe]  # H_aa of the block's rows (0 for padding)
        boot = boot + jnp.sum(w[:, safe] * (w @ h.T), axis=1)  # padding columns of h are 0
        return total + jnp.sum(h), diag + jnp.sum(h_diag), boot

    init = (jnp.zeros((), dtype), jnp.zeros((), dtype), jnp.zeros((n_bootstrap,), dtype))
    total, diag, boot = fold_row_blocks(block, init, n, block_size, samples, scores)
    if estimator == "v":
        discrepancy, statistic, boot = total / float(n * n), total / n, boot / n
    else:  # w_a^2 = 1: every w^T H w holds the same diagonal sum, removed like the statistic's
        discrepancy, statistic, boot = (total - diag) / float(n * (n - 1)), (total - diag) / (n - 1), (boot - diag) / (n - 1)
    p_value = (1.0 + jnp.sum(boot >= statistic)) / (1.0 + n_bootstrap)
    threshold = jnp.quantile(boot, 1.0 - level)
    return GofResult(
        statistic=statistic,
        p_value=p_value,
        threshold=threshold,
        reject=p_value <= level,
        discrepancy=discrepancy,
        level=level,
        n_bootstrap=n_bootstrap,
        estimator=estimator,
        kind=kind,
    )
