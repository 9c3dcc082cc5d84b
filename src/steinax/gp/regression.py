"""GP regression with the latent function marginalised (Pinder et al. 2020, section 4): a target of the
hyperparameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from steinax.gp.base import (
    _check_inputs,
    _GPBase,
    _marginal_samples,
    _mixture_log_predictive,
    _mixture_moments,
)
from steinax.gp.kernels import gaussian_log_marginal


class GPRegression(_GPBase):
    """GP regression with the latent function marginalised; particles are ``[D + 2]`` unconstrained hyperparameters.

    Args:
        X: inputs ``[N, D]`` (standardise them; the paper does).
        y: targets ``[N]``.
        kernel: ``"se"`` (ARD squared exponential) or ``"matern32"``.
        ml: drop the priors and the Jacobian (type-II maximum likelihood with one particle).
        jitter: added to the diagonal with the noise variance.
    """

    def __check_init__(self):
        self._check_common()

    def __init__(self, X, y, kernel: str = "se", *, ml: bool = False, jitter: float = 1e-6):
        self.X, self.y = _check_inputs(X, y)
        self.kernel, self.ml, self.jitter = kernel, ml, jitter

    @property
    def _has_noise(self) -> bool:
        return True

    @property
    def dim(self) -> int:
        return self.num_inputs + 2

    def log_marginal_likelihood(self, theta: jax.Array) -> jax.Array:
        """``log N(y | 0, K_theta + (sigma^2 + jitter) I)`` for one particle (tinygp's kernel matrix, then
        :func:`gaussian_log_marginal`; equal to ``tinygp.GaussianProcess(...).log_probability``, tested)."""
        hyp = self.hyperparameters(theta)
        C = self._gram(hyp, self.X) + (hyp.noise + self.jitter) * jnp.eye(self.num_data, dtype=self.X.dtype)
        return gaussian_log_marginal(C, self.y)

    def logdensity(self, theta: jax.Array) -> jax.Array:
        return self.log_marginal_likelihood(theta) + self._hyper_logprior(theta)

    def init_particles(self, rng_key: jax.Array, n: int, *, dtype=None) -> jax.Array:
        """``[n, D + 2]`` particles with hyperparameters drawn from their Gamma(1, scale 2) priors."""
        return self._init_hyper(rng_key, n, dtype or self.X.dtype)

    def _predict_one(self, theta, X_new):
        """``K*^T C^{-1} y`` and ``k** - K*^T C^{-1} K*`` with ``C = K + (sigma^2 + jitter) I`` (by one Cholesky)."""
        hyp = self.hyperparameters(theta)
        C = self._gram(hyp, self.X) + (hyp.noise + self.jitter) * jnp.eye(self.num_data, dtype=self.X.dtype)
        L = jnp.linalg.cholesky(C)
        A = jax.scipy.linalg.solve_triangular(L, self._gram(hyp, self.X, X_new), lower=True)
        mean = A.T @ jax.scipy.linalg.solve_triangular(L, self.y, lower=True)
        return mean, jnp.maximum(hyp.variance - jnp.sum(A * A, axis=0), 0.0), hyp.noise

    def predict(self, particles: jax.Array, X_new, *, include_noise: bool = False):
        """Posterior predictive mean and variance ``[N*]`` of ``f*`` (or ``y*``), mixed over the particles.

        Algorithm 2 draws ``K`` samples of ``f*`` per particle and reports their
        mean and variance; this returns the exact moments of that mixture
        (``K -> infinity``): ``mean = avg_j mu_j``, ``var = avg_j (s_j^2 + mu_j^2) - mean^2``.
        Use :meth:`predictive_samples` for the samples themselves.
        """
        X_new = self._new_inputs(X_new)
        mu, var, noise = jax.lax.map(lambda t: self._predict_one(t, X_new), particles)
        return _mixture_moments(mu, var + noise[:, None] if include_noise else var)

    def predictive_samples(self, rng_key, particles: jax.Array, X_new, num_samples: int = 20) -> jax.Array:
        """Algorithm 2: ``[J, K, N*]`` samples of ``f*`` (``K = num_samples`` per particle, marginal at each point)."""
        X_new = self._new_inputs(X_new)
        mu, var, _ = jax.lax.map(lambda t: self._predict_one(t, X_new), particles)
        return _marginal_samples(rng_key, mu, var, num_samples)

    def log_predictive(self, particles: jax.Array, X_new, y_new) -> jax.Array:
        """Mean test log-likelihood ``mean_i log avg_j N(y_i | mu_ij, s_ij^2 + sigma_j^2)`` (the particle mixture)."""
        X_new, y_new = self._new_inputs(X_new, y_new)
        mu, var, noise = jax.lax.map(lambda t: self._predict_one(t, X_new), particles)
        return _mixture_log_predictive(mu, var + noise[:, None], y_new)
