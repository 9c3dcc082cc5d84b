"""nutpie (Seyboldt et al.; the sampler PyMC users reach for) on a steinax target: NUTS with nutpie's mass-matrix
adaptation from gradients and positions, and optionally its normalizing-flow adaptation (``transform_adapt``).

nutpie samples models compiled from PyMC or Stan; a steinax target is handed to it through
``nutpie.compiled_pyfunc.from_pyfunc``, nutpie's own entry for a log-density written in Python: the log-density and
its gradient are one jitted ``jax.value_and_grad``, the flow adaptation gets the raw JAX log-density (as nutpie's
own JAX backend does for PyMC). The chains run one after another (``cores=1``), as the suite runs every sampler.

Requires ``nutpie`` (``steinax[bench]``; its flow adaptation also ``flowjax``).
"""

from __future__ import annotations

import itertools
import time

import jax
import numpy as np

from steinax._validation import check_particles
from steinax.targets.base import as_target, check_target

__all__ = ["nutpie"]


def nutpie(target, initial_positions, *, tune: int = 1000, draws: int = 1000, seed: int = 0, flow: bool = False,
           progress: bool = False):
    """nutpie's NUTS on ``target.logdensity`` (or a log-density function), one chain per row of
    ``initial_positions``.

    Args:
        target: a steinax target or a function ``[d] -> scalar``.
        initial_positions: ``[chains, d]``; chain ``i`` starts at row ``i``.
        tune, draws: warm-up and kept draws per chain (nutpie's defaults are 300 and 1000; 1000 warm-up draws here,
            as NumPyro's NUTS in the suite).
        seed: nutpie's seed.
        flow: nutpie's normalizing-flow adaptation (``transform_adapt=True``; trains a flow on the warm-up's draws
            and gradients, and samples in its coordinates).

    Returns:
        ``(draws [chains, draws, d], info)`` with ``info["num_steps"]`` (total leapfrog steps, warm-up included: the
        gradient evaluations), ``info["diverging"]`` (divergent kept transitions), ``info["seconds"]``.
    """
    import nutpie as _nutpie
    from nutpie.compiled_pyfunc import from_pyfunc

    target = as_target(target)  # the same checks as steinax.baselines.mcmc.nuts: the target, its starts, the counts
    x0 = check_particles(initial_positions, "initial_positions")
    for name, value in (("tune", tune), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
    check_target(target, jax.random.key(seed), x0)
    logdensity = target.logdensity
    x0 = np.asarray(x0, np.float64)
    chains, d = x0.shape
    value_and_grad = jax.jit(jax.value_and_grad(logdensity))
    x64 = bool(jax.config.jax_enable_x64)  # nutpie calls back from its own threads, where a scoped
    # `jax.enable_x64` of the caller does not hold: each call re-enters the caller's precision

    def make_logp():
        def logp(x):
            with jax.enable_x64(x64):
                value, grad = value_and_grad(x)
            return float(value), np.asarray(grad, np.float64)
        return logp

    def make_expand(seed1, seed2, chain):
        return lambda x: {"x": np.asarray(x, np.float64)}

    starts = itertools.count()
    model = from_pyfunc(d, make_logp, make_expand, [np.dtype("float64")], [(d,)], ["x"],
                        # nutpie asks for one point per chain, in order; a chain that restarts its initialisation
                        # takes the next row (cyclically)
                        make_initial_point_fn=lambda _seed: x0[next(starts) % chains].copy(),
                        raw_logp_fn=_raw(logdensity, x64) if flow else None)
    t0 = time.perf_counter()
    trace = _nutpie.sample(model, chains=chains, tune=tune, draws=draws, seed=seed, cores=1, progress_bar=progress,
                           transform_adapt=flow)
    seconds = time.perf_counter() - t0
    kept = np.asarray(trace.posterior["x"].values, np.float64)
    steps = int(np.sum(trace.sample_stats.n_steps.values)) + int(np.sum(trace.warmup_sample_stats.n_steps.values))
    return kept, {"num_steps": steps, "diverging": np.asarray(trace.sample_stats.diverging.values),
                  "seconds": seconds}


def _raw(logdensity, x64: bool):
    """The log-density as nutpie's flow adaptation calls it (a tuple whose first entry is the value), in the
    caller's precision."""
    def raw(x):
        with jax.enable_x64(x64):
            return (logdensity(x),)
    return raw
