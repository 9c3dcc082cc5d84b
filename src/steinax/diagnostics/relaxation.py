"""A collapse check that needs no ground truth: do the particles stay put under a sampler that leaves the target invariant?

Why not the Stein identities alone (:mod:`~steinax.diagnostics.spread`): at a fixed point of SVGD every
Stein identity whose test function lies in the span of the kernels centred at the particles holds
exactly, and at a smooth kernel's bandwidth that span holds the linear and the slowly varying
functions. At the optimum of full-rank Gaussian VI, Stein's lemma gives
``E_q[s(x) (x - mu)^T] = E_q[hess log p] Sigma = -I``: the linear identities hold there too. So the
particles' own scores cannot tell a collapsed fixed point from a right one (measured on the posterior
suite: SVGD on Neal's funnel at sd ratio 0.01 and Gaussian VI on the banana at 0.36 both read
``T_k ~ 1``). The target must be asked about points the particles do not occupy.

**The check.** Let ``K`` be a Markov kernel that leaves the target ``p`` invariant and is reversible
with respect to it (MALA). If ``x ~ p`` then ``(x, x')`` with ``x' ~ K(x, .)`` has the same law as
``(x', x)``: any statistic ``u(x, x') = f(x') - f(x)`` is symmetric about 0. With ``f`` the squared
standardised distance to the particles' mean,

.. math::

    u_i = \\frac{1}{d} \\sum_k \\frac{(x'_{ik} - \\bar x_{-i,k})^2 - (x_{ik} - \\bar x_{-i,k})^2}{\\hat\\sigma_{-i,k}^2},
    \\qquad D = \\frac{1}{n} \\sum_i u_i ,

(``bar x_{-i}``, ``sigma_{-i}``: the mean and sd of the other particles, so that swapping ``x_i``
and ``x'_i`` negates ``u_i`` exactly), ``D`` is the relative growth of the particles' spread
(about their own mean) after ``K`` moves them.
Under-dispersed or off-centre particles drift outward or away (``D > 0``); over-dispersed ones
contract (``D < 0``). Its null distribution comes from flipping the signs of the ``u_i`` (exact for
i.i.d. draws from ``p``; for chain output the flips act on blocks of consecutive draws,
``block_length``), so the p-value needs no ground truth and no asymptotics.

**Sampler.** BlackJAX's MALA on the particles whitened by their own mean and per-coordinate sd,
one chain per particle, ``steps`` moves after a step size adapted on short pilot chains to an
acceptance rate of 0.574 (Roberts & Rosenthal 1998). The pilot chains are discarded; the measured
chains start again from the particles. The whitening and the step size are read from the particles,
a small departure from exactness calibrated below.

**Decision rule.** ``collapsed`` when the one-sided (growth) p-value is below ``level`` (default
:data:`RELAXATION_LEVEL` = 0.01); ``overdispersed`` when the contraction p-value is; no decision
(``untestable``, with the reason) when the measured chains accept fewer than
:data:`MIN_ACCEPTANCE` of their moves. Calibrated in
``experiments/posteriors/diagnostic_calibration.py`` (200 disjoint 100-draw subsets of every suite
reference) together with :func:`~steinax.diagnostics.spread_check`.

What it does not see: a mode the particles never visited (a local sampler does not cross to it in
``steps`` moves), and departures slower than ``steps`` MALA moves (on a funnel's neck a small step
size moves exact draws little, and collapsed ones little more). Cost: ``n * (steps + PILOT_ROUNDS *
CHUNK)`` log-density and score evaluations.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["RelaxationCheck", "relaxation_check", "RELAXATION_LEVEL"]

DEFAULT_STEPS = 300
"""MALA moves per particle. At 100 moves sliced SVGD's funnel particles (sd ratio 0.11) grew by only 0.19
(p = 0.12); at 300 by 1.08 (p = 0.001); exact draws stayed put at both."""
RELAXATION_LEVEL = 0.01
"""Flag when the sign-flip p-value of the spread's growth is below this."""
TARGET_ACCEPTANCE = 0.574
"""MALA's optimal acceptance rate (Roberts & Rosenthal 1998), the pilot chains' target."""
MIN_ACCEPTANCE = 0.2
"""Below this mean acceptance the measured chains barely move (a stiff target at the particles: a funnel's
neck), so a small growth says nothing: the check reports ``untestable`` instead of passing."""
PILOT_ROUNDS = 6
CHUNK = 10
"""MALA moves per compiled call: a pilot round is one call, the measured chains ``steps / CHUNK`` calls."""


