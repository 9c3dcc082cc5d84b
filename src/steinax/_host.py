"""NumPy work called from compiled code, reading XLA's buffers in place.

``jax.pure_callback`` (jax 0.10) copies every operand twice before the function
sees it: XLA's callback handler copies the buffer into a new NumPy array, and
``pure_callback`` then ``device_put``-s that into a fresh ``jax.Array``. The
exact median's operand is the 50 MB packed distance triangle at ``n = 5000``;
each copy lands in newly mapped memory, which costs about 35 ms, twice the
selection itself (at ``n = 1000`` the copies are 1.4 ms of a 2.5 ms call).

:func:`host_call` goes through :func:`jax.experimental.buffer_callback.buffer_callback`
(public, experimental): the function's operands are NumPy views of XLA's own
buffers (no copy) and its results are written into XLA's result buffers. On a
jax without it, :func:`host_call` falls back to ``jax.pure_callback`` with
identical results; ``FAST_PATH`` says which one is in use.

``fn`` must be pure and must not keep or modify its operands (they are views of
buffers XLA reuses): it receives NumPy arrays and returns a tuple of arrays of
the declared shapes and dtypes. Batching (``vmap``) maps ``fn`` over the batch
sequentially. There is no differentiation rule: callers stop gradients first
(every caller here is a bandwidth heuristic).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import numpy as np

__all__ = ["host_call", "FAST_PATH"]

try:  # public but experimental (jax >= 0.7); see the module docstring
    from jax.experimental.buffer_callback import buffer_callback

    FAST_PATH = True
except ImportError:  # pragma: no cover - older jax
    FAST_PATH = False


def _call(fn, results, args):
    out = fn(*args)
    return tuple(np.asarray(o, dtype=dtype).reshape(shape) for o, (shape, dtype) in zip(out, results))


def _fn_key(fn):
    """A value key for ``fn``: a ``functools.partial`` compares by its function and arguments."""
    if isinstance(fn, functools.partial):
        return (_fn_key(fn.func), fn.args, tuple(sorted(fn.keywords.items())))
    return fn


@dataclasses.dataclass(frozen=True)
class _InPlace:
    """``buffer_callback``'s callback: ``fn`` on read-only views, results written into XLA's buffers.

    Equal and hashed by value (``fn``, a partial's arguments, the result types),
    so eager calls of the same ``fn`` reuse one compiled computation.
    """

    fn: Callable = dataclasses.field(compare=False)
    results: tuple
    key: object

    def __call__(self, ctx, outs, *args):
        views = []
        for a in args:
            v = np.asarray(a)
            v.flags.writeable = False  # a view of XLA's buffer: fn must not change it
            views.append(v)
        for o, value in zip(outs, _call(self.fn, self.results, views)):
            np.asarray(o)[...] = value


def host_call(fn, result_shapes, *args):
    """``fn(*numpy_args)`` from compiled code on the CPU backend; returns a tuple of arrays.

    Args:
        fn: a pure, hashable function (a module-level function or a
            ``functools.partial`` of one with hashable arguments, so that eager
            calls hit the compilation cache) returning a tuple of arrays.
        result_shapes: a sequence of ``jax.ShapeDtypeStruct``.
        *args: the operands (arrays).
    """
    results = tuple((tuple(s.shape), np.dtype(s.dtype)) for s in result_shapes)
    if FAST_PATH:
        shapes = tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in results)
        return tuple(buffer_callback(_InPlace(fn, results, _fn_key(fn)), shapes, vmap_method="sequential")(*args))
    out = jax.pure_callback(
        lambda *a: _call(fn, results, [np.asarray(x) for x in a]), tuple(result_shapes), *args,
        vmap_method="sequential",
    )
    return tuple(out)
