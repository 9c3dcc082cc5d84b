"""A warm start: Pathfinder (Zhang et al. 2022, BlackJAX's implementation) from the start's particles.

Particles started from ``N(0, I)`` on a posterior whose scales differ by orders of magnitude spend most of a run
travelling, and a settle rule that compares each coordinate's move with its own sd can read "settled" while the
cloud still creeps along a ridge. Pathfinder runs L-BFGS on ``-log p`` and, along its path, fits normal
approximations from the inverse-Hessian estimates (``diag(alpha) + beta gamma beta^T``, about the Newton step from
each iterate); the one with the largest ELBO is kept. The stage returns draws of it as particles (in the typical set)
and learns its mean and covariance as an :class:`~steinax.targets.AffineMap`, the coordinates in which the next
stage sees a whitened target (:class:`~steinax.targets.AffineTarget`).

**Decided here:** ``paths`` independent paths (BlackJAX's ``approximate``, vmapped), from the first ``paths`` start
particles; one path's normal is kept (the ELBOs of all are reported), not a PSIS resampling across paths
(multi-path Pathfinder): the map wants one mean and covariance. The covariance is Pathfinder's own, symmetrised;
not refitted to the draws.

**Decided here: which path.** Not the largest of BlackJAX's ELBO estimates: each is the best of one path's noisy
estimates (``elbo_draws`` draws per iterate), so the largest is biased upwards most where the fit is worst and its
log-weights vary most. On a 3-D Gaussian with sds 200, 1 and 0.01 it kept a path whose ELBO read 0.040 (above
``log Z = 0``, which no ELBO can truly exceed) over one fitted exactly (0.0000002), and the map's whitened covariance
was 0.37 off the identity. Each path's normal is scored afresh on ``check_draws`` new draws by the lower bound
``mean(log w) - 2 sd(log w) / sqrt(check_draws)``, ``log w = log p - log q``: a normal that is the target has
constant ``log w`` and wins outright.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from steinax.particles.loop.stages import AbstractStage, Staged
from steinax.targets.affine import AffineMap
from steinax.targets.base import as_target

__all__ = ["PathfinderStart"]


class PathfinderStart(AbstractStage):
    """Pathfinder as a stage (module docstring). Learns ``{"affine", "elbo", "elbos", "scores", "lbfgs_iterations",
    "elbo_evaluations", "evaluations"}`` (the last their sum, for :func:`steinax.sample`'s ledger: a lower bound): the L-BFGS iterations per path (each at least one value-and-gradient evaluation, more
    where a line search backtracks: BlackJAX does not report those) and the log-density evaluations of the ELBO
    estimates; returns as many draws as the start has particles (or ``num_particles``).

    Attributes:
        paths: independent L-BFGS paths, from the first ``paths`` start particles.
        maxiter: L-BFGS iterations per path, at most (BlackJAX's ``maxiter``).
        ftol, gtol: L-BFGS's stopping tolerances on the relative decrease of ``-log p`` and on the gradient.
            **Decided here:** ``1e-12`` and ``1e-10``, not BlackJAX's ``1e-5`` and ``1e-8``: on a regression on the
            calendar year (intercept and slope correlated at -0.9997) L-BFGS crawls along the ridge, each step
            decreasing ``-log p`` by less than ``1e-5`` of it, and stopped 79 sds from the mean after 18-86
            iterations; with ``1e-12`` its paths ran 133-286 iterations and the map's mean was 0.21 sd off.
        elbo_draws: draws per iterate to estimate its ELBO (BlackJAX's ``num_samples``).
        check_draws: fresh draws per path to choose between the paths (module docstring).
        num_particles: particles to return (default: as many as the start).
    """

    name: ClassVar[str] = "warm_start"
    paths: int = 4
    maxiter: int = 1000
    elbo_draws: int = 20
    num_particles: int | None = None
    ftol: float = 1e-12
    gtol: float = 1e-10
    check_draws: int = 100

    def apply(self, target, start: Staged, rng_key) -> Staged:
        from blackjax.vi import pathfinder

        tgt = as_target(target)
        x0 = jnp.asarray(start.particles)
        paths = min(int(self.paths), x0.shape[0])
        n = int(self.num_particles or x0.shape[0])
        key_paths, key_draws = jax.random.split(rng_key)

        def one(key, position):
            return pathfinder.approximate(key, tgt.logdensity, position, num_samples=self.elbo_draws,
                                          maxiter=self.maxiter, ftol=self.ftol, gtol=self.gtol)

        with jax.numpy_rank_promotion("allow"):  # BlackJAX's sampler broadcasts implicitly
            states, infos = jax.vmap(one)(jax.random.split(key_paths, paths), x0[:paths])
        elbos = np.asarray(states.elbo, np.float64)
        if not np.any(np.isfinite(elbos)):
            raise FloatingPointError(f"Pathfinder found no finite ELBO on any of its {paths} paths (the log-density is "
                                     "not finite near the start's particles, or L-BFGS diverged): check the target "
                                     "at the starting points, or start elsewhere")
        key_check, key_draws = jax.random.split(key_draws)
        m = int(self.check_draws)

        def score(key, state):
            with jax.numpy_rank_promotion("allow"):
                x, logq = pathfinder.sample(key, state, m)
            logw = jax.vmap(tgt.logdensity)(x) - logq
            return jnp.mean(logw) - 2.0 * jnp.std(logw) / np.sqrt(m)

        scores = np.asarray(jax.jit(jax.vmap(score))(jax.random.split(key_check, paths), states), np.float64)
        scores = np.where(np.isfinite(elbos) & np.isfinite(scores), scores, -np.inf)
        if not np.any(np.isfinite(scores)):
            raise FloatingPointError(f"Pathfinder's normals gave no finite importance log-weight on any of its {paths} "
                                     "paths (the log-density is not finite where they put mass): check the target, "
                                     "or start elsewhere")
        best = int(np.argmax(scores))
        state = jax.tree_util.tree_map(lambda a: a[best], states)
        with jax.numpy_rank_promotion("allow"):
            draws, _ = pathfinder.sample(key_draws, state, n)
        cov = jnp.diag(state.alpha) + state.beta @ state.gamma @ state.beta.T
        mean = state.position + cov @ state.grad_position  # the normal's mean: the Newton step from the iterate
        iterations = np.isfinite(np.asarray(infos.path.elbo)).sum(axis=1)
        learnt = {"affine": AffineMap.from_moments(mean, cov), "elbo": float(elbos[best]), "elbos": elbos.tolist(),
                  "scores": scores.tolist(),
                  "lbfgs_iterations": iterations.tolist(),
                  "elbo_evaluations": int(iterations.sum()) * int(self.elbo_draws) + paths * m}
        # the ledger: one evaluation per L-BFGS iteration at least (BlackJAX does not report its line searches'), the
        # ELBO estimates' and the paths' scoring draws
        learnt["evaluations"] = int(iterations.sum()) + learnt["elbo_evaluations"]
        return Staged(particles=draws.astype(x0.dtype), state=None, learnt={**start.learnt, self.name: learnt})
