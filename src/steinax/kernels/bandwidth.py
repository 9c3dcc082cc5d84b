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

Cost: never a sort of ``n^2`` values. The exact median of a materialised ``D``
is an introselect (``np.partition``, O(n^2)) on the CPU backend and a k-ary
bisection on the floats' bit patterns (:func:`kth_smallest`, a fixed number of
fused counting passes) on accelerators and in blocked mode, where ``D`` is
recomputed block by block and never stored. Blocked mode pays one distance
pass per bisection step (about 33 in float32 on CPU); for very large ``n``
``"liu_subsampled"`` or a fixed bandwidth are the cheap alternatives.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from steinax.kernels.pairwise import fold_row_blocks, squared_distances

__all__ = ["BANDWIDTH_RULES", "median_bandwidth", "kth_smallest"]

BANDWIDTH_RULES = ("liu", "pairs", "per_dimension", "liu_subsampled")

def _arity_bits() -> int:
    """Bits resolved per counting pass: 4 (15 thresholds) on accelerators, 1 on CPU.

    XLA:CPU does not fuse a multi-threshold count into one streaming pass (15
    thresholds cost ~40x one), so on CPU plain bisection is fastest.
    """
    return 1 if jax.default_backend() == "cpu" else 4


def _uint_type(dtype):
    return {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(dtype).itemsize]


def _count_dtype():
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


# A "source" is a function fold(fn, init) that folds fn(acc, values, mask) over
# blocks of the multiset of non-negative floats whose order statistics we want.
# Dense data is one block; blocked data recomputes each block on demand.


def _dense_source(values, mask=None):
    def fold(fn, init):
        m = jnp.ones(values.shape, bool) if mask is None else mask
        return fn(init, values, m)

    return fold


