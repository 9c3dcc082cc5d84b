"""Backend choices: made inside the compiled program, per platform, never by asking which backend is the default.

Some of steinax's layouts exist for XLA:CPU only: host (NumPy) selection for the
median, targets evaluated one particle at a time and LAPACK handed one matrix at a
time (jaxlib 0.10's batched CPU kernels can stall), plain bisection instead of a
multi-threshold count. On an accelerator each of them costs (a host round-trip, a
serial loop), so they must not follow a program onto a GPU.

:func:`on_cpu_else` is the one place these choices are made: it wraps
:func:`jax.lax.platform_dependent`, so both branches are traced and the platform the
program is *lowered for* picks one. A program exported with
``jax.export.export(..., platforms=("cuda",))`` on a CPU-only machine then holds the
accelerator branch only (no host callback), which is what the tests check.

Static layout choices (how many rows a block holds) cannot be branches: they are
shapes. They follow :func:`layout_platform`, the backend the program is traced for:
``jax.default_backend()``, or the platform named by :func:`tracing_for` while a
program is exported for another platform.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable

import jax

__all__ = ["on_cpu_else", "on_cuda_else", "branches", "forced_branch", "layout_platform", "tracing_for"]

_LAYOUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("steinax_layout_platform", default=None)
_FORCED: contextvars.ContextVar[str | None] = contextvars.ContextVar("steinax_forced_branch", default=None)


def on_cpu_else(cpu: Callable, other: Callable, *args):
    """``cpu(*args)`` in a program lowered for the CPU, ``other(*args)`` on every other platform.

    Both functions must return the same shapes and dtypes. The choice is
    :func:`jax.lax.platform_dependent`'s, made when the program is lowered, so a
    program traced on a CPU machine and exported for ``"cuda"`` runs ``other``.
    """
    forced = _FORCED.get()
    if forced is not None:
        return (cpu if forced == "cpu" else other)(*args)
    # fresh callables: platform_dependent hashes its branches, and a bound method of a module holding arrays
    # (a target's ``evaluate``) is unhashable
    return jax.lax.platform_dependent(*args, cpu=lambda *a: cpu(*a), default=lambda *a: other(*a))


def on_cuda_else(cuda: Callable, other: Callable, *args):
    """``cuda(*args)`` in a program lowered for CUDA (compiled Pallas kernels), ``other(*args)`` elsewhere."""
    forced = _FORCED.get()
    if forced is not None:
        return (other if forced == "cpu" else cuda)(*args)
    return jax.lax.platform_dependent(*args, cuda=lambda *a: cuda(*a), default=lambda *a: other(*a))


@contextlib.contextmanager
def branches(which: str):
    """Trace every platform choice as on ``which`` (``"cpu"`` or ``"accelerator"``), whatever the program is
    lowered for: so tests on a CPU run the accelerator's branches (Pallas kernels interpreted) and compare
    them with the CPU's. JAX's compilation caches are cleared on entry and exit (a cached program would
    hold the other branches)."""
    if which not in ("cpu", "accelerator"):
        raise ValueError(f"`which` must be 'cpu' or 'accelerator'; received {which!r}")
    jax.clear_caches()
    token = _FORCED.set(which)
    try:
        yield
    finally:
        _FORCED.reset(token)
        jax.clear_caches()


def forced_branch() -> str | None:
    """The branch set by :func:`branches`, if any."""
    return _FORCED.get()


def layout_platform() -> str:
    """The platform whose memory layout (block sizes) a program being traced now should use."""
    return _LAYOUT.get() or jax.default_backend()


@contextlib.contextmanager
def tracing_for(platform: str):
    """Trace with the layout of ``platform`` (``"cpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``), e.g. around
    ``jax.export.export(..., platforms=(platform,))`` on a machine of another kind."""
    if platform not in ("cpu", "cuda", "rocm", "tpu"):
        raise ValueError(f"`platform` must be one of 'cpu', 'cuda', 'rocm', 'tpu'; received {platform!r}")
    token = _LAYOUT.set(platform)
    try:
        yield
    finally:
        _LAYOUT.reset(token)
