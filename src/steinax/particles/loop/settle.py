"""Runs that stop when the particles have settled, and say so when they have not.

:func:`steinax.run` with ``steps=None`` lands here: the run goes on in segments of
``check_every`` steps (one compiled loop, reused), and after each segment the particles'
per-coordinate means and sds are compared with the previous segment's:

.. math::

    \\Delta = \\max_k \\max\\left( \\frac{|\\bar x_k - \\bar x_k^{prev}|}{s_k^{prev}},
    \\; \\left|\\log \\frac{s_k}{s_k^{prev}}\\right| \\right).

**Stopping rule.** Converged when ``Delta < tol`` (default 0.05: no coordinate's mean moved by
5% of its sd and no sd changed by 5% over the last segment). Otherwise, when the segment's trace
KSD has stopped falling (its last quarter's mean is above half its first quarter's) the particles
are jittering at the optimizer's step rather than travelling, and the learning rate is halved, down
to 1/64 of the default (an ``optax.inject_hyperparams`` optimizer, as the default is; another
optimizer keeps its step): a vanishing step would freeze the particles and pass the rule unsettled.
A run that reaches ``max_steps`` unconverged warns (:class:`ConvergenceWarning`) with ``Delta``.
A run that settles is also checked against Stein's identity ``E_p[s_k(x) (x_k - mu_k)] = -1``
(:func:`stein_identity`): a flat or improper target (the step halves until nothing moves, and the
moments stop changing) gives 0 in its flat directions, and particles far narrower than the target
give ``-var_particles / var_target``; above :data:`STEIN_IDENTITY_LIMIT` the run is not converged
and warns.

**Default optimizer** (``optimizer=None`` in :func:`steinax.run`): the method's
``default_optimizer()``, for every method but sliced SVGD Adam at learning rate
:data:`DEFAULT_LEARNING_RATE` = 0.05, injectable so the rule above can halve it. Adam rather than
the papers' AdaGrad with momentum: on the issue-25 runs the latter did not settle (a radon model's
trace KSD stayed near 200 after 6000 steps, against 2.47 with Adam). Sliced SVGD's default is SGD
0.1 with each step clipped to 1 (:meth:`steinax.particles.sliced.SlicedSVGD.default_optimizer`): with
Adam it settled on a false fixed point.

Runs with a fixed ``steps`` (of at least :data:`MIN_JUDGED_STEPS`) are checked too, by the same rule
over their last :data:`SETTLE_WINDOW` steps (at most half the run; :func:`settled_over`): ``result.converged`` says whether ``Delta`` over
that window stayed under ``tol * window / SETTLE_WINDOW`` (the same speed as the segments above), and a
run whose particles still travel warns. Such a run says nothing else: its trace KSD can fall
steadily while the particles are still far from the target. The case that showed it: sliced SVGD
with SGD 0.1 for 3000 steps from ``N(0, I)`` on German credit had the right spread at 100 particles
and twice the posterior's sd at 300, silently. Particles outside the bulk's kernel reach are moved
only by their own score term, weighted ``1/n``, so at a fixed step size the stragglers take
``n`` times longer to come in (134 of the 300 particles still had a coordinate beyond 4 posterior
sds; SGD 0.3 at n = 300 gave sd ratio 1.00). Adam, the default, normalises each particle's step
and does not have this ``1/n`` slowdown. A trace whose final KSD is :data:`UNSETTLED_FACTOR` or
more times its own minimum (after the first tenth of the run) also warns (:func:`warn_if_unsettled`).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import user_stacklevel
from steinax.particles.optim import DEFAULT_LEARNING_RATE, default_optimizer

__all__ = ["ConvergenceWarning", "DivergenceWarning", "default_optimizer", "warn_if_unsettled", "warn_if_diverging",
           "settled_over", "settle_window_start", "particle_moments", "moment_change", "stein_identity",
           "SETTLE_WINDOW", "DEFAULT_LEARNING_RATE", "DEFAULT_MAX_STEPS", "DEFAULT_CHECK_EVERY", "DEFAULT_TOL",
           "UNSETTLED_FACTOR", "STEIN_IDENTITY_LIMIT", "DIVERGENCE_FACTOR"]

DEFAULT_MAX_STEPS = 20000
DEFAULT_CHECK_EVERY = 500
DEFAULT_TOL = 0.05
MIN_LEARNING_RATE_FACTOR = 1.0 / 64.0
"""The halving stops at this fraction of the default rate: particles frozen by a vanishing step would pass
the moment rule without having settled."""
UNSETTLED_FACTOR = 5.0
"""A fixed-length run warns when its final trace KSD is at least this many times its minimum."""
SETTLE_WINDOW = DEFAULT_CHECK_EVERY
"""A fixed-length run's settling is judged over its last this many steps (at most half the run)."""
MIN_JUDGED_STEPS = 100
"""A fixed-length run shorter than this is not judged (``converged`` None): a user stepping a run in short calls
would be warned at every call."""