class RelaxationCheck(eqx.Module):
    """What :func:`relaxation_check` returns.

    Attributes:
        growth: ``D``, the relative growth of the particles' spread after ``steps`` MALA moves (0 for draws from the target).
        coordinate_growth: ``[d]`` the same per coordinate.
        p_value: one-sided sign-flip p-value of growth (small: under-dispersed or off-centre).
        p_value_contraction: one-sided p-value of contraction (small: over-dispersed).
        step_size: the adapted MALA step size (whitened coordinates).
        acceptance: the measured chains' mean acceptance rate.
        steps: MALA moves per particle.
        level: the level of both decisions.
        collapsed: ``p_value < level``.
        overdispersed: ``p_value_contraction < level``.
        evaluations: evaluations of the target the check made: the particles' log-densities, then one per MALA move
            (pilot rounds included) per particle.
        untestable: why no decision could be made (``None`` when it could): MALA accepted under
            :data:`MIN_ACCEPTANCE` of its moves even at the tuned step size, so the particles did not
            move enough to show a departure. Not a pass; the suite counts it as flagged.
    """

    growth: float
    coordinate_growth: jax.Array
    p_value: float
    p_value_contraction: float
    step_size: float
    acceptance: float
    steps: int
    level: float
    collapsed: bool
    overdispersed: bool
    untestable: str | None = None
    evaluations: int = 0

    def summary(self) -> str:
        if self.untestable is not None:
            return f"relaxation: UNTESTABLE, no decision: {self.untestable}"
        verdict = ("COLLAPSED: the spread grows under a sampler that leaves the target invariant (under-dispersed "
                   "or off-centre particles); more particles, another method, or NUTS" if self.collapsed else
                   "OVER-DISPERSED: the spread contracts under the target's sampler" if self.overdispersed else
                   "no departure detected")
        return (f"relaxation: spread growth {self.growth:+.3f} after {self.steps} MALA moves (step {self.step_size:.3g}, "
                f"acceptance {self.acceptance:.2f}); p = {self.p_value:.4g} (growth), {self.p_value_contraction:.4g} "
                f"(contraction), level {self.level} -> {verdict}")


def _mala_chains(target, center, scale, z0, step_size, rng_key, stream, index):
    """``CHUNK`` BlackJAX MALA moves from each row of ``z0`` (whitened), row ``i`` with key
    ``split(fold_in(fold_in(rng_key, stream), index), n)[i]``; returns ``(z, mean acceptance, the step adapted to
    it)``.

    Longer runs call this repeatedly (one compilation serves the pilot and the measured chains; the keys are
    derived inside, as eager key splits compiled programs of their own).
    """
    import blackjax

    keys = jax.random.split(jax.random.fold_in(jax.random.fold_in(rng_key, stream), index), z0.shape[0])

    def logdensity(z):
        return target.logdensity(center + scale * z)

    kernel = blackjax.mala.build_kernel()

    def chain(key, z):
        def move(state, k):
            state, info = kernel(k, state, logdensity, step_size)
            return state, info.acceptance_rate

        state, acc = jax.lax.scan(move, blackjax.mala.init(z, logdensity), jax.random.split(key, CHUNK))
        return state.position, jnp.mean(acc)

    z, acc = jax.vmap(chain)(keys, z0)
    acc = jnp.mean(acc)
    return z, acc, step_size * jnp.exp(2.0 * (acc - TARGET_ACCEPTANCE))


_mala_chains_jit = eqx.filter_jit(_mala_chains)  # the target's arrays traced, its functions static


def _i32(i: int):
    """A stream or round index as an array: traced by ``eqx.filter_jit`` (a Python int is static: one compilation
    per value)."""
    return np.int32(i)


@jax.jit
def _growth(z0, z1, accs):
    """``(all finite, [n] u_i, [d] coordinate growth, mean acceptance)`` of the moved chains."""
    change = _leave_one_out_change(z0, z1)
    return jnp.all(jnp.isfinite(z1)), jnp.mean(change, axis=1), jnp.mean(change, axis=0), jnp.mean(accs)
_logdensities = eqx.filter_jit(lambda target, x: jax.vmap(target.logdensity)(x))


def _leave_one_out_change(z0, z1):
    """``[n, d]`` ``((z1 - m_i)^2 - (z0 - m_i)^2) / v_i`` with ``m_i``, ``v_i`` the mean and variance of the other rows of ``z0``.

    ``z0`` is whitened (column means 0, population variances 1). Leaving row ``i`` out makes the
    reference point independent of the pair ``(z0_i, z1_i)``, so swapping the pair negates the term
    exactly; with the full-sample mean, ``E[(z1 - mean)^2] - E[(z0 - mean)^2] = 2 (1 - corr(z0, z1)) / n``
    even for draws from the target, a bias towards growth.
    """
    n = z0.shape[0]
    m = -z0 / (n - 1)
    # floored: where all the other rows agree (a MAP ensemble with one straggler) any move is a large growth
    v = jnp.maximum((n - z0 * z0) / (n - 1) - m * m, jnp.finfo(z0.dtype).eps)
    return ((z1 - m) ** 2 - (z0 - m) ** 2) / v


