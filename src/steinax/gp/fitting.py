"""Point estimates of a GP model's hyperparameters: type-II maximum likelihood and MAP (the baselines of the
Stein GP experiments)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from steinax.gp.kernels import _softplus_inverse
from steinax.gp.regression import GPRegression


def type2_ml(X, y, kernel: str = "se", *, steps: int = 2000, learning_rate: float = 0.05, rng_key=None):
    """Type-II maximum likelihood for :class:`GPRegression`: Adam (optax) on ``-log N(y | 0, K + sigma^2 I)``.

    Starts from the paper's values (lengthscales ``sqrt(D)``, variance 1, noise 1).
    Returns the ``[D + 2]`` unconstrained hyperparameters, usable as one particle.
    """
    model = GPRegression(X, y, kernel, ml=True)
    D = model.num_inputs
    theta = _softplus_inverse(jnp.concatenate([jnp.full((D,), math.sqrt(D)), jnp.ones(2)]).astype(model.X.dtype))
    return map_estimate(model, theta, steps=steps, learning_rate=learning_rate)


def map_estimate(target, x0, *, steps: int, learning_rate: float = 0.05) -> jax.Array:
    """The mode of ``target.logdensity`` by optax Adam from ``x0`` (``steps`` steps in one compiled scan).

    The start the papers give MCMC baselines (the Stein-GP paper's HMC starts at the MAP);
    :func:`type2_ml` is this on the ``ml=True`` regression target.
    """
    import optax

    opt = optax.adam(learning_rate)

    @jax.jit
    def fit(x):
        def step(carry, _):
            x, state = carry
            grad = jax.grad(lambda z: -target.logdensity(z))(x)
            updates, state = opt.update(grad, state, x)
            return (optax.apply_updates(x, updates), state), None

        return jax.lax.scan(step, (x, opt.init(x)), None, length=steps)[0][0]

    return fit(jnp.asarray(x0))
