"""Bayesian neural network regression: Liu & Wang (2016)'s model, reused by every paper's BNN experiment.

One hidden layer of ``hidden`` units with biases, ``f(x) = act(x W1 + b1) w2 + b2`` (ReLU by
default; ``activation="sigmoid"`` or ``"tanh"`` for other papers' networks),
Gaussian noise of precision ``gamma``, and a Gaussian prior of precision ``lambda``
on all weights and biases; ``gamma, lambda ~ Gamma(a0, rate b0)``. A particle is the
flat vector ``theta = [W1, b1, w2, b2, log gamma, log lambda]`` of dimension
``p * hidden + 2 * hidden + 3`` (ALGORITHMS.md, "BNN regression"):

.. math::

    \\log p(\\theta \\mid \\mathcal D) = \\sum_n \\Big[\\tfrac12(\\log\\gamma - \\log 2\\pi)
        - \\tfrac\\gamma2 (f(x_n) - y_n)^2\\Big]
      + a_0 \\log\\gamma - b_0 \\gamma
      - \\tfrac{W}{2}(\\log 2\\pi - \\log\\lambda) - \\tfrac\\lambda2 \\lVert w \\rVert^2
      + a_0 \\log\\lambda - b_0 \\lambda + \\text{const},

where ``W`` counts weights and biases and ``a0 log(.)`` is ``(a0 - 1) log(.)`` plus the
log-Jacobian of the log parameterisation. Defaults ``a0 = 1``, ``b0 = 0.1`` as in the
authors' code; data are standardised (:func:`steinax.datasets.train_test_split`).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.models.base import Evaluation
from steinax.targets.base import MinibatchTarget

__all__ = ["BNNRegression"]

_LOG_2PI = math.log(2.0 * math.pi)


class BNNRegression(eqx.Module):
    """The one-hidden-layer BNN of Liu & Wang (2016) on ``n_features`` inputs.

    Example:
        >>> model = BNNRegression(n_features=13, hidden=50)
        >>> model.dim
        753
    """

    n_features: int = eqx.field(static=True)
    hidden: int = eqx.field(static=True, default=50)
    a0: float = eqx.field(static=True, default=1.0)
    b0: float = eqx.field(static=True, default=0.1)
    activation: str = eqx.field(static=True, default="relu")

    def __check_init__(self):
        for name in ("n_features", "hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
        if self.activation not in ("relu", "sigmoid", "tanh"):
            raise ValueError(f"`activation` must be 'relu', 'sigmoid' or 'tanh'; received {self.activation!r}")
        if not (self.a0 > 0 and self.b0 > 0):
            raise ValueError(f"`a0` and `b0` must be positive; received a0={self.a0!r}, b0={self.b0!r}")

    @property
    def num_weights(self) -> int:
        """Weights and biases (the prior's ``W``)."""
        return self.n_features * self.hidden + 2 * self.hidden + 1

    @property
    def dim(self) -> int:
        """Dimension of a particle: the weights, ``log gamma`` and ``log lambda``."""
        return self.num_weights + 2

    def unflatten(self, theta: jax.Array):
        """``(W1 [p, H], b1 [H], w2 [H], b2 [], log_gamma, log_lambda)`` from a flat ``[dim]`` vector."""
        p, h = self.n_features, self.hidden
        w1 = theta[: p * h].reshape(p, h)
        b1 = theta[p * h : p * h + h]
        w2 = theta[p * h + h : p * h + 2 * h]
        b2 = theta[p * h + 2 * h]
        return w1, b1, w2, b2, theta[-2], theta[-1]

    def predict(self, theta: jax.Array, X: jax.Array) -> jax.Array:
        """Network output ``f(X)`` (``[N]``, standardised units) for one particle."""
        w1, b1, w2, b2, _, _ = self.unflatten(theta)
        act = {"relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}[self.activation]
        return act(X @ w1 + b1[None, :]) @ w2 + b2

    def loglik(self, theta: jax.Array, example) -> jax.Array:
        """``log N(y | f(x), 1/gamma)`` for one example ``(x [p], y [])``."""
        x, y = example
        log_gamma = theta[-2]
        resid = self.predict(theta, x[None])[0] - y
        return 0.5 * (log_gamma - _LOG_2PI) - 0.5 * jnp.exp(log_gamma) * resid * resid

    def logprior(self, theta: jax.Array) -> jax.Array:
        """Gaussian prior on the weights, Gamma priors on the precisions (in log space, with Jacobians)."""
        w = theta[:-2]
        log_gamma, log_lambda = theta[-2], theta[-1]
        gamma_part = self.a0 * log_gamma - self.b0 * jnp.exp(log_gamma)
        lambda_part = self.a0 * log_lambda - self.b0 * jnp.exp(log_lambda)
        weights = -0.5 * self.num_weights * (_LOG_2PI - log_lambda) - 0.5 * jnp.exp(log_lambda) * jnp.sum(w * w)
        return gamma_part + lambda_part + weights

    def target(self, X, y, batch_size: int | None = 100) -> MinibatchTarget:
        """The posterior given standardised data, with minibatch scores (``batch_size=None``: exact)."""
        X = jnp.asarray(X)
        y = jnp.asarray(y, X.dtype)
        if X.ndim != 2 or X.shape[1] != self.n_features or y.shape != (X.shape[0],):
            raise ValueError(
                f"`X` must be [N, {self.n_features}] and `y` [N]; received shapes {X.shape} and {y.shape}"
            )
        return MinibatchTarget(self.logprior, self.loglik, (X, y), batch_size)

    def init_particles(self, rng_key, n: int, X=None, y=None, *, scheme: str = "liu", dtype=jnp.float32):
        """``[n, dim]`` initial particles.

        ``scheme="liu"`` (the authors' code, ``bayesian_nn.py``): ``W1 ~ N(0, 1/(p+1))``,
        ``w2 ~ N(0, 1/(H+1))``, biases 0, ``lambda ~ np.random.gamma(a0, b0)`` and
        ``gamma = 1 / mean((f(x) - y)^2)`` of the initial network on the data (``X``, ``y``
        needed). numpy's second argument is a *scale*, so the code starts ``lambda`` near
        ``a0 * b0`` (0.1), not near the prior mean ``a0 / b0`` (10) of its own rate-``b0``
        prior; we follow the code, because the outcome depends on it: with AdaGrad at
        step 1e-3 ``log lambda`` moves about 1e-3 per step, so 2000 steps cannot undo a
        start 4.6 nats higher, and a start at the prior mean over-regularises the network
        (Boston: train RMSE 3.1 instead of 1.8 after 2000 steps; docs/benchmarks.md).
        ``scheme="standard"``: every weight and bias ``N(0, 1)`` and ``log gamma = log lambda = 0``
        (KCC-SD paper, Fig. 6).
        """
        if scheme == "standard":
            theta = jax.random.normal(rng_key, (n, self.num_weights), dtype)
            return jnp.concatenate([theta, jnp.zeros((n, 2), dtype)], axis=1)
        if scheme != "liu":
            raise ValueError(f"`scheme` must be 'liu' or 'standard'; received {scheme!r}")
        if X is None or y is None:
            raise ValueError("`scheme='liu'` sets gamma from the initial network's error: pass `X` and `y`")
        p, h = self.n_features, self.hidden
        k1, k2, k3 = jax.random.split(rng_key, 3)
        w1 = jax.random.normal(k1, (n, p * h), dtype) / jnp.sqrt(p + 1.0)
        w2 = jax.random.normal(k2, (n, h), dtype) / jnp.sqrt(h + 1.0)
        lam = jax.random.gamma(k3, self.a0, (n,), dtype) * self.b0  # numpy gamma(a0, scale b0), as the code
        zeros_h, zero = jnp.zeros((n, h), dtype), jnp.zeros((n, 1), dtype)
        theta = jnp.concatenate([w1, zeros_h, w2, zero, zero, jnp.log(lam)[:, None]], axis=1)
        X, y = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
        mse = jax.vmap(lambda t: jnp.mean((self.predict(t, X) - y) ** 2))(theta)
        return theta.at[:, -2].set(-jnp.log(mse))

    def reestimate_noise(self, particles: jax.Array, X_dev: jax.Array, y_dev: jax.Array) -> jax.Array:
        """Liu & Wang's dev-set step: per particle, replace ``gamma`` by ``1 / mean((f(x) - y)^2)`` on a
        development set if that raises the particle's dev log-likelihood (ALGORITHMS.md section 0).

        Off unless asked for (``steinax bench --dev-noise``): it is a post-hoc fit of the noise to
        held-out data, not part of the posterior. The authors' code computes the new ``gamma`` in
        original units and stores it where training keeps a standardised-units ``gamma``; here both
        candidates are in standardised units (``X_dev``, ``y_dev`` standardised as the training data),
        so the comparison is the same and the units stay consistent.
        """

        def one(theta):
            resid = self.predict(theta, X_dev) - y_dev
            mse = jnp.mean(resid * resid)

            def dev_ll(log_gamma):
                return jnp.sum(0.5 * (log_gamma - _LOG_2PI) - 0.5 * jnp.exp(log_gamma) * resid * resid)

            candidate = -jnp.log(mse)
            return theta.at[-2].set(jnp.where(dev_ll(candidate) > dev_ll(theta[-2]), candidate, theta[-2]))

        return jax.vmap(one)(jnp.asarray(particles))

    def evaluate(self, particles, X, y, y_mean: float = 0.0, y_std: float = 1.0) -> Evaluation:
        """Test RMSE of the particle-averaged prediction and mean test log-likelihood, in original units.

        The predictive density is the equal-weight mixture over particles of
        ``N(y | f(x), 1/gamma)``, mapped to original units by ``y_mean``, ``y_std``.
        """
        preds = jax.vmap(lambda t: self.predict(t, X))(particles) * y_std + y_mean  # [n, N]
        y_orig = y * y_std + y_mean
        rmse = jnp.sqrt(jnp.mean((jnp.mean(preds, axis=0) - y_orig) ** 2))
        var = y_std**2 * jnp.exp(-particles[:, -2])[:, None]
        logpdf = -0.5 * (jnp.log(2.0 * jnp.pi * var) + (preds - y_orig[None, :]) ** 2 / var)
        ll = jax.scipy.special.logsumexp(logpdf, axis=0) - jnp.log(particles.shape[0])
        return Evaluation(loglik=jnp.mean(ll), rmse=rmse)
