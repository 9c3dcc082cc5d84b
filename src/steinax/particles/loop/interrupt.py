"""Ctrl-C as a request to stop, for the whole life of a run: one service shared by every loop.

A run is many host-side pieces (validation, compilation, compiled segments of steps, the settle
rule between segments): a Ctrl-C may land in any of them. :func:`interrupt_scope` turns SIGINT into
a flag for as long as the outermost scope is open; a nested scope (a segment inside
:func:`steinax.run_until_converged`) joins the open one, so the flag, and the global step at which it
was honoured, live across segments. The loops look at the flag:

* on the host, before and after each compiled segment (:attr:`InterruptScope.requested`);
* from inside a compiled loop on the CPU, every ``INTERRUPT_CHECK_EVERY`` steps, through
  :func:`interrupted` (a host callback): the main thread is then inside XLA, where Python's own
  handler cannot run, but the C-level handler writes the signal number to a wakeup pipe at once
  (``signal.set_wakeup_fd``), and the callback reads it.

Main thread only (the only one Python delivers signals to); elsewhere the scope is inert and Ctrl-C
behaves as usual. On exit the previous handler and wakeup descriptor are restored, and a Ctrl-C that no
loop honoured (pressed after its last look) is raised there as a ``KeyboardInterrupt``: never dropped.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading

import numpy as np

__all__ = ["InterruptScope", "interrupt_scope", "interrupted", "INTERRUPT_CHECK_EVERY"]

INTERRUPT_CHECK_EVERY = 100
"""Steps between two looks at Ctrl-C from inside a compiled loop (CPU)."""

_IDS = itertools.count(1)
_REQUESTED: set[int] = set()
_WAKEUP: dict[int, int] = {}  # scope id -> the read end of the pipe the C-level signal handler writes to
_OPEN: list["InterruptScope"] = []  # the open scope (at most one per process: the main thread's)


class InterruptScope:
    """The open scope: ``id`` (passed into compiled loops) and whether Ctrl-C was pressed since it opened."""

    def __init__(self, live: bool):
        self.id = next(_IDS)
        self.live = live  # False off the main thread: nothing installed, never requested
        self.honoured = False  # set by the loop that raised for this Ctrl-C

    @property
    def requested(self) -> bool:
        """Whether Ctrl-C has been pressed while the scope was open (drains the wakeup pipe)."""
        return bool(interrupted(self.id))


def interrupted(scope_id) -> np.ndarray:
    """Has Ctrl-C been pressed in scope ``scope_id``? Callable from any thread (an XLA callback included)."""
    scope_id = int(scope_id)
    fd = _WAKEUP.get(scope_id)
    if fd is not None and scope_id not in _REQUESTED:
        try:
            if signal.SIGINT in os.read(fd, 512):
                _REQUESTED.add(scope_id)
        except (BlockingIOError, OSError):
            pass
    return np.asarray(scope_id in _REQUESTED)


@contextlib.contextmanager
def interrupt_scope():
    """Open a scope (or join the open one): inside it SIGINT sets the scope's flag instead of raising."""
    if _OPEN:
        yield _OPEN[-1]
        return
    if threading.current_thread() is not threading.main_thread():
        yield InterruptScope(live=False)
        return
    scope = InterruptScope(live=True)
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    try:
        old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main interpreter
        os.close(read)
        os.close(write)
        yield InterruptScope(live=False)
        return
    _WAKEUP[scope.id] = read
    previous = signal.signal(signal.SIGINT, lambda signum, frame: _REQUESTED.add(scope.id))
    _OPEN.append(scope)
    failed = False
    try:
        yield scope
    except BaseException:
        failed = True
        raise
    finally:
        _OPEN.pop()
        signal.signal(signal.SIGINT, previous)
        signal.set_wakeup_fd(old_fd)
        lost = bool(interrupted(scope.id)) and not scope.honoured
        _WAKEUP.pop(scope.id, None)
        _REQUESTED.discard(scope.id)
        os.close(read)
        os.close(write)
        if lost and not failed:  # pressed after the loop's last look: delivered now, never dropped
            raise KeyboardInterrupt("interrupted (Ctrl-C) as the run was finishing")
