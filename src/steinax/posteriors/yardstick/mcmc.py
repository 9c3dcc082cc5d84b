"""The many-chain MCMC peers on the yardstick, each with its documented adaptation (BlackJAX), none tuned per
posterior: a function per sampler, ``(logdensity, init [chains, d], rng_key, moments, steps, warmup) -> Trace``.

* ``nuts``: BlackJAX NUTS, each chain with its own Stan-style window adaptation (``blackjax.window_adaptation``,
  diagonal mass matrix, target acceptance 0.8), ``warmup`` steps, vmapped over chains.
* ``meads``: MEADS (Hoffman & Sountsov 2022): ``blackjax.meads_adaptation`` across all chains (its defaults: four
  folds), ``warmup`` steps, then generalised HMC (``blackjax.ghmc``, one leapfrog step a transition) with the
  adapted step size, damping and per-coordinate scales, fixed.
* ``numpyro_nuts``: NumPyro NUTS as most users run it, 4 chains (the first four starts), its window adaptation,
  ``warmup`` steps, then as many draws in all as the many-chain samplers' ``chains x steps`` (``steps x chains / 4``
  per chain, at least ``steps``), so that its cap is the same number of draws and not a floor of ``1 / (4 steps)``
  (chains run one after another: its seconds are their sum, its sequential steps per draw the most any chain took,
  as if they ran side by side).
* ``chees``: ChEES-HMC (Hoffman, Radul & Sountsov 2021): ``blackjax.chees_adaptation`` across all chains (Adam at
  0.025, the paper's setting, from step size 0.1), ``warmup`` steps, then its jittered HMC kernel.

Tuning's gradient evaluations are every chain's leapfrog steps during adaptation; its sequential steps are, per
adaptation step, the most any chain took.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from steinax.posteriors.yardstick.trace import (
    Trace,
    timed_compile,
    timed_run,
    trace_chains,
    trace_from_draws,
)

__all__ = ["chees", "meads", "numpyro_nuts", "nuts"]


def _tuning(n_int, seconds: float) -> dict:
    """Tuning's costs from its per-step, per-chain gradient evaluations ``[steps, chains]``."""
    n_int = np.asarray(n_int, np.float64)
    return {"gradient_evaluations": float(n_int.sum()), "sequential_steps": float(n_int.max(axis=1).sum()),
            "seconds": seconds}


def _trace(sampler, step, states, key, moments, steps, tuning, compile_s, position, info,
           gradients=lambda info: info.num_integration_steps) -> Trace:
    """:func:`trace_chains` of the adapted kernel as a :class:`Trace`; a chain gone non-finite is in ``info``."""
    states, biases, grads, seq, c_s, run_s, nonfinite, each = trace_chains(step, states, key, moments, steps,
                                                                           position=position, gradients=gradients)
    return Trace(sampler=sampler, chains=int(jax.tree_util.tree_leaves(states)[0].shape[0]),
                 biases=biases, gradient_evaluations=grads, sequential_steps=seq, seconds=run_s * seq / seq[-1],
                 tuning=tuning, compile_seconds=compile_s + c_s, info={**info, "nonfinite_step": nonfinite},
                 per_chain=each)


def nuts(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000) -> Trace:
    """BlackJAX NUTS with window adaptation per chain (module docstring)."""
    import blackjax

    key_warm, key_run = jax.random.split(rng_key)
    chains = init.shape[0]

    def adapt(key, x):
        warm = blackjax.window_adaptation(blackjax.nuts, logdensity)
        (state, params), info = warm.run(key, x, num_steps=warmup)
        return state, params["step_size"], params["inverse_mass_matrix"], info.info.num_integration_steps

    def step(key, s):
        state, eps, m = s
        state, info = blackjax.nuts(logdensity, eps, m).step(key, state)
        return (state, eps, m), info

    keys = jax.random.split(key_warm, chains)
    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        compiled, compile_s = timed_compile(jax.vmap(adapt), keys, init)
        (state, step_size, imm, n_int), warm_s = timed_run(compiled, keys, init)
        return _trace("nuts", step, (state, step_size, imm), key_run, moments, steps,
                      _tuning(np.swapaxes(n_int, 0, 1), warm_s), compile_s, lambda s: s[0].position,
                      {"step_size_quantiles": np.quantile(np.asarray(step_size), [0.0, 0.1, 0.5, 0.9, 1.0]).tolist()})


