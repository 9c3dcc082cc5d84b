"""A run's options, grouped, and the checks every loop applies to its arguments.

:class:`RunOptions` holds what :func:`steinax.run` takes besides the method, target, particles, length, optimizer and
key: the trace (spacing, kernel, block, points), progress and checkpointing. The stopping rules
(:mod:`steinax.particles.loop.stopping`) pass it on unchanged.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from steinax.particles.base import ParticleState
from steinax.particles.loop.result import RunResult

__all__ = ["RunOptions", "positive_int", "as_state", "MAX_STEPS"]

MAX_STEPS = 2**31 - 2  # the step counter is int32


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The trace, progress and checkpoint options of a run (see :func:`steinax.run` for each)."""

    trace_every: int | None = None
    diagnostic_kernel: object = None
    diagnostic_block_size: int | None = None
    diagnostic_points: int | None = 2000
    progress: bool | str = "auto"
    checkpoint: str | os.PathLike | None = None
    checkpoint_every: int | None = None


def positive_int(value, name: str) -> int:
    """``value`` as an int in ``[1, MAX_STEPS]``, or a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
    if value > MAX_STEPS:
        raise ValueError(f"`{name}` must be at most {MAX_STEPS} (the step counter is a 32-bit integer); received {value!r}")
    return int(value)


def as_state(initial_state) -> ParticleState:
    """``initial_state`` as a :class:`ParticleState`: a ``RunResult`` stands for its ``.state``."""
    if isinstance(initial_state, RunResult):
        return initial_state.state
    if not isinstance(initial_state, ParticleState):
        raise TypeError(f"`initial_state` must be a ParticleState (a previous `result.state`) or a RunResult; received "
                        f"{type(initial_state).__name__}")
    return initial_state