def _kth_from_source(fold, k, vmax, dtype):
    """Exact ``k``-th smallest (0-based) value of a source, by k-ary bisection on bit patterns.

    For non-negative IEEE floats the bit pattern, read as an unsigned integer,
    is monotone in the value, so a search over bit patterns is exact. Each pass
    counts the entries below ``2**b - 1`` thresholds at once (one read of the
    data), narrowing the candidate range ``2**b``-fold (:func:`_arity_bits`).
    """
    utype = _uint_type(dtype)
    nbits = 8 * jnp.dtype(dtype).itemsize
    arity_bits = _arity_bits()
    arity = 2**arity_bits
    cdt = _count_dtype()
    k = jnp.asarray(k, cdt)
    lo = jnp.zeros((), utype)  # the answer lies in [lo, hi]
    hi = jax.lax.bitcast_convert_type(jnp.asarray(vmax, dtype), utype)
    steps = jnp.arange(1, arity, dtype=utype)

    def body(_, bounds):
        lo, hi = bounds
        width = hi - lo
        thr = lo + (width // arity) * steps + (width % arity) * steps // arity
        thr_f = jax.lax.bitcast_convert_type(thr, dtype)

        def count(acc, v, m):
            v = v.reshape(-1)
            m = m.reshape(-1)
            return acc + jnp.sum((v[:, None] <= thr_f[None, :]) & m[:, None], axis=0, dtype=cdt)

        counts = fold(count, jnp.zeros((arity - 1,), cdt))
        ok = counts > k  # the answer is <= thr[j] exactly where ok[j]
        idx = jnp.argmax(ok)
        any_ok = jnp.any(ok)
        new_hi = jnp.where(any_ok, thr[idx], hi)
        below = jnp.where(idx > 0, thr[jnp.maximum(idx - 1, 0)] + 1, lo)
        new_lo = jnp.minimum(jnp.where(any_ok, below, thr[-1] + 1), new_hi)
        return new_lo, new_hi

    n_pass = math.ceil(nbits / arity_bits) + 2
    _, hi = jax.lax.fori_loop(0, n_pass, body, (lo, hi))
    return jax.lax.bitcast_convert_type(hi, dtype)


def _source_max(fold, dtype):
    def mx(acc, v, m):
        return jnp.maximum(acc, jnp.max(jnp.where(m & jnp.isfinite(v), v, jnp.zeros((), dtype))))

    return fold(mx, jnp.zeros((), dtype))


def _median_from_source(fold, count: int, dtype) -> jax.Array:
    """numpy-convention median of ``count`` values (mean of the two middle ones when even)."""
    vmax = _source_max(fold, dtype)
    upper = _kth_from_source(fold, count // 2, vmax, dtype)
    if count % 2 == 1:
        return upper
    # the lower middle value is ``upper`` unless more than count//2 - 1 values
    # lie strictly below it, in which case it is the largest of those.
    cdt = _count_dtype()

    def below(acc, v, m):
        n_acc, max_acc = acc
        b = m & (v < upper)
        return n_acc + jnp.sum(b, dtype=cdt), jnp.maximum(max_acc, jnp.max(jnp.where(b, v, jnp.zeros((), dtype))))

    n_below, max_below = fold(below, (jnp.zeros((), cdt), jnp.zeros((), dtype)))
    lower = jnp.where(n_below > count // 2 - 1, max_below, upper)
    return 0.5 * (lower + upper)


def kth_smallest(values: jax.Array, k: int, mask: jax.Array | None = None) -> jax.Array:
    """Exact ``k``-th smallest (0-based) of the non-negative floats in ``values``.

    Args:
        values: array of non-negative floats, any shape.
        k: 0-based rank among the (unmasked) entries.
        mask: optional boolean array of ``values``' shape; ``False`` entries are ignored.
    """
    fold = _dense_source(values, mask)
    return _kth_from_source(fold, k, _source_max(fold, values.dtype), values.dtype)


def _host_median(values, mask):
    """numpy-convention median by one introselect (``np.partition``), O(N) on the host."""
    v = np.asarray(values)
    if mask is not None:
        v = v[np.asarray(mask)]
    v = v.reshape(-1)
    count = v.size
    k = count // 2
    part = np.partition(v, k)
    if count % 2 == 1:
        return part[k].astype(v.dtype)
    # after partitioning, part[:k] holds the k smallest values: the lower middle is their max
    return (0.5 * (part[:k].max() + part[k])).astype(v.dtype)


def _use_host(dtype) -> bool:
    """Host introselect on CPU for 32-bit floats; on-device bisection otherwise.

    64-bit values stay on the device: when x64 is switched on with the
    thread-local ``jax.enable_x64`` context manager, callbacks that run on XLA's
    threads inside compiled loops see x64 off and JAX converts their float64
    data to float32, so the host path cannot be trusted to keep float64.
    """
    return jax.default_backend() == "cpu" and jnp.dtype(dtype).itemsize <= 4


def _dense_median(values: jax.Array, count: int, mask: jax.Array | None = None) -> jax.Array:
    """Exact median of a materialised array: introselect on CPU, bisection on accelerators.

    On the CPU backend a single ``np.partition`` (via ``jax.pure_callback``)
    is several times faster than the >= 10 counting passes of the bisection; on
    GPU/TPU the passes are cheap and the data stays on the device. Both are
    exact and return the same value (tested).
    """
    if _use_host(values.dtype):
        shape = jax.ShapeDtypeStruct((), values.dtype)
        args = (values,) if mask is None else (values, mask)
        return jax.pure_callback(
            lambda v, m=None: _host_median(v, m), shape, *args, vmap_method="sequential"
        )
    return _median_from_source(_dense_source(values, mask), count, values.dtype)


def _finalise(med: jax.Array, n: int) -> jax.Array:
    h = med / jnp.log(jnp.asarray(n + 1.0, med.dtype))
    h = jnp.where(jnp.isfinite(h) & (h > 0), h, jnp.ones_like(h))
    return jax.lax.stop_gradient(h)


def _sqdist_source(particles, block_size, pairs_only: bool):
    """Source over the squared distances of ``particles``, recomputed block by block."""
    n = particles.shape[0]
    col = jnp.arange(n)

    def fold(fn, init):
        def block(acc, row_index, rows):
            d2 = squared_distances(rows, particles)
            m = (row_index >= 0)[:, None]
            if pairs_only:
                m = m & (row_index[:, None] < col[None, :])
            else:
                m = jnp.broadcast_to(m, d2.shape)
            return fn(acc, d2, m)

        return fold_row_blocks(block, init, n, block_size, particles)

    return fold


_SMALL_PAIRS = 2**17  # up to n of about 512
_HOST_PAIRS = 2**22  # per-coordinate introselect on the host up to n of about 2900 (CPU backend)


def _host_per_dimension_median(particles):
    """Per-coordinate median of ``(x_id - x_jd)^2`` over ``i < j``, by introselect on the host."""
    x = np.asarray(particles)
    n = x.shape[0]
    iu, ju = np.triu_indices(n, k=1)
    out = np.empty(x.shape[1], x.dtype)
    for d in range(x.shape[1]):
        out[d] = _host_median((x[iu, d] - x[ju, d]) ** 2, None)
    return out


def _median_pairwise_1d(col: jax.Array) -> jax.Array:
    """Median of ``(x_i - x_j)^2`` over ``i < j`` for one coordinate, in O(n log n) memory O(n).

    Counting pairs with ``x_j - x_i <= t`` on the sorted column is a
    ``searchsorted``; the median distance is found by bisection on bit patterns.
    """
    n = col.shape[0]
    count = n * (n - 1) // 2
    if count <= _SMALL_PAIRS:
        # few pairs: sorting them is cheaper than a bisection loop (numpy median convention)
        i, j = jnp.triu_indices(n, k=1)
        sq = jnp.sort((col[i] - col[j]) ** 2)
        return sq[count // 2] if count % 2 == 1 else 0.5 * (sq[count // 2 - 1] + sq[count // 2])
    xs = jnp.sort(col)
    idx = jnp.arange(n)
    dtype = col.dtype
    utype = _uint_type(dtype)
    nbits = 8 * jnp.dtype(dtype).itemsize

    def n_le(t):  # number of pairs i<j with xs[j]-xs[i] <= t
        pos = jnp.searchsorted(xs, xs + t, side="right")
        return jnp.sum(pos - idx - 1)

    def kth(k):
        lo = jnp.zeros((), utype)
        hi = jax.lax.bitcast_convert_type(xs[-1] - xs[0], utype)

        def body(_, b):
            lo, hi = b
            mid = lo + (hi - lo) // 2
            ok = n_le(jax.lax.bitcast_convert_type(mid, dtype)) > k
            return jnp.where(ok, lo, mid + 1), jnp.where(ok, mid, hi)

        lo, hi = jax.lax.fori_loop(0, nbits, body, (lo, hi))
        return jax.lax.bitcast_convert_type(hi, dtype)

    upper = kth(count // 2)
    if count % 2 == 1:
        return upper * upper
    lower = kth(count // 2 - 1)
    return 0.5 * (lower * lower + upper * upper)  # median of the squared differences


def median_bandwidth(
    particles: jax.Array,
    rule: str = "liu",
    *,
    sqdist: jax.Array | None = None,
    block_size: int | None = None,
    rng_key: jax.Array | None = None,
    max_points: int = 1000,
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
            memory stays O(block_size * n); the result is identical.
        rng_key: ``"liu_subsampled"`` only: a random subset (default: strided rows).
        max_points: subsample size of ``"liu_subsampled"``.

    Returns:
        A scalar (or a ``[d]`` vector for ``"per_dimension"``), positive,
        finite, with gradients stopped.
    """
    n = particles.shape[0]
    dtype = particles.dtype
    particles = jax.lax.stop_gradient(particles)
    sqdist = None if sqdist is None else jax.lax.stop_gradient(sqdist)
    if rule in ("liu", "pairs"):
        pairs = rule == "pairs"
        count = n * (n - 1) // 2 if pairs else n * n
        if count == 0:
            return _finalise(jnp.zeros((), dtype), n)
        if sqdist is None and block_size is not None and block_size < n:
            fold = _sqdist_source(particles, block_size, pairs)
            return _finalise(_median_from_source(fold, count, dtype), n)
        if sqdist is None:
            sqdist = squared_distances(particles, particles)
        mask = jnp.triu(jnp.ones((n, n), dtype=bool), k=1) if pairs else None
        return _finalise(_dense_median(sqdist, count, mask), n)
    if rule == "per_dimension":
        if n < 2:
            return _finalise(jnp.zeros((particles.shape[1],), dtype), n)
        if _use_host(dtype) and n * (n - 1) // 2 <= _HOST_PAIRS:
            shape = jax.ShapeDtypeStruct((particles.shape[1],), dtype)
            med = jax.pure_callback(_host_per_dimension_median, shape, particles, vmap_method="sequential")
            return _finalise(med, n)
        return _finalise(jax.lax.map(_median_pairwise_1d, particles.T), n)
    if rule == "liu_subsampled":
        if n <= max_points:
            return median_bandwidth(particles, "liu", sqdist=sqdist, block_size=block_size)
        if rng_key is None:
            sub = particles[:: n // max_points][:max_points]
        else:
            sub = particles[jax.random.permutation(rng_key, n)[:max_points]]
        # the log factor uses the full n: the subsample only estimates the median
        return _finalise(_dense_median(squared_distances(sub, sub), max_points * max_points), n)
    raise ValueError(f"`rule` must be one of {BANDWIDTH_RULES}; received {rule!r}")
