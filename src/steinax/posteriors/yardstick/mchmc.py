"""The microcanonical peers on the yardstick (BlackJAX), each configured as its authors run it, none tuned per
posterior: ``(logdensity, init [chains, d], rng_key, moments, steps, warmup) -> Trace``.

* ``mams``: MAMS, Metropolis-adjusted microcanonical HMC (Robnik, Cohn-Gordon & Seljak, arXiv 2503.01707), every
  chain tuned by itself (as NUTS is here) with the authors' scheme, then run ``steps`` proposals
  (``blackjax.adjusted_mclmc_dynamic``): isokinetic velocity Verlet (one gradient a step), a uniformly jittered
  number of steps per proposal with mean ``L / step_size``, no partial momentum refresh, a diagonal preconditioner.
  Tuning, ``warmup`` steps in all, split as the authors' benchmark code splits ``num_tuning_steps``: a third to the
  step size's dual averaging at target acceptance 0.9 (with ``L`` moving with it), a third to the preconditioner and
  ``L`` from the chain's variances (then dual averaging again), a third to ``L`` from the chain's effective sample
  size (half the ESS-based length, BlackJAX's factor) and a last dual averaging at that ``L``; each over two
  windows. **Decided**: the installed BlackJAX's ``adjusted_mclmc_find_L_and_step_size`` pins ``L`` to 2 steps per
  proposal after tuning (its ``target_num_integration_steps``, not in the paper nor upstream BlackJAX), so the stages
  are composed here from its own building blocks without that pin, as the paper tunes ``L``. Measured: on a
  3-d Gaussian about 1 chain in 50 ends its tuning with a collapsed step size (1e-5) and stays stuck, in BlackJAX's
  tuner whether vmapped or run chain by chain; such chains are counted in ``info`` and the row's note, and kept in
  the estimate (a user of many chains would keep them).
* ``laps``: LAPS (``blackjax.adaptation.laps.laps``, arXiv 2601.16696), all chains as one ensemble: an unadjusted
  microcanonical burn-in of at most ``warmup`` steps (its early stop on the ensemble's fluctuations of ``E[x^2]``),
  then ``steps`` MAMS samples of 15 integrator steps each, its step size bisected to the acceptance it chooses
  (0.7, or 0.9 above d = 200) over the first half. Its defaults otherwise. Its answer at each step is the
  **ensemble** (every chain's current position), which is how its authors score it (the squared bias of the
  chains' mean of ``x^2``, their ``observables_for_bias`` and ``contract``): the trace's ``x2_*`` rows are that,
  computed inside LAPS; it has no per-chain or ``x`` rows (NaN). Its starts: ``draw_init(key)``, the posterior's
  own initialiser at LAPS's per-chain keys (default: rows of ``init`` drawn at those keys). Its costs: one gradient
  per chain per burn-in step (and one to start), ``15 x`` its integrator's gradients per chain per sample;
  sequential steps the same per chain. BlackJAX compiles inside the call: seconds include compilation
  (``compile_seconds`` 0, stated in ``info``). No tuning is reported apart: the burn-in is its run, as
  ``steinax.sample``'s stages are.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax.posteriors.yardstick.mcmc import _trace
from steinax.posteriors.yardstick.trace import Trace, timed_compile, timed_run

__all__ = ["laps", "mams"]

MAMS_TARGET_ACCEPTANCE = 0.9
"""The MAMS paper's (and its authors' benchmark code's) target acceptance rate."""


def _mams_kernel():
    """``(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, integration_steps_params) -> (state,
    info)``: the adjusted microcanonical kernel with a jittered trajectory (module docstring)."""
    from blackjax.mcmc import adjusted_mclmc_dynamic, integrators

    return adjusted_mclmc_dynamic.build_kernel(
        integration_steps_fn=adjusted_mclmc_dynamic.make_random_trajectory_length_fn(True),
        integrator=integrators.isokinetic_velocity_verlet)


def _mams_tune(logdensity, x, key, warmup: int, windows: int = 2):
    """One chain's MAMS tuning from ``x`` (module docstring): ``(state, step size, L, inverse mass matrix, integrator
    steps)``."""
    from blackjax.adaptation import adjusted_mclmc_adaptation as ad
    from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
    from blackjax.mcmc import adjusted_mclmc_dynamic

    kernel, d = _mams_kernel(), x.shape[0]
    key_init, key = jax.random.split(key)
    state = adjusted_mclmc_dynamic.init(x, logdensity, key_init)
    frac = 1.0 / (3 * windows)  # of num_steps = warmup: the authors' thirds, per window
    params = MCLMCAdaptationState(jnp.sqrt(d), jnp.sqrt(d) * 0.25, inverse_mass_matrix=jnp.ones(d, x.dtype))
    n_steps = jnp.zeros((), x.dtype)
    stage12 = ad.adjusted_mclmc_make_L_step_size_adaptation(
        kernel=kernel, logdensity_fn=logdensity, dim=d, frac_tune1=frac, frac_tune2=frac,
        target=MAMS_TARGET_ACCEPTANCE, diagonal_preconditioning=True, target_num_integration_steps=None)
    stage3 = ad.adjusted_mclmc_make_adaptation_L(kernel, logdensity_fn=logdensity, frac=frac, l_factor=0.5)
    stage3_da = ad.adjusted_mclmc_make_L_step_size_adaptation(
        kernel=kernel, logdensity_fn=logdensity, dim=d, frac_tune1=frac, frac_tune2=0.0,
        target=MAMS_TARGET_ACCEPTANCE, fix_L_first_da=True, diagonal_preconditioning=True,
        target_num_integration_steps=None)
    for i in range(windows):
        state, params, _, n = stage12(state, params, warmup, jax.random.fold_in(key, i))
        n_steps = n_steps + n
    for i in range(windows):
        k1, k2 = jax.random.split(jax.random.fold_in(key, windows + i))
        state, params, n = stage3(state, params, warmup, k1)
        state, params, _, n2 = stage3_da(state, params, warmup, k2)
        n_steps = n_steps + n + n2
    return state, params.step_size, params.L, params.inverse_mass_matrix, n_steps


