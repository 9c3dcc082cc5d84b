"""NumPy work called from compiled code, with one copy of each operand.

``jax.pure_callback`` (jax 0.10) receives its operands from XLA as NumPy arrays
and then ``device_put``-s them into fresh ``jax.Array`` s before calling the
function: a second copy into newly mapped memory. For the exact median's 100 MB
distance matrix at ``n = 5000`` that costs about 85 ms, three times the
selection itself. :func:`host_call` binds a small primitive whose CPU lowering
is JAX's own Python-callback custom call, so the function sees the NumPy arrays
XLA hands over (one copy, made by XLA's callback handler) and nothing else.

The lowering uses a JAX-internal function (``jax._src.callback.emit_python_callback``);
when it is missing or has a different signature (another jax version),
:func:`host_call` falls back to ``jax.pure_callback`` with identical results.
``FAST_PATH`` says which one is in use.

``fn`` must be pure: it receives NumPy arrays and returns a tuple of NumPy
arrays of the declared shapes and dtypes. Batching (``vmap``) maps ``fn`` over
the batch sequentially. There is no differentiation rule: callers stop
gradients first (every caller here is a bandwidth heuristic).
"""

from __future__ import annotations

import inspect

import jax
import numpy as np

__all__ = ["host_call", "FAST_PATH"]

try:  # JAX-internal; guarded, see the module docstring
    from jax._src.callback import _callback_op_sharding, emit_python_callback
    from jax.extend.core import Primitive
    from jax.interpreters import batching, mlir

    FAST_PATH = "returns_token" in inspect.signature(emit_python_callback).parameters
except (ImportError, AttributeError, ValueError, TypeError):  # pragma: no cover - other jax versions
    FAST_PATH = False


def _call(fn, results, args):
    out = fn(*args)
    return tuple(np.asarray(o, dtype=dtype).reshape(shape) for o, (shape, dtype) in zip(out, results))


if FAST_PATH:
    _host_call_p = Primitive("steinax_host_call")
    _host_call_p.multiple_results = True

    def _abstract_eval(*avals, fn, results):
        return [jax.core.ShapedArray(shape, dtype) for shape, dtype in results]

    def _lowering(ctx, *args, fn, results):
        sharding = _callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)
        out, _, _ = emit_python_callback(
            ctx, lambda *a: _call(fn, results, a), None, list(args), ctx.avals_in, ctx.avals_out,
            has_side_effect=False, returns_token=False, sharding=sharding,
        )
        return out

    def _batch(args, dims, *, fn, results):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        moved = [a if d is None else jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims)]
        mapped = [d is not None for d in dims]

        def one(i):
            return _host_call_p.bind(*[a[i] if m else a for a, m in zip(moved, mapped)], fn=fn, results=results)

        out = jax.lax.map(one, jax.numpy.arange(size))
        return out, [0] * len(results)

    _host_call_p.def_abstract_eval(_abstract_eval)
    _host_call_p.def_impl(lambda *args, fn, results: list(_call(fn, results, [np.asarray(a) for a in args])))
    mlir.register_lowering(_host_call_p, _lowering, platform="cpu")
    batching.primitive_batchers[_host_call_p] = _batch


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
        return tuple(_host_call_p.bind(*args, fn=fn, results=results))
    out = jax.pure_callback(
        lambda *a: _call(fn, results, [np.asarray(x) for x in a]), tuple(result_shapes), *args,
        vmap_method="sequential",
    )
    return tuple(out)
