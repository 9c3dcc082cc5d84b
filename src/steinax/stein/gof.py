"""Goodness-of-fit tests with the kernel Stein discrepancies and a wild bootstrap.

``H0: the samples come from p``, tested with ``n * S`` where ``S`` is the squared
KSD (:func:`steinax.ksd`) or KCC-SD (:func:`steinax.stein.kcc_sd`), U- or
V-statistic. The null distribution is approximated by the **wild bootstrap**
of Chwialkowski, Strathmann & Gretton (2016) with Rademacher-type multipliers
``w in {-1, +1}^n``:

* ``bootstrap="iid"``: independent Rademacher signs, for independent samples;
* ``bootstrap="dependent"``: for autocorrelated samples (MCMC chains), the
  wild bootstrap for dependent data of Chwialkowski, Sejdinovic & Gretton
  (2014), in the form of Chwialkowski, Strathmann & Gretton (2016, sec. 2.2):
  within each chain ``w_1 = +-1`` with equal probability and
  ``w_t = -w_{t-1}`` with probability ``1 / block_length``, else ``w_t = w_{t-1}``,
  so ``corr(w_t, w_s) = (1 - 2 / block_length)^{|t - s|}``: the signs persist over
  about ``block_length`` draws and the bootstrap keeps the chain's
  autocorrelation. Chains are independent of each other. ``block_length = 2``
  (a fair coin at every draw) is the i.i.d. case; it must be ``>= 2``. The
  expected length of a run of equal signs is ``block_length``. With
  ``block_length="auto"`` it is ``max(2, ceil(8 tau))`` with ``tau`` the largest
  integrated autocorrelation time of the coordinates
  (:func:`integrated_autocorrelation_time`); see ``gof_test``.

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

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._memory import require_memory
from steinax._validation import check_block_size, check_finite_statistic, check_key, check_particles, check_scores, user_stacklevel
from steinax.kernels.base import IMQ, AbstractKernel, as_kernel, imq_fast_path, map_coordinates
from steinax.kernels.pairwise import fold_row_blocks, pairwise_plan
from steinax.stein.ksd import check_estimator, stein_kernel_from_terms, stein_terms

__all__ = [
    "BOOTSTRAPS",
    "DISCREPANCIES",
    "GofResult",
    "MIN_BLOCKS",
    "UntestableWarning",
    "bootstrap_statistics",
    "chain_autocovariance",
    "checked_test_inputs",
    "fold_symmetric_tiles",
    "gof_test",
    "integrated_autocorrelation_time",
    "stein_matrix_rows",
    "wild_bootstrap_multipliers",
]

DISCREPANCIES = ("ksd", "kcc_sd")
BOOTSTRAPS = ("iid", "dependent")
# block_length="auto" is ceil(AUTO_BLOCK_FACTOR * tau): 8 held the level on AR(1) chains with tau up to 19
# (experiments/diagnostics/dependent_bootstrap.py; 6 over-rejected, 12 was conservative)
AUTO_BLOCK_FACTOR = 8.0
# a dependent bootstrap needs at least this many blocks (block_length <= draws / MIN_BLOCKS) per chain: with
# fewer, the signs are nearly constant within a chain, w^T H w ~ T for any H, and p ~ 1 whatever the samples
# (a chain centred at 3 tested against N(0, 1): squared KSD 15.7, p = 0.35)
MIN_BLOCKS = 10


class UntestableWarning(UserWarning):
    """A goodness-of-fit test could not have power on these samples (see ``GofResult.untestable``)."""


class GofResult(eqx.Module):
    """Result of :func:`gof_test`.

    Attributes:
        statistic: ``n * S`` (``S`` the squared discrepancy, U- or V-statistic).
        p_value: bootstrap p-value ``(1 + #{T* >= T}) / (1 + B)``.
        threshold: the ``1 - level`` quantile of the bootstrap statistics.
        reject: ``p_value <= level``.
        discrepancy: the squared discrepancy ``S`` itself.
        bootstrap: which wild bootstrap ran: ``"iid"`` or ``"dependent"``.
        block_length: the dependent bootstrap's expected run length of equal signs (``None`` for iid).
        chains: the number of chains the samples were split into.
        untestable: ``None``, or why the test cannot have power on these samples (then ``p_value``
            and ``threshold`` are NaN and ``reject`` is ``None``: no decision, neither "reject" nor "do not
            reject"; ``reject is None`` is the test for it).
    """

    statistic: jax.Array
    p_value: jax.Array
    threshold: jax.Array
    reject: jax.Array | None
    discrepancy: jax.Array
    level: float = eqx.field(static=True)
    n_bootstrap: int = eqx.field(static=True)
    estimator: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    bootstrap: str = eqx.field(static=True, default="iid")
    block_length: int | None = eqx.field(static=True, default=None)
    chains: int = eqx.field(static=True, default=1)
    untestable: str | None = eqx.field(static=True, default=None)


def stein_matrix_rows(kind: str, particles, scores, kernel: AbstractKernel, block_size: int | None = None):
    """``rows(row_index, x_rows, s_rows) -> H[rows, :]``, the Stein kernel matrix of ``kind`` by row blocks.

    ``"ksd"``: the Langevin Stein kernel with ``kernel`` resolved on all samples
    (a median rule in row blocks of ``block_size``, never an ``[n, n]`` matrix, when given);
    ``"kcc_sd"``: the sum over coordinates of the 1-D Stein kernels, each
    coordinate's kernel resolved on that coordinate (as :func:`steinax.stein.kcc_sd`).
    """
    if kind == "ksd":
        kernel = kernel.resolve(particles, None, block_size)

        def rows(row_index, xr, sr):
            def block(k):
                return stein_kernel_from_terms(k, stein_terms(xr, sr, particles, scores, k.scale, row_index=row_index))

            return imq_fast_path(kernel, block)

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


def chain_autocovariance(x: np.ndarray) -> np.ndarray:
    """``[c, t, d]`` each chain's lag-k autocovariances about its own mean, divided by ``t`` (NumPy, by FFT,
    zero-padded to a power of two at least ``2t - 1``: no wrap-around)."""
    t = x.shape[1]
    xc = x - x.mean(axis=1, keepdims=True)
    size = 1 << (2 * t - 1).bit_length()
    f = np.fft.rfft(xc, n=size, axis=1)
    return np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :t] / t


def integrated_autocorrelation_time(chains, window_factor: float = 5.0) -> float:
    """Largest integrated autocorrelation time over the coordinates of ``chains`` ``[c, t, d]``.

    ``tau = 1 + 2 sum_{k=1}^{M} rho_k`` with ``rho_k`` the lag-k autocorrelation
    (FFT, averaged over chains) and Sokal's automatic window: the smallest ``M``
    with ``M >= window_factor * tau(M)``. ``tau = 1`` for independent draws,
    ``(1 + phi) / (1 - phi)`` for an AR(1) chain with coefficient ``phi``.
    Computed on the host with NumPy (it only chooses a static block length).
    """
    x = np.asarray(chains, np.float64)
    if x.ndim != 3 or x.shape[1] < 4:
        raise ValueError(f"`chains` must have shape [chains, draws >= 4, d]; received shape {x.shape}")
    c, t, d = x.shape
    acov = chain_autocovariance(x).mean(axis=0)
    var = acov[0]
    rho = np.where(var > 0, acov / np.where(var > 0, var, 1.0), 0.0)  # [t, d]
    taus = 2.0 * np.cumsum(rho, axis=0) - 1.0  # tau(M) for M = 0 .. t-1
    worst = 1.0
    for j in range(d):
        ok = np.arange(t) >= window_factor * taus[:, j]
        m = int(np.argmax(ok)) if ok.any() else t - 1
        worst = max(worst, float(taus[m, j]))
    return worst


def wild_bootstrap_multipliers(
    rng_key: jax.Array, n_bootstrap: int, n: int, dtype, *, bootstrap: str = "iid", block_length: int = 2, chains: int = 1
) -> jax.Array:
    """``[n_bootstrap, n]`` multipliers in ``{-1, +1}`` for the wild bootstrap (see the module docstring).

    ``"iid"``: independent Rademacher signs. ``"dependent"``: per chain (the
    ``n`` samples are ``chains`` equal chains laid one after the other), a
    sign process that flips with probability ``1 / block_length`` at each draw
    (Chwialkowski, Strathmann & Gretton 2016, sec. 2.2), computed as a
    cumulative product of flips, no loop.
    """
    if bootstrap == "iid":
        return jax.random.rademacher(rng_key, (n_bootstrap, n), dtype)
    key_start, key_flip = jax.random.split(rng_key)
    draws = n // chains
    start = jax.random.rademacher(key_start, (n_bootstrap, chains, 1), dtype)
    flips = jnp.where(jax.random.uniform(key_flip, (n_bootstrap, chains, draws - 1)) < 1.0 / block_length, -1.0, 1.0)
    signs = jnp.concatenate([jnp.ones((n_bootstrap, chains, 1)), jnp.cumprod(flips, axis=2)], axis=2)
    return (start * signs.astype(dtype)).reshape(n_bootstrap, n)


def resolve_block_length(block_length, samples, chains: int) -> int:
    """The dependent bootstrap's block length: an integer ``>= 2`` or ``"auto"`` (``max(2, ceil(8 tau))``)."""
    if isinstance(block_length, str):
        if block_length != "auto":
            raise ValueError(f"`block_length` must be an integer >= 2 or 'auto'; received {block_length!r}")
        x = np.asarray(samples)
        tau = integrated_autocorrelation_time(x.reshape(chains, x.shape[0] // chains, x.shape[1]))
        return max(2, int(np.ceil(AUTO_BLOCK_FACTOR * tau)))
    if isinstance(block_length, bool) or not isinstance(block_length, (int, np.integer)) or block_length < 2:
        raise ValueError(f"`block_length` must be an integer >= 2 or 'auto'; received {block_length!r}")
    draws = np.shape(samples)[0] // chains
    if block_length > draws // MIN_BLOCKS:
        raise ValueError(
            f"`block_length` = {block_length} leaves fewer than {MIN_BLOCKS} blocks in chains of {draws} draws; expected "
            f"at most {draws // MIN_BLOCKS} (with fewer blocks the dependent bootstrap has no power: p ~ 1 for any "
            "samples). Use longer chains, or thin them less"
        )
    return int(block_length)


BOOTSTRAP_HINT = "The test's level is resolved to about 1 / B: B of a few thousand is plenty."
"""What a refusal of a huge ``n_bootstrap`` suggests (every test)."""

MIN_TEST_SAMPLES = 20
"""The fewest samples a test takes. Below it the wild bootstrap has too few sign patterns (``2^(n-1)``) and too
few pairs to approximate the statistic's law: two exact draws got "REJECT, p = 0"."""


def checked_test_inputs(particles, scores, rng_key, estimator, level, n_bootstrap, bootstrap, block_length, chains,
                        kind="ksd", statistics: int = 1):
    """Validate a wild-bootstrap test's arguments; ``(particles, scores, block_length or None, untestable or None)``.

    Shared by :func:`gof_test` and :func:`steinax.stein.ksdagg.ksdagg_test`; an ``"auto"`` block length
    too long for the chains makes the test *untestable* (with an :class:`UntestableWarning`).
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_key(rng_key, "rng_key")
    n = particles.shape[0]
    check_estimator(estimator, n)
    if n < MIN_TEST_SAMPLES:
        raise ValueError(f"a goodness-of-fit test needs at least {MIN_TEST_SAMPLES} samples (its wild bootstrap cannot "
                         f"approximate the statistic's law on fewer); received `particles` with n = {n}")
    if kind not in DISCREPANCIES:
        raise ValueError(f"`kind` must be one of {DISCREPANCIES}; received {kind!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1); received {level!r}")
    for b in np.atleast_1d(np.asarray(n_bootstrap, dtype=object)):
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise ValueError(f"`n_bootstrap` must be a positive integer (or a pair of them); received {n_bootstrap!r}")
    if bootstrap not in BOOTSTRAPS:
        raise ValueError(f"`bootstrap` must be one of {BOOTSTRAPS}; received {bootstrap!r}")
    # the bootstrap statistics ([statistics, B], with their sorted and concatenated copies) are held whole; the
    # multipliers are drawn in batches within the memory budget
    draws = int(np.sum(np.asarray(n_bootstrap, dtype=object)))
    require_memory(4 * draws * int(statistics) * particles.dtype.itemsize, argument="n_bootstrap", received=n_bootstrap,
                   what=f"{draws:,} bootstrap statistics of {int(statistics)} kernel(s) and their sorted copies",
                   hint=BOOTSTRAP_HINT)
    if isinstance(chains, bool) or not isinstance(chains, (int, np.integer)) or chains < 1 or n % chains:
        raise ValueError(f"`chains` must be a positive integer dividing n = {n}; received {chains!r}")
    if bootstrap == "dependent" and n // chains < 4:
        raise ValueError(f"the dependent bootstrap needs chains of >= 4 draws; received {chains} chains of {n // chains}")
    length, untestable = None, None
    if bootstrap == "dependent" or not (isinstance(block_length, str) and block_length == "auto"):
        length = resolve_block_length(block_length, particles, int(chains))  # validated whichever bootstrap runs
    if bootstrap == "iid":
        length = None
    draws = n // int(chains)
    if length is not None and length > draws // MIN_BLOCKS:  # only "auto" gets here: an explicit length is refused
        untestable = (
            f"the chains' autocorrelation asks for blocks of {length} draws, so chains of {draws} draws hold fewer "
            f"than {MIN_BLOCKS} blocks and the dependent bootstrap cannot have power (a stuck or slowly mixing "
            f"chain): no decision. Run the chains for at least {MIN_BLOCKS * length} draws"
        )
        warnings.warn(untestable, UntestableWarning, stacklevel=user_stacklevel())  # the user's line
    return particles, scores, length, untestable


def gof_test(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel | None = None,
    *,
    rng_key: jax.Array,
    kind: str = "ksd",
    estimator: str = "v",
    level: float = 0.05,
    n_bootstrap: int = 1000,
    block_size: int | None = None,
    bootstrap: str = "iid",
    block_length: int | str = "auto",
    chains: int = 1,
) -> GofResult:
    """Kernel Stein goodness-of-fit test with a wild (Rademacher) bootstrap.

    Args:
        particles: ``[n, d]`` samples to test (draws of any sampler, or particles).
        scores: ``[n, d]`` values of ``nabla log p`` at ``particles``.
        kernel: default ``IMQ(1, -1/2)`` (KSD controls weak convergence with it).
        rng_key: JAX key for the bootstrap multipliers (explicit, no hidden state).
        kind: ``"ksd"`` or ``"kcc_sd"``.
        estimator: ``"v"`` (default) or ``"u"``.
        level: test level in (0, 1).
        n_bootstrap: number of bootstrap draws ``B``.
        block_size: rows of ``H`` per block (memory O(block_size * n + B * n)); default
            automatic (:func:`~steinax.kernels.pairwise.pairwise_plan`), so a median-rule
            kernel never builds the ``[n, n]`` distance matrix at large ``n``.
        bootstrap: ``"iid"`` (independent particles) or ``"dependent"`` (autocorrelated
            chains; see the module docstring).
        block_length: the dependent bootstrap's expected run of equal signs, an
            integer ``>= 2`` or ``"auto"`` (from the chains' autocorrelation time). Each
            chain must hold at least ``MIN_BLOCKS`` = 10 blocks: a larger integer is refused,
            and an ``"auto"`` length beyond it makes the result *untestable* (no decision,
            NaN p-value, an :class:`UntestableWarning`), never "do not reject".
        chains: the particles are this many equal-length chains, one after the other
            (chain-major); the dependent multipliers restart at every chain.

    Example:
        >>> import jax
        >>> x = jax.random.normal(jax.random.key(0), (200, 2))
        >>> res = gof_test(x, -x, rng_key=jax.random.key(1))
        >>> bool(res.reject)      # particles of N(0, I) tested against N(0, I)
        False
    """
    particles, scores, length, untestable = checked_test_inputs(particles, scores, rng_key, estimator, level, n_bootstrap,
                                                                bootstrap, block_length, chains, kind)
    check_block_size(block_size)
    kernel = as_kernel(kernel, IMQ())
    statistic, p_value, threshold, discrepancy = _bootstrap_in_batches(
        rng_key, int(n_bootstrap), kind, particles, scores, kernel, estimator, level, block_size, bootstrap, length, int(chains))
    if untestable is not None:
        p_value, threshold = jnp.full_like(p_value, jnp.nan), jnp.full_like(threshold, jnp.nan)
    result = GofResult(
        statistic=statistic,
        p_value=p_value,
        threshold=threshold,
        reject=None if untestable is not None else p_value <= level,  # no decision when untestable
        discrepancy=discrepancy,
        level=level,
        n_bootstrap=int(n_bootstrap),
        estimator=estimator,
        kind=kind,
        bootstrap=bootstrap,
        block_length=length,
        chains=int(chains),
        untestable=untestable,
    )
    check_finite_statistic(discrepancy, f"the squared {kind.upper().replace('_', '-')}", scores)
    return result


def _bootstrap_in_batches(rng_key, n_bootstrap, kind, particles, scores, kernel, estimator, level, block_size, bootstrap,
                          length, chains):
    """The test's statistic, p-value, threshold and discrepancy (:func:`bootstrap_statistics`: batches of
    bootstrap draws that fit the memory budget)."""
    statistic, boot, discrepancy = bootstrap_statistics(rng_key, n_bootstrap, kind, particles, scores, kernel, estimator,
                                                        block_size, bootstrap, length, chains)
    p_value = (1.0 + jnp.sum(boot >= statistic)) / (1.0 + n_bootstrap)
    threshold = jnp.quantile(boot, 1.0 - level)
    return statistic, p_value, threshold, discrepancy


def bootstrap_statistics(rng_key, n_bootstrap, kind, particles, scores, kernel, estimator, block_size, bootstrap,
                         length, chains):
    """``(statistic, boot [B], discrepancy)``: the test statistic and its ``B`` wild-bootstrap copies (module docstring).

    The multipliers depend only on ``rng_key``, ``B``, ``n`` and the bootstrap's kind, so calls with
    different kernels and the same key share them (KSDAgg's joint bootstrap). One ``[B, n]`` batch
    when ``B n`` values take at most a quarter of the memory budget; beyond, each batch of draws is
    its own pass over the Stein kernel matrix (keys ``fold_in(rng_key, batch)``), so memory stays
    bounded at any ``n``.
    """
    from steinax.kernels.pairwise import memory_budget

    n, itemsize = particles.shape[0], jnp.dtype(particles.dtype).itemsize
    per_batch = max(1, min(n_bootstrap, (memory_budget() // 4) // max(1, n * itemsize)))

    def multipliers(key, count):
        return wild_bootstrap_multipliers(key, count, n, particles.dtype, bootstrap=bootstrap, block_length=length or 2,
                                          chains=chains)

    if per_batch >= n_bootstrap:
        return _gof(kind, particles, scores, kernel, multipliers(rng_key, n_bootstrap), estimator, block_size)
    boots = []
    for b, start in enumerate(range(0, n_bootstrap, per_batch)):
        w = multipliers(jax.random.fold_in(rng_key, b), min(per_batch, n_bootstrap - start))
        statistic, boot_b, discrepancy = _gof(kind, particles, scores, kernel, w, estimator, block_size)
        boots.append(boot_b)
    return statistic, jnp.concatenate(boots), discrepancy


TILE = 512
"""Rows (and columns) of a tile of the KSD's bootstrap pass (:func:`fold_symmetric_tiles`)."""


def fold_symmetric_tiles(samples, scores, w, tile: int, tile_matrices):
    """``([N] sum_ab H_ab, [N] sum_a H_aa, [N, B] w^T H w)`` for ``N`` symmetric Stein kernel matrices ``H``.

    One pass over the upper triangle of ``tile x tile`` blocks: ``H`` is symmetric, so an off-diagonal
    tile stands for itself and its transpose (counted twice), half the bootstrap's ``B n^2``
    multiply-adds of a pass over full row blocks; the ``B`` quadratic forms of all ``N`` matrices come
    from one ``[N tile, tile] x [tile, B]`` product per tile. ``tile_matrices(xi, si, xj, sj, row_index)
    -> [N, tile, tile]`` evaluates the matrices on a tile (``row_index``: the diagonal tiles' own rows,
    ``-1`` elsewhere, for exactly zero self-distances). Rows beyond ``n`` are padding: their multipliers
    are 0 and they are masked out of the sums.
    """
    n, dtype = samples.shape[0], samples.dtype
    tile = min(tile, n)
    nb = -(-n // tile)
    pad = nb * tile - n
    # the Stein kernel is translation invariant: centre once (smaller rounding in the distances' products)
    xp = jnp.concatenate([samples, jnp.repeat(samples[-1:], pad, axis=0)]) - jnp.mean(samples, axis=0, keepdims=True)
    sp = jnp.concatenate([scores, jnp.repeat(scores[-1:], pad, axis=0)])
    wp = jnp.concatenate([w, jnp.zeros((w.shape[0], pad), dtype)], axis=1).T  # [n + pad, B]: tiles are row slices
    valid = jnp.arange(nb * tile) < n
    pairs = jnp.asarray(np.array([(i, j) for i in range(nb) for j in range(i, nb)], dtype=np.int32))

    def one(acc, ij):
        total, diag, boot = acc
        i, j = ij[0], ij[1]
        sl = lambda a, k, axis=0: jax.lax.dynamic_slice_in_dim(a, k * tile, tile, axis=axis)  # noqa: E731
        row_index = jnp.where(i == j, jnp.arange(tile), -1)
        mask = sl(valid, i)[:, None] & sl(valid, j)[None, :]
        h = jnp.where(mask[None], tile_matrices(sl(xp, i), sl(sp, i), sl(xp, j), sl(sp, j), row_index), 0.0)
        factor = jnp.where(i == j, 1.0, 2.0).astype(dtype)
        wi, wj = sl(wp, i), sl(wp, j)  # [tile, B]
        # per matrix, w_i^T (H w_j) as one fused product and column sum (XLA:CPU fuses the GEMM with the
        # product and the reduction: 2.2x the speed of one [N tile, tile] x [tile, B] GEMM and a contraction,
        # whose [N, tile, B] intermediate is memory-bound; measured at n = 250, B = 4001, N = 10). Unrolled
        # over the N matrices on purpose: the same product under vmap is miscompiled by XLA:CPU (jax 0.10.2)
        # at these sizes (relative error 1.2; tests/stein/test_ksdagg.py checks the pass against float64)
        quad = jnp.stack([jnp.sum(wi * (h[k] @ wj), axis=0) for k in range(h.shape[0])])  # [N, B]
        boot = boot + factor * quad
        diag = diag + jnp.where(i == j, jnp.trace(h, axis1=1, axis2=2), 0.0)
        return (total + factor * jnp.sum(h, axis=(1, 2)), diag, boot), None

    count = jax.eval_shape(lambda: tile_matrices(xp[:tile], sp[:tile], xp[:tile], sp[:tile],
                                                 jnp.arange(tile))).shape[0]
    init = (jnp.zeros((count,), dtype), jnp.zeros((count,), dtype), jnp.zeros((count, w.shape[0]), dtype))
    return jax.lax.scan(one, init, pairs)[0]


@eqx.filter_jit
def _gof(kind, samples, scores, kernel, w, estimator, block_size):
    """The test's statistic, bootstrap statistics and discrepancy from multipliers ``w`` ``[B, n]`` (compiled)."""
    n = samples.shape[0]
    n_bootstrap = w.shape[0]
    dtype = samples.dtype
    # automatic blocks by default: a block holds H's rows, their products with the B multipliers and the terms
    block_size = pairwise_plan(n, dtype, block_size, store_wanted=False, arrays=6, columns=n + n_bootstrap).rows
    if kind == "ksd" and n > TILE:  # symmetric tiles: half the bootstrap's work (fold_symmetric_tiles)
        kernel = kernel.resolve(samples, None, block_size)

        def tile_matrix(xi, si, xj, sj, row_index):
            def block(k):
                return stein_kernel_from_terms(k, stein_terms(xi, si, xj, sj, k.scale, row_index=row_index))

            return imq_fast_path(kernel, block)[None]

        total, diag, boot = fold_symmetric_tiles(samples, scores, w, min(TILE, block_size or TILE), tile_matrix)
        return _statistics(total[0], diag[0], boot[0], n, estimator)
    rows = stein_matrix_rows(kind, samples, scores, kernel, block_size)

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
    return _statistics(total, diag, boot, n, estimator)


def _statistics(total, diag, boot, n, estimator):
    """``(statistic, boot, discrepancy)`` from the sums of ``H``, of its diagonal, and the ``w^T H w``."""
    if estimator == "v":
        return total / n, boot / n, total / float(n * n)
    # w_a^2 = 1: every w^T H w holds the same diagonal sum, removed like the statistic's
    return (total - diag) / (n - 1), (boot - diag) / (n - 1), (total - diag) / float(n * (n - 1))
