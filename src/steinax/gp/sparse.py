"""Sparse GPs: inducing points by k-means and minibatch scores by Pinder et al. (2020) eq. 10."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._linalg import per_particle
from steinax.gp.base import (
    _check_likelihood_data,
    _GPBase,
    _marginal_samples,
    _mixture_log_predictive,
    _mixture_moments,
)
from steinax.gp.kernels import LIKELIHOODS
from steinax.gp.latent import _inverse_link, _log_likelihood

SPARSE_LIKELIHOODS = ("gaussian",) + LIKELIHOODS
_GH_POINTS = 20


def _expected_log_likelihood(name, y, mean, var, noise):
    """``E_{f ~ N(mean, var)} log p(y | f)`` per point (closed form for Gaussian and Poisson, Gauss-Hermite otherwise)."""
    if name == "gaussian":
        return -0.5 * (jnp.log(2 * jnp.pi * noise) + ((y - mean) ** 2 + var) / noise)
    if name == "poisson":
        return y * mean - jnp.exp(mean + 0.5 * var) - jax.scipy.special.gammaln(y + 1.0)
    x, w = np.polynomial.hermite_e.hermegauss(_GH_POINTS)  # probabilists' Hermite: weight exp(-x^2 / 2)
    lead = (1,) * jnp.ndim(mean)
    x = jnp.asarray(x, mean.dtype).reshape(lead + (-1,))
    w = jnp.asarray(w / np.sqrt(2 * np.pi), mean.dtype).reshape(lead + (-1,))
    f = mean[..., None] + jnp.sqrt(var)[..., None] * x
    return jnp.sum(_log_likelihood(name, y[..., None], f) * w, -1)


def kmeans_inducing_points(X, num_inducing: int, seed: int = 0) -> np.ndarray:
    """``[M, D]`` k-means centres of ``X`` (SciPy ``kmeans2``, k-means++ start): the inducing points' initialisation."""
    from scipy.cluster.vq import kmeans2

    X = np.asarray(X, dtype=np.float64)
    if isinstance(num_inducing, bool) or not isinstance(num_inducing, (int, np.integer)) or num_inducing < 1:
        raise ValueError(f"`num_inducing` must be a positive integer; received {num_inducing!r}")
    if num_inducing > X.shape[0]:
        raise ValueError(
            f"`num_inducing` ({num_inducing}) must not exceed the number of data points ({X.shape[0]})"
        )
    centres, _ = kmeans2(X, int(num_inducing), seed=seed, minit="++")
    return centres


