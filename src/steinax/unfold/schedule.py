"""Step-size schedules: the learned or Chebyshev steps as an optax schedule, their training log, and their JSON
file (Kawamura & Takabe 2024)."""

from __future__ import annotations

import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._io import atomic_write_text
from steinax._validation import is_concrete



FORMAT = "steinax.unfold.Schedule"
_VERSION = 1
_KINDS = ("dusvgd", "chebyshev", "fixed")


class TrainingDivergedError(FloatingPointError):
    """The loss or the steps became non-finite during training.

    ``schedule`` holds the last finite schedule (the parameters before the failing
    update, with the log up to it), so the work done is not lost.
    """

    def __init__(self, message: str, schedule):
        super().__init__(message)
        self.schedule = schedule


def _check_horizon(T, name: str = "T") -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"`{name}` must be an integer >= 1 (the number of unrolled iterations); received {T!r}")
    return int(T)


def chebyshev_steps(alpha, beta, T: int) -> jax.Array:
    """The Chebyshev step sizes of C-DUSVGD (paper eq. 9-11), in the paper's reverse order.

    .. math::

        \\lambda_1 = \\alpha^2,\\quad \\lambda_n = \\alpha^2 + \\beta^2,\\quad
        \\epsilon^{(t)} = \\left[\\frac{\\lambda_n + \\lambda_1}{2}
            + \\frac{\\lambda_n - \\lambda_1}{2}\\cos\\frac{(2(T - t) - 1)\\pi}{2T}\\right]^{-1},
        \\qquad t = 0, \\dots, T - 1.

    ``t = 0`` gives the largest step (close to ``1 / lambda_1``), ``t = T - 1``
    the smallest (close to ``1 / lambda_n``); eq. 7 (the forward order) is
    ``chebyshev_steps(alpha, beta, T)[::-1]``. Pure and differentiable in
    ``alpha`` and ``beta``.
    """
    T = _check_horizon(T)
    alpha = jnp.asarray(alpha)
    beta = jnp.asarray(beta)
    dtype = jnp.result_type(alpha, beta, float)
    lam1 = alpha.astype(dtype) ** 2
    lamn = lam1 + beta.astype(dtype) ** 2
    t = jnp.arange(T, dtype=dtype)
    cos = jnp.cos((2.0 * (T - t) - 1.0) * jnp.pi / (2.0 * T))
    return 1.0 / (0.5 * (lamn + lam1) + 0.5 * (lamn - lam1) * cos)


# --------------------------------------------------------------------------- schedule


class TrainingLog(eqx.Module):
    """What training did: the loss of each epoch (``[stages * epochs]``), its stage, and the wall time."""

    losses: np.ndarray
    stages: np.ndarray
    seconds: float = eqx.field(static=True)
    settings: tuple = eqx.field(static=True, default=())

    def to_json(self) -> dict:
        return {
            "losses": [float(v) for v in np.asarray(self.losses)],
            "stages": [int(v) for v in np.asarray(self.stages)],
            "seconds": float(self.seconds),
            "settings": dict(self.settings),
        }

    @classmethod
    def from_json(cls, d: dict) -> "TrainingLog":
        return cls(
            losses=np.asarray(d["losses"], np.float64),
            stages=np.asarray(d["stages"], np.int64),
            seconds=float(d["seconds"]),
            settings=tuple(d.get("settings", {}).items()),
        )


