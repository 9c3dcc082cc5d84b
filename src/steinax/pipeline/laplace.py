"""A warm start by MAP and Laplace that searches for every optimum: L-BFGS (optax) on ``-log p`` from a few of the
start's particles and from points spread wider than them, then a normal ``N(x*, (-nabla^2 log p(x*))^{-1})`` at each
distinct optimum, each seeding its own share of the particles; Pathfinder where no such normal exists.

Pathfinder (:class:`~steinax.pipeline.PathfinderStart`) is the robust warm start: it keeps the best normal along the
optimiser's path, so it serves posteriors whose density has no maximum (a centred hierarchy's funnel, where the
density grows without bound as a group scale goes to 0). It is also the slow one to compile: measured cold on the
calendar-year regression, 15-18 s against 1.5 s for L-BFGS to the MAP and the Hessian there (both on 2 CPU cores,
float64). On the regressions and time series people bring the MAP exists and the Laplace normal is close, and
Newton's step (hence the Laplace map) is affine-invariant where Pathfinder's L-BFGS metric is not.

**Why every optimum.** A stage that keeps only the best optimum hands the next stages one mode, and chains started
in one mode of two separated ones agree with each other: split R-hat passes and the answer is wrong with nothing to
say so (measured, issue 56: two unit Gaussians 12 apart, weights 0.1/0.9, every draw in the 10% mode, 2.9 sds from
the mean, ``ok=True``). Every distinct optimum found seeds chains of its own; the correction then converges within
each mode and bridge sampling sets the modes' masses (:mod:`steinax.pipeline.modes`), so the particles' split does
not decide the answer's. What no search can do is find a mode no start reaches: what was searched is reported
(``learnt["search"]``) and :func:`steinax.sample`'s message says it.

**Decided here:**

* **Starts.** ``starts`` of the start's own particles (the first ones) and ``wide_starts`` points drawn from
  ``N(m, diag(spread * s)^2)``, ``m`` and ``s`` the start particles' mean and per-coordinate sd (``s`` of 1 where the
  particles do not vary in a coordinate); ``spread = 3`` by default. L-BFGS from each, one after another
  (``lax.map``: a vmapped ``while_loop`` runs every start as long as the slowest, and its evaluations would be spent
  for nothing), at most ``maxiter`` iterations (optax's ``lbfgs`` with its zoom line search), converged when the
  gradient's norm is below ``gtol`` times ``max(1, |log p|)``. Each run's evaluations of the log-density (one per
  line-search step, one to start and one at the optimum) are counted (``learnt["evaluations"]``).
* **Distinct optima.** The converged optima in decreasing log-density; one within Mahalanobis distance
  ``same_mode = 1`` of an optimum already kept, in that optimum's Laplace metric, is the same mode (two optima
  closer than a sd are one mode to any sampler). Each kept optimum's Hessian (``jax.hessian``, counted as ``d``
  evaluations) must be negative definite; one whose Hessian is not is dropped and reported.
* **Masses and particles.** Each optimum's Laplace mass ``log p(x*) + d/2 log 2 pi + 1/2 log det Sigma``, as a share
  of all; an optimum below ``min_share = 1e-3`` is dropped and reported (its mode moves no mean by more than 0.1% of
  its distance). The particles are split between the optima half equally and half by share (largest remainders, at
  least 2 each, so that R-hat within each mode has chains to compare): the Laplace share is only a first guess of the
  mass, which the correction estimates. Each optimum's particles are draws of its normal. The map learnt is that of the
  particles' mixture (its mean and covariance), one optimum's own normal where there is one.
* **Fallback.** Where no start converged, or the best optimum's Hessian is not negative definite (a flat density
  has zero curvature), or a draw of the normals falls where the log-density is not finite (a hard boundary near the
  optimum), the stage falls back to ``fallback`` (Pathfinder by default) and says so in what it learns. Where that
  fails too (no finite ELBO, or its draws outside the support), the start's own particles go on, with their moments'
  map (``method="start"``): a uniform box has no normal approximation, and the later stages sample it from points
  inside it. The draws' log-densities are checked (``n`` evaluations, counted).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import check_settings
from steinax.particles.loop.stages import AbstractStage, Staged
from steinax.pipeline.warm_start import PathfinderStart
from steinax.targets.affine import AffineMap
from steinax.targets.base import as_target, hessian_at, logdensities

__all__ = ["LaplaceStart", "search_starts"]


@eqx.filter_jit
def _lbfgs(tgt, x0, maxiter: int, gtol: float):
    """L-BFGS on ``-log p`` from each row of ``x0``, one after another: the optima, their log-densities, iterations,
    gradient norms and evaluations of the log-density (module docstring)."""
    import optax

    def f(x):
        return -tgt.logdensity(x)

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(f)

    def one(x):
        def step(carry):
            x, state, evaluations = carry
            value, grad = value_and_grad(x, state=state)
            updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=f)
            searched = optax.tree_utils.tree_get(state, "info").num_linesearch_steps
            return optax.apply_updates(x, updates), state, evaluations + searched.astype(evaluations.dtype)

        def going(carry):
            _, state, _ = carry
            count = optax.tree_utils.tree_get(state, "count")
            grad = optax.tree_utils.tree_get(state, "grad")
            value = optax.tree_utils.tree_get(state, "value")
            small = optax.tree_utils.tree_norm(grad) <= gtol * jnp.maximum(1.0, jnp.abs(value))
            return (count == 0) | ((count < maxiter) & ~small & jnp.isfinite(value))

        # the first value_and_grad evaluates (the state holds no value yet); each line-search step evaluates once
        x, state, evaluations = jax.lax.while_loop(going, step, (x, opt.init(x), jnp.asarray(1, jnp.int32)))
        grad = optax.tree_utils.tree_get(state, "grad")
        return (x, -f(x), optax.tree_utils.tree_get(state, "count"), optax.tree_utils.tree_norm(grad),
                evaluations + 1)

    return jax.lax.map(one, x0)


@jax.jit
def _laplace_covariance(hess):
    """The Laplace normal's covariance: the inverse of the negated Hessian, symmetrised."""
    return jnp.linalg.inv(-0.5 * (hess + hess.T))


