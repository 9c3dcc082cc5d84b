"""One memory budget for every allocation a user's arguments size.

* :func:`memory_budget`: the bytes the pairwise engines may hold in temporaries (a quarter of the
  free memory; ``STEINAX_MEMORY_BUDGET`` overrides, in bytes).
* :func:`memory_available`: the memory a computation may use at all (the free memory of the
  default device; with ``STEINAX_MEMORY_BUDGET`` set, four times it, so the override bounds both).
* :func:`require_memory`: the one refusal, before allocating, of a size argument
  (``n_bootstrap``, ``tail_draws``, a samples file) whose estimate exceeds half of
  :func:`memory_available`; the message names the argument, the estimate and the memory there is.
"""

from __future__ import annotations

import os

import jax

__all__ = ["memory_budget", "memory_available", "require_memory", "MemoryBudgetError"]

_BUDGET_FRACTION = 4


class MemoryBudgetError(ValueError, MemoryError):
    """A size argument asks for more memory than there is; raised before anything is allocated."""


def _env_budget() -> int | None:
    env = os.environ.get("STEINAX_MEMORY_BUDGET")
    if not env:
        return None
    try:
        value = int(float(env))
    except ValueError:
        raise ValueError(f"STEINAX_MEMORY_BUDGET must be a number of bytes; received {env!r}") from None
    if value < 1:
        raise ValueError(f"STEINAX_MEMORY_BUDGET must be a positive number of bytes; received {env!r}")
    return value


def memory_available() -> int:
    """Bytes a computation may use: the default device's free memory (accelerators: ``bytes_limit -
    bytes_in_use``; CPU: the kernel's ``MemAvailable``), or ``4 x STEINAX_MEMORY_BUDGET`` when set."""
    env = _env_budget()
    if env is not None:
        return env * _BUDGET_FRACTION
    device = jax.devices()[0]
    if device.platform != "cpu":
        try:
            stats = device.memory_stats() or {}
            free = stats.get("bytes_limit", 0) - stats.get("bytes_in_use", 0)
            if free > 0:
                return int(free)
        except Exception:  # pragma: no cover - backends without memory stats
            pass
    return _host_available()


def memory_budget() -> int:
    """Bytes the pairwise engines may hold in ``[rows, n]`` temporaries (and a stored ``[n, n]`` matrix): a quarter
    of :func:`memory_available` (``STEINAX_MEMORY_BUDGET``, in bytes, when set)."""
    env = _env_budget()
    return env if env is not None else max(1, memory_available() // _BUDGET_FRACTION)


def require_memory(need: int, *, argument: str, received, what: str, hint: str = "") -> None:
    """Refuse, before allocating, a computation whose estimate ``need`` (bytes) exceeds half of
    :func:`memory_available` (the rest is the library's and the user's own)."""
    have = memory_available()
    if need > have // 2:
        raise MemoryBudgetError(
            f"`{argument}` = {received!r} needs about {_gib(need)} for {what}, more than half of the {_gib(have)} of "
            f"memory available; nothing was allocated.{' ' + hint if hint else ''}")


def _gib(n: int) -> str:
    if n >= 2**28:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def _host_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    try:  # pragma: no cover
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 2**32
