"""Atomic file writing: every file steinax writes goes through :func:`atomic_write`.

A file is written to a temporary file in the destination folder, flushed to
disk, given the permissions of the file it replaces (a user's ``chmod`` is kept)
or, for a new file, those an ordinary ``open(path, "w")`` would give it
(``0o666`` less the process umask; ``tempfile.mkstemp`` alone gives ``0o600``),
then renamed over the destination with ``os.replace``. A reader never sees a
partial file and an interrupted write leaves the old file (or none) in place.

Temporaries are named ``.<name>.<host>.<pid>.<random>.tmp``. A writer killed
mid-write (SIGKILL, power loss) cannot remove its own; the next write to the same
destination removes every temporary of that destination whose writer, on this
host, is no longer running (:func:`remove_orphan_temporaries`). A live writer's
temporary, or one written from another host, is never touched.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import socket
import tempfile
from typing import Callable

__all__ = ["atomic_write", "check_output", "check_writable", "atomic_write_csv", "atomic_write_text", "default_file_mode", "remove_orphan_temporaries"]


def default_file_mode() -> int:
    """``0o666`` less the current umask: the mode ``open(path, "w")`` would create."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: alive
        return True
    return True


def remove_orphan_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporaries of ``path`` left by writers of this host that are no longer running; return them."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape("." + os.path.basename(path)) + r"\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[^.]+\.tmp")
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    host = _host()
    for name in names:
        match = pattern.fullmatch(name)
        if match and match["host"] == host and not _alive(int(match["pid"])):
            try:
                os.remove(os.path.join(directory, name))
                removed.append(name)
            except OSError:  # removed by another writer meanwhile, or not ours to remove
                pass
    return removed


def _cannot_write(path: str, exc: OSError) -> OSError:
    """``exc`` again, of its own class, with a message naming ``path``."""
    return type(exc)(exc.errno, f"cannot write {path!r}: {exc.strerror or exc}")


def _temporary(path: str) -> str:
    """A new empty temporary next to ``path`` (its folder created), named for :func:`remove_orphan_temporaries`."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.{_host()}.{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    return tmp


def check_writable(path: str | os.PathLike, size: int = 0) -> None:
    """Raise an ``OSError`` naming ``path`` now if a write of ``size`` bytes there would fail later: the
    folder cannot be created or written (a temporary is created and removed), ``path`` is a folder, or
    the disk has less than ``2 * size`` bytes free (the temporary beside the file it replaces). Called
    before long work that ends in a write, so no work is lost to a late failure."""
    import shutil

    path = os.fspath(path)
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "it is a folder")
        os.remove(_temporary(path))
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    if free < 2 * size:
        raise OSError(28, f"cannot write {path!r}: {free} bytes free on its disk, about {2 * size} needed")


def _same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path (symbolic links followed), or, both
    existing, the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def check_output(path: str | os.PathLike, inputs=(), *, name: str = "--out", size: int = 0) -> None:
    """The one guard of every command that writes: called before any work, it refuses an output that is
    one of the command's ``inputs`` (the same file under any name: a symbolic or hard link counts), then
    checks that ``path`` can be written (:func:`check_writable`).

    Args:
        path: the output file.
        inputs: the files the command reads (samples, a target module); ``None`` entries are skipped.
        name: the argument that named ``path``, for the message.
        size: the bytes the write will need, if known.

    Raises:
        ValueError: ``path`` is an input (the input is left byte for byte as it was).
        OSError: ``path`` cannot be written.
    """
    path = os.fspath(path)
    for given in inputs:
        if given is not None and _same_file(path, os.fspath(given)):
            raise ValueError(f"`{name}` {path!r} is an input of this command ({os.fspath(given)!r}); writing there "
                             "would destroy it. Expected a new path")
    check_writable(path, size)


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file next to ``path``, then rename it to ``path``.

    Args:
        path: the destination; its folder is created if missing.
        write: writes the whole content to the path it is given (e.g. ``fig.savefig``,
            ``np.savez``); it must not append a suffix of its own.

    Raises:
        OSError: the folder cannot be written (permissions, a full disk); the message names ``path``,
            and the destination is left as it was.
    """
    path = os.fspath(path)
    if os.path.islink(path):  # write where the link points (a dangling one included), never over the link itself
        path = os.path.realpath(path)
    try:
        mode = os.stat(path).st_mode & 0o7777  # a rewrite keeps the user's permissions
    except OSError:
        mode = default_file_mode()
    tmp = None
    try:
        remove_orphan_temporaries(path)
        tmp = _temporary(path)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        raise _cannot_write(path, exc) from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
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


def read_rows(path) -> list[dict]:
    """The rows of a results CSV file (none when it does not exist yet)."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@contextlib.contextmanager
def locked(path):
    """An exclusive lock for writing ``path``: ``fcntl.flock`` on the folder that holds it (released when the process
    dies). No lock file is made, so none is left behind; writers of other files in the same folder wait their turn
    too, which costs only the time of a small write."""
    import fcntl

    folder = os.path.dirname(os.path.abspath(path))
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def append_row(path, row: dict, fields, key) -> None:
    """Add ``row`` to the results CSV at ``path`` under a lock: re-read what is there (another process may have added
    rows), keep every row once (by the fields named in ``key``), write atomically (:func:`atomic_write_csv`)."""
    with locked(path):
        rows = read_rows(path)
        mine = tuple(str(row[k]) for k in key)
        if mine not in {tuple(str(r[k]) for k in key) for r in rows}:
            rows.append(row)
        atomic_write_csv(path, rows, fields)
