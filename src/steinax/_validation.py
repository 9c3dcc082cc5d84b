"""Input checks shared by every public entry point.

Every error names the argument, what was received and what was expected.
Checks on values (finiteness) run only on concrete arrays: inside ``jit`` the
shapes and dtypes are still checked, values are checked by the run loop.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np


class PrecisionWarning(UserWarning):
    """Input of a higher precision than JAX will compute in (float64 without ``jax_enable_x64``)."""

class InputDtypeWarning(UserWarning):
    """Integer input read as continuous coordinates or values (:func:`as_float_input`)."""


__all__ = [
    "user_stacklevel",
    "InputDtypeWarning",
    "PrecisionWarning",
    "as_float_input",
    "check_block_size",
    "check_finite_statistic",
    "check_float_dtype",
    "check_key",
    "check_particles",
    "check_scores",
    "check_positive",
    "is_concrete",
]


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer inside ``jit``)."""
    return not isinstance(x, jax.core.Tracer)


def _describe(x) -> str:
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None:
        return f"{type(x).__name__}"
    return f"array of shape {tuple(shape)} and dtype {dtype}"


def check_float_dtype(x, name: str) -> None:
    """The one dtype policy: steinax computes in float32 (default) or float64, nothing else.

    Half precisions (float16, bfloat16) are refused, not computed: their 8- and 11-bit
    significands make pairwise sums meaningless (``ksd`` in float16 was exactly 0 for
    n >= 256; a bfloat16 SVGD run barely moved). Integer, boolean and complex arrays are refused too.

    Raises:
        TypeError: naming ``name``, the dtype received and the two accepted.
    """
    dtype = np.dtype(x.dtype) if not jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else None
    if dtype is None or dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        hint = " (half precision is not supported: cast with .astype(jnp.float32))" if dtype is not None and \
            jnp.issubdtype(dtype, jnp.floating) else ""
        raise TypeError(f"`{name}` must have dtype float32 or float64; received {_describe(x)}{hint}")


def as_float_input(values, name: str) -> np.ndarray:
    """The one policy for data a user hands a tool (draws, a function's values): a float64 NumPy array.

    * float: kept (as float64; the tool then computes in its own dtype);
    * integer: converted, with an :class:`InputDtypeWarning` (a Stein discrepancy treats every coordinate
      as continuous; integer draws are usually a discrete parameter, which has no score);
    * boolean, complex, strings, objects: refused (``TypeError`` naming ``name``).
    """
    try:
        arr = np.asarray(values)
    except Exception as exc:
        raise TypeError(f"`{name}` must be a numeric array; received {type(values).__name__}") from exc
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"`{name}` must be real numbers; received booleans ({_describe(arr)}): a Stein method needs "
                        "continuous coordinates and values")
    if kind == "c":
        raise TypeError(f"`{name}` must be real numbers; received complex values ({_describe(arr)}); pass the real "
                        "and imaginary parts as separate real coordinates")
    if kind in "iu":
        warnings.warn(f"`{name}` are integers ({_describe(arr)}); they are read as continuous real numbers. A Stein "
                      "discrepancy needs continuous coordinates with a score: if these are a discrete parameter's "
                      "draws, leave them out", InputDtypeWarning, stacklevel=user_stacklevel())
    elif kind != "f":
        raise TypeError(f"`{name}` must be numeric; received dtype {arr.dtype}")
    return arr.astype(np.float64)


def check_key(key, name: str = "rng_key") -> None:
    """One JAX PRNG key: a typed key of shape ``()`` (``jax.random.key(seed)``) or a legacy ``uint32[2]``
    (``jax.random.PRNGKey(seed)``). Float or int arrays of shape (2,), and batches of keys, are refused.

    Raises:
        TypeError: naming ``name`` and what was received.
    """
    dtype = getattr(key, "dtype", None)
    shape = tuple(getattr(key, "shape", ()) or ())
    typed = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    legacy = dtype is not None and not typed and np.dtype(dtype) == np.uint32 and shape == (2,)
    if (typed and shape == ()) or legacy:
        return
    got = f"a batch of {shape} keys" if typed else (_describe(key) if dtype is not None else f"{type(key).__name__} {key!r}")
    raise TypeError(f"`{name}` must be one JAX PRNG key (jax.random.key(seed)); received {got}")


