"""Exact order statistics of large multisets of non-negative floats: the median rules' engine.

The multiset (all ``n^2`` squared distances of ``n`` particles, say) is given as
a **source**: a function ``fold(fn, init)`` that folds ``fn(acc, values, mask)``
over its blocks. A stored matrix is one block; a blocked source recomputes each
block of distances on demand and never stores them.

:func:`select_ranks` returns the exact values at given ranks in a few passes:

1. **Bracket.** A sample of ``m`` values (random positions, fixed seed) is
   sorted; the sample quantiles at ``q -+ 6 sd`` (``sd = sqrt(q (1 - q) / m)``,
   the binomial error of a sample quantile) give ``[lo, hi]``, which holds the
   wanted ranks except with probability below ``1e-8``. The host first tries
   ``q -+ 3.5 sd`` (:func:`host_select`): its compaction costs ~30 ns per
   value copied, so the narrower bracket saves more than its rare misses cost.
2. **One pass** over the source counts the values below ``lo`` and copies those
   in ``[lo, hi]`` (about ``6 / sqrt(m)`` of them) into a buffer: by a host
   callback on the CPU backend (NumPy compacts at memory speed; XLA:CPU's
   compaction is ~10x slower), on the device elsewhere (the choice is made per
   platform when the program is lowered: :mod:`steinax._platform`).
3. The wanted ranks, shifted by the count below ``lo``, are selected among the
   buffered values (an introselect on the host, a sort on the device).

If the bracket misses (or a buffer overflows), an exact fallback runs: k-ary
bisection on the floats' bit patterns (:func:`kth_from_source`, one counting
pass per step). Past about 10^11 values (the pairs of 10^6 particles), where the
bracket would buffer billions of them, the bisection runs alone. Either way the
result is the exact order statistic, so it does not depend on the order of the data, on the blocking, or on how the data are
sharded (``axis_name``: counts are summed and buffers gathered across devices;
no host callback is used inside a sharded computation).

Counts are carried as two int32 limbs (``hi * 2^30 + lo``), so more than
``2^31`` values (``n > 46,340`` particles) are counted exactly without x64.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import os

import jax
import jax.numpy as jnp
import numpy as np

from steinax._host import host_call
from steinax._platform import on_cpu_else

__all__ = ["select_ranks", "host_select", "kth_from_source", "dense_source", "use_host"]

_BASE = 2**30
_Z = 6.0  # bracket half-width in binomial standard deviations
_Z_HOST = 3.5  # the host's first, narrower bracket (a miss, probability ~5e-4, costs one more pass)
_HOST_SMALL = 2**16  # below this many values the host partitions them all


def use_host(dtype, axis_name=None) -> bool:
    """Whether host (NumPy) selection may serve: 32-bit floats outside sharded computations.

    It then serves in programs lowered for the CPU only (:func:`steinax._platform.on_cpu_else`);
    elsewhere the same algorithm runs on the device. 64-bit values stay on the device: when x64
    is switched on with the thread-local ``jax.enable_x64`` context manager, callbacks run on
    XLA's threads see x64 off and JAX converts their float64 data to float32.
    """
    return axis_name is None and jnp.dtype(dtype).itemsize <= 4


# ---------------------------------------------------------------- two-limb counts


def _limbs(x):
    """A count as ``(hi, lo)`` int32 limbs; ``x`` an int32 array below 2^30."""
    return jnp.zeros_like(x), x


def _limbs_add(c, x):
    hi, lo = c
    lo = lo + x  # both < 2^30: no int32 overflow
    carry = (lo >= _BASE).astype(lo.dtype)
    return hi + carry, lo - carry * _BASE


def limbs_le(c, k: int):
    """``c <= k`` for limbs ``c`` and a Python int (of any size) or an int32 array ``k``."""
    k_hi, k_lo = divmod(k, _BASE)
    hi, lo = c
    return (hi < k_hi) | ((hi == k_hi) & (lo <= k_lo))


def _limbs_minus(k: int, c):
    """``k - c`` as int32 where it lies in ``[0, 2^30)``, else a negative or huge marker (caller checks)."""
    k_hi, k_lo = divmod(int(k), _BASE)
    hi, lo = c
    dhi = k_hi - hi
    return jnp.where(dhi == 0, k_lo - lo, jnp.where(dhi == 1, k_lo - lo + _BASE, jnp.where(dhi < 0, -1, _BASE)))


def _limbs_psum(c, axis_name):
    """Sum limb counts over devices; ``lo`` is split into 15-bit halves so no partial sum overflows."""
    hi, lo = c
    return _from_halves(jax.lax.psum(hi, axis_name), jax.lax.psum(lo >> 15, axis_name),
                        jax.lax.psum(lo & (2**15 - 1), axis_name))


def _from_halves(hi, top, bottom):
    """``hi * 2^30 + top * 2^15 + bottom`` as limbs, for sums ``top``, ``bottom`` below ``2^30``: each count
    is split into 15-bit halves before summing, so that no partial sum overflows int32."""
    return _normalise(hi + (top >> 15), (top & (2**15 - 1)) << 15, bottom)


def limbs_sum(x):
    """The sum of a 1-D int32 array of counts in ``[0, 2^30)`` as ``(hi, lo)`` limbs, exact at any length.

    Each count is split into 15-bit halves; a block of ``2^15`` halves sums below ``2^30``, and the blocks'
    partial sums are summed the same way (one level per factor ``2^15`` in length)."""
    x = x.reshape(-1)
    block = 2**15
    if x.size <= block:
        return _from_halves(jnp.zeros((), x.dtype), jnp.sum(x >> 15), jnp.sum(x & (block - 1)))
    x = jnp.pad(x, (0, -x.size % block)).reshape(-1, block)
    top = jnp.sum(x >> 15, axis=1)  # per block, below 2^30
    bottom = jnp.sum(x & (block - 1), axis=1)
    hi, lo = limbs_sum(jnp.concatenate([(top & (block - 1)) << 15, bottom]))
    return hi + jnp.sum(top >> 15), lo


def _normalise(hi, a, b):
    """``hi * 2^30 + a + b`` as limbs, for ``a < 2^30`` and ``0 <= b < 2^30``."""
    carry = (b >= _BASE - a).astype(a.dtype)
    return hi + carry, jnp.where(carry > 0, b - (_BASE - a), a + b)


# ---------------------------------------------------------------- sources


def dense_source(values, mask=None):
    """A source with one block: ``values`` (any shape) and an optional boolean ``mask``."""

    def fold(fn, init):
        m = jnp.ones(values.shape, bool) if mask is None else mask
        return fn(init, values, m)

    return fold


def _uint_type(dtype):
    return {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}[jnp.dtype(dtype).itemsize]


def kth_from_source(fold, k: int, dtype, axis_name=None, arity_bits: int | None = None):
    """Exact ``k``-th smallest (0-based) value of a source, by k-ary bisection on bit patterns.

    For non-negative IEEE floats the bit pattern, read as an unsigned integer,
    is monotone in the value, so a search over bit patterns is exact. Each pass
    counts the entries below ``2**b - 1`` thresholds at once (one read of the
    data), narrowing the candidate range ``2**b``-fold. The fallback of
    :func:`select_ranks`, and the whole algorithm for small inputs of tests.

    ``arity_bits``: bits resolved per pass. Default: 1 (plain bisection) in programs
    lowered for the CPU, where XLA does not fuse a multi-threshold count into one
    streaming pass (15 thresholds cost ~40x one), and 4 (15 thresholds) elsewhere.
    """
    if arity_bits is None:
        return on_cpu_else(lambda: kth_from_source(fold, k, dtype, axis_name, 1),
                           lambda: kth_from_source(fold, k, dtype, axis_name, 4))
    utype = _uint_type(dtype)
    nbits = 8 * jnp.dtype(dtype).itemsize
    arity = 2**arity_bits

    def mx(acc, v, m):
        return jnp.maximum(acc, jnp.max(jnp.where(m & jnp.isfinite(v), v, jnp.zeros((), dtype))))

    vmax = fold(mx, jnp.zeros((), dtype))
    if axis_name is not None:
        vmax = jax.lax.pmax(vmax, axis_name)
    lo = jnp.zeros((), utype)  # the answer lies in [lo, hi]
    hi = jax.lax.bitcast_convert_type(vmax, utype)
    steps = jnp.arange(1, arity, dtype=utype)

    def body(_, bounds):
        lo, hi = bounds
        width = hi - lo
        thr = lo + (width // arity) * steps + (width % arity) * steps // arity
        thr_f = jax.lax.bitcast_convert_type(thr, dtype)

        def count(acc, v, m):
            v = v.reshape(-1)
            m = m.reshape(-1)
            return _limbs_add(acc, jnp.sum((v[:, None] <= thr_f[None, :]) & m[:, None], axis=0, dtype=jnp.int32))

        counts = fold(count, _limbs(jnp.zeros((arity - 1,), jnp.int32)))
        if axis_name is not None:
            counts = _limbs_psum(counts, axis_name)
        ok = ~limbs_le(counts, k)  # the answer is <= thr[j] exactly where ok[j]
        idx = jnp.argmax(ok)
        any_ok = jnp.any(ok)
        new_hi = jnp.where(any_ok, thr[idx], hi)
        below = jnp.where(idx > 0, thr[jnp.maximum(idx - 1, 0)] + 1, lo)
        new_lo = jnp.minimum(jnp.where(any_ok, below, thr[-1] + 1), new_hi)
        return new_lo, new_hi

    n_pass = math.ceil(nbits / arity_bits) + 2
    _, hi = jax.lax.fori_loop(0, n_pass, body, (lo, hi))
    return jax.lax.bitcast_convert_type(hi, dtype)


# ---------------------------------------------------------------- host (NumPy) pieces

_CHUNK = 2**18  # values per NumPy chunk (cache-sized)
_MAX_BUFFER = 2**27  # the bracket pass's largest buffer (512 MB of float32); beyond it, bisection alone


def _bracket_ranks(ranks, count: int, m: int, z: float = _Z):
    """Static sample ranks ``(lo_r, hi_r)`` bracketing the population ranks ``ranks`` (see module docstring)."""
    q0, q1 = ranks[0] / count, ranks[-1] / count
    sd = math.sqrt(max(q0 * (1 - q0), q1 * (1 - q1), 1.0 / m) / m)
    lo_r = math.floor((q0 - z * sd) * m) - 2
    hi_r = math.ceil((q1 + z * sd) * m) + 2
    return lo_r, hi_r


def _np_compact_chunk(c, m, lo, hi):
    if m is not None:
        c = np.compress(m, c)
    ge = c >= lo
    return c.size - int(np.count_nonzero(ge)), np.compress(ge & (c <= hi), c)  # compress: ~20% faster than c[mask]


def _np_compact(v, m, lo, hi):
    """``(count below lo, values in [lo, hi])`` of the unmasked entries, chunk by chunk.

    From ``_THREADED`` values on, the input is split into one contiguous part per
    worker of a small thread pool, each compacted chunk by chunk (NumPy releases the
    GIL in these loops), so the host pass uses the cores XLA's threads leave idle
    while the callback runs.
    """
    v = v.reshape(-1)
    m = None if m is None else m.reshape(-1)
    if v.size >= _THREADED and _pool() is not None:
        edges = np.linspace(0, v.size, POOL_WORKERS + 1).astype(np.int64)
        parts = [(v[a:b], None if m is None else m[a:b]) for a, b in zip(edges[:-1], edges[1:])]
        results = list(_pool().map(lambda part: _np_compact_serial(*part, lo, hi), parts))
    else:
        results = [_np_compact_serial(v, m, lo, hi)]
    below = sum(r[0] for r in results)
    return below, np.concatenate([r[1] for r in results])


def _np_compact_serial(v, m, lo, hi):
    results = [_np_compact_chunk(v[a : a + _CHUNK], None if m is None else m[a : a + _CHUNK], lo, hi)
               for a in range(0, v.size, _CHUNK)]
    return sum(r[0] for r in results), (np.concatenate([r[1] for r in results]) if results else v[:0])


# values from which the host pass uses threads (measured on 2 cores: 5.1 -> 3.8 ms at 4 M values, 13.4 -> 9.3 ms at
# 12.5 M; no gain at 500 k, where the threads' start-up costs what they save)
_THREADED = 2**21
_POOL = []
POOL_WORKERS = min(8, os.cpu_count() or 1)


def _pool():
    """A process-wide thread pool with one worker per core (None on a single core)."""
    if not _POOL:
        _POOL.append(concurrent.futures.ThreadPoolExecutor(POOL_WORKERS) if POOL_WORKERS > 1 else None)
    return _POOL[0]


def host_select(values, ranks, mask=None) -> np.ndarray:
    """Exact values at ``ranks`` (0-based, ascending) of the unmasked entries, in NumPy.

    The bracket-and-compact algorithm of the module docstring on one array. The
    host tries a narrow bracket first (``_Z_HOST`` standard deviations: the
    compaction's cost grows with the values it copies, about 30 ns each, and a
    miss, probability below ``1e-3``, costs one more pass), then the device's
    ``_Z``, then partitions everything. Always exact.
    """
    v = np.asarray(values).reshape(-1)
    if mask is not None:
        v = v[np.asarray(mask).reshape(-1)]
    ranks = [int(r) for r in ranks]
    if v.size > _HOST_SMALL:
        m = _sample_size(v.size)
        sample = v[_sample_positions(v.size, m)]
        for z in (_Z_HOST, _Z):  # the wider bracket only after a miss of the narrow one
            lo_r, hi_r = _bracket_ranks(ranks, v.size, m, z)
            sample = np.partition(sample, sorted({min(max(r, 0), m - 1) for r in (lo_r, hi_r)}))
            lo = sample[lo_r] if lo_r >= 0 else -np.inf
            hi = sample[hi_r] if hi_r < m else np.inf
            below, cand = _np_compact(v, None, lo, hi)
            if below <= ranks[0] and ranks[-1] < below + cand.size:
                shifted = [r - below for r in ranks]
                return np.partition(cand, shifted)[shifted]
    return np.partition(v, ranks)[ranks]


@functools.lru_cache(maxsize=4)
def _sample_positions(size: int, m: int) -> np.ndarray:
    """``m`` random positions in ``[0, size)`` (fixed seed), cached: the same for every call of a given size."""
    positions = np.random.default_rng(0).integers(0, size, m)
    positions.flags.writeable = False
    return positions


def _sample_size(count: int) -> int:
    """About ``(3 count)^(2/3)``: balances the sample's cost against the bracket's ``6 count / sqrt(m)`` values."""
    return int(min(count, 2**22, max(2**12, round((3.0 * count) ** (2 / 3)))))


# ---------------------------------------------------------------- the bracket pass


def _sample_values(sample_fn, m: int, dtype, host: bool):
    """``m`` sampled values, sorted (``sample_fn(key, size)`` returns values at random positions)."""
    chunk = min(m, 2**16)
    n_chunks = -(-m // chunk)
    keys = jax.random.split(jax.random.key(0), n_chunks)
    vals = jax.lax.map(lambda k: sample_fn(k, chunk), keys).reshape(-1)[:m]
    if host:
        return host_call(_np_sort, [jax.ShapeDtypeStruct((m,), dtype)], vals)[0]
    return jnp.sort(vals)


def _np_sort(v):
    return (np.sort(v),)


def _np_compact_block(cap_block, v, msk, lo, hi):
    """Host side of one block of the bracket pass: (count below, count inside, first ``cap_block`` inside)."""
    below, cand = _np_compact(v, msk, lo, hi)
    out = np.full((cap_block,), np.inf, v.dtype)
    out[: min(cand.size, cap_block)] = cand[:cap_block]
    return np.int32(below), np.int32(cand.size), out


def _np_pick(buf, shifted):
    return (np.partition(buf, shifted)[shifted],)


def select_ranks(fold, ranks, count: int, dtype, sample_fn, *, block_entries: int, axis_name=None, host=None):
    """Exact values at the static ``ranks`` (0-based, ascending, at most a few apart) of a source.

    Args:
        fold: the source (see module docstring); with ``axis_name``, this device's part of it.
        ranks: Python ints.
        count: number of (unmasked) values in the whole source, all devices together.
        dtype: the values' float dtype.
        sample_fn: ``sample_fn(key, size)`` -> ``[size]`` values at random positions of the
            whole source (identical on every device).
        block_entries: the largest number of entries ``fold`` passes to ``fn`` at once.
        axis_name: the mesh axis over which the source is split (inside ``shard_map``).
        host: force (``True``) or forbid (``False``) the NumPy path; default: the NumPy path in programs
            lowered for the CPU where :func:`use_host` allows it, the device path elsewhere.

    Returns:
        ``[len(ranks)]`` values.
    """
    ranks = [int(r) for r in ranks]
    if host is None:
        if not use_host(dtype, axis_name):
            host = False
        else:
            def run(on_host):
                return lambda: select_ranks(fold, ranks, count, dtype, sample_fn, block_entries=block_entries,
                                            axis_name=axis_name, host=on_host)
            return on_cpu_else(run(True), run(False))
    m = _sample_size(count)
    lo_r, hi_r = _bracket_ranks(ranks, count, m)
    sample = _sample_values(sample_fn, m, dtype, host)
    lo = sample[lo_r] if lo_r >= 0 else jnp.zeros((), dtype)
    hi = sample[hi_r] if hi_r < m else jnp.asarray(jnp.inf, dtype)
    frac = min(1.0, (hi_r - lo_r + 1) / m)
    cap_block = int(min(block_entries, 8 * frac * block_entries + 4096))
    cap_total = int(min(count + cap_block, 2 * frac * count + 2 * cap_block))
    if cap_total > _MAX_BUFFER:
        # past ~10^11 values the bracket would hold billions (12 GB at n = 10^6 particles, and int32 offsets):
        # bisection alone, a counting pass per step, in memory O(block)
        return jnp.stack([kth_from_source(fold, r, dtype, axis_name) for r in ranks])
    inf = jnp.asarray(jnp.inf, dtype)

    def compact(v, msk):
        if host:
            shapes = (jax.ShapeDtypeStruct((), jnp.int32),) * 2 + (jax.ShapeDtypeStruct((cap_block,), dtype),)
            return host_call(functools.partial(_np_compact_block, cap_block), shapes, v, msk, lo, hi)
        v, msk = v.reshape(-1), msk.reshape(-1)
        inside = msk & (v >= lo) & (v <= hi)
        idx = jnp.nonzero(inside, size=cap_block, fill_value=0)[0]
        out = jnp.where(jnp.arange(cap_block) < jnp.sum(inside), v[idx], inf)
        return jnp.sum(msk & (v < lo), dtype=jnp.int32), jnp.sum(inside, dtype=jnp.int32), out

    def step(acc, v, msk):
        below, ptr, over, buf = acc
        b, c, chunk = compact(v, msk)
        over = over | (c > cap_block) | (ptr + c > cap_total - cap_block)
        buf = jax.lax.dynamic_update_slice(buf, chunk, (jnp.minimum(ptr, cap_total - cap_block),))
        return _limbs_add(below, b), jnp.where(over, ptr, ptr + c), over, buf

    init = (_limbs(jnp.zeros((), jnp.int32)), jnp.zeros((), jnp.int32), jnp.zeros((), bool), jnp.full((cap_total,), inf))
    below, ptr, over, buf = fold(step, init)
    if axis_name is not None:
        below = _limbs_psum(below, axis_name)
        over = jax.lax.psum(over.astype(jnp.int32), axis_name) > 0
        ptr = jax.lax.psum(ptr, axis_name)
        buf = jax.lax.all_gather(buf, axis_name, tiled=True)
    shifted = jnp.stack([_limbs_minus(r, below) for r in ranks])
    ok = ~over & (shifted[0] >= 0) & (shifted[-1] < ptr)
    shifted = jnp.clip(shifted, 0, buf.shape[0] - 1)

    def from_buffer():
        if host:
            return host_call(_np_pick, [jax.ShapeDtypeStruct((len(ranks),), dtype)], buf, shifted)[0]
        return jnp.sort(buf)[shifted]

    def fallback():
        return jnp.stack([kth_from_source(fold, r, dtype, axis_name) for r in ranks])

    return jax.lax.cond(ok, from_buffer, fallback)