def search_starts(particles, starts: int, wide_starts: int, spread: float, rng_key) -> jax.Array:
    """The L-BFGS starts (module docstring): the first ``starts`` rows of ``particles``, then ``wide_starts`` draws
    of ``N(m, diag(spread * s)^2)`` with ``m``, ``s`` the particles' mean and per-coordinate sd (1 where it is 0)."""
    x = jnp.asarray(particles)
    mean, sd = jnp.mean(x, axis=0), jnp.std(x, axis=0)
    sd = jnp.where(sd > 0, sd, jnp.ones_like(sd))
    wide = mean[None] + spread * sd[None] * jax.random.normal(rng_key, (int(wide_starts), x.shape[1]), x.dtype)
    return jnp.concatenate([x[: min(int(starts), x.shape[0])], wide])


def _allocate(shares: np.ndarray, n: int) -> np.ndarray:
    """Particles per optimum: half of ``n`` equally, half by ``shares``, largest remainders, at least 2 each."""
    k = shares.size
    target = n * (0.5 / k + 0.5 * shares)
    counts = np.maximum(np.floor(target).astype(int), min(2, n // k))
    while counts.sum() > n:  # the floor of 2 took particles from the largest
        counts[np.argmax(counts)] -= 1
    order = np.argsort(-(target - np.floor(target)))
    for i in range(n - counts.sum()):
        counts[order[i % k]] += 1
    return counts


def _importance(tgt, optima: list, fractions: np.ndarray, particles, logp: np.ndarray, draws: int, rng_key) -> dict:
    """How good an importance proposal the normals' mixture ``q = sum_k f_k N(x*_k, Sigma_k)`` is: the Pareto k-hat
    of ``p / q`` at the particles (draws of ``q``, stratified by ``fractions``) and ``draws - n`` more drawn the same
    way (evaluations: those extra draws). Measured where the particles are made, from log-densities made anyway: the
    evidence :func:`steinax.sample` sizes the particle stage by (below ``threshold``, ``q`` is close to the target
    in the sense that matters to a sampler started from it)."""
    from steinax.diagnostics.pareto import importance_khat, khat_threshold

    n, d = particles.shape
    extra = max(0, draws - n)
    x, lp = particles, logp
    if extra:
        counts = _allocate(fractions, extra) if extra >= 2 * len(optima) else np.bincount(
            np.arange(extra) % len(optima), minlength=len(optima))
        keys = jax.random.split(rng_key, len(optima))
        more = jnp.concatenate([o["affine"].forward(jax.random.normal(k, (int(c), d), particles.dtype))
                                for o, k, c in zip(optima, keys, counts)])
        x = jnp.concatenate([particles, more])
        lp = np.concatenate([logp, np.asarray(logdensities(tgt, more), np.float64)])
    from steinax.targets.toys import GaussianMixture  # the one mixture log-density

    q = GaussianMixture(fractions, jnp.stack([o["affine"].shift for o in optima]),
                        jnp.stack([jnp.asarray(o["cov"]) for o in optima]))
    logq = np.asarray(logdensities(q, x), np.float64)
    return {"khat": importance_khat(lp - logq), "draws": int(n + extra), "threshold": khat_threshold(n + extra)}


def _mixture_map(means: list, covs: list, fractions: np.ndarray) -> AffineMap:
    """The map of the mixture ``sum_k f_k N(mean_k, cov_k)``'s mean and covariance."""
    means = np.stack([np.asarray(m, np.float64) for m in means])
    mean = fractions @ means
    centred = means - mean
    cov = sum(f * (np.asarray(c, np.float64) + np.outer(u, u)) for f, c, u in zip(fractions, covs, centred))
    dtype = jnp.asarray(covs[0]).dtype
    return AffineMap.from_moments(jnp.asarray(mean, dtype), jnp.asarray(cov, dtype))


class LaplaceStart(AbstractStage):
    """MAP and Laplace at every distinct optimum as a stage (module docstring). Learns ``{"affine", "method":
    "laplace" or "pathfinder", "map" (the best optimum), "optima" (per distinct optimum kept: its log-density, Laplace
    share, particles and how many starts reached it), "dropped" (optima left out, with why), "search" (the starts:
    from the start particles, wide ones, their spread), "lbfgs_iterations", "converged", "evaluations" (log-density
    evaluations of all L-BFGS runs), "hessian_evaluations", "fallback_reason", "importance" (how good an importance
    proposal the normals' mixture is: ``{"khat", "draws", "threshold"}``, the Pareto k-hat of ``p / q`` over
    ``importance_draws`` draws of it, :func:`~steinax.diagnostics.pareto.importance_khat`)}`` (plus Pathfinder's own where it fell
    back); returns as many particles as the start has (or ``num_particles``).

    Attributes:
        starts: L-BFGS runs from the first ``starts`` start particles.
        wide_starts: L-BFGS runs from points spread ``spread`` times wider than the start particles.
        spread: how much wider (module docstring).
        maxiter: L-BFGS iterations per run, at most.
        gtol: convergence: gradient norm below ``gtol * max(1, |log p|)``.
        same_mode: two optima closer than this (Mahalanobis, in the kept one's Laplace metric) are one.
        min_share: an optimum whose Laplace share of the mass is below this seeds no particles.
        num_particles: particles to return (default: as many as the start).
        importance_draws: draws of the normals (the particles and more of the same mixture) whose importance ratios
            measure how good a proposal the normals are (``learnt["importance"]``; 0: not measured).
        fallback: the stage used where the Laplace normal does not exist (default Pathfinder).
    """

    name: ClassVar[str] = "warm_start"
    starts: int = 4
    wide_starts: int = 12
    spread: float = 3.0
    maxiter: int = 1000
    gtol: float = 1e-6
    same_mode: float = 1.0
    min_share: float = 1e-3
    num_particles: int | None = None
    importance_draws: int = 400
    fallback: AbstractStage = PathfinderStart()

    def __check_init__(self):
        check_settings("LaplaceStart", self, integers=("starts", "maxiter"), counts=("wide_starts", "importance_draws"),
                       positive=("spread", "gtol", "same_mode"))
        if isinstance(self.min_share, bool) or not isinstance(self.min_share, (int, float)) \
                or not 0.0 <= self.min_share < 1.0:
            raise ValueError(f"LaplaceStart: `min_share` must be in [0, 1); received {self.min_share!r}")
        if self.num_particles is not None and (isinstance(self.num_particles, bool) or not isinstance(
                self.num_particles, (int, np.integer)) or self.num_particles < 2):
            raise ValueError(f"LaplaceStart: `num_particles` must be None or an integer >= 2; received "
                             f"{self.num_particles!r}")

    def apply(self, target, start: Staged, rng_key) -> Staged:
        tgt = as_target(target)
        x0 = jnp.asarray(start.particles)
        n, d = int(self.num_particles or x0.shape[0]), int(x0.shape[1])
        key_starts, key_draws = jax.random.split(rng_key)
        points = search_starts(x0, self.starts, self.wide_starts, float(self.spread), key_starts)
        xs, logd, iters, gnorm, evaluations = _lbfgs(tgt, points, int(self.maxiter), float(self.gtol))
        logd, iters, gnorm = np.asarray(logd, np.float64), np.asarray(iters), np.asarray(gnorm, np.float64)
        converged = np.isfinite(logd) & (gnorm <= self.gtol * np.maximum(1.0, np.abs(logd)))
        search = {"from_start": int(min(self.starts, x0.shape[0])), "wide": int(self.wide_starts),
                  "spread": float(self.spread), "converged": int(converged.sum())}
        common = {"lbfgs_iterations": iters.tolist(), "converged": converged.tolist(), "search": search,
                  "evaluations": int(np.sum(np.asarray(evaluations)))}
        optima, dropped, hessians, reason = self._distinct(tgt, xs, logd, converged)
        if not optima:
            reason = reason or f"no L-BFGS run converged in {self.maxiter} iterations (gradient norms {gnorm.tolist()})"
        if reason is not None:
            return self._fall_back(tgt, start, rng_key, reason, {**common, "hessian_evaluations": hessians * d,
                                                                   "optima": [], "dropped": dropped})
        log_mass = np.array([o["log_mass"] for o in optima])
        shares = np.exp(log_mass - np.max(log_mass))
        shares /= shares.sum()
        keep = shares >= self.min_share
        dropped += [{"logdensity": o["logdensity"], "share": float(s), "why": f"Laplace share below {self.min_share}"}
                    for o, s in zip(optima, shares) if s < self.min_share]
        optima, shares = [o for o, k in zip(optima, keep) if k], shares[keep] / shares[keep].sum()
        optima, shares = optima[: max(1, n // 2)], shares[: max(1, n // 2)] / shares[: max(1, n // 2)].sum()
        counts = _allocate(shares, n)
        keys = jax.random.split(key_draws, len(optima))
        draws = [o["affine"].forward(jax.random.normal(k, (int(c), d), x0.dtype)) for o, k, c in zip(optima, keys, counts)]
        affine = optima[0]["affine"] if len(optima) == 1 else _mixture_map(
            [o["affine"].shift for o in optima], [o["cov"] for o in optima], counts / n)
        particles = jnp.concatenate(draws).astype(x0.dtype)
        logp = np.asarray(logdensities(tgt, particles), np.float64)
        outside = int(np.sum(~np.isfinite(logp)))
        common["evaluations"] += n
        if not outside and self.importance_draws:
            common["importance"] = _importance(tgt, optima, counts / n, particles, logp, self.importance_draws,
                                               jax.random.fold_in(key_draws, 1))
            common["evaluations"] += common["importance"]["draws"] - n
        if outside:  # a hard boundary near an optimum: the normal puts mass where the target has none
            return self._fall_back(tgt, start, rng_key, f"{outside} of {n} draws of the Laplace normal fall where the "
                                   "log-density is not finite (a hard boundary of the support near the optimum)",
                                   {**common, "hessian_evaluations": hessians * d, "optima": [], "dropped": dropped})
        learnt = {**common, "affine": affine, "method": "laplace", "map": np.asarray(optima[0]["affine"].shift),
                  "optima": [{"logdensity": o["logdensity"], "share": float(s), "particles": int(c),
                              "starts": o["starts"]} for o, s, c in zip(optima, shares, counts)],
                  "dropped": dropped, "hessian_evaluations": hessians * d, "fallback_reason": None}
        return Staged(particles=particles, state=None, learnt={**start.learnt, self.name: learnt})

    def _fall_back(self, tgt, start: Staged, rng_key, reason: str, common: dict) -> Staged:
        """The fallback stage (Pathfinder) where no Laplace normal serves; where it fails too (no finite ELBO, or
        draws outside the support), the start's own particles and their moments' map (``method="start"``): a flat
        or bounded density (a uniform box) has neither a mode nor a normal to fit, and the later stages can still
        sample it from points inside it. Either way the reasons are learnt."""
        n = int(self.num_particles or start.particles.shape[0])
        try:
            out = self.fallback(tgt, start, rng_key)
            bad = int(np.sum(~np.isfinite(np.asarray(logdensities(tgt, out.particles)))))
            theirs = out.learnt[self.fallback.name]
            common = {**common, "evaluations": common["evaluations"] + int(theirs.get("evaluations", 0))
                      + int(out.particles.shape[0]),
                      "fallback_lbfgs_iterations": theirs.get("lbfgs_iterations")}
            if not bad:
                learnt = {**theirs, **common, "method": "pathfinder", "fallback_reason": reason}
                return Staged(particles=out.particles, state=None, learnt={**start.learnt, self.name: learnt})
            why = f"{bad} of {out.particles.shape[0]} of its draws fall where the log-density is not finite"
        except FloatingPointError as exc:
            why = str(exc).split(" (")[0]
        x = jnp.asarray(start.particles)
        x = x if n == x.shape[0] else x[jax.random.choice(rng_key, x.shape[0], (n,), replace=n > x.shape[0])]
        learnt = {**common, "affine": AffineMap.from_particles(x), "method": "start",
                  "fallback_reason": f"{reason}; the fallback ({type(self.fallback).__name__}) failed too: {why}; the "
                                     "later stages start from the starting points"}
        return Staged(particles=x, state=None, learnt={**start.learnt, self.name: learnt})

    def _distinct(self, tgt, xs, logd, converged):
        """The distinct optima in decreasing log-density (module docstring), those dropped, the Hessians computed and,
        where the best optimum's normal does not exist, why."""
        optima, dropped, hessians = [], [], 0
        for i in np.argsort(-np.where(converged, logd, -np.inf)):
            if not converged[i]:
                break
            x = xs[i]
            same = next((o for o in optima if float(jnp.linalg.norm(o["affine"].inverse(x[None])[0])) < self.same_mode),
                        None)
            if same is not None:
                same["starts"] += 1
                continue
            hessians += 1
            hess = hessian_at(tgt, x)
            cov = _laplace_covariance(hess)
            try:
                affine = AffineMap.from_moments(x, cov)
            except ValueError:
                if not optima:
                    curvature = np.linalg.eigvalsh(-0.5 * np.asarray(hess + hess.T, np.float64))
                    scale = float(np.max(np.abs(curvature)))
                    flat = (" (zero curvature: the log-density is flat there)" if scale == 0.0 else
                            f" (zero curvature in some direction, smallest eigenvalue of its negative {curvature[0]:.3g}"
                            f" against {scale:.3g}: the log-density is flat there)"
                            if abs(curvature[0]) <= 1e-10 * scale else
                            f" (smallest eigenvalue of its negative {curvature[0]:.3g})")
                    return [], dropped, hessians, f"the Hessian at the MAP is not negative definite{flat}"
                dropped.append({"logdensity": float(logd[i]), "share": float("nan"),
                                "why": "the Hessian there is not negative definite"})
                continue
            log_mass = float(logd[i]) + 0.5 * x.shape[0] * np.log(2 * np.pi) + float(affine.log_det())
            optima.append({"affine": affine, "cov": cov, "logdensity": float(logd[i]), "log_mass": log_mass,
                           "starts": 1})
        return optima, dropped, hessians, None
