"""The microcanonical peers on the yardstick (BlackJAX), each configured as its authors run it, none tuned per
posterior: ``(logdensity, init [chains, d], rng_key, moments, steps, warmup) -> Trace``.

* ``mams``: MAMS, Metropolis-adjusted microcanonical HMC (Robnik, Cohn-Gordon & Seljak, arXiv 2503.01707), every
  chain tuned by itself (as NUTS is here) the way the authors' benchmark code (``sampler-comparison``) tunes it, then
  run ``steps`` proposals (``blackjax.adjusted_mclmc_dynamic``): isokinetic velocity Verlet (one gradient a step), a
  uniformly jittered number of steps per proposal with mean ``L / step_size``, no partial momentum refresh. Tuning:
  a NUTS window adaptation of ``warmup`` steps for the diagonal preconditioner and the start; the step size's dual
  averaging at target acceptance 0.9 from ``L = 1`` (``warmup`` steps), ``L`` from the chain's variances and dual
  averaging again (``warmup / 2`` and ``warmup`` steps; the NUTS preconditioner is then restored, as theirs is);
  ``L`` from the chain's effective sample size times 0.3 (``warmup / 2`` steps); a last dual averaging at that ``L``
  (``warmup / 10``). These are the authors' ratios (20000 : 20000 : 10000 : 10000 : 2000), scaled to ``warmup``.
  **Decided**: the installed BlackJAX's ``adjusted_mclmc_find_L_and_step_size`` pins ``L`` to 2 steps per proposal
  after tuning (its ``target_num_integration_steps``, not in the paper nor upstream BlackJAX), so the stages are
  composed here from its own building blocks without that pin, and ``L`` is reset to ``sqrt(d)`` after the
  preconditioner as upstream BlackJAX does (the installed version dropped that reset; without it ``L`` stayed at
  1.1 steps per proposal, its floor, and on Brownian motion 16 chains x 5000 proposals ended at b2 0.03). Tuning from the model's initialiser with MAMS's own
  stages alone (no NUTS warm-up) left about 1 chain in 50 with a collapsed step size on a 3-d Gaussian; chains
  whose step size ends below 1e-3 of the median are counted in ``info`` and the row's note, and kept in the estimate.
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
MAMS_L_FACTOR = 0.3
"""The authors' benchmark code's factor on the ESS-based trajectory length (stage 3)."""


def _mams_kernel():
    """``(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, integration_steps_params) -> (state,
    info)``: the adjusted microcanonical kernel with a jittered trajectory (module docstring)."""
    from blackjax.mcmc import adjusted_mclmc_dynamic, integrators

    return adjusted_mclmc_dynamic.build_kernel(
        integration_steps_fn=adjusted_mclmc_dynamic.make_random_trajectory_length_fn(True),
        integrator=integrators.isokinetic_velocity_verlet)


def _mams_tune(logdensity, x, key, warmup: int):
    """One chain's MAMS tuning from ``x`` (module docstring): ``(state, step size, L, inverse mass matrix, NUTS
    leapfrog steps + MAMS integrator steps)``. Stage lengths in the authors' benchmark code's ratios (20000 NUTS
    warm-up : 20000 dual averaging : 10000 variances : 10000 ESS : 2000 final dual averaging), scaled so that the
    NUTS warm-up is ``warmup`` steps."""
    import blackjax
    from blackjax.adaptation import adjusted_mclmc_adaptation as ad
    from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
    from blackjax.mcmc import adjusted_mclmc_dynamic

    kernel, d = _mams_kernel(), x.shape[0]
    key_nuts, key_init, key1, key3, key4 = jax.random.split(key, 5)
    nuts = blackjax.window_adaptation(blackjax.nuts, logdensity, target_acceptance_rate=0.8)
    (nuts_state, nuts_params), nuts_info = nuts.run(key_nuts, x, num_steps=warmup)
    imm = nuts_params["inverse_mass_matrix"]
    state = adjusted_mclmc_dynamic.init(nuts_state.position, logdensity, key_init)
    params = MCLMCAdaptationState(jnp.ones((), x.dtype), nuts_params["step_size"], inverse_mass_matrix=imm)
    n = warmup  # the fractions below are of n steps
    state, params, _, n1 = ad.adjusted_mclmc_make_L_step_size_adaptation(
        kernel=kernel, logdensity_fn=logdensity, dim=d, frac_tune1=1.0, frac_tune2=0.5,
        target=MAMS_TARGET_ACCEPTANCE, diagonal_preconditioning=True, fix_L_first_da=True,
        target_num_integration_steps=None)(state, params, n, key1)
    # the NUTS warm-up's preconditioner, as the authors keep it; L = sqrt(d), upstream BlackJAX's reset after the
    # preconditioner (the installed version drops it, and L then stays at its 1.1-steps floor: MALA-like proposals)
    params = params._replace(inverse_mass_matrix=imm, L=jnp.sqrt(d) * jnp.ones((), x.dtype))
    state, params, n3 = ad.adjusted_mclmc_make_adaptation_L(kernel, logdensity_fn=logdensity, frac=0.5,
                                                          l_factor=MAMS_L_FACTOR)(state, params, n, key3)
    state, params, _, n4 = ad.adjusted_mclmc_make_L_step_size_adaptation(
        kernel=kernel, logdensity_fn=logdensity, dim=d, frac_tune1=0.1, frac_tune2=0.0,
        target=MAMS_TARGET_ACCEPTANCE, fix_L_first_da=True, diagonal_preconditioning=True,
        target_num_integration_steps=None)(state, params, n, key4)
    steps = nuts_info.info.num_integration_steps.sum() + n1 + n3 + n4
    return state, params.step_size, params.L, params.inverse_mass_matrix, steps


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
    bad = np.flatnonzero(~np.isfinite(bias).all(axis=1))  # never silent: the row's note names the step
    nonfinite = int(bad[0]) + 1 if bad.size else None
    biases = {"x_mean": nan, "x_max": nan, "x2_mean": bias[:, 1], "x2_max": bias[:, 0], "chain_x2_mean": nan,
              "chain_x2_max": nan}
    return Trace(sampler="laps", chains=chains, biases=biases, gradient_evaluations=seq * chains,
                 sequential_steps=seq, seconds=seconds * seq / seq[-1],
                 tuning={"gradient_evaluations": 0.0, "sequential_steps": 0.0, "seconds": 0.0}, compile_seconds=0.0,
                 info={"compilation": "inside seconds", "burn_in_steps": len(b1), "acceptance_target": float(acc),
                       "gradients_per_integrator_step": int(grads_per_step), "nonfinite_step": nonfinite},
                 unmeasured=("x_mean", "x_max", "chain_x2_mean", "chain_x2_max"))
