"""Bandwidth rules for the RBF kernel ``k(x, y) = exp(-||x - y||^2 / h)``.

One function, :func:`median_bandwidth`, owns every rule. Each rule is exact
(no subsampling unless asked for), so the resolved bandwidth is invariant to
permuting particles, and a sharded run gives the same ``h`` as a single-device one.

Rules (``n`` particles, ``D_ij = ||x_i - x_j||^2``):

``"liu"`` (default)
    Liu & Wang's reference code (``svgd.py``): ``med`` is the median of all
    ``n^2`` entries of ``D``, the ``n`` diagonal zeros included (numpy's median:
    the mean of the two middle values when ``n^2`` is even), and
    ``h = med / log(n + 1)``. This reproduces the papers' runs.
``"pairs"``
    The median over the ``n(n-1)/2`` distinct pairs ``i < j`` of ``D``, and
    ``h = med / log(n + 1)``. Unbiased by the zero diagonal.
``"per_dimension"``
    One bandwidth per coordinate (Pyro's rule, used by coordinate-wise
    kernels): ``h_d = median_{i<j} (x_id - x_jd)^2 / log(n + 1)``. Returns a
    ``[d]`` vector; the RBF kernel then reads ``exp(-sum_d (x_d - y_d)^2 / h_d)``.
``"liu_subsampled"``
    ``"liu"`` on ``max_points`` of the particles (explicit option for huge ``n``;
    not permutation-equivariant): a random subset when ``rng_key`` is given, else
    the evenly strided rows ``0, s, 2s, ...`` with ``s = n // max_points``
    (deterministic, so ``RBF("liu_subsampled")`` needs no key). The log factor
    uses the full ``n``.

Fallback: when the median is zero or not finite (``n = 1``, or all particles
coincide) the bandwidth is ``1.0``; there is no scale to read off the particles.

The result is wrapped in ``jax.lax.stop_gradient``: the bandwidth is a
heuristic, not a function of the particles to differentiate through
(SteinGP's code differentiates through it and gets a wrong repulsion; see
ALGORITHMS.md section D).

Cost: never a sort of ``n^2`` values. The exact median is found by the
bracket-and-compact selection of :mod:`steinax.kernels.select`: a sample of the
distances brackets the middle ranks, one pass counts the distances below the
bracket and keeps the few inside it, and those are partitioned. On a stored
``D`` (dense mode) that is one pass over its strict upper triangle, packed into
one vector by a mirrored read (the ``n^2`` entries are the ``n`` zeros and each
pair twice, so ``"liu"``'s middle ranks map to pair ranks; on the CPU backend in
NumPy through one host call); in blocked mode the same packed triangle is
recomputed block by block in that one pass and never stored. Both are exact, so permuting,
blocking or sharding the particles does not change ``h``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from steinax._host import host_call
from steinax._platform import on_cpu_else
from steinax.kernels.pairwise import fold_row_blocks, pairwise_plan, squared_distances
from steinax.kernels.select import (
    POOL_WORKERS,
    _pool,
    _uint_type,
    dense_source,
    host_select,
    kth_from_source,
    limbs_le,
    limbs_sum,
    select_ranks,
    use_host,
)

__all__ = ["BANDWIDTH_RULES", "median_bandwidth", "median_squared_distance", "kth_smallest"]

BANDWIDTH_RULES = ("liu", "pairs", "per_dimension", "liu_subsampled")

def _median_of(values) -> jax.Array:
    """numpy's median convention from the values at the middle rank(s)."""
    return values[0] if values.shape[0] == 1 else 0.5 * (values[0] + values[1])