class Schedule(eqx.Module):
    """A step-size schedule of ``T`` steps, reused periodically: ``eps^{(t)} = steps[t mod T]``.

    Calling it on a step count gives that step's size, so it is an optax
    schedule: ``steinax.run(method, target, x0, steps=..., optimizer=optax.sgd(schedule))``
    runs the paper's update ``x + eps^{(t)} phi(x)``.

    Attributes:
        steps: ``[T]`` step sizes.
        kind: ``"dusvgd"`` (free steps), ``"chebyshev"`` (eq. 11 of ``alpha``, ``beta``) or ``"fixed"``.
        alpha, beta: the Chebyshev parameters (``None`` otherwise).
        log: the :class:`TrainingLog` of a trained schedule (``None`` otherwise).
    """

    steps: jax.Array
    kind: str = eqx.field(static=True, default="dusvgd")
    alpha: jax.Array | None = None
    beta: jax.Array | None = None
    log: TrainingLog | None = None

    def __check_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"`kind` must be one of {_KINDS}; received {self.kind!r}")
        if jnp.ndim(self.steps) != 1 or jnp.shape(self.steps)[0] < 1:
            raise ValueError(
                f"`steps` must be a 1-D array of T >= 1 step sizes; received shape {jnp.shape(self.steps)}"
            )
        if is_concrete(self.steps):
            bad = np.flatnonzero(~np.isfinite(np.asarray(self.steps)))
            if bad.size:
                raise ValueError(
                    f"`steps` must be finite; step(s) {bad.tolist()} are {np.asarray(self.steps)[bad].tolist()}"
                )

    @property
    def T(self) -> int:
        return int(jnp.shape(self.steps)[0])

    def __call__(self, count):
        """The step size at iteration ``count`` (periodic: ``steps[count mod T]``)."""
        return jnp.asarray(self.steps)[jnp.asarray(count) % self.T]

    @classmethod
    def chebyshev(cls, alpha, beta, T: int, log: TrainingLog | None = None) -> "Schedule":
        """The C-DUSVGD schedule of eq. 11 for given ``alpha``, ``beta``."""
        return cls(chebyshev_steps(alpha, beta, T), "chebyshev", jnp.asarray(alpha), jnp.asarray(beta), log)

    @classmethod
    def constant(cls, step: float, T: int = 1) -> "Schedule":
        """A fixed step size (a baseline)."""
        return cls(jnp.full((_check_horizon(T),), step, jnp.result_type(float)), "fixed")

    # ------------------------------------------------------------------ files

    def to_json(self) -> dict:
        steps = np.asarray(self.steps)
        return {
            "format": FORMAT,
            "version": _VERSION,
            "kind": self.kind,
            "T": self.T,
            "dtype": steps.dtype.name,
            "steps": [float(v) for v in steps],  # float64 repr: exact for float32 and float64 values
            "alpha": None if self.alpha is None else float(self.alpha),
            "beta": None if self.beta is None else float(self.beta),
            "log": None if self.log is None else self.log.to_json(),
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the schedule to ``path`` as JSON (format :data:`FORMAT`, written atomically).

        Fields: ``format``, ``version``, ``kind``, ``T``, ``dtype``, ``steps``
        (``T`` numbers), ``alpha``, ``beta`` (Chebyshev parameters or ``null``),
        ``log`` (``losses``, ``stages``, ``seconds``, ``settings`` of training, or ``null``).
        """
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")


def load_schedule(path: str | os.PathLike) -> Schedule:
    """Read a schedule written by :meth:`Schedule.save`; a file of another format is an error."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(
            f"`path` {path!r} is not a steinax schedule file: expected JSON with format {FORMAT!r} "
            f"(written by Schedule.save); could not parse it as JSON ({e})"
        ) from None
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt != FORMAT:
        raise ValueError(f"`path` {path!r} is not a steinax schedule file: expected format {FORMAT!r}, found {fmt!r}")
    if data.get("version") != _VERSION:
        raise ValueError(f"`path` {path!r}: schedule file version {data.get('version')!r}; this steinax reads {_VERSION}")
    steps = np.asarray(data["steps"], dtype=np.float64).astype(data["dtype"])
    if steps.shape != (data["T"],):
        raise ValueError(f"`path` {path!r}: {steps.shape[0]} steps stored but T = {data['T']}")
    dtype = steps.dtype
    alpha = None if data["alpha"] is None else jnp.asarray(np.asarray(data["alpha"]).astype(dtype))
    beta = None if data["beta"] is None else jnp.asarray(np.asarray(data["beta"]).astype(dtype))
    log = None if data["log"] is None else TrainingLog.from_json(data["log"])
    return Schedule(jnp.asarray(steps), data["kind"], alpha, beta, log)


# --------------------------------------------------------------------------- problems and losses
