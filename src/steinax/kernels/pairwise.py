"""Pairwise squared distances in matrix-product form, and row blocks.

This is the only module that forms pairwise distances. Everything that needs
``||x_i - y_j||^2`` (kernels, Stein kernels, SVGD directions, MMD, bandwidth
rules) calls :func:`squared_distances`.

Convention: ``||x - y||^2 = ||x||^2 + ||y||^2 - 2 x.y``, computed after
subtracting a common centre (the mean of ``y``, so row blocks of ``x`` against
the same ``y`` share it) to limit cancellation in float32; entries within the form's rounding
bound (``2 (d + 2) eps (||x||^2 + ||y||^2)``) are exactly 0, which also clamps at zero. An optional per-dimension ``scale`` ``s`` gives
``sum_d (x_d - y_d)^2 / s_d``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from steinax._platform import layout_platform

__all__ = [
    "squared_distances", "scan_row_blocks", "map_row_blocks", "fold_row_blocks",
    "memory_budget", "auto_block_size", "PairwisePlan", "pairwise_plan",
]

# ---------------------------------------------------------------- automatic blocks
#
# Every pairwise engine asks :func:`pairwise_plan` how to lay out its O(n m) work.
# On the CPU backend, row blocks of about 2^21 entries (8 MiB of float32) keep a
# block's distance, kernel and product temporaries in the caches, which is 1.5-5x
# faster than whole-matrix operations (benchmarks/bench_scale.py); on accelerators
# the blocks are as large as the memory budget allows. The budget is a quarter of
# the memory available when the plan is made (``STEINAX_MEMORY_BUDGET`` overrides,
# in bytes), so a default run never needs more than a fraction of the machine.

_CPU_BLOCK_ENTRIES = 2**21
_STORE_MAX_ENTRIES = 2**26  # CPU: n of about 8192: beyond, the product, the packed triangle and the kernel matrix
# (about 2.5 n^2 values: 1 GB in float32 at n = 10,000) outweigh the recomputation row blocks pay
_STORE_MAX_ENTRIES_ACCELERATOR = 2**30  # accelerators: as long as the budget holds them (n up to 32768; the
# packed triangle's n^2 / 2 entries stay int32-indexable)


from steinax._memory import _host_available, memory_budget  # noqa: E402,F401 (the engines' budget lives there)


def _near_divisor(n: int, target: int) -> int:
    """A divisor of ``n`` in ``[target / 2, target]`` if there is one (no padded rows), else ``target``."""
    for b in range(target, max(1, target // 2) - 1, -1):
        if n % b == 0:
            return b
    return target


def auto_block_size(n_rows: int, n_cols: int, dtype, *, arrays: int = 4, budget: int | None = None) -> int | None:
    """Rows per block for pairwise work on ``[n_rows, n_cols]`` (``None``: one block holds all rows).

    ``arrays``: how many ``[rows, n_cols]`` temporaries a block holds at once.
    Accelerators: the most rows within the budget. CPU: cache-sized blocks of
    about 2^21 entries (fewer if the budget asks), a divisor of ``n_rows`` when one is near.
    """
    itemsize = jnp.dtype(dtype).itemsize
    budget = memory_budget() if budget is None else budget
    cap = max(1, budget // max(1, arrays * n_cols * itemsize))
    rows = cap if layout_platform() != "cpu" else min(cap, max(8, _CPU_BLOCK_ENTRIES // max(1, n_cols)))
    if rows >= n_rows:
        return None
    return _near_divisor(n_rows, rows)


class PairwisePlan(NamedTuple):
    """How an engine lays out its pairwise work: store the ``[n, n]`` distances or not, and the row blocks."""

    store: bool
    rows: int | None


def pairwise_plan(
    n: int, dtype, block_size: int | None, *, store_wanted: bool, arrays: int = 4, columns: int | None = None
) -> PairwisePlan:
    """The layout for ``n`` particles.

    ``block_size`` (the user's override): an int forces row blocks of that size and
    never stores an ``[n, n]`` matrix (memory O(block_size * n)). ``None``: automatic.
    The distances are stored (so a median rule reads them in one pass instead of
    recomputing them) when ``store_wanted``, three ``[n, n]`` arrays (the product, the
    median's packed triangle, the kernel matrix) take at most the budget, and the
    matrix has at most 2^26 entries on the CPU (``n`` up to about 8192; beyond, the
    recomputation is cheaper than the memory traffic) or 2^30 on accelerators.
    ``columns``: the number of columns when it differs from ``n`` (a device's rows
    against all particles, :mod:`steinax.runtime.sharding`).
    """
    if block_size is not None:
        return PairwisePlan(False, None if block_size >= n else int(block_size))
    m = n if columns is None else columns
    budget = memory_budget()
    most = _STORE_MAX_ENTRIES if layout_platform() == "cpu" else _STORE_MAX_ENTRIES_ACCELERATOR
    store = store_wanted and 3 * n * m * jnp.dtype(dtype).itemsize <= budget and n * m <= most
    rest = budget - (n * m * jnp.dtype(dtype).itemsize if store else 0)
    return PairwisePlan(store, auto_block_size(n, m, dtype, arrays=arrays, budget=max(1, rest)))


def squared_distances(
    x: jax.Array, y: jax.Array, scale: jax.Array | float | None = None, *, row_index: jax.Array | None = None
) -> jax.Array:
    """Matrix of (scaled) squared distances ``D_ij = sum_d (x_id - y_jd)^2 / s_d``.

    Args:
        x: ``[n, d]`` points.
        y: ``[m, d]`` points.
        scale: ``None`` (no scaling), a positive scalar, or a ``[d]`` vector of
            positive per-dimension scales ``s_d``.
        row_index: when ``x`` is a block of rows of ``y``, their indices in ``y``
            (``-1`` for padding), so the self-distances are set to exactly 0.

    Returns:
        ``[n, m]`` array, clamped to be ``>= 0``. Never forms an ``n x m x d`` tensor.
        The self-distances (``x is y``, or those named by ``row_index``) are exactly 0:
        in the expanded form they carry a rounding error of about
        ``eps * ||x - centre||^2``, which in float32 and high dimension would make
        ``k(x, x)`` visibly differ from ``kappa(0)``.
    """
    if x.shape[-1] == 1:  # one coordinate (CC-SVGD, KCC-SD): the direct difference is exact and fuses
        diff = x - y.T
        d2 = diff * diff
        return d2 if scale is None else d2 / jnp.reshape(jnp.asarray(scale, x.dtype), ())
    whole = row_index is None and x is y
    centre = jnp.mean(y, axis=0, keepdims=True)
    x = x - centre
    y = y - centre
    if scale is not None:
        inv = 1.0 / jnp.sqrt(jnp.asarray(scale, dtype=x.dtype))
        inv = inv[None, :] if inv.ndim == 1 else inv
        x = x * inv
        y = y * inv
    xx = jnp.sum(x * x, axis=-1)
    yy = jnp.sum(y * y, axis=-1)
    norms = xx[:, None] + yy[None, :]
    d2 = norms - 2.0 * jnp.matmul(x, y.T, precision=jax.lax.Precision.HIGHEST)  # float32 on GPUs too (no TF32)
    # entries within the expanded form's rounding bound are indistinguishable from 0: exactly 0 (the clamp too)
    d2 = jnp.where(d2 <= _rounding_floor(x.shape[-1], x.dtype) * norms, 0.0, d2)
    if whole:
        # the whole square matrix (stored for a median rule): one product, and the clamp and zero diagonal by
        # an elementwise select, not a scatter, so the matrix stays one elementwise function of the product,
        # which XLA fuses into its readers (the median's packing, the kernel's exponential) instead of writing
        # it out (n = 5000, d = 100: an SVGD step 98 ms this way, 116 ms with row blocks copied into a matrix)
        i = jax.lax.broadcasted_iota(jnp.int32, d2.shape, 0)
        return jnp.where(i == jax.lax.broadcasted_iota(jnp.int32, d2.shape, 1), 0.0, d2)
    if row_index is not None:
        # a row block: a scatter of its n_b entries (a select would add a compare per entry, which at small
        # d is a visible share of the block's elementwise work); padding (-1) is dropped
        cols = jnp.where(row_index >= 0, row_index, y.shape[0])
        d2 = d2.at[jnp.arange(d2.shape[0]), cols].set(0.0, mode="drop")
    return d2


def _rounding_floor(d: int, dtype) -> float:
    """Relative rounding bound of ``||x||^2 + ||y||^2 - 2 x.y`` in ``dtype``: ``2 (d + 2) eps``.

    Each of the two squared norms and the product is a length-``d`` dot product, off by at
    most ``gamma_d ~ d eps`` of its absolute terms (Higham, *Accuracy and Stability of
    Numerical Algorithms*, eq. 3.5), and ``2|x.y| <= ||x||^2 + ||y||^2``; two additions add
    ``2 eps``. So ``|fl(D) - D| <= 2 (d + 2) eps (||x||^2 + ||y||^2)``, and an entry at or
    below that is set to exactly 0: it cannot be told from 0 in this form. Coincident
    distinct rows (particles started at one point, a chain stuck for many draws) then give
    exact zeros, as the documented median rule assumes (a median of 0 means ``h = 1``);
    before, their residues of about ``eps ||x||^2`` made the median, and ``h``, about 1e-16.
    Distances are after centring, so the bound scales with the spread of the points, not
    with their offset; a kernel value changes by at most that relative amount over ``h``.
    """
    return 2.0 * (d + 2) * float(jnp.finfo(dtype).eps)


def _row_blocks(n: int, block_size: int, row_args):
    """Pad rows to a multiple of ``block_size`` (repeating the last row) and reshape to blocks."""
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"`block_size` must be a positive integer or None; received {block_size!r}")
    n_blocks = -(-n // block_size)
    block_size = -(-n // n_blocks)  # balanced blocks: the least padding for this number of blocks
    pad = n_blocks * block_size - n
    index = jnp.arange(n_blocks * block_size)
    index = jnp.where(index < n, index, -1).reshape(n_blocks, block_size)

    def pad_rows(a):
        if pad:
            a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)], axis=0)
        return a.reshape((n_blocks, block_size) + a.shape[1:])

    return index, tuple(pad_rows(a) for a in row_args)


def scan_row_blocks(fn: Callable, init, n: int, block_size: int | None, *row_args: jax.Array):
    """Scan ``(acc, out) = fn(acc, row_index, *row_blocks)`` over consecutive row blocks.

    The one blocking primitive: ``row_index`` holds the global indices of the
    block's rows, ``-1`` for padding rows (which repeat the last real row, so
    ``fn`` never sees values outside the data, and must be masked by ``fn`` in
    any reduction). ``out`` has the block's rows as leading axis; the outputs are
    concatenated and the padding dropped. With ``block_size=None`` (or ``>= n``)
    ``fn`` is applied once to all rows. The rows are split into
    ``ceil(n / block_size)`` blocks of equal size (at most ``block_size``, so
    ``n = 1000`` with ``block_size=256`` gives four blocks of 250 and no
    padding). Blocks are evaluated sequentially
    (``lax.scan``), so peak memory is that of one call of ``fn`` on
    ``block_size`` rows: O(block_size * n) for pairwise work.

    Returns:
        ``(acc, out)``.
    """
    if block_size is None or block_size >= n:
        return fn(init, jnp.arange(n), *row_args)
    index, blocks = _row_blocks(n, block_size, row_args)

    def body(acc, xs):
        idx, *rows = xs
        return fn(acc, idx, *rows)

    acc, out = jax.lax.scan(body, init, (index,) + blocks)
    out = jax.tree_util.tree_map(lambda o: o.reshape((-1,) + o.shape[2:])[:n], out)
    return acc, out


def map_row_blocks(fn: Callable, n: int, block_size: int | None, *row_args: jax.Array, with_index: bool = False):
    """Apply ``fn(*row_blocks)`` (``fn(row_index, *row_blocks)`` with ``with_index``) to row blocks and concatenate.

    See :func:`scan_row_blocks`.
    """
    if with_index:
        return scan_row_blocks(lambda acc, idx, *rows: (acc, fn(idx, *rows)), (), n, block_size, *row_args)[1]
    return scan_row_blocks(lambda acc, _, *rows: (acc, fn(*rows)), (), n, block_size, *row_args)[1]


def fold_row_blocks(fn: Callable, init, n: int, block_size: int | None, *row_args: jax.Array):
    """Fold ``acc = fn(acc, row_index, *row_blocks)`` over row blocks (see :func:`scan_row_blocks`)."""
    return scan_row_blocks(lambda acc, idx, *rows: (fn(acc, idx, *rows), ()), init, n, block_size, *row_args)[0]
