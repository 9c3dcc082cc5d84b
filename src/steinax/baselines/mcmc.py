"""MCMC baselines on steinax targets: SGLD (BlackJAX), preconditioned SGLD, and NUTS (NumPyro).

These are the papers' sampling baselines, run on the same :class:`~steinax.targets.AbstractTarget`
as the particle methods, so that a table compares methods and not models. Each returns draws
``[chains, draws, d]``; flatten the first two axes to use them where particles are expected.

Conventions:

* Stochastic-gradient Langevin dynamics uses BlackJAX's Euler step (``blackjax.sgld``):
  ``x <- x + eps * s(x) + sqrt(2 eps) xi`` with the minibatch score ``s`` of the target
  (its ``evaluate``, so the ``N/B`` rescaling is the target's). Step size ``eps`` is the
  user's; there is no step-size schedule.
* Preconditioned SGLD (Li et al., AAAI 2016, eq. 4, without the ``Gamma`` correction term as
  they recommend): ``V <- a V + (1 - a) s * s``, ``G = 1 / (delta + sqrt(V))``,
  ``x <- x + eps * G * s + sqrt(2 eps G) xi`` (the same ``eps`` convention as SGLD); ``V``
  starts at the first step's ``s * s`` (as Liu & Wang's AdaGrad does), not at 0, whose
  ``G = 1/delta`` would throw the chain far at the first step. BlackJAX
  1.7 has no pSGLD, so it is written here, in the same few lines.
* NUTS runs NumPyro's sampler on the full-data log-density ``target.logdensity``.
"""

from __future__ import annotations

import jax
import numpy as np
import jax.numpy as jnp

from steinax._validation import check_particles
from steinax.targets.base import as_target, check_target

__all__ = ["sgld", "psgld_step", "nuts"]