def _sign_flip_p_values(u, key, n_flips: int, block_length: int, stream: int = 0):
    """One-sided p-values of ``mean(u) > 0`` and ``< 0`` from sign flips of ``u`` in blocks of ``block_length``, the
    flips drawn on the host (:func:`steinax.diagnostics._checks.host_rng` of ``key`` and ``stream``), in float64."""
    from steinax.diagnostics._checks import host_rng

    u = np.asarray(u, np.float64)
    n = u.shape[0]
    blocks = -(-n // block_length)
    flips = host_rng(key, stream).choice(np.array([-1.0, 1.0]), size=(n_flips, blocks))
    null = np.repeat(flips, block_length, axis=1)[:, :n] @ u / n
    stat = np.mean(u)
    return float((1 + np.sum(null >= stat)) / (n_flips + 1)), float((1 + np.sum(null <= stat)) / (n_flips + 1))


def relaxation_check(target, particles, *, steps: int = DEFAULT_STEPS, level: float = RELAXATION_LEVEL,
                     rng_key: jax.Array | None = None, n_flips: int = 2000, block_length: int = 1) -> RelaxationCheck:
    """Check particles (or draws) for collapse by moving them with MALA on the target (module docstring).

    Args:
        target: a log-density of one ``[d]`` point, or a steinax target (its ``logdensity`` is used).
        particles: ``[n, d]``, ``n >= 10``, in the target's (unconstrained) space.
        steps: MALA moves per particle after the step-size pilot (a multiple of :data:`CHUNK`).
        level: the level of the decisions, in ``(0, 1)``.
        rng_key: default ``jax.random.key(0)`` (deterministic).
        n_flips: sign flips for the p-values.
        block_length: flip the ``u_i`` in blocks of this many consecutive rows (chain output laid
            chain after chain; 1 for independent particles).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> logp = lambda x: -0.5 * jnp.sum(x ** 2)
        >>> x = jax.random.normal(jax.random.key(0), (100, 3))
        >>> relaxation_check(logp, x).collapsed, relaxation_check(logp, 0.5 * x).collapsed
        (False, True)
    """
    from steinax.diagnostics._checks import checked_inputs, whitened

    if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) and steps % CHUNK:
        raise ValueError(f"`steps` must be a multiple of {CHUNK}; received {steps}")
    target, x, rng_key = checked_inputs(target, particles, rng_key, level, "relaxation check", steps=(steps, 1),
                                        n_flips=(n_flips, 1), block_length=(block_length, 1))
    n, d = x.shape
    logp0 = np.asarray(_logdensities(target, x))
    if not np.all(np.isfinite(logp0)):
        rows = np.flatnonzero(~np.isfinite(logp0))[:5].tolist()
        raise ValueError(f"the target's log-density is not finite at particle rows {rows} (first five shown)")

    # every small step compiled (a first call's time was mostly XLA compiling eager operations one by one)
    center, scale, z0 = whitened(x)
    step = jnp.asarray(0.5 / d ** (1.0 / 3.0), x.dtype)
    for r in range(PILOT_ROUNDS):  # stream 0: the pilot's rounds; 1: the measured chains; 2: the sign flips
        _, acc, step = _mala_chains_jit(target, center, scale, z0, step, rng_key, _i32(0), _i32(r))
    z1, accs = z0, []
    for c in range(steps // CHUNK):
        z1, acc, _ = _mala_chains_jit(target, center, scale, z1, step, rng_key, _i32(1), _i32(c))
        accs.append(acc)
    finite, u, coordinate_growth, acc = _growth(z0, z1, jnp.stack(accs))
    if not bool(finite):
        raise FloatingPointError("MALA moved a particle to a non-finite point: the target's log-density or score "
                                 "overflows near the particles")
    p_grow, p_shrink = _sign_flip_p_values(u, rng_key, n_flips, int(block_length), stream=2)
    untestable = None
    if float(acc) < MIN_ACCEPTANCE:
        untestable = (f"MALA accepted {float(acc):.2f} of its moves at step {float(step):.3g} (whitened), so the "
                      f"particles barely moved (growth {float(np.mean(np.asarray(u))):+.3f}): the target is stiff where they sit "
                      "(a funnel's neck?). Do not read this as a pass: compare with NUTS or more particles")
    return RelaxationCheck(growth=float(np.mean(np.asarray(u))), coordinate_growth=coordinate_growth, p_value=p_grow,
                           p_value_contraction=p_shrink, step_size=float(step), acceptance=float(acc), steps=int(steps),
                           level=float(level), collapsed=p_grow < level and untestable is None,
                           overdispersed=p_shrink < level and untestable is None, untestable=untestable,
                           evaluations=n * (1 + int(steps) + PILOT_ROUNDS * CHUNK))  # the start's, then each move's

