"""Pairwise squared distances in matrix-product form, and row blocks.

This is the only module that forms pairwise distances. Everything that needs
``||x_i - y_j||^2`` (kernels, Stein kernels, SVGD directions, MMD, bandwidth
rules) calls :func:`squared_distances`.

Convention: ``||x - y||^2 = ||x||^2 + ||y||^2 - 2 x.y``, computed after
subtracting a common centre (the mean of ``y``, so row blocks of ``x`` against
the same ``y`` share it) to limit cancellation in float32, and clamped at zero. An optional per-dimension ``scale`` ``s`` gives
``sum_d (x_d - y_d)^2 / s_d``.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

__all__ = ["squared_distances", "scan_row_blocks", "map_row_blocks", "fold_row_blocks"]


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
    if row_index is None and x is y:
        row_index = jnp.arange(x.shape[0])
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
    d2 = xx[:, None] + yy[None, :] - 2.0 * (x @ y.T)
    if row_index is not None:  # a scatter of n entries, not a pass over the matrix; padding (-1) is dropped
        cols = jnp.where(row_index >= 0, row_index, y.shape[0])
        d2 = d2.at[jnp.arange(d2.shape[0]), cols].set(0.0, mode="drop")
    return jnp.maximum(d2, 0.0)


def _row_blocks(n: int, block_size: int, row_args):
    """Pad rows to a multiple of ``block_size`` (repeating the last row) and reshape to blocks."""
    if block_size < 1:
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


def map_row_blocks(fn: Callable, n: int, block_size: int | None, *row_args: jax.Array):
    """Apply ``fn(*row_blocks)`` to consecutive row blocks and concatenate (see :func:`scan_row_blocks`)."""
    return scan_row_blocks(lambda acc, _, *rows: (acc, fn(*rows)), (), n, block_size, *row_args)[1]


def fold_row_blocks(fn: Callable, init, n: int, block_size: int | None, *row_args: jax.Array):
    """Fold ``acc = fn(acc, row_index, *row_blocks)`` over row blocks (see :func:`scan_row_blocks`)."""
    return scan_row_blocks(lambda acc, idx, *rows: (fn(acc, idx, *rows), ()), init, n, block_size, *row_args)[0]
