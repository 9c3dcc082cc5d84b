"""GPs with a non-Gaussian likelihood (Bernoulli probit or logit, Poisson) and the whitened latent function in
the particles (Pinder et al. 2020, section 4; GPflow's GPMC)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.gp.base import _check_likelihood_data, _GPBase, _marginal_samples
from steinax.gp.kernels import LIKELIHOODS, Hyperparameters


def _log_likelihood(name, y, f):
    if name == "bernoulli_probit":
        return jax.scipy.stats.norm.logcdf((2.0 * y - 1.0) * f)
    if name == "bernoulli_logit":
        return jax.nn.log_sigmoid((2.0 * y - 1.0) * f)
    return y * f - jnp.exp(f) - jax.scipy.special.gammaln(y + 1.0)  # poisson, log link


def _inverse_link(name, f):
    if name == "bernoulli_probit":
        return jax.scipy.stats.norm.cdf(f)
    if name == "bernoulli_logit":
        return jax.nn.sigmoid(f)
    return jnp.exp(f)


class LatentGP(_GPBase):
    """A GP with a non-Gaussian likelihood; particles are ``[D + 1 + N]``: hyperparameters and whitened ``nu``.

    Args:
        X: inputs ``[N, D]``.
        y: labels in {0, 1} (or {-1, 1}) for ``"bernoulli_probit"`` / ``"bernoulli_logit"``,
            counts for ``"poisson"``.
        likelihood: one of :data:`LIKELIHOODS`.
        kernel, ml, jitter: as :class:`GPRegression` (``ml`` drops the hyperparameter priors
            and Jacobian; ``nu ~ N(0, I)`` is part of the model and always kept).
    """

    likelihood: str = eqx.field(static=True, default="bernoulli_probit")

    def __check_init__(self):
        self._check_common()
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {LIKELIHOODS}; received {self.likelihood!r}")

    def __init__(self, X, y, likelihood: str = "bernoulli_probit", kernel: str = "se", *, ml: bool = False,
                 jitter: float = 1e-6):
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {LIKELIHOODS}; received {likelihood!r}")
        self.X, self.y = _check_likelihood_data(likelihood, X, y)
        self.likelihood, self.kernel, self.ml, self.jitter = likelihood, kernel, ml, jitter

    @property
    def dim(self) -> int:
        return self.num_hyperparameters + self.num_data

    def _cholesky(self, hyp: Hyperparameters):
        K = self._gram(hyp, self.X)
        return jnp.linalg.cholesky(K + self.jitter * jnp.eye(self.num_data, dtype=K.dtype))

    def latent(self, theta: jax.Array) -> jax.Array:
        """``f = L_theta nu`` ``[N]`` at the training inputs for one particle."""
        return self._cholesky(self.hyperparameters(theta)) @ theta[self.num_hyperparameters:]

    def whiten(self, theta: jax.Array, f: jax.Array) -> jax.Array:
        """``nu = L_theta^{-1} f``: the particle whose latent function is ``f`` (hyperparameters of ``theta``)."""
        L = self._cholesky(self.hyperparameters(theta))
        nu = jax.scipy.linalg.solve_triangular(L, f, lower=True)
        return jnp.concatenate([theta[: self.num_hyperparameters], nu])

    def logdensity(self, theta: jax.Array) -> jax.Array:
        nu = theta[self.num_hyperparameters:]
        f = self.latent(theta)
        return (jnp.sum(_log_likelihood(self.likelihood, self.y, f)) - 0.5 * jnp.sum(nu * nu)
                + self._hyper_logprior(theta))

    def init_particles(self, rng_key: jax.Array, n: int, *, dtype=None) -> jax.Array:
        """``[n, D + 1 + N]``: hyperparameters from their priors, ``nu ~ N(0, I)``."""
        dtype = dtype or self.X.dtype
        k1, k2 = jax.random.split(rng_key)
        return jnp.concatenate([self._init_hyper(k1, n, dtype), jax.random.normal(k2, (n, self.num_data), dtype)], 1)

    def _predict_one(self, theta, X_new):
        hyp = self.hyperparameters(theta)
        L = self._cholesky(hyp)
        Ks = self._gram(hyp, self.X, X_new)  # [N, N*]
        A = jax.scipy.linalg.solve_triangular(L, Ks, lower=True)  # L^{-1} K*
        mean = A.T @ theta[self.num_hyperparameters:]  # K*^T K^{-1} f = (L^{-1} K*)^T nu
        var = hyp.variance - jnp.sum(A * A, axis=0)
        return mean, jnp.maximum(var, 0.0)

    def predictive_samples(self, rng_key, particles: jax.Array, X_new, num_samples: int = 20) -> jax.Array:
        """Algorithm 2: ``[J, K, N*]`` samples of the latent ``f*`` (marginal at each point)."""
        X_new = self._new_inputs(X_new)
        mu, var = jax.lax.map(lambda t: self._predict_one(t, X_new), particles)
        return _marginal_samples(rng_key, mu, var, num_samples)

    def predict_mean(self, rng_key, particles: jax.Array, X_new, num_samples: int = 20) -> jax.Array:
        """``[N*]``: the average over the ``J K`` latent samples of the inverse link.

        For a Bernoulli likelihood this is the class probability ``P(y* = 1)``;
        for Poisson, the expected count. (The authors' demo applies the link to
        the mean latent instead; averaging the link over the samples is the
        posterior predictive probability.)
        """
        f = self.predictive_samples(rng_key, particles, X_new, num_samples)
        return jnp.mean(_inverse_link(self.likelihood, f), axis=(0, 1))