def check_particles(particles, name: str = "particles", *, check_finite: bool = True) -> jax.Array:
    """Return ``particles`` as a floating JAX array of shape ``[n, d]``.

    Raises:
        TypeError: not an array of a floating dtype.
        ValueError: not two-dimensional, empty, or holding NaN/inf.
    """
    if not hasattr(particles, "shape") or not hasattr(particles, "dtype"):
        try:
            particles = np.asarray(particles)
        except Exception as exc:  # pragma: no cover - defensive
            raise TypeError(
                f"`{name}` must be an array of shape [n, d]; received {type(particles).__name__}"
            ) from exc
    if particles.ndim != 2:
        raise ValueError(
            f"`{name}` must have shape [n, d] (n particles in d dimensions); "
            f"received {_describe(particles)}"
        )
    if particles.shape[0] < 1 or particles.shape[1] < 1:
        raise ValueError(f"`{name}` must hold at least one particle of dimension >= 1; received {_describe(particles)}")
    check_float_dtype(particles, name)
    if np.dtype(particles.dtype) == np.float64 and not jax.config.jax_enable_x64:
        warnings.warn(
            f"`{name}` are float64 but JAX's 64-bit mode is off, so steinax computes in float32. "
            "Enable float64 with jax.config.update('jax_enable_x64', True) before creating arrays, "
            "or pass float32 arrays to silence this warning.",
            PrecisionWarning,
            stacklevel=user_stacklevel(),
        )
    particles = jnp.asarray(particles)
    if check_finite and is_concrete(particles):
        if not particles.is_fully_addressable:  # spread over processes: one global reduction, gather only if bad
            if bool(jax.jit(lambda a: jnp.all(jnp.isfinite(a)))(particles)):
                return particles
            from jax.experimental import multihost_utils

            particles_host = np.asarray(multihost_utils.process_allgather(particles, tiled=True))
        else:
            particles_host = np.asarray(particles)
        bad = ~np.isfinite(particles_host)
        if bad.any():
            rows = np.unique(np.nonzero(bad)[0])
            raise ValueError(
                f"`{name}` must be finite; received {int(bad.sum())} non-finite entries "
                f"(NaN or inf) in rows {rows[:10].tolist()}{' ...' if rows.size > 10 else ''}"
            )
    return particles


def check_scores(scores, particles: jax.Array, name: str = "scores", *, check_finite: bool = True) -> jax.Array:
    """Return ``scores`` checked to match ``particles`` in shape and dtype."""
    scores = check_particles(scores, name, check_finite=check_finite)
    if scores.shape != particles.shape:
        raise ValueError(
            f"`{name}` must have the same shape as `particles` {tuple(particles.shape)}; "
            f"received {_describe(scores)}"
        )
    if scores.dtype != particles.dtype:
        raise TypeError(
            f"`{name}` must have the same dtype as `particles` ({particles.dtype}); received {_describe(scores)}"
        )
    return scores


def check_positive(value, name: str) -> None:
    """Raise if a concrete ``value`` is not finite and strictly positive."""
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"`{name}` must be finite and > 0; received {arr.tolist()!r}")


def check_settings(owner: str, obj, *, integers=(), counts=(), positive=()) -> None:
    """A stage's or method's settings, each refused by name when made: ``integers`` (attribute names) must be integers
    >= 1, ``counts`` integers >= 0, ``positive`` finite numbers > 0; ``owner`` prefixes the message
    (``"HMCCorrection: `warmup` must be ..."``)."""
    for field in integers + counts:
        value, least = getattr(obj, field), 1 if field in integers else 0
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            kind = "a positive integer" if least else "a non-negative integer"
            raise ValueError(f"{owner}: `{field}` must be {kind}; received {value!r}")
    for field in positive:
        value = getattr(obj, field)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
                np.isfinite(value) and value > 0):
            raise ValueError(f"{owner}: `{field}` must be a finite number > 0; received {value!r}")


def check_finite_statistic(value, what: str, scores=None) -> None:
    """Raise ``FloatingPointError`` saying why when a concrete statistic is NaN or inf.

    A discrepancy is a sum of products of scores: scores of size ``> sqrt(max float)``
    (``1.8e19`` in float32) overflow even when every input is finite.
    """
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    if np.all(np.isfinite(arr)):
        return
    dtype = arr.dtype
    why = ""
    if scores is not None and is_concrete(scores):
        biggest = float(np.max(np.abs(np.asarray(scores))))
        limit = float(np.sqrt(np.finfo(dtype).max))
        if biggest > limit / 1e3:
            why = (
                f" The scores reach |s| = {biggest:.3g}; products of scores overflow {dtype} "
                f"(largest value {float(np.finfo(dtype).max):.3g})."
            )
    hint = (
        " Compute in float64 (jax.config.update('jax_enable_x64', True) and float64 samples), "
        "or check the target's scale."
        if dtype != np.float64
        else " Check the target's scale."
    )
    raise FloatingPointError(f"{what} is not finite ({arr.tolist()!r}) although every sample and score is finite.{why}{hint}")


def check_block_size(block_size, name: str = "block_size") -> None:
    """``None`` (automatic blocks) or a positive integer (rows per block)."""
    if block_size is None:
        return
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        raise ValueError(f"`{name}` must be None (automatic) or a positive integer (rows per block); received {block_size!r}")


def user_stacklevel() -> int:
    """The ``stacklevel`` at which ``warnings.warn``, called by the caller of this function, points at the first frame
    outside steinax (the user's line), however deep in the library the warning is raised."""
    import inspect
    import os

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = inspect.currentframe().f_back, 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
