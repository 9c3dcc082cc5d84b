"""Progress bars, one service for every loop: a ``tqdm`` bar on the host, advanced from inside compiled code.

:func:`progress_bar` opens a bar (or none) for a loop of ``total`` steps and registers it under an integer id; a
compiled loop passes that id to :func:`advance` through an ordered ``jax.debug.callback``, so the bar moves while
XLA runs. ``progress``: ``True``, ``False`` or ``"auto"`` (a bar for loops of at least :data:`AUTO_MIN_STEPS`
steps on a terminal). The bar is closed, and its id forgotten, when the scope exits, whatever happened inside.
"""

from __future__ import annotations

import contextlib
import itertools
import sys

import jax

__all__ = ["progress_bar", "advance", "ProgressBar", "AUTO_MIN_STEPS"]

AUTO_MIN_STEPS = 1000
_BARS: dict[int, object] = {}
_IDS = itertools.count()


class ProgressBar:
    """An open bar's handle: ``id`` (for :func:`advance` from compiled code), ``shown`` (whether there is a bar) and
    :meth:`update` (from the host)."""

    def __init__(self, bar):
        self.id = next(_IDS)
        self.bar = bar
        self.shown = bar is not None

    def update(self, n: int, **postfix) -> None:
        """Advance by ``n`` (from the host), showing ``postfix`` (e.g. ``loss=...``) beside the bar."""
        if self.bar is not None:
            self.bar.update(int(n))
            if postfix:
                self.bar.set_postfix(**postfix)


def advance(bar_id, n_steps) -> None:
    """Advance the bar registered as ``bar_id`` by ``n_steps`` (a host callback's target; no bar: nothing)."""
    bar = _BARS.get(int(bar_id))
    if bar is not None:
        bar.update(int(n_steps))


def _tqdm(progress, total, desc, leave, unit):
    if progress == "auto":
        progress = total >= AUTO_MIN_STEPS and sys.stderr.isatty()
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit=unit, leave=leave)


@contextlib.contextmanager
def progress_bar(progress, total: int, desc: str = "steinax", leave: bool = True, unit: str = "step"):
    """A :class:`ProgressBar` for a loop of ``total`` steps (module docstring); closed on exit, and, where the loop
    advanced it from compiled code, after the last callback has run."""
    handle = ProgressBar(_tqdm(progress, total, desc, leave, unit))
    if handle.shown:
        _BARS[handle.id] = handle.bar
    try:
        yield handle
        if handle.shown:
            jax.effects_barrier()
    finally:
        if handle.shown:
            handle.bar.close()
            _BARS.pop(handle.id, None)