class SparseGP(_GPBase):
    """A sparse GP with ``M`` fixed inducing points; particles are ``[H + M]``: hyperparameters and whitened ``nu``.

    ``u = f(Z) = L_Z nu`` with ``L_Z L_Z^T = K_ZZ + jitter I`` and ``nu ~ N(0, I)``;
    given ``u`` the data are independent with ``f_i ~ N(a_i^T nu, k_ii - ||a_i||^2)``,
    ``a_i = L_Z^{-1} k_Z(x_i)``, and each contributes
    ``E_{f_i} log p(y_i | f_i)`` (GPflow's SGPMC). The score is eq. 10:
    ``nabla log p_0(theta, nu) + (N / |B|) sum_{i in B} nabla E log p(y_i | f_i)``
    over one minibatch ``B`` per step (shared by the particles). ``H`` is
    ``D + 1`` hyperparameters (lengthscales, variance), plus the noise variance
    for the Gaussian likelihood.

    Args:
        X, y: data (``y`` binary for Bernoulli, counts for Poisson).
        likelihood: ``"gaussian"`` or one of :data:`LIKELIHOODS`.
        kernel: ``"se"`` or ``"matern32"`` (the paper's sparse model uses Matern-3/2).
        num_inducing: ``M`` (k-means centres of ``X`` by :func:`kmeans_inducing_points`) ...
        inducing: ... or the inducing inputs ``[M, D]`` themselves.
        batch_size: ``|B|`` (``None``: all data, exact scores).
        ml, jitter: as :class:`GPRegression`.
        seed: the k-means seed.
    """

    Z: jax.Array = None
    likelihood: str = eqx.field(static=True, default="gaussian")
    batch_size: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        self._check_common()
        if self.likelihood not in SPARSE_LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {SPARSE_LIKELIHOODS}; received {self.likelihood!r}")

    def __init__(self, X, y, likelihood: str = "gaussian", kernel: str = "matern32", *, num_inducing: int = 300,
                 inducing=None, batch_size: int | None = 1000, ml: bool = False, jitter: float = 1e-6, seed: int = 0):
        if likelihood not in SPARSE_LIKELIHOODS:
            raise ValueError(f"`likelihood` must be one of {SPARSE_LIKELIHOODS}; received {likelihood!r}")
        X, y = _check_likelihood_data(likelihood, X, y)
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                       or batch_size < 1):
            raise ValueError(f"`batch_size` must be None or a positive integer; received {batch_size!r}")
        if inducing is None:
            Z = jnp.asarray(kmeans_inducing_points(np.asarray(X), num_inducing, seed), X.dtype)
        else:
            Z = jnp.asarray(inducing, X.dtype)
            if Z.ndim != 2 or Z.shape[1] != X.shape[1]:
                raise ValueError(f"`inducing` must be [M, {X.shape[1]}]; received shape {Z.shape}")
            if Z.shape[0] > X.shape[0]:
                raise ValueError(f"`inducing` has {Z.shape[0]} points, more than the {X.shape[0]} data points")
        self.X, self.y, self.Z = X, y, Z
        self.likelihood, self.kernel, self.ml, self.jitter, self.batch_size = likelihood, kernel, ml, jitter, batch_size

    @property
    def _has_noise(self) -> bool:
        return self.likelihood == "gaussian"

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    @property
    def dim(self) -> int:
        return self.num_hyperparameters + self.num_inducing

    def _conditional(self, theta, X_new):
        """Mean ``a^T nu`` and variance ``k(x, x) - ||a||^2`` of ``f(X_new)`` given ``u``, with ``a = L_Z^{-1} k_Z(x)``."""
        hyp = self.hyperparameters(theta)
        Kzz = self._gram(hyp, self.Z) + self.jitter * jnp.eye(self.num_inducing, dtype=self.Z.dtype)
        A = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(Kzz), self._gram(hyp, self.Z, X_new), lower=True)
        mean = A.T @ theta[self.num_hyperparameters:]
        return mean, jnp.maximum(hyp.variance - jnp.sum(A * A, axis=0), 0.0), hyp

    def _logdensity_on(self, theta, batch, factor):
        Xb, yb = batch
        nu = theta[self.num_hyperparameters:]
        mean, var, hyp = self._conditional(theta, Xb)
        ell = _expected_log_likelihood(self.likelihood, yb, mean, var, hyp.noise)
        return self._hyper_logprior(theta) - 0.5 * jnp.sum(nu * nu) + factor * jnp.sum(ell)

    def logdensity(self, theta: jax.Array) -> jax.Array:
        """The full-data log-density (all ``N`` points)."""
        return self._logdensity_on(theta, (self.X, self.y), 1.0)

    def evaluate(self, rng_key, particles):
        """Eq. 10: one minibatch for all particles, then each particle's value and score (one ``M x M`` Cholesky)."""
        from steinax.targets.base import draw_minibatch

        batch, factor = draw_minibatch(rng_key, (self.X, self.y), self.batch_size)
        return per_particle(lambda t: jax.value_and_grad(self._logdensity_on)(t, batch, factor), particles)

    def init_particles(self, rng_key: jax.Array, n: int, *, dtype=None) -> jax.Array:
        """``[n, H + M]``: hyperparameters from their priors, ``nu ~ N(0, I)``."""
        dtype = dtype or self.X.dtype
        k1, k2 = jax.random.split(rng_key)
        return jnp.concatenate([self._init_hyper(k1, n, dtype), jax.random.normal(k2, (n, self.num_inducing), dtype)], 1)

    def predictive_samples(self, rng_key, particles: jax.Array, X_new, num_samples: int = 20) -> jax.Array:
        """Algorithm 2: ``[J, K, N*]`` samples of ``f*`` given each particle's ``u`` (marginal at each point)."""
        X_new = self._new_inputs(X_new)
        mu, var = jax.lax.map(lambda t: self._conditional(t, X_new)[:2], particles)
        return _marginal_samples(rng_key, mu, var, num_samples)

    def predict(self, particles: jax.Array, X_new, *, include_noise: bool = False):
        """Mixture mean and variance ``[N*]`` of ``f*`` (``y*`` with ``include_noise``, Gaussian likelihood)."""
        X_new = self._new_inputs(X_new)
        mu, var, noise = jax.lax.map(lambda t: self._noisy_conditional(t, X_new), particles)
        return _mixture_moments(mu, var + noise[:, None] if include_noise else var)

    def _noisy_conditional(self, theta, X_new):
        mean, var, hyp = self._conditional(theta, X_new)
        return mean, var, (hyp.noise if hyp.noise is not None else jnp.zeros((), mean.dtype))

    def log_predictive(self, particles: jax.Array, X_new, y_new) -> jax.Array:
        """Mean test log-likelihood of the particle mixture (Gaussian likelihood)."""
        if self.likelihood != "gaussian":
            raise ValueError("log_predictive is for the Gaussian likelihood; use predict_mean for the others")
        X_new, y_new = self._new_inputs(X_new, y_new)
        mu, var, noise = jax.lax.map(lambda t: self._noisy_conditional(t, X_new), particles)
        return _mixture_log_predictive(mu, var + noise[:, None], y_new)

    def predict_mean(self, rng_key, particles: jax.Array, X_new, num_samples: int = 20) -> jax.Array:
        """``[N*]``: the average of the inverse link over the ``J K`` latent samples (see :meth:`LatentGP.predict_mean`)."""
        f = self.predictive_samples(rng_key, particles, X_new, num_samples)
        return f.mean(axis=(0, 1)) if self.likelihood == "gaussian" else jnp.mean(_inverse_link(self.likelihood, f),
                                                                                 axis=(0, 1))
