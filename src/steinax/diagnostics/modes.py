"""A missing-mode check that needs no ground truth: do the particles split over the target's modes as the modes' masses say?

Why a separate check: score-based discrepancies are blind to the weights of well-separated
components (Wenliang & Kanagawa 2021: the score of a mixture is, in each component's region, that
component's score), and so are the collapse checks (:mod:`~steinax.diagnostics.spread`,
:mod:`~steinax.diagnostics.relaxation`): particles that all sit in one mode, or split 50/50 over
modes of mass 30/70, satisfy every local identity. The log-density itself (not only its gradient)
compares the modes, and a search started away from the particles finds modes they do not occupy.

**The check.**

1. *Basins.* Every particle, and ``n_starts`` points drawn from ``N(xbar, (inflate * sd)^2)``
   (the particles' mean and per-coordinate sd, widened ``inflate`` times), ascends the log-density
   (Adam in coordinates whitened by the particles' mean and sd; the step decays from 0.1 to 0.001
   over ``ascent_steps``). The ascent's end points are grouped greedily, highest log-density
   first: the best ungrouped end point is refined by Newton steps to a mode ``m`` with
   negative-definite Hessian ``H``, and takes the end points within ``(z - m)^T (-H) (z - m) < d``
   of it (one typical-set radius of the mode's Laplace approximation). An end point whose Newton
   decrement does not fall below :data:`SETTLED_DECREMENT` per coordinate (no mode: a funnel's neck,
   where the density grows without bound or the curvature overflows) is *unsettled* and takes no
   others (its Hessian may be indefinite); particles in no mode's group are left unassigned.
2. *Masses.* Each settled mode's mass is its Laplace approximation,
   ``log Z_k = log p(m_k) + (d/2) log(2 pi) - (1/2) log det(-H_k)``, and its share
   ``pi_k = Z_k / sum_j Z_j`` over the settled modes.
3. *Test.* With ``c_k`` of the ``n_a`` assigned particles in mode ``k``'s basin, exact draws give
   ``c_k ~ Binomial(n_a, pi_k)`` (for SVGD's particles, which repel each other, the count varies
   less: the test is conservative for them). The p-value is the smallest lower-tail binomial
   probability ``P(Binomial(n_a, pi_k) <= c_k)`` over the modes, times the number of modes
   (Bonferroni). ``mismatch`` when it is below ``level`` (default :data:`MODES_LEVEL` = 0.01):
   a mode holds fewer particles than its mass implies (an over-populated mode makes another
   under-populated, so a lower tail suffices).

With fewer than two settled modes there is nothing to compare and the check passes (one mode, or
none found: the log-density grows without bound along a funnel's neck, the hierarchical models'
usual shape). Calibrated with the two collapse checks in
``experiments/posteriors/diagnostic_calibration.py``.

What it does not see: a mode farther than ``inflate`` particle sds from the particles (no start
reaches its basin); modes that the Laplace approximation weighs badly (strongly skewed or
heavy-tailed modes; it is exact for Gaussian components); the spread within a mode (the other
checks' job). Cost: ``(n + n_starts) * ascent_steps`` score evaluations and one Hessian per group.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["ModeCheck", "mode_check", "MODES_LEVEL"]

MODES_LEVEL = 0.01
"""Flag when the Bonferroni-adjusted binomial p-value of the most under-populated mode is below this."""
SETTLED_DECREMENT = 1e-3
"""A group's refined point is a mode when its Newton decrement ``g^T (-H)^{-1} g`` (twice the log-density still
to gain, by the quadratic model) is below this times ``d`` and ``-H`` is positive definite."""
NEWTON_STEPS = 8
MAX_ROWS = 500
"""Rows ascended at most (evenly thinned): the cost is one ascent per row, and for chain output thinning spaces the
draws apart, closer to the independent draws the binomial test assumes."""
MAX_GROUPS = 16
"""At most this many groups are refined (one Hessian each); end points left over are unassigned."""


class ModeCheck(eqx.Module):
    """What :func:`mode_check` returns.

    Attributes:
        modes: ``[K, d]`` the settled modes found (original coordinates), by decreasing share.
        shares: ``[K]`` their Laplace shares ``pi_k`` (sum 1).
        counts: ``[K]`` particles whose ascent ended in each mode.
        unassigned: particles whose ascent ended in no settled mode.
        p_value: Bonferroni-adjusted lower-tail binomial p-value of the most under-populated mode (1 when ``K < 2``).
        level: the decision's level.
        mismatch: ``p_value < level``: the particles do not split over the modes as their masses say.
        n_starts: the extra ascents started away from the particles.
        inflate: how many particle sds the starts were spread over.
        evaluations: evaluations of the target the check made (each a log-density or its gradient at one point; a
            Hessian counted as ``d``): every ascent's steps, the log-density at every end, each refinement's Newton
            steps.
    """

    modes: jax.Array
    shares: jax.Array
    counts: jax.Array
    unassigned: int
    p_value: float
    level: float
    mismatch: bool
    n_starts: int
    inflate: float
    evaluations: int = 0

    def summary(self) -> str:
        k = int(self.shares.shape[0])
        if k < 2:
            found = "one settled mode" if k == 1 else "no settled mode (an unbounded or ill-conditioned density)"
            return (f"modes: {found} found from the particles and {self.n_starts} starts within {self.inflate:g} sds; "
                    "nothing to compare -> no missing mode detected")
        n_a = int(np.sum(np.asarray(self.counts)))
        split = ", ".join(f"{int(c)}/{n_a} (mass share {float(s):.2f})" for c, s in zip(self.counts, self.shares))
        verdict = ("MISMATCH: a mode holds fewer particles than its mass implies (a missing or under-populated mode); "
                   "more particles, annealing, or NUTS from several starts" if self.mismatch else "no missing mode detected")
        return (f"modes: {k} found; particles per mode {split}; {self.unassigned} unassigned; p = {self.p_value:.3g}, "
                f"level {self.level} -> {verdict}")


def _ascend(target, center, scale, z0, steps: int):
    """Adam ascent of ``log p(center + scale * z)`` from every row of ``z0``; returns the end points ``[m, d]``."""
    opt = optax.adam(optax.exponential_decay(0.1, steps, 0.01))

    def f(z):
        return target.logdensity(center + scale * z)

    def one(z):
        def step(carry, _):
            z, state = carry
            g = jax.grad(f)(z)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            updates, state = opt.update(-g, state, z)
            return (z + updates, state), None

        (z, _), _ = jax.lax.scan(step, (z, opt.init(z)), None, length=steps)
        return z

    return jax.vmap(one)(z0)


def _refine(target, center, scale, z):
    """Newton steps from ``z`` while ``-H`` is positive definite; returns ``(mode, log p, -H, decrement)``."""

    def f(z):
        return target.logdensity(center + scale * z)

    def newton(z, _):
        g, h = jax.grad(f)(z), jax.hessian(f)(z)
        chol = jnp.linalg.cholesky(-h)
        dz = jax.scipy.linalg.cho_solve((chol, True), g)
        ok = jnp.all(jnp.isfinite(dz))
        return jnp.where(ok, z + dz, z), None

    z, _ = jax.lax.scan(newton, z, None, length=NEWTON_STEPS)
    g, h = jax.grad(f)(z), jax.hessian(f)(z)
    neg_h = -0.5 * (h + h.T)
    chol = jnp.linalg.cholesky(neg_h)
    dec = jnp.dot(g, jax.scipy.linalg.cho_solve((chol, True), g))
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    return z, f(z), neg_h, dec, logdet


_ascend_jit = eqx.filter_jit(_ascend)
_refine_jit = eqx.filter_jit(_refine)
_logdensities = eqx.filter_jit(lambda target, center, scale, z: jax.vmap(lambda u: target.logdensity(center + scale * u))(z))


def mode_check(target, particles, *, n_starts: int = 64, inflate: float = 4.0, ascent_steps: int = 1000,
               level: float = MODES_LEVEL, rng_key: jax.Array | None = None, max_rows: int = MAX_ROWS) -> ModeCheck:
    """Check whether particles (or draws) split over the target's modes as the modes' masses say (module docstring).

    Args:
        target: a log-density of one ``[d]`` point, or a steinax target (its ``logdensity`` is used).
        particles: ``[n, d]``, ``n >= 10``, in the target's (unconstrained) space.
        n_starts: extra ascents from ``N(xbar, (inflate * sd)^2)``, to find modes no particle occupies.
        inflate: how far (in particle sds) the extra starts are spread.
        ascent_steps: Adam steps of each ascent.
        level: the decision's level, in ``(0, 1)``.
        rng_key: default ``jax.random.key(0)`` (deterministic).
        max_rows: ascend from at most this many rows, evenly spaced (default :data:`MAX_ROWS`).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from steinax.targets import GaussianMixture
        >>> p = GaussianMixture(jnp.array([0.5, 0.5]), jnp.array([[-4.0, 0.0], [4.0, 0.0]]), jnp.stack([jnp.eye(2)] * 2))
        >>> x = p.sample(jax.random.key(0), 100)
        >>> mode_check(p, x).mismatch, mode_check(p, x[x[:, 0] > 0]).mismatch
        (False, True)
    """
    from scipy import stats

    from steinax.diagnostics._checks import checked_inputs

    if not (np.isfinite(inflate) and inflate > 0):
        raise ValueError(f"`inflate` must be a positive number; received {inflate!r}")
    target, x, rng_key = checked_inputs(target, particles, rng_key, level, "mode check", n_starts=(n_starts, 0),
                                        ascent_steps=(ascent_steps, 1), max_rows=(max_rows, 10))
    n, d = x.shape
    x = jnp.asarray(np.asarray(x)[np.linspace(0, n - 1, min(n, int(max_rows))).astype(int)])
    n = x.shape[0]

    from steinax.diagnostics._checks import host_rng, whitened

    extra = inflate * host_rng(rng_key).standard_normal((int(n_starts), d))
    center, scale, z = whitened(x)
    starts = np.concatenate([np.asarray(z), extra]).astype(z.dtype)  # the rows, then the extra starts
    ends = _ascend_jit(target, center, scale, starts, int(ascent_steps))
    logp = np.asarray(_logdensities(target, center, scale, ends), np.float64)
    logp = np.where(np.isfinite(logp) & np.all(np.isfinite(np.asarray(ends)), axis=1), logp, -np.inf)

    evaluations = starts.shape[0] * (int(ascent_steps) + 1)  # the ascents, and the log-density at their ends
    group = np.full(ends.shape[0], -1)  # -1: not yet grouped; -2: unsettled
    modes, log_mass = [], []
    ends_np = np.asarray(ends, np.float64)
    for _ in range(MAX_GROUPS):
        free = np.flatnonzero((group == -1) & np.isfinite(logp))
        if free.size == 0:
            break
        best = free[np.argmax(logp[free])]
        m, fm, neg_h, dec, logdet = (np.asarray(a, np.float64) for a in _refine_jit(target, center, scale,
                                                                                       jnp.asarray(ends_np[best], x.dtype)))
        evaluations += (NEWTON_STEPS + 1) * (d + 1) + 1  # a gradient and a Hessian per Newton step, then f
        settled = bool(np.isfinite(dec) and np.isfinite(logdet) and np.isfinite(fm) and dec < SETTLED_DECREMENT * d)
        if not settled:  # -H may be indefinite there: its quadratic form says nothing about who else belongs
            group[best] = -2
            continue
        delta = ends_np[free] - m[None]
        members = np.union1d(free[np.einsum("ij,jk,ik->i", delta, neg_h, delta) < d], [best])
        # a mode already found (two groups refined to one point) is merged, not counted twice
        same = [k for k, mk in enumerate(modes) if float((mk - m) @ neg_h @ (mk - m)) < d]
        if same:
            group[members] = same[0]
            continue
        group[members] = len(modes)
        modes.append(m)
        log_mass.append(fm + 0.5 * d * np.log(2 * np.pi) - 0.5 * logdet)
    k = len(modes)
    particle_group = group[:n]
    counts = np.array([int(np.sum(particle_group == j)) for j in range(k)], dtype=int)
    unassigned = int(n - counts.sum())
    shares = np.exp(np.asarray(log_mass) - np.max(log_mass)) if k else np.zeros(0)
    shares = shares / shares.sum() if k else shares
    p_value = 1.0
    n_a = int(counts.sum())
    if k >= 2 and n_a > 0:
        p_value = float(min(1.0, k * np.min(stats.binom.cdf(counts, n_a, shares))))
    order = np.argsort(-shares) if k else np.zeros(0, int)
    modes_x = (np.asarray(center, np.float64)[None] + np.asarray(scale, np.float64)[None] * np.asarray(modes).reshape(k, d))
    return ModeCheck(modes=jnp.asarray(modes_x[order], x.dtype), shares=jnp.asarray(shares[order], x.dtype),
                     counts=jnp.asarray(counts[order]), unassigned=unassigned, p_value=p_value, level=float(level),
                     mismatch=bool(k >= 2 and p_value < level), n_starts=int(n_starts), inflate=float(inflate),
                     evaluations=int(evaluations))
