"""The posterior suite's peers: other libraries' samplers on the suite's posteriors, each as its library runs it.

Each runner takes the posterior (its unconstrained log-density, dimension and initialiser), a
key and the suite's settings, and returns ``(draws [m, d], score evaluations, info)``. Every peer
sees the same log-density as the steinax methods; where a peer needs a NumPyro model, the
log-density is wrapped as one site on the real line with a ``factor``, so the peer works in the
same coordinates. Particle peers use the README's optimizer (AdaGrad with momentum, 0.05,
through optax) for the same number of steps and particles as the steinax methods, and the RBF
kernel with the median heuristic (each library's default kernel).

* ``numpyro_svgd``, ``numpyro_asvgd``: ``numpyro.contrib.einstein`` ``SVGD`` and ``ASVGD``
  (its default cyclical annealing: 10 cycles, transition speed 10); particles from NumPyro's
  own initialiser (uniform on ``(-2, 2)``).
* ``blackjax_svgd``: ``blackjax.svgd`` with ``update_median_heuristic`` every step, from the
  suite's ``N(0, I)`` start.
* ``pathfinder``: ``blackjax.vi.pathfinder`` (L-BFGS, 30 iterations by default; one path from
  the suite's start), then as many draws as particles.
* ``nuts``: NumPyro NUTS, 4 chains from the suite's ``N(0, I)`` start; its info carries the minimum
  bulk ESS, from which :func:`nuts_seconds_to_ess` extrapolates the wall time to an ESS of 1000.
* ``vi``: full-rank Gaussian VI (:func:`steinax.baselines.vi.gaussian_vi`).
"""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["PEERS", "nuts_seconds_to_ess"]


def _numpyro_stein(post, key, settings, annealed: bool):
    import numpyro
    from numpyro.contrib.einstein import ASVGD, SVGD, RBFKernel

    import steinax

    from steinax.targets.numpyro_adapter import flat_model

    model = flat_model(post.target.logdensity, post.dim)
    optim = numpyro.optim.optax_to_numpyro(steinax.adagrad_momentum(0.05))
    cls = ASVGD if annealed else SVGD
    stein = cls(model, optim, RBFKernel(), num_stein_particles=settings.particles)
    with jax.numpy_rank_promotion("allow"):  # NumPyro's internals broadcast implicitly
        result = stein.run(key, settings.steps, progress_bar=False)
    x = np.asarray(result.params["x_auto_loc"]).reshape(settings.particles, post.dim)
    return x, settings.particles * settings.steps, {}


def numpyro_svgd(post, key, settings):
    return _numpyro_stein(post, key, settings, annealed=False)


def numpyro_asvgd(post, key, settings):
    return _numpyro_stein(post, key, settings, annealed=True)


def blackjax_svgd(post, key, settings):
    import blackjax
    from blackjax.vi.svgd import rbf_kernel, update_median_heuristic

    import steinax

    svgd = blackjax.svgd(jax.grad(post.target.logdensity), steinax.adagrad_momentum(0.05), rbf_kernel,
                         update_median_heuristic)
    state = svgd.init(post.init(key, settings.particles), {"length_scale": 1.0})

    def step(state, _):
        return update_median_heuristic(svgd.step(state)), None

    state, _ = jax.jit(lambda s: jax.lax.scan(step, s, None, length=settings.steps))(state)
    return np.asarray(state.particles), settings.particles * settings.steps, {}


def pathfinder(post, key, settings):
    import blackjax

    k_init, k_fit, k_draw = jax.random.split(key, 3)
    x0 = post.init(k_init, 1)[0]
    with jax.numpy_rank_promotion("allow"):  # BlackJAX's internals broadcast implicitly
        state, info = blackjax.vi.pathfinder.approximate(k_fit, post.target.logdensity, x0)
        draws = blackjax.vi.pathfinder.sample(k_draw, state, settings.particles)
    draws = draws[0] if isinstance(draws, tuple) else draws
    # L-BFGS iterates: a lower bound on the gradient evaluations (line searches add some; each iterate's
    # ELBO also costs 200 log-density evaluations)
    evals = int(np.asarray(info.path.elbo).size)
    return np.asarray(draws), evals, {}


def nuts(post, key, settings):
    from numpyro.diagnostics import effective_sample_size

    from steinax.baselines.mcmc import nuts as run_nuts

    draws, info = run_nuts(post.target, post.init(key, 4), num_warmup=settings.nuts_warmup,
                           num_samples=settings.nuts_samples, rng_key=jax.random.fold_in(key, 1), return_info=True)
    draws = np.asarray(draws, np.float64)
    ess = float(np.min(effective_sample_size(draws)))
    return draws.reshape(-1, post.dim), int(np.sum(np.asarray(info["num_steps"]))), {"min_ess_bulk": ess}


def vi(post, key, settings):
    from steinax.baselines.vi import gaussian_vi

    x = gaussian_vi(post.target, post.dim, steps=settings.steps, num_draws=settings.particles, rng_key=key)
    return np.asarray(x), settings.steps, {}


def nuts_seconds_to_ess(wall: float, min_ess: float, warmup: int, samples: int, target_ess: float = 1000.0) -> float:
    """NUTS wall time to a minimum bulk ESS of ``target_ess``, extrapolated from one run.

    The run's time is split in proportion to transitions (warm-up and kept draws cost alike; its
    compilation counted in both); the kept draws are scaled by ``target_ess / min_ess`` (ESS grows
    linearly with draws once warmed up). An estimate, not a measurement: it is labelled so.
    """
    per_transition = wall / (warmup + samples)
    return per_transition * (warmup + samples * max(target_ess / max(min_ess, 1.0), 0.0))


PEERS = {"nuts": nuts, "vi": vi, "numpyro_svgd": numpyro_svgd, "numpyro_asvgd": numpyro_asvgd,
         "blackjax_svgd": blackjax_svgd, "pathfinder": pathfinder}
"""name -> runner ``(posterior, key, settings) -> (draws [m, d], score evaluations, info)``."""