def _middle_ranks(count: int) -> list[int]:
    return [count // 2] if count % 2 == 1 else [count // 2 - 1, count // 2]


_DEVICE_SORT_MAX = 2**20
"""Up to this many values (unsharded), :func:`_dense_select`'s accelerator branch is one sort."""


def _dense_select(values: jax.Array, ranks, axis_name=None) -> jax.Array:
    """Exact values at ``ranks`` of a materialised 1-D array (:mod:`steinax.kernels.select`).

    On the CPU backend one host call brackets the ranks from a sample, compacts
    the few values in the bracket and partitions them (about 15x faster than one
    ``np.partition`` of everything at ``n = 5000``); on accelerators the same
    algorithm runs on the device, except below :data:`_DEVICE_SORT_MAX` values (and
    unsharded), where one sort is exact, a single cheap kernel there, and traces in a
    tenth of the bracket algorithm's time (both branches are traced on every
    platform: a one-off median, a thinning's, pays that tracing on its first call).
    """
    ranks = [int(r) for r in ranks]
    size = values.shape[0]

    def sample(key, m):
        return values[jax.random.randint(key, (m,), 0, size)]

    def on_device():
        if axis_name is None and size <= _DEVICE_SORT_MAX:
            return jnp.sort(values)[jnp.asarray(ranks)]
        return select_ranks(dense_source(values), ranks, size, values.dtype, sample, block_entries=size, host=False)

    if use_host(values.dtype, axis_name):
        shape = jax.ShapeDtypeStruct((len(ranks),), values.dtype)
        return on_cpu_else(lambda: host_call(functools.partial(_np_select, tuple(ranks)), [shape], values)[0],
                           on_device)
    return on_device()


def _np_select(ranks, values):
    return (host_select(values, ranks).astype(values.dtype),)


def _packed_upper_triangle(sqdist: jax.Array) -> tuple[jax.Array, int]:
    """The ``n(n-1)/2`` entries ``i < j`` of an ``[n, n]`` matrix and ``n // 2`` diagonal zeros, as one vector.

    Row ``r < n // 2`` of the packed ``[n // 2, n]`` rectangle is row ``r``'s upper
    part (columns ``j > r``) followed, where ``j <= r``, by the reversed matrix
    ``D[n-1-r, n-1-j]``: row ``n - 1 - r``'s upper part and one diagonal zero.
    Both reads run along rows, so XLA writes the rectangle in one elementwise
    pass (no gather). For odd ``n`` the middle row's upper part is appended.

    Returns:
        ``(values, zeros)``: the vector and the number of diagonal zeros in it
        (the smallest values of a distance matrix, so rank ``k`` among the pairs
        is rank ``k + zeros`` in the vector).
    """
    n = sqdist.shape[0]
    half = n // 2
    packed = _mirror_pack(jnp.arange(half), sqdist[:half], sqdist[::-1, ::-1][:half]).reshape(-1)
    if n % 2:
        packed = jnp.concatenate([packed, sqdist[half, half + 1 :]])
    return packed, half


def _mirror_pack(row_index: jax.Array, top: jax.Array, mirrored: jax.Array) -> jax.Array:
    """Rows of the packed triangle: ``top[i, j] = D[r_i, j]`` where ``j > r_i``, else ``mirrored[i, j] = D[n-1-r_i, n-1-j]``.

    ``row_index`` holds the rows ``r_i < n // 2``; the second part is row
    ``n - 1 - r_i``'s upper triangle and its diagonal zero, so each packed row
    has ``n`` entries: one zero and ``n - 1`` distinct pairs.
    """
    col = jnp.arange(top.shape[1])
    return jnp.where(col[None, :] > row_index[:, None], top, mirrored)


def _stored_median(sqdist: jax.Array, pairs: bool, axis_name=None) -> jax.Array:
    """The ``"liu"`` or ``"pairs"`` median of a stored ``[n, n]`` distance matrix, from its strict upper triangle.

    The ``n^2`` entries of a distance matrix are its ``n`` zero diagonal entries and
    every pair's distance twice, so the ``k``-th smallest of them is ``0`` for
    ``k < n`` and the ``(k - n) // 2``-th smallest pair distance otherwise: both
    rules select among the ``n(n-1)/2`` pairs (half the data of the full matrix).
    The lower triangle is not read; it equals the upper one bit for bit when the
    matrix comes from one product ``x x^T`` (checked in the tests).
    """

    def select(pair_ranks):
        values, zeros = _packed_upper_triangle(sqdist)
        return _dense_select(values, [k + zeros for k in pair_ranks], axis_name)

    return _median_over_pairs(sqdist.shape[0], pairs, sqdist.dtype, select)


def _median_over_pairs(n: int, pairs: bool, dtype, select) -> jax.Array:
    """The ``"pairs"`` or ``"liu"`` median from order statistics of the ``n(n-1)/2`` pair distances.

    ``select(pair_ranks)`` returns the values at those (static, ascending) ranks
    among the pairs. ``"liu"``'s ``n^2`` entries are the ``n`` zero self-distances
    and every pair twice, so its rank ``k`` is ``0`` for ``k < n`` and pair rank
    ``(k - n) // 2`` otherwise.
    """
    if pairs:
        return _median_of(select(_middle_ranks(n * (n - 1) // 2)))
    full = _middle_ranks(n * n)
    pair_ranks = sorted({(k - n) // 2 for k in full if k >= n})
    picked = select(pair_ranks) if pair_ranks else None
    zero = jnp.zeros((), dtype)
    return _median_of(jnp.stack([zero if k < n else picked[pair_ranks.index((k - n) // 2)] for k in full]))


def kth_smallest(values: jax.Array, k: int, mask: jax.Array | None = None) -> jax.Array:
    """Exact ``k``-th smallest (0-based) of the non-negative floats in ``values`` (bisection on bit patterns).

    Args:
        values: array of non-negative floats, any shape.
        k: 0-based rank among the (unmasked) entries (may be traced).
        mask: optional boolean array of ``values``' shape; ``False`` entries are ignored.
    """
    return kth_from_source(dense_source(values, mask), k, values.dtype)


def _finalise(med: jax.Array, n: int, stop_gradient: bool = True) -> jax.Array:
    """``h = med / log(n + 1)``, 1 where that is 0 or not finite; gradient stopped unless asked otherwise."""
    h = med / jnp.log(jnp.asarray(n + 1.0, med.dtype))
    h = jnp.where(jnp.isfinite(h) & (h > 0), h, jnp.ones_like(h))
    return jax.lax.stop_gradient(h) if stop_gradient else h


def _blocked_median(particles, block_size, pairs_only: bool, axis_name=None):
    """Median of the squared distances, recomputed block by block, never stored.

    Unsharded, the selection reads each pair once: the strict upper triangle,
    packed as in :func:`_packed_upper_triangle` (row ``i < n/2`` of the top half
    with the reversed row ``n-1-i``), block by block (:func:`_packed_fold`), so the
    host compacts half the values of full rows. With ``axis_name`` (inside
    ``shard_map``), ``particles`` are all particles and this device folds over
    the full rows of its own share.
    """
    n = particles.shape[0]

    def sample(key, m):
        i, j = jax.random.randint(key, (2, m), 0, n)
        j = jnp.where(i == j, (j + 1) % n, j)
        diff = particles[i] - particles[j]
        return jnp.sum(diff * diff, axis=-1)

    if axis_name is None:
        fold, count, zeros, block_rows = _packed_fold(particles, block_size)

        def select(pair_ranks):
            return select_ranks(fold, [r + zeros for r in pair_ranks], count, particles.dtype, sample,
                                block_entries=block_rows * n)

        return _median_over_pairs(n, pairs_only, particles.dtype, select)
    col = jnp.arange(n)
    n_dev = jax.lax.psum(1, axis_name)
    n_local = n // n_dev
    offset = jax.lax.axis_index(axis_name) * n_local
    rows = jax.lax.dynamic_slice_in_dim(particles, offset, n_local)

    def fold_local(fn, init):
        def block(acc, row_index, xr):
            index = jnp.where(row_index >= 0, row_index + offset, -1)
            d2 = squared_distances(xr, particles, row_index=index)
            return fn(acc, d2, (index >= 0)[:, None] & (index[:, None] < col[None, :]))

        return fold_row_blocks(block, init, n_local, block_size, rows)

    block_rows = n_local if block_size is None else min(block_size, n_local)

    def select_local(pair_ranks):
        return select_ranks(fold_local, pair_ranks, n * (n - 1) // 2, particles.dtype, sample,
                            block_entries=block_rows * n, axis_name=axis_name)

    return _median_over_pairs(n, pairs_only, particles.dtype, select_local)


def _packed_fold(particles, block_size):
    """A source over the strict upper triangle of the distances and ``n // 2`` zeros, in row blocks.

    Row ``i < n // 2`` is ``D[i, j]`` for ``j > i`` and ``D[n-1-i, n-1-j]`` for
    ``j <= i`` (row ``n-1-i`` against all particles, its columns reversed), as in
    :func:`_packed_upper_triangle`; every pair ``a < b`` is computed as row ``a``
    against column ``b``, exactly as a full-row layout computes it. For odd ``n``
    the middle row's upper part is a last block. Blocks of ``block_size // 2``
    rows: each holds two ``[rows, n]`` distance blocks, as much as one full-row
    block of ``block_size`` rows.

    Returns:
        ``(fold, count, zeros, rows per block)``.
    """
    n = particles.shape[0]
    half = n // 2
    col = jnp.arange(n)
    rows = None if block_size is None else max(1, block_size // 2)

    def fold(fn, init):
        def block(acc, row_index, xr, xr_mirror):
            top = squared_distances(xr, particles, row_index=row_index)
            mirror_index = jnp.where(row_index >= 0, n - 1 - row_index, -1)
            bottom = squared_distances(xr_mirror, particles, row_index=mirror_index)[:, ::-1]  # D[n-1-i, n-1-j]
            packed = _mirror_pack(row_index, top, bottom)
            return fn(acc, packed, jnp.broadcast_to((row_index >= 0)[:, None], packed.shape))

        acc = fold_row_blocks(block, init, half, rows, particles[:half], particles[::-1][:half]) if half else init
        if n % 2:
            middle = squared_distances(particles[half : half + 1], particles, row_index=jnp.array([half]))
            acc = fn(acc, middle, col[None, :] > half)
        return acc

    return fold, half * n + (n - 1 - half if n % 2 else 0), half, (half if rows is None else min(rows, half)) or 1


# ---------------------------------------------------------------- per-coordinate medians
#
# For one coordinate, sort the values: ``xs[0] <= ... <= xs[n-1]``. The pairs'
# differences are then ``fl(xs[j] - xs[i]) >= 0`` for ``j > i`` (``fl(a - b) = -fl(b - a)``,
# so these are exactly the ``|fl(x_a - x_b)|`` of the unsorted pairs), and for a
# fixed row ``i`` they are non-decreasing in ``j`` (rounding is monotone). So the
# number of pairs below a threshold is a binary search per row, with the exact
# predicate ``fl(xs[j] - xs[i]) <= t`` (not ``xs[j] <= xs[i] + t``, which rounds
# differently). Squaring is monotone, so the median of the squared differences
# comes from the middle differences. Both versions below are exact, hence identical.


def _row_bounds(xs, t, strict: bool, xp, square: bool = False, rows=None, cols=None):
    """First ``j > i`` with ``xs[c, j] - xs[c, i]`` above ``t[c]`` (``>= t`` if ``strict``), for every ``(c, i)``.

    ``xs``: ``[d, n]`` sorted rows; ``t``: ``[d]``. Vectorised binary search (``xp`` is
    ``numpy`` or ``jax.numpy``). With ``square`` the rounded square of the difference
    is compared (also monotone in ``j``). ``rows``, ``cols``: only these ``(c, i)``
    (NumPy), returned as a flat array.
    """
    d, n = xs.shape
    if rows is None:
        lo = xp.broadcast_to(xp.arange(1, n + 1), (d, n))
        base, thresh = xs, t[:, None]

        def at(j):
            return xp.take_along_axis(xs, j, axis=1)
    else:
        lo = cols + 1
        base, thresh = xs[rows, cols], t[rows]

        def at(j):
            return xs[rows, j]

    hi = xp.full(lo.shape, n)
    for _ in range(max(1, int(n).bit_length())):
        mid = (lo + hi) // 2
        diff = at(xp.minimum(mid, n - 1)) - base
        if square:
            diff = diff * diff
        inside = (diff < thresh) if strict else (diff <= thresh)
        go = (lo < hi) & inside
        hi = xp.where((lo < hi) & ~inside, mid, hi)
        lo = xp.where(go, mid + 1, lo)
    return lo


class _SortedRows:
    """Exact row bounds of :func:`_row_bounds` for many thresholds on the same sorted rows, at merge speed.

    Every bound comes approximately from the position of the query ``xs[c, i] + t[c]``
    (float64) among row ``c``'s values (:meth:`bounds`: a merge of the two sorted
    runs; the query rounds differently from ``fl(xs[j] - xs[i])``). Each bound is then
    checked with the exact predicate on its two neighbours (monotone in ``j``); the
    few that fail are found by :func:`_row_bounds`' binary search. The estimate on
    sampled rows (:meth:`estimate`) searches float64 keys ``(xs - xs[:, 0]) / span + 4 c``,
    increasing over the flattened array. Both are one NumPy call for all rows: NumPy
    releases the GIL in them, so the thread pool's groups run in parallel (per-row
    calls in a Python loop do not).
    """

    def __init__(self, xs: np.ndarray, stride: int):
        d, n = xs.shape
        self.xs, self.flat = xs, xs.reshape(-1)
        wide = xs.astype(np.float64)
        self.base = wide[:, :1]
        span = wide[:, -1:] - self.base
        self.span = np.where(span > 0, span, 1.0)
        self.offset = 4.0 * np.arange(d)[:, None]  # a query exceeds its row's keys by at most 1
        self.keys = ((wide - self.base) / self.span + self.offset).reshape(-1)
        self.wide = wide
        self.row_start = (np.arange(d) * n)[:, None]
        self.first = np.arange(1, n + 1)
        self.sampled = np.unique(np.append(np.arange(0, n, stride), n - 1))  # rows of :meth:`estimate`
        self.weights = np.zeros(self.sampled.size)  # trapezoid rule over the sampled rows
        self.weights[1:] += 0.5 * np.diff(self.sampled)
        self.weights[:-1] += 0.5 * np.diff(self.sampled)
        self.weights[[0, -1]] += 0.5

    def _search(self, cols, t, side):
        query = ((self.wide[:, cols] - self.base + t.astype(np.float64)[:, None]) / self.span + self.offset).reshape(-1)
        return np.searchsorted(self.keys, query, side=side).reshape(self.xs.shape[0], -1) - self.row_start

    def _merge(self, t, strict):
        """``_search`` for every row at once by merging: a row's keys and its queries are two sorted runs.

        A stable argsort (timsort: it merges the two runs in linear time) puts each
        query after the keys it exceeds, ties after the keys (``side="right"``) or,
        with the queries first, before them (``"left"``, ``strict``). A query's count
        is its merged position less the queries before it. Alone about 1.6x faster than
        ``searchsorted`` over the flattened keys (measured, n = 1000, 50 rows); within
        the whole median, on the pool, a few percent.
        """
        d, n = self.xs.shape
        query = self.wide + t.astype(np.float64)[:, None]
        runs = [query, self.wide] if strict else [self.wide, query]
        order = np.argsort(np.concatenate(runs, axis=1), axis=1, kind="stable")
        is_query = (order < n) if strict else (order >= n)
        return np.flatnonzero(is_query).reshape(d, n) - (2 * n) * np.arange(d)[:, None] - self.first + 1

    def bounds(self, t: np.ndarray, strict: bool) -> np.ndarray:
        xs, n = self.xs, self.xs.shape[1]
        ub = np.clip(self._merge(t, strict), self.first, n)
        after = self.flat[self.row_start + np.minimum(ub, n - 1)] - xs
        before = self.flat[self.row_start + ub - 1] - xs
        thresh = t[:, None]
        if strict:
            wrong = ((ub < n) & (after < thresh)) | ((ub > self.first) & ~(before < thresh))
        else:
            wrong = ((ub < n) & (after <= thresh)) | ((ub > self.first) & ~(before <= thresh))
        if wrong.any():
            rows, cols = np.nonzero(wrong)
            ub[rows, cols] = _row_bounds(xs, t, strict, np, rows=rows, cols=cols)
        return ub

    def estimate(self, t: np.ndarray) -> np.ndarray:
        """Approximate ``#{pairs: diff <= t[c]}`` per row from the sampled rows' bounds (trapezoid rule in ``i``).

        Not exact (the bounds are unchecked, the rows between are interpolated): it
        only proposes thresholds, whose exact counts come from :meth:`bounds`.
        """
        n, rows = self.xs.shape[1], self.sampled
        return (np.clip(self._search(rows, t, "right"), rows + 1, n) - rows - 1) @ self.weights


def _host_per_dimension_median(particles):
    """Per-coordinate medians on the host (see :func:`_per_dimension_chunk`), coordinates split over the thread pool.

    NumPy releases the GIL in the sorts, searches and gathers, so the groups run in parallel.
    """
    x = np.asarray(particles)
    pool = _pool()
    if pool is None or x.shape[1] < 2 or x.shape[0] ** 2 * x.shape[1] < 2**22:
        return (_per_dimension_chunk(x),)
    groups = np.array_split(np.arange(x.shape[1]), min(x.shape[1], POOL_WORKERS))
    return (np.concatenate(list(pool.map(lambda g: _per_dimension_chunk(np.ascontiguousarray(x[:, g])), groups))),)


_PER_DIMENSION_SAMPLE = 512  # sampled pairs per coordinate: the bracket that starts :func:`_propose`
_PER_DIMENSION_CANDIDATES = 4096  # the bracket narrows until it holds at most this many pairs per coordinate (or 4n)


def _candidates(n: int) -> int:
    return max(_PER_DIMENSION_CANDIDATES, 4 * n)


def _propose(rows: _SortedRows, sample: np.ndarray, count: int, k_lo: int, k_hi: int, n: int):
    """First thresholds for :func:`_per_dimension_chunk`: about ``margin`` pairs either side of the middle ranks.

    ``sample``: ``[d, m]`` sorted sampled pair differences. Its middle value starts
    a secant on the strided-row estimate of the count (:meth:`_SortedRows.estimate`),
    whose first slope is the sample's own (its quantiles' spread); from the second
    point the proposals lie ``margin`` pairs out (``margin`` exceeds the estimate's
    error: about 400 pairs at n = 1000, measured). Only proposals: their exact counts decide.
    """
    dtype = sample.dtype
    m = sample.shape[1]
    target = 0.5 * (k_lo + k_hi)
    mid, step = min(int(target / count * m), m - 1), max(m // 16, 1)
    lo_q, hi_q = max(mid - step, 0), min(mid + step, m - 1)
    t0 = sample[:, mid].astype(np.float64)
    slope = (sample[:, hi_q].astype(np.float64) - sample[:, lo_q]) / max((hi_q - lo_q) / m * count, 1)
    c0 = rows.estimate(t0)
    t1 = t0 + (target - c0) * slope
    c1 = rows.estimate(t1)
    secant = np.abs(c1 - c0) >= 1
    slope = np.where(secant, (t1 - t0) / np.where(secant, c1 - c0, 1), slope)
    margin = _candidates(n) // 4
    return (t1 + (k_lo - margin - c1) * slope).astype(dtype), (t1 + (k_hi + margin - c1) * slope).astype(dtype)


_STRIDE = 8  # rows per estimate point in :func:`_propose`


def _per_dimension_chunk(x):
    """Per-coordinate median of ``fl(x_id - x_jd)^2`` over ``i < j``, exact, in NumPy (CPU backend).

    Each coordinate keeps a bracket ``[lo, hi]`` of differences with exact counts:
    ``#{diff < lo} <= k_lo`` and ``#{diff <= hi} > k_hi`` for the middle ranks
    ``k_lo <= k_hi``, so the ranks lie among the pairs inside it. :func:`_propose`
    gives the first bracket (a secant on a strided-row estimate of the count,
    started from sampled pair differences); later proposals, if needed, interpolate
    the exact counts linearly inside the bracket. A proposal
    replaces a side only if its exact count (:class:`_SortedRows`) keeps the ranks
    inside, so a bad proposal costs time, never correctness. Once at most
    ``max(_PER_DIMENSION_CANDIDATES, 4n)`` pairs remain (or the bracket stops shrinking:
    ties), the pairs inside are gathered and partitioned. Cost ``O(d n log n)`` per
    proposal, a few proposals, not ``O(d n^2)``.
    """
    n, d = x.shape
    count = n * (n - 1) // 2
    ranks = _middle_ranks(count)
    k_lo, k_hi = ranks[0], ranks[-1]
    out = np.full(d, np.nan, x.dtype)
    finite = np.isfinite(x).all(axis=0)  # a non-finite coordinate has no median (the rule falls back to 1.0)
    if not finite.all():
        if finite.any():
            out[finite] = _per_dimension_chunk(np.ascontiguousarray(x[:, finite]))
        return out
    xs = np.ascontiguousarray(np.sort(x, axis=0).T)  # [d, n]
    rows = _SortedRows(xs, _STRIDE)
    first = rows.first
    lo_t, c_lo, start = np.zeros(d, x.dtype), np.zeros(d, np.int64), first  # bounds broadcast until a proposal holds
    hi_t, c_hi, stop = xs[:, -1] - xs[:, 0], np.full(d, count, np.int64), n
    m = min(count, _PER_DIMENSION_SAMPLE)
    i, j = np.random.default_rng(0).integers(0, n, (2, m))
    j = np.where(i == j, (j + 1) % n, j)
    sample = np.sort(np.abs(xs[:, i] - xs[:, j]), axis=1)
    propose_lo, propose_hi = _propose(rows, sample, count, k_lo, k_hi, n)
    width = c_hi - c_lo
    for _ in range(8):
        s_new = rows.bounds(propose_lo, True)  # first j with diff >= proposal
        c_new = (s_new - first).sum(axis=1)
        take = (c_new <= k_lo) & (propose_lo > lo_t)
        lo_t, c_lo = np.where(take, propose_lo, lo_t), np.where(take, c_new, c_lo)
        start = np.where(take[:, None], s_new, start)
        e_new = rows.bounds(propose_hi, False)  # first j with diff > proposal
        c_new = (e_new - first).sum(axis=1)
        take = (c_new > k_hi) & (propose_hi < hi_t)
        hi_t, c_hi = np.where(take, propose_hi, hi_t), np.where(take, c_new, c_hi)
        stop = np.where(take[:, None], e_new, stop)
        before, width = width, c_hi - c_lo
        if width.max() <= _candidates(n) or np.array_equal(width, before):
            break
        margin = np.maximum(_candidates(n) // 4, width // 50)
        scale = (hi_t - lo_t) / np.maximum(width, 1)
        propose_lo = (lo_t + np.clip(k_lo - margin - c_lo, 0, width) * scale).astype(x.dtype)
        propose_hi = (lo_t + np.clip(k_hi + margin - c_lo, 0, width) * scale).astype(x.dtype)
    # gather every coordinate's pairs inside its bracket, then partition each coordinate's
    start, stop = np.broadcast_to(start, (d, n)), np.broadcast_to(stop, (d, n))
    lens = (stop - start).reshape(-1).astype(np.int32)  # int32 (d n < 2^31): half the memory traffic of int64
    offsets = np.cumsum(lens, dtype=np.int32) - lens  # where each row's pairs start in the gathered vector
    row = _segment_ids(lens, offsets)
    first_at = (start + rows.row_start).reshape(-1).astype(np.int32) - offsets  # a row's first pair, less its offset
    cand = rows.flat[np.arange(row.size, dtype=np.int32) + first_at[row]] - rows.flat[row]
    edges = np.concatenate([[0], np.cumsum(lens.reshape(d, n).sum(axis=1))])
    for c in range(d):
        k = ranks[0] - int(c_lo[c])
        part = np.partition(cand[edges[c] : edges[c + 1]], k)
        lo_sq = part[k] * part[k]
        if len(ranks) == 1:
            out[c] = lo_sq
        else:  # the next rank is the smallest value above the k-th (one partition, not two)
            hi = part[k + 1 :].min()
            out[c] = 0.5 * (lo_sq + hi * hi)
    return out


def _segment_ids(lens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``np.repeat(np.arange(lens.size), lens)`` by a cumulative sum of the jumps between non-empty segments.

    ``offsets``: each segment's start, ``cumsum(lens) - lens``. ``np.repeat`` with
    counts holds the GIL (it was a third of the thread pool's serial time here);
    ``cumsum`` and the scatter release it.
    """
    nonempty = np.flatnonzero(lens)
    jumps = np.zeros(int(offsets[-1] + lens[-1]), lens.dtype)
    jumps[offsets[nonempty[1:]]] = np.diff(nonempty)
    jumps[0] = nonempty[0]
    return np.cumsum(jumps, dtype=lens.dtype)


def _median_pairwise_1d(col: jax.Array) -> jax.Array:
    """Median of ``fl(x_i - x_j)^2`` over ``i < j`` for one coordinate, on the device, memory O(n).

    Bisection on the bit patterns of the ``k``-th squared difference, each step
    counting the pairs below a threshold by the exact per-row binary search (see
    above), in int32 limbs: past ``n = 65,536`` there are more than ``2^31`` pairs.
    The squares are selected, not squared afterwards: inside ``jit`` XLA may fuse a
    square into the final mean (a fused multiply-add), which rounds differently.
    """
    n = col.shape[0]
    count = n * (n - 1) // 2
    xs = jnp.sort(col)[None, :]
    dtype = col.dtype
    utype = _uint_type(dtype)
    nbits = 8 * jnp.dtype(dtype).itemsize
    first = jnp.arange(1, n + 1)

    def n_le(t):  # number of pairs i < j with fl(fl(xs[j] - xs[i])^2) <= t, as int32 limbs
        return limbs_sum(_row_bounds(xs, t[None], False, jnp, square=True)[0] - first)

    def kth(k):
        lo = jnp.zeros((), utype)
        span = xs[0, -1] - xs[0, 0]
        hi = jax.lax.bitcast_convert_type(span * span, utype)

        def body(_, b):
            lo, hi = b
            mid = lo + (hi - lo) // 2
            ok = ~limbs_le(n_le(jax.lax.bitcast_convert_type(mid, dtype)), k)  # count > k, past 2^31 pairs
            return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

        lo, hi = jax.lax.fori_loop(0, nbits, body, (lo, hi))
        return jax.lax.bitcast_convert_type(hi, dtype)

    return _median_of(jnp.stack([kth(r) for r in _middle_ranks(count)]))


@jax.jit
def median_squared_distance(points: jax.Array) -> jax.Array:
    """The exact median of ``||x_i - x_j||^2`` over the ``n(n-1)/2`` distinct pairs (no log factor, no fallback).

    The ``"pairs"`` rule's median before ``/ log(n + 1)``: for an even number of pairs the mean of the
    two middle squared distances. Dense (``[n, n]`` distances): for the few hundred to few thousand
    points a preconditioner reads it from (:func:`steinax.diagnostics.thinning.thinning_metric`).
    Gradient stopped; 0 when fewer than two points differ.
    """
    points = jax.lax.stop_gradient(points)
    if points.shape[0] < 2:
        return jnp.zeros((), points.dtype)
    return _stored_median(squared_distances(points, points), True)


def median_bandwidth(
    particles: jax.Array,
    rule: str = "liu",
    *,
    sqdist: jax.Array | None = None,
    block_size: int | None = None,
    rng_key: jax.Array | None = None,
    max_points: int = 1000,
    axis_name: str | tuple | None = None,
    stop_gradient: bool = True,
) -> jax.Array:
    """Median-heuristic bandwidth ``h`` of the RBF kernel ``exp(-||x - y||^2 / h)``.

    Args:
        particles: ``[n, d]``.
        rule: one of ``"liu"`` (default), ``"pairs"``, ``"per_dimension"``,
            ``"liu_subsampled"``; see the module docstring for each formula.
        sqdist: the ``[n, n]`` squared distances of ``particles`` if already
            computed (reused, not recomputed).
        block_size: when set (and ``sqdist`` is not given), distances are
            recomputed in row blocks of this size at each counting pass, so
            memory stays O(block_size * n); the result is identical. Default: the
            engines' layout (:func:`~steinax.kernels.pairwise.pairwise_plan`): the
            distances are stored only when they fit.
        rng_key: ``"liu_subsampled"`` only: a random subset (default: strided rows).
        max_points: subsample size of ``"liu_subsampled"``.
        axis_name: inside ``shard_map`` over the particles: the mesh axis; ``particles``
            are then all particles (gathered) and each device counts its own rows'
            distances (``"liu"`` and ``"pairs"``; the result is identical to the unsharded one).

        stop_gradient: ``True`` (default, steinax's convention): ``h`` is a constant for
            differentiation. ``False`` (``"liu"`` and ``"pairs"`` only): ``h`` is
            differentiable as PyTorch's ``torch.median`` is, the gradient flowing to the
            pair(s) whose distance is the median; computed from the dense ``[n, n]``
            distances by a sort (small ``n``: unrolled training, deep-unfolded SVGD's
            ablation). The value is the same exact median.

    Returns:
        A scalar (or a ``[d]`` vector for ``"per_dimension"``), positive,
        finite, with gradients stopped unless ``stop_gradient=False``.
    """
    n = particles.shape[0]
    if not stop_gradient:
        if rule not in ("liu", "pairs"):
            raise ValueError(f"`stop_gradient=False` serves the rules 'liu' and 'pairs'; received rule={rule!r}")
        if n < 2:
            return _finalise(jnp.zeros((), particles.dtype), n)
        d2 = squared_distances(particles, particles) if sqdist is None else sqdist
        values = d2[jnp.triu_indices(n, 1)] if rule == "pairs" else d2.reshape(-1)
        # a sort and a gather: the gradient reaches the middle element(s)
        return _finalise(jnp.median(values), n, stop_gradient=False)
    dtype = particles.dtype
    particles = jax.lax.stop_gradient(particles)
    sqdist = None if sqdist is None else jax.lax.stop_gradient(sqdist)
    if rule in ("liu", "pairs"):
        pairs = rule == "pairs"
        count = n * (n - 1) // 2 if pairs else n * n
        if count == 0:
            return _finalise(jnp.zeros((), dtype), n)
        if sqdist is None and block_size is None and axis_name is None:
            # the engines' layout: store the distances only when they fit (n = 10^5 would be 40 GB)
            plan = pairwise_plan(n, dtype, None, store_wanted=True)
            if not plan.store:
                return _finalise(_blocked_median(particles, plan.rows, pairs, None), n)
        if axis_name is not None or (sqdist is None and block_size is not None and block_size < n):
            return _finalise(_blocked_median(particles, block_size, pairs, axis_name), n)
        if sqdist is None:
            sqdist = squared_distances(particles, particles)
        return _finalise(_stored_median(sqdist, pairs), n)
    if rule == "per_dimension":
        if n < 2:
            return _finalise(jnp.zeros((particles.shape[1],), dtype), n)
        def on_device():  # coordinates in batches of O(2^22) entries: one bisection for many (CC-SVGD at d = 1000)
            return jax.lax.map(_median_pairwise_1d, particles.T, batch_size=max(1, min(particles.shape[1], 2**22 // n)))

        if use_host(dtype, axis_name):
            shape = jax.ShapeDtypeStruct((particles.shape[1],), dtype)
            return _finalise(on_cpu_else(lambda: host_call(_host_per_dimension_median, [shape], particles)[0],
                                         on_device), n)
        return _finalise(on_device(), n)
    if rule == "liu_subsampled":
        if n <= max_points:
            return median_bandwidth(particles, "liu", sqdist=sqdist, block_size=block_size, axis_name=axis_name)
        if rng_key is None:
            sub = particles[:: n // max_points][:max_points]
        else:
            sub = particles[jax.random.permutation(rng_key, n)[:max_points]]
        # the log factor uses the full n: the subsample only estimates the median
        return _finalise(_stored_median(squared_distances(sub, sub), False, axis_name), n)
    raise ValueError(f"`rule` must be one of {BANDWIDTH_RULES}; received {rule!r}")
