"""Atomic file writing: every file steinax writes goes through :func:`atomic_write`.

A file is written to a temporary file in the destination folder, flushed to
disk, given the permissions an ordinary ``open(path, "w")`` would give it
(``0o666`` less the process umask; ``tempfile.mkstemp`` alone gives ``0o600``),
then renamed over the destination with ``os.replace``. A reader never sees a
partial file and an interrupted write leaves the old file (or none) in place.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

__all__ = ["atomic_write", "atomic_write_csv", "atomic_write_text", "default_file_mode"]


def default_file_mode() -> int:
    """``0o666`` less the current umask: the mode ``open(path, "w")`` would create."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file next to ``path``, then rename it to ``path``.

    Args:
        path: the destination; its folder is created if missing.
        write: writes the whole content to the path it is given (e.g. ``fig.savefig``,
            ``np.savez``); it must not append a suffix of its own.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""

    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    atomic_write(path, write)


def atomic_write_csv(path: str | os.PathLike, rows: list[dict], fields=None) -> None:
    """Write ``rows`` (dicts) as a CSV with a header atomically; ``fields`` default to the first row's keys."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields if fields is not None else rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())
