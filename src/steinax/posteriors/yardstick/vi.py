"""Pathfinder (Zhang et al. 2022) on the yardstick: BlackJAX's ``blackjax.vi.pathfinder`` with its defaults, one path
from the first start, then as many draws of its normal as there are chains. Not exact: its squared bias is that of
its normal approximation plus ``1 / chains``; a single checkpoint.

Costs: the L-BFGS iterates' gradient evaluations (a lower bound: line searches add some), all sequential; each
iterate's ELBO also costs 200 log-density evaluations (not gradients), reported in ``info``. Seconds include
compilation (BlackJAX compiles inside the call); ``compile_seconds`` is 0 (stated in ``info``).
"""

from __future__ import annotations

import time

import jax
import numpy as np

from steinax.metrics.posterior import squared_bias
from steinax.posteriors.yardstick.trace import BIASES, Trace

__all__ = ["pathfinder"]


def pathfinder(logdensity, init, rng_key, moments: dict, steps: int | None = None, warmup: int | None = None) -> Trace:
    """BlackJAX Pathfinder (module docstring); ``steps`` and ``warmup`` are the MCMC peers' and are not used."""
    import blackjax

    key_fit, key_draw = jax.random.split(rng_key)
    chains = int(np.shape(init)[0])
    t0 = time.perf_counter()
    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        state, info = blackjax.vi.pathfinder.approximate(key_fit, logdensity, init[0])
        draws = blackjax.vi.pathfinder.sample(key_draw, state, chains)
    draws = np.asarray(draws[0] if isinstance(draws, tuple) else draws, np.float64)
    seconds = time.perf_counter() - t0
    iterates = float(np.isfinite(np.asarray(info.path.elbo)).sum())
    b = squared_bias(draws, moments)
    biases = {name: np.asarray([v], np.float64) for name, v in zip(BIASES, (
        b["x"].mean(), b["x"].max(), b["x2"].mean(), b["x2"].max(), np.nan, np.nan))}
    return Trace(sampler="pathfinder", chains=chains, biases=biases, gradient_evaluations=np.asarray([iterates]),
                 sequential_steps=np.asarray([iterates]), seconds=np.asarray([seconds]),
                 tuning={"gradient_evaluations": 0.0, "sequential_steps": 0.0, "seconds": 0.0}, compile_seconds=0.0,
                 info={"compilation": "inside seconds", "elbo_logdensity_evaluations": 200 * iterates},
                 unmeasured=("chain_x2_mean", "chain_x2_max"))
