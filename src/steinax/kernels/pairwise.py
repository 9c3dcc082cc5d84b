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

__all__ = ["squared_distances", "map_row_blocks"]


def squared_distances(x: jax.Array, y: jax.Array, scale: jax.Array | float | None = None) -> jax.Array:
    """Matrix of (scaled) squared distances ``D_ij = sum_d (x_id - y_jd)^2 / s_d``.

    Args:
        x: ``[n, d]`` points.
        y: ``[m, d]`` points.
        scale: ``None`` (no scaling), a positive scalar, or a ``[d]`` vector of
            positive per-dimension scales ``s_d``.

    Returns:
        ``[n, m]`` array, clamped to be ``>= 0``. Never forms an ``n x m x d`` tensor.
    """
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
    return jnp.maximum(d2, 0.0)


def map_row_blocks(fn: Callable, n: int, block_size: int | None, *row_args: jax.Array):
    """Apply ``fn(*row_blocks)`` to consecutive row blocks of ``row_args`` and stack.

    ``fn`` maps arrays whose leading axis is a block of rows to outputs whose
    leading axis is the same block. With ``block_size=None`` (or ``>= n``) it is
    called once on all rows; otherwise rows are padded to a multiple of
    ``block_size``, the blocks are evaluated sequentially with ``lax.map`` (so
    peak memory is O(block_size * n)), and the padding is dropped.

    Padding rows repeat the last real row, so ``fn`` never sees values outside
    the data (no spurious NaN/inf from zero rows).
    """
    if block_size is None or block_size >= n:
        return fn(*row_args)
    if block_size < 1:
        raise ValueError(f"`block_size` must be a positive integer or None; received {block_size!r}")
    n_blocks = -(-n // block_size)
    pad = n_blocks * block_size - n

    def pad_rows(a):
        if pad == 0:
            return a
        return jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)], axis=0)

    blocks = [pad_rows(a).reshape((n_blocks, block_size) + a.shape[1:]) for a in row_args]
    out = jax.lax.map(lambda args: fn(*args), tuple(blocks))
    return jax.tree_util.tree_map(lambda o: o.reshape((n_blocks * block_size,) + o.shape[2:])[:n], out)


def fold_row_blocks(fn: Callable, init, n: int, block_size: int | None, *row_args: jax.Array):
    """Fold ``acc = fn(acc, row_index, *row_blocks)`` over consecutive row blocks.

    ``row_index`` holds the global indices of the block's rows, ``-1`` for
    padding rows (which repeat the last real row and must be masked by ``fn``).
    With ``block_size=None`` (or ``>= n``) ``fn`` is applied once to all rows.
    Peak memory is that of one call of ``fn`` on ``block_size`` rows.
    """
    if block_size is None or block_size >= n:
        return fn(init, jnp.arange(n), *row_args)
    if block_size < 1:
        raise ValueError(f"`block_size` must be a positive integer or None; received {block_size!r}")
    n_blocks = -(-n // block_size)
    pad = n_blocks * block_size - n
    index = jnp.arange(n_blocks * block_size)
    index = jnp.where(index < n, index, -1).reshape(n_blocks, block_size)

    def pad_rows(a):
        if pad:
            a = jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)], axis=0)
        return a.reshape((n_blocks, block_size) + a.shape[1:])

    blocks = tuple(pad_rows(a) for a in row_args)

    def body(acc, xs):
        idx, *rows = xs
        return fn(acc, idx, *rows), None

    acc, _ = jax.lax.scan(body, init, (index,) + blocks)
    return acc