def _thin(steps: int, burn_in: int | None, keep: int, name: str = "steps") -> tuple[int, int]:
    for arg, value in ((name, steps), ("keep", keep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{arg}` must be a positive integer; received {value!r}")
    burn_in = steps // 2 if burn_in is None else burn_in
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ValueError(f"`burn_in` must be an integer in [0, {steps}); received {burn_in!r}")
    if keep > steps - burn_in:
        raise ValueError(f"`keep` must be at most the {steps - burn_in} steps after burn-in; received {keep}")
    return burn_in, (steps - burn_in) // keep


def psgld_step(position, v, score, noise, step_size, decay: float = 0.99, delta: float = 1e-5):
    """One pSGLD step (Li et al. 2016, eq. 4 without ``Gamma``) given the score and standard normal noise.

    Returns ``(new_position, new_v)``. Dropping ``Gamma`` biases the chain where the
    preconditioner tracks the position (a slowly mixing coordinate): on N(0, diag(0.01, 9))
    with step 1e-3 the second variance comes out near 16, not 9, because the stationary
    density of the uncorrected diffusion is ``p(x) / G(x)``. Li et al. rely on minibatch noise
    dominating ``V``; prefer SGLD where that bias matters.
    """
    v = decay * v + (1.0 - decay) * score * score
    g = 1.0 / (delta + jnp.sqrt(v))
    return position + step_size * g * score + jnp.sqrt(2.0 * step_size * g) * noise, v


def sgld(
    target,
    initial_positions: jax.Array,
    *,
    steps: int,
    step_size: float,
    rng_key: jax.Array,
    burn_in: int | None = None,
    keep: int = 10,
    preconditioned: bool = False,
    decay: float = 0.99,
    delta: float = 1e-5,
) -> jax.Array:
    """Run one SGLD (or pSGLD) chain from each row of ``initial_positions``; return ``[chains, keep, d]`` draws.

    Args:
        target: a steinax target (minibatch scores are used as they come) or a log-density.
        initial_positions: ``[chains, d]`` starting points.
        steps: steps per chain, burn-in included.
        step_size: ``eps`` (see the module docstring for the convention).
        rng_key: PRNG key.
        burn_in: steps discarded first (default ``steps // 2``).
        keep: draws kept per chain, evenly thinned over the steps after burn-in.
        preconditioned: pSGLD with an RMSprop preconditioner (``decay``, ``delta``).

    Raises:
        FloatingPointError: if a chain leaves the finite numbers (the step size is too large).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> draws = sgld(lambda x: -0.5 * jnp.sum(x * x), jnp.zeros((4, 2)), steps=2000, step_size=0.05,
        ...              rng_key=jax.random.key(0), keep=100)
        >>> draws.shape
        (4, 100, 2)
        >>> bool(abs(float(draws.var()) - 1.0) < 0.3)
        True
    """
    import blackjax

    target = as_target(target)
    x0 = check_particles(initial_positions, "initial_positions")
    burn_in, stride = _thin(steps, burn_in, keep)
    if not step_size > 0:
        raise ValueError(f"`step_size` must be positive; received {step_size!r}")
    check_target(target, rng_key, x0)

    def score(position, key):
        return target.evaluate(key, position[None])[1][0]

    kernel = blackjax.sgld(score)

    def one_step(carry, key):
        pos, v = carry
        k_batch, k_noise = jax.random.split(key)
        if not preconditioned:
            return (kernel.step(k_noise, pos, k_batch, step_size), v), None
        noise = jax.random.normal(k_noise, pos.shape, pos.dtype)
        return psgld_step(pos, v, score(pos, k_batch), noise, step_size, decay, delta), None

    def chain(x, key):
        v0 = jnp.square(score(x, jax.random.fold_in(key, 2))) if preconditioned else jnp.zeros_like(x)
        carry, _ = jax.lax.scan(one_step, (x, v0), jax.random.split(jax.random.fold_in(key, 0), burn_in))

        def segment(carry, key):
            carry, _ = jax.lax.scan(one_step, carry, jax.random.split(key, stride))
            return carry, carry[0]

        _, draws = jax.lax.scan(segment, carry, jax.random.split(jax.random.fold_in(key, 1), keep))
        return draws

    draws = jax.jit(jax.vmap(chain))(x0, jax.random.split(rng_key, x0.shape[0]))
    if not bool(jnp.all(jnp.isfinite(draws))):
        bad = int(jnp.sum(~jnp.all(jnp.isfinite(draws.reshape(draws.shape[0], -1)), axis=1)))
        raise FloatingPointError(
            f"{'pSGLD' if preconditioned else 'SGLD'} left the finite numbers in {bad} of {x0.shape[0]} chains at "
            f"step_size={step_size:g}; use a smaller `step_size`"
        )
    return draws


def nuts(
    target,
    initial_positions: jax.Array,
    *,
    num_warmup: int = 500,
    num_samples: int = 500,
    max_tree_depth: int = 10,
    rng_key: jax.Array,
    progress: bool = False,
    return_info: bool = False,
    target_accept_prob: float = 0.8,
    min_ess: float | None = None,
    max_samples: int = 100_000,
):
    """NumPyro NUTS on ``target.logdensity`` (full data), one chain per row of ``initial_positions``.

    Returns ``[chains, num_samples, d]`` draws; with ``return_info=True``, ``(draws, info)`` where
    ``info["diverging"]`` ``[chains, num_samples]`` marks divergent transitions and
    ``info["num_steps"]`` counts each transition's leapfrog steps (gradient evaluations). Chains run sequentially (one CPU device).
    ``max_tree_depth`` bounds a transition at ``2**max_tree_depth - 1`` leapfrog steps
    (NumPyro's default 10); a smaller one caps the cost of a draw on posteriors whose
    trajectories run long (hierarchical or whitened latent models). ``target_accept_prob`` is the
    step-size adaptation's target (NumPyro's default 0.8; higher takes smaller steps, fewer divergences).
    With ``min_ess``, the chains continue from their last state in blocks of ``num_samples`` kept draws
    (no new warm-up) until the minimum bulk ESS over coordinates (``numpyro.diagnostics``, all chains)
    reaches it or ``max_samples`` draws per chain are kept; ``info["min_ess_bulk"]`` then reports it.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> draws = nuts(lambda x: -0.5 * jnp.sum((x - 1.0) ** 2), jnp.zeros((2, 3)), num_warmup=200,
        ...              num_samples=300, rng_key=jax.random.key(0))
        >>> draws.shape, bool(jnp.all(jnp.abs(draws.mean((0, 1)) - 1.0) < 0.25))
        ((2, 300, 3), True)
    """
    from numpyro.infer import MCMC, NUTS

    target = as_target(target)
    # NumPyro draws momenta in JAX's default float dtype: positions in another (float32 starts inside
    # ``jax.enable_x64``) would make its tree-building branches disagree in dtype
    x0 = check_particles(initial_positions, "initial_positions").astype(jnp.result_type(float))
    _thin(num_samples, 0, 1, "num_samples")
    if isinstance(num_warmup, bool) or not isinstance(num_warmup, int) or num_warmup < 0:
        raise ValueError(f"`num_warmup` must be a non-negative integer; received {num_warmup!r}")
    check_target(target, rng_key, x0)
    if isinstance(max_tree_depth, bool) or not isinstance(max_tree_depth, int) or max_tree_depth < 1:
        raise ValueError(f"`max_tree_depth` must be a positive integer; received {max_tree_depth!r}")
    if not 0.0 < float(target_accept_prob) < 1.0:
        raise ValueError(f"`target_accept_prob` must be in (0, 1); received {target_accept_prob!r}")
    mcmc = MCMC(NUTS(potential_fn=lambda x: -target.logdensity(x), max_tree_depth=max_tree_depth,
                     target_accept_prob=float(target_accept_prob)), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=x0.shape[0], chain_method="sequential", progress_bar=progress)
    extra = ("diverging", "num_steps") if return_info else ()
    mcmc.run(rng_key, init_params=x0[0] if x0.shape[0] == 1 else x0, extra_fields=extra)  # one chain's as [d]
    blocks = [np.asarray(mcmc.get_samples(group_by_chain=True))]
    fields = [mcmc.get_extra_fields(group_by_chain=True)]
    ess = None
    if min_ess is not None:
        from numpyro.diagnostics import effective_sample_size

        ess = float(np.min(effective_sample_size(blocks[0])))
        while ess < float(min_ess) and len(blocks) * num_samples < max_samples:
            mcmc.post_warmup_state = mcmc.last_state  # continue the chains: no new warm-up
            mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=extra)
            blocks.append(np.asarray(mcmc.get_samples(group_by_chain=True)))
            fields.append(mcmc.get_extra_fields(group_by_chain=True))
            ess = float(np.min(effective_sample_size(np.concatenate(blocks, axis=1))))
    draws = jnp.asarray(np.concatenate(blocks, axis=1))
    if not return_info:
        return draws
    info = {name: jnp.asarray(np.concatenate([np.asarray(f[name]) for f in fields], axis=1)) for name in extra}
    if ess is not None:
        info["min_ess_bulk"] = ess
    return draws, info
