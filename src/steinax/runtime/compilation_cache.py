"""JAX's persistent compilation cache for steinax's programs, opt-in (issue 58).

Each call of :func:`steinax.sample` in a fresh process compiles its programs (L-BFGS, the particle loop, the
hand-off KSD, ChEES's warm-up and its rounds): measured as 71-97% of the first call's wall time on small posteriors,
14-22 s of XLA on one CPU core. JAX can keep compiled programs on disk and load them in the next process that
traces the same program (same shapes, dtypes, model constants and JAX version): :func:`enable_compilation_cache`
turns that on.

**Decided here: every program is kept** (``min_compile_seconds=0``). A call compiles many small programs, not a few
large ones: on Lake Huron (d = 3) 165, of which 3 took over half a second; kept only above 0.5 s, a second process
compiled 11.7 s of its 18 s again, and kept all (156 files, 1.3 MB on disk), 5.4 s in all (measured issue 58, one
CPU core; tracing and lowering, 4 s of it, are paid in every process).

**Decided here: opt-in.** The cache writes to the user's disk (about 1-2 MB per model and number of particles),
and a library that writes there on import surprises; a user
who runs the same model again (a script rerun, a notebook restarted) calls :func:`enable_compilation_cache` once
at the top, or sets ``STEINAX_COMPILATION_CACHE`` (a folder, or ``1`` for the default one) before importing
steinax. The default folder is ``$XDG_CACHE_HOME/steinax/jax`` (``~/.cache/steinax/jax``). JAX never evicts
entries by itself: delete the folder to reclaim the space (:func:`cache_size` says how much it holds).
"""

from __future__ import annotations

import os

import jax

__all__ = ["enable_compilation_cache", "default_cache_dir", "cache_size", "ENV"]

ENV = "STEINAX_COMPILATION_CACHE"
"""An environment variable: a folder (or ``1``, the default one) makes ``import steinax`` enable the cache there."""


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/steinax/jax``, else ``~/.cache/steinax/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "steinax", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None, *, min_compile_seconds: float = 0.0) -> str:
    """Keep JAX's compiled programs in ``path`` (default :func:`default_cache_dir`) and load them from there in later
    processes (module docstring). Returns the folder.

    Args:
        path: the folder (created if missing).
        min_compile_seconds: only programs that took at least this long to compile are written (JAX's
            ``jax_persistent_cache_min_compile_time_secs``; its default, 1 s, leaves out all but a few of steinax's;
            default 0: every program, module docstring).

    Raises:
        ValueError: ``min_compile_seconds`` is not a finite number >= 0.
        OSError: the folder cannot be created.
    """
    if isinstance(min_compile_seconds, bool) or not isinstance(min_compile_seconds, (int, float)) \
            or not (min_compile_seconds >= 0 and min_compile_seconds < float("inf")):
        raise ValueError(f"`min_compile_seconds` must be a finite number >= 0; received {min_compile_seconds!r}")
    folder = os.path.abspath(os.fspath(path) if path is not None else default_cache_dir())
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def cache_size(path: str | os.PathLike | None = None) -> int:
    """Bytes held in the cache folder ``path`` (default: the one in use, else :func:`default_cache_dir`)."""
    folder = os.fspath(path) if path is not None else (jax.config.jax_compilation_cache_dir or default_cache_dir())
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def enable_from_environment() -> str | None:
    """``import steinax`` calls this: :data:`ENV` set to a folder, or to ``1`` (the default folder), enables the
    cache there; unset or empty, nothing."""
    value = os.environ.get(ENV, "").strip()
    if not value or value == "0":
        return None
    return enable_compilation_cache(None if value == "1" else value)
