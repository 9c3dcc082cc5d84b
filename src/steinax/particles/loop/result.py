"""What a run returns and raises: the trace, the result, the errors that carry the run up to where it stopped."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from steinax.particles.base import ParticleState

__all__ = ["Trace", "RunResult", "NonFiniteError", "NonFiniteStart", "RunInterrupted", "PARTICLE_NOTE"]


class Trace(eqx.Module):
    """Diagnostics recorded every ``trace_every`` steps (arrays of length ``T``).

    Attributes:
        step: number of completed steps at each record (0 = initial particles).
        ksd: squared V-statistic KSD with the IMQ(1, -1/2) diagnostic kernel.
        direction_norm: RMS ``||phi(x_i)||`` of the last step before the record (NaN at step 0).
        method: the method's diagnostics of that step, e.g. ``{"bandwidth": ...}`` (NaN at step 0).
        max_abs: the largest ``|x_id|`` of the particles (a run whose particles explode while
            staying finite is reported from it: :class:`DivergenceWarning`).
    """

    step: jax.Array
    ksd: jax.Array
    direction_norm: jax.Array
    method: dict
    max_abs: jax.Array | None = None

    def __getitem__(self, idx) -> "Trace":
        return jax.tree_util.tree_map(lambda a: a[idx], self)


PARTICLE_NOTE = ("particles of a Stein method, not a Markov chain: R-hat, ESS and MCSE do not apply (R-hat is NaN for "
                 "one chain; ESS and MCSE read the particles' order as time). Use arviz_stats.summary(tree, "
                 "kind='stats') for means, sds and intervals, and steinax.diagnostics.sample_quality(tree, target, "
                 "spread=True) for whether they are the posterior")


class RunResult(eqx.Module):
    """What :func:`run` returns.

    Attributes:
        particles: ``[n, d]`` final particles (in the target's space).
        samples: the particles mapped by ``target.postprocess`` (NumPyro: dict of constrained sites).
        trace: a :class:`Trace`.
        state: the final :class:`~steinax.particles.ParticleState` (pass as ``initial_state`` to resume).
        wall_time: seconds for the whole call, compilation included when it happened.
        converged: whether the particles settled: for ``steps=None`` runs the stopping rule; for fixed-length
            runs the same moment rule over the last 500 steps (at most half the run;
            :func:`steinax.particles.converge.settled_over`); ``None`` for runs of fewer than 100 steps, and
            where no window was left to judge (a resumed run that was already finished).
        convergence: ``{"steps", "delta", "learning_rate", "stein_identity"}`` (``steps=None``) or
            ``{"steps", "delta", "window", "tolerance"}`` (fixed length) at the end.
        labels: the model's ``{"coords", "dims"}`` for :meth:`to_datatree` (PyMC models), else ``None``.
        evaluations: evaluations of the target (a log-density with its score, at one point) this call made: one per
            particle per step, one per particle at the first trace record, one per diagnostic point at every later
            record (and, for ``steps=None``, one per particle for the final check of Stein's identity). Curvatures
            (matrix-valued kernels' Hessians, Fisher matrices) are not in it.
    """

    particles: jax.Array
    samples: object
    trace: Trace
    state: ParticleState
    wall_time: float = eqx.field(static=True)
    converged: bool | None = eqx.field(static=True, default=None)
    convergence: dict | None = eqx.field(static=True, default=None)
    labels: dict | None = eqx.field(static=True, default=None)
    evaluations: int | None = eqx.field(static=True, default=None)

    def to_datatree(self, var_name: str = "x"):
        """The samples as an ArviZ ``DataTree`` (one chain, particles as draws); needs ``arviz-base``.

        The posterior group carries the attribute ``steinax_particles = 1``: the draws are
        exchangeable particles, not a Markov chain, so :func:`steinax.diagnostics.sample_quality`
        tests them with the i.i.d. bootstrap. Its attribute ``steinax_diagnostics`` says that MCMC
        diagnostics do not apply: R-hat, ESS and MCSE (``arviz_stats.summary``'s defaults) assume
        chains; use ``arviz_stats.summary(tree, kind="stats")`` and ``sample_quality(..., spread=True)``. A PyMC model's draws carry its ``dims`` and ``coords``
        (the names ``pm.sample`` gives).
        """
        try:
            from arviz_base import from_dict
        except ImportError as exc:  # pragma: no cover
            raise ImportError("to_datatree needs arviz-base: pip install arviz-base h5netcdf "
                              "(the steinax `arviz` extra)") from exc
        samples = self.samples if isinstance(self.samples, dict) else {var_name: self.samples}
        labels = self.labels or {}
        return from_dict({"posterior": {k: np.asarray(v)[None] for k, v in samples.items()}},
                         attrs={"posterior": {"steinax_particles": 1, "steinax_diagnostics": PARTICLE_NOTE}},
                         coords=labels.get("coords"),
                         dims=labels.get("dims"))


class NonFiniteError(FloatingPointError):
    """A run met a non-finite value; ``.step`` is the failing step, ``.result`` the last finite state."""

    def __init__(self, message: str, step: int, result: RunResult):
        super().__init__(message)
        self.step = step
        self.result = result


class NonFiniteStart(ValueError):
    """A run's initial particles have a non-finite log-density or score (``.rows``: which), so no step was made."""

    def __init__(self, message: str, rows):
        super().__init__(message)
        self.rows = rows


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run`: ``.step`` is the last completed step, ``.result`` the run up to it."""

    def __init__(self, message: str, step: int, result: RunResult):
        super().__init__(message)
        self.step = step
        self.result = result