def numpyro_nuts(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000) -> Trace:
    """NumPyro NUTS, 4 chains (module docstring). Compilation is not separable from its run here: NumPyro compiles
    inside ``warmup`` and ``run``, so its seconds include compilation and ``compile_seconds`` is 0 (stated)."""
    import time

    from numpyro.infer import MCMC, NUTS

    x0 = jnp.asarray(init[:4])
    draws_per_chain = steps * max(1, init.shape[0] // x0.shape[0])
    key_warm, key_run = jax.random.split(rng_key)
    mcmc = MCMC(NUTS(potential_fn=lambda x: -logdensity(x)), num_warmup=warmup, num_samples=draws_per_chain,
                num_chains=x0.shape[0], chain_method="sequential", progress_bar=False)
    with jax.numpy_rank_promotion("allow"):  # NumPyro broadcasts implicitly
        t0 = time.perf_counter()
        mcmc.warmup(key_warm, init_params=x0, extra_fields=("num_steps",), collect_warmup=True)
        warm_steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])  # [chains, warmup]
        t1 = time.perf_counter()
        mcmc.run(key_run, extra_fields=("num_steps",))
        t2 = time.perf_counter()
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))
    n_steps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
    biases, grads, seq, each = trace_from_draws(draws, n_steps, moments)
    return Trace(sampler="numpyro_nuts", chains=int(x0.shape[0]), biases=biases, gradient_evaluations=grads,
                 sequential_steps=seq, seconds=(t2 - t1) * seq / seq[-1], per_chain=each,
                 tuning=_tuning(np.swapaxes(warm_steps, 0, 1), t1 - t0), compile_seconds=0.0,
                 info={"compilation": "inside seconds", "message": f"{draws_per_chain} draws per chain"})


def chees(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000) -> Trace:
    """ChEES-HMC across the chains (module docstring)."""
    import blackjax
    import optax

    key_warm, key_run = jax.random.split(rng_key)
    chains = init.shape[0]
    warm = blackjax.chees_adaptation(logdensity, chains)

    def adapt(key, x):
        (states, params), info = warm.run(key, x, 0.1, optax.adam(0.025), warmup, max_sampling_steps=steps)
        return states, params["step_size"], params["integration_steps_params"][0], params["inverse_mass_matrix"], \
            info.info.num_integration_steps

    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        compiled, compile_s = timed_compile(adapt, key_warm, init)
        (states, step_size, leapfrogs, imm, n_int), warm_s = timed_run(compiled, key_warm, init)
        kernel = blackjax.dynamic_hmc(logdensity, step_size=step_size, inverse_mass_matrix=imm,
                                      next_random_arg_fn=lambda i: i + 1,
                                      integration_steps_fn=_halton_steps(warmup + steps),
                                      integration_steps_params=(leapfrogs,))
        return _trace("chees", lambda key, s: kernel.step(key, s), states, key_run, moments, steps,
                      _tuning(n_int, warm_s), compile_s, lambda s: s.position,
                      {"step_size": float(step_size), "leapfrog_steps": float(leapfrogs)})


def meads(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000) -> Trace:
    """MEADS across the chains (module docstring). Tuning's gradient evaluations: each adaptation step moves the
    chains of all folds but one, one leapfrog step each."""
    import blackjax

    key_warm, key_run = jax.random.split(rng_key)
    chains, folds = init.shape[0], 4
    warm = blackjax.meads_adaptation(logdensity, chains, num_folds=folds)

    def adapt(key, x):
        (states, params), _ = warm.run(key, x, warmup)
        return states, params

    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        compiled, compile_s = timed_compile(adapt, key_warm, init)
        (states, params), warm_s = timed_run(compiled, key_warm, init)
        kernel = blackjax.ghmc(logdensity, **params)
        tuning = {"gradient_evaluations": float(warmup * chains * (folds - 1) / folds),
                  "sequential_steps": float(warmup), "seconds": warm_s}
        return _trace("meads", lambda key, s: kernel.step(key, s), states, key_run, moments, steps, tuning, compile_s,
                      lambda s: s.position, {"step_size": float(params["step_size"]), "alpha": float(params["alpha"]),
                                             "delta": float(params["delta"])},
                      gradients=lambda info: jnp.ones(()))


def _halton_steps(total: int):
    """ChEES's jitter: ``ceil(u_i L)`` with ``u_i`` the Halton sequence at the chain's counter, on as many bits as
    the adaptation used (``ceil(log2(warm-up + sampling steps))``)."""
    from blackjax.mcmc.dynamic_hmc import halton_sequence

    bits = int(np.ceil(np.log2(total)))
    return lambda i, length: jnp.asarray(jnp.ceil(halton_sequence(i, bits) * length), dtype=int)