def mams(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000) -> Trace:
    """MAMS, every chain tuned by itself (module docstring). Tuning's sequential steps: the most integrator steps any
    chain's tuning took (a lower bound on the vmapped loop's, which waits for the slowest chain at every step)."""
    key_warm, key_run = jax.random.split(rng_key)
    chains = init.shape[0]
    kernel = _mams_kernel()

    def step(key, s):
        state, eps, length, imm = s
        state, info = kernel(rng_key=key, state=state, logdensity_fn=logdensity, step_size=eps,
                             inverse_mass_matrix=imm, integration_steps_params=(length / eps,))
        return (state, eps, length, imm), info

    keys = jax.random.split(key_warm, chains)
    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        compiled, compile_s = timed_compile(jax.vmap(lambda k, x: _mams_tune(logdensity, x, k, warmup)), keys, init)
        (state, eps, length, imm, n_int), warm_s = timed_run(compiled, keys, init)
        n_int = np.asarray(n_int, np.float64)
        tuning = {"gradient_evaluations": float(n_int.sum()), "sequential_steps": float(n_int.max()),
                  "seconds": warm_s}
        q = lambda v: np.quantile(np.asarray(v), [0.0, 0.5, 1.0]).tolist()
        stuck = int(np.sum(np.asarray(eps) < 1e-3 * np.median(np.asarray(eps))))
        return _trace("mams", step, (state, eps, length, imm), key_run, moments, steps, tuning, compile_s,
                      lambda s: s[0].position, {"step_size_quantiles": q(eps),
                                                "steps_per_proposal_quantiles": q(length / eps),
                                                "collapsed_chains": stuck,
                                                "message": f"{stuck} chains' tuning collapsed (step size below 1e-3 "
                                                           "of the median)" if stuck else ""})


def laps(logdensity, init, rng_key, moments: dict, steps: int, warmup: int = 1000, draw_init=None) -> Trace:
    """LAPS across the chains as one ensemble (module docstring)."""
    from blackjax.adaptation.laps import laps as run_laps
    from blackjax.mcmc.integrators import mclachlan_coefficients, omelyan_coefficients

    chains, d = init.shape
    steps_per_sample = 15
    grads = len(omelyan_coefficients if d > 200 else mclachlan_coefficients) // 2  # LAPS's own choice of integrator
    if draw_init is None:
        draw_init = lambda k: init[jax.random.randint(k, (), 0, chains)]
    m2 = jnp.asarray(moments["mean2"], init.dtype)
    v2 = jnp.asarray(moments["var2"], init.dtype)

    def contract(e_x2):  # the ensemble's squared bias of E[x^2], per coordinate in units of Var[x^2]
        b = (e_x2 - m2) ** 2 / v2
        return jnp.stack([jnp.max(b), jnp.mean(b)])

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("chains",))
    t0 = time.perf_counter()
    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        info, grads_per_step, acc, _ = run_laps(
            logdensity, draw_init, d, warmup, steps * steps_per_sample * grads, chains, mesh, rng_key,
            observables_for_bias=lambda x: x * x, contract=contract)
        b1, b2 = (np.asarray(jax.block_until_ready(info[p]["bias"]), np.float64) for p in ("phase_1", "phase_2"))
    seconds = time.perf_counter() - t0
    if grads_per_step != grads or len(b2) != steps:
        raise RuntimeError(f"LAPS ran {len(b2)} samples at {grads_per_step} gradients a step; expected {steps} at "
                           f"{grads} (has BlackJAX's LAPS changed its integrator choice?)")
    per_chain = np.concatenate([np.ones(len(b1)), np.full(len(b2), float(steps_per_sample * grads_per_step))])
    per_chain[0] += 1.0  # the start's gradient
    seq = np.cumsum(per_chain)
    nan = np.full(len(seq), np.nan)
    bias = np.concatenate([b1, b2])
    biases = {"x_mean": nan, "x_max": nan, "x2_mean": bias[:, 1], "x2_max": bias[:, 0], "chain_x2_mean": nan,
              "chain_x2_max": nan}
    return Trace(sampler="laps", chains=chains, biases=biases, gradient_evaluations=seq * chains,
                 sequential_steps=seq, seconds=seconds * seq / seq[-1],
                 tuning={"gradient_evaluations": 0.0, "sequential_steps": 0.0, "seconds": 0.0}, compile_seconds=0.0,
                 info={"compilation": "inside seconds", "burn_in_steps": len(b1), "acceptance_target": float(acc),
                       "gradients_per_integrator_step": int(grads_per_step)})