class ConvergenceWarning(RuntimeWarning):
    """A run that stopped before its particles settled (module docstring)."""


def particle_moments(particles: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The particles' per-coordinate ``(mean, sd)`` (``[d]`` each), traceable: what the compiled loop records."""
    return jnp.mean(particles, axis=0), jnp.std(particles, axis=0)


def settled_over(snapshot, state, end_step: int, tol: float = DEFAULT_TOL):
    """``(converged, info)`` of a fixed-length run, or ``None`` when its window is shorter than
    ``MIN_JUDGED_STEPS / 2`` (module docstring).

    ``snapshot`` is ``(step, mean, sd)`` at the window's start, ``state`` the final state. ``Delta``
    between them (:func:`moment_change`) is compared with ``tol`` scaled to the window's length
    (``tol`` per :data:`SETTLE_WINDOW` steps); over it, a :class:`ConvergenceWarning` names the move.
    """
    start = int(snapshot[0])
    window = end_step - start
    if window <= 0 or 2 * window < MIN_JUDGED_STEPS or int(state.step) != end_step:
        return None
    delta = moment_change(tuple(np.asarray(a, np.float64) for a in snapshot[1:]), _moments(state.particles))
    allowed = tol * min(1.0, window / SETTLE_WINDOW)
    converged = bool(delta < allowed)
    if not converged:
        warnings.warn(f"the particles are still moving: over the last {window} steps (from step {start}) a particle "
                      f"mean or sd moved by {_sds(delta)} (a settled run moves less than {allowed:.3g}); they are not "
                      "a converged approximation. Run longer or with a larger step (with plain SGD, particles outside "
                      "the others' kernel reach move at step / n), or with steps=None (Adam until settled)",
                      ConvergenceWarning, stacklevel=user_stacklevel())
    return converged, {"steps": end_step, "delta": delta, "window": window, "tolerance": allowed}


def _moments(particles):
    """:func:`particle_moments` on the host, as float64 arrays."""
    return tuple(np.asarray(a, np.float64) for a in particle_moments(particles))


def settle_window_start(end_step: int, steps: int) -> int:
    """The first step of the window over which a fixed-length run of ``steps`` ending at ``end_step`` is judged:
    its last :data:`SETTLE_WINDOW` steps, at most half the run."""
    return end_step - min(SETTLE_WINDOW, steps // 2)


def moment_change(before, after) -> float:
    """``Delta`` of the module docstring between two ``(mean, sd)`` pairs."""
    (m0, s0), (m1, s1) = before, after
    tiny = np.finfo(np.float64).tiny
    s0 = np.maximum(s0, tiny)
    return float(np.max(np.maximum(np.abs(m1 - m0) / s0, np.abs(np.log(np.maximum(s1, tiny) / s0)))))


def _sds(delta: float) -> str:
    """``Delta`` for a warning; past 10^6 sds a coordinate's particles had (all but) collapsed onto one value."""
    if delta > 1e6:  # the number itself is a ratio to an sd near 0: noise, not information
        return ("more than 10^6 sds: some coordinate's particles had collapsed onto one value (sd near 0) and "
                "then moved")
    return f"{delta:.3g} sds"


def _plateaued(ksd) -> bool:
    k = np.asarray(ksd, np.float64)
    q = max(1, k.size // 4)
    return bool(np.mean(k[-q:]) > 0.5 * np.mean(k[:q]))


def _halve_learning_rate(state, floor: float):
    """``state`` with its injected learning rate halved, not below ``floor`` (unchanged without one)."""
    opt = state.opt_state
    hyper = getattr(opt, "hyperparams", None)
    if not isinstance(hyper, dict) or "learning_rate" not in hyper:
        return state
    lr = jnp.maximum(hyper["learning_rate"] * 0.5, floor)
    return type(state)(particles=state.particles, opt_state=opt._replace(hyperparams={**hyper, "learning_rate": lr}),
                       aux=state.aux, step=state.step, origin=state.origin)


STEIN_IDENTITY_LIMIT = -0.2
"""A run that settled is still unconverged when some coordinate's :func:`stein_identity` is above this: for
particles of any proper target it is near -1 (0 on a flat or improper direction; ``-var_particles / var_target`` on
a Gaussian, so above -0.2 the particles hold under a fifth of the variance)."""


def stein_identity(target, particles) -> np.ndarray:
    """``[d]`` the particle average of ``s_k(x) (x_k - mean_k)``: Stein's identity with ``f(x) = x_k`` gives
    ``E_p[s_k(x) (x_k - mu_k)] = -1`` for every proper density with finite variance (integration by parts); a flat
    or improper direction gives 0 (module docstring)."""
    from steinax.targets.base import as_target, evaluate_compiled

    from steinax.runtime.sharding import gather

    _, scores = evaluate_compiled(as_target(target), jax.random.key(0), particles)
    x, s = gather(particles).astype(np.float64), gather(scores).astype(np.float64)  # (multi-process: every row)
    return np.mean(s * (x - x.mean(axis=0)), axis=0)


def warn_if_unsettled(trace) -> None:
    """Warn when a fixed-length run's final trace KSD is ``UNSETTLED_FACTOR`` times its minimum after the first tenth."""
    k = np.asarray(trace.ksd, np.float64)
    steps = np.asarray(trace.step)
    if k.size < 10 or not np.all(np.isfinite(k)):
        return
    tail = k[k.size // 10:]
    i = int(np.argmin(tail)) + k.size // 10
    if k[-1] >= UNSETTLED_FACTOR * max(k[i], np.finfo(np.float64).tiny):
        warnings.warn(f"the run did not settle: its final trace KSD {k[-1]:.3g} is {k[-1] / k[i]:.1f} times its minimum "
                      f"{k[i]:.3g} at step {int(steps[i])}; the optimizer's step is too large for this target. Lower the "
                      "step size, or run with steps=None (stops when the particles settle)", ConvergenceWarning,
                      stacklevel=user_stacklevel())


DIVERGENCE_FACTOR = 1e6


class DivergenceWarning(RuntimeWarning):
    """A run whose particles stayed finite but exploded, or whose trace's KSD is not finite."""


def warn_if_diverging(trace) -> None:
    """Warn, naming the first step, when the trace's KSD is not finite or the particles' largest coordinate grew
    more than ``DIVERGENCE_FACTOR`` times beyond ``max(1, its initial value)`` (finite particles can still diverge:
    a heavy-tailed prior sent a coordinate to 1.9e19 while every step was finite)."""
    import warnings

    steps = np.asarray(trace.step)
    ksd_bad = np.flatnonzero(~np.isfinite(np.asarray(trace.ksd)))
    if ksd_bad.size:
        warnings.warn(f"the run's trace KSD is not finite from step {int(steps[ksd_bad[0]])} on (value "
                      f"{float(np.asarray(trace.ksd)[ksd_bad[0]])}): the particles diverge or the score overflows; "
                      "lower the step size, or use float64", DivergenceWarning, stacklevel=user_stacklevel())
        return
    if trace.max_abs is None:
        return
    sizes = np.asarray(trace.max_abs, np.float64)
    limit = DIVERGENCE_FACTOR * max(1.0, float(sizes[0]))
    grown = np.flatnonzero(sizes > limit)
    if grown.size:
        i = int(grown[0])
        warnings.warn(f"the particles diverge: their largest coordinate is {sizes[i]:.3g} at step {int(steps[i])}, "
                      f"over {DIVERGENCE_FACTOR:g} times max(1, {sizes[0]:.3g}) at the start; the result is not a sample "
                      "of the target. Lower the step size or check the model", DivergenceWarning, stacklevel=user_stacklevel())
