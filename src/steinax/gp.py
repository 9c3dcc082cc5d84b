"""Stein variational Gaussian processes (Pinder, Nemeth & Leslie 2020): GP models as steinax targets.

Each model is a target whose particles are GP hyperparameters (and, for a
non-Gaussian likelihood, the whitened latent function), so any steinax
particle method samples their posterior (the paper uses SVGD, Algorithm 1).
The GP kernels are tinygp's (``ExpSquared``, ``Matern32`` with the Euclidean
distance, ARD by an input scaling ``tinygp.transforms.Linear``).

* :class:`GPRegression`: Gaussian likelihood, the latent function marginalised
  (paper section 4):
  ``log p(theta | y) = log N(y | 0, K_theta + sigma^2 I) + log p_0(theta) + log |J|``.
* :class:`SparseGP`: ``M`` inducing points ``Z`` (k-means), ``u = L_Z nu``, any
  likelihood, and minibatch scores by the paper's eq. 10, so a step costs
  O(B M^2 + M^3) per particle instead of O(N^3).
* :class:`LatentGP`: a Bernoulli (probit or logit link) or Poisson (log link)
  likelihood with the whitened latent ``f = L_theta nu``, ``L_theta L_theta^T = K_theta + jitter I``,
  ``nu ~ N(0, I)`` (paper section 4, GPflow's GPMC):
  ``log p(theta, nu | y) = sum_i log p(y_i | f_i) + log N(nu | 0, I) + log p_0(theta) + log |J|``.

Parameters (decided once): a particle holds unconstrained values
``theta_u``; the constrained hyperparameters are ``softplus(theta_u)``
(ARD lengthscales, the signal variance, and for regression the noise
variance ``sigma^2``), with the log-Jacobian ``sum log sigmoid(theta_u)``.
Priors: Gamma(shape 1, scale 2) on every constrained hyperparameter (paper
section 5.1). ``ml=True`` drops the priors and the Jacobian (the authors'
regression code differentiates the log marginal likelihood only; with one
particle SVGD then finds the type-II maximum-likelihood estimate, the paper's
J = 1 remark).

Every per-particle quantity needs a Cholesky factor of an ``N x N`` matrix.
Targets evaluate the particles one at a time (``lax.map``) in programs lowered
for the CPU, so each factorisation is a single-matrix LAPACK call (see
:mod:`steinax._linalg`), and batched on accelerators. Predictions map over the
particles on every platform (memory: one particle's ``N_new x N`` matrices at a time).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._linalg import per_particle
from steinax._validation import is_concrete
from steinax.targets.base import AbstractTarget

__all__ = ["KERNELS", "LIKELIHOODS", "Hyperparameters", "GPRegression", "LatentGP", "SparseGP", "kernel_matrix",
           "gaussian_log_marginal",
           "kmeans_inducing_points", "map_estimate", "type2_ml"]

KERNELS = ("se", "matern32")
LIKELIHOODS = ("bernoulli_probit", "bernoulli_logit", "poisson")
_PRIOR_SHAPE = 1.0
_PRIOR_SCALE = 2.0


def _tinygp_kernel(name: str, lengthscale: jax.Array, variance: jax.Array):
    from tinygp import kernels, transforms

    if name == "se":
        base = kernels.ExpSquared()  # exp(-r^2 / 2)
    else:
        base = kernels.Matern32(distance=kernels.distance.L2Distance())  # (1 + sqrt(3) r) exp(-sqrt(3) r)
    return variance * transforms.Linear(1.0 / lengthscale, base)


@jax.custom_vjp
def gaussian_log_marginal(C: jax.Array, y: jax.Array) -> jax.Array:
    """``log N(y | 0, C)`` by one Cholesky factorisation, with the analytic gradient.

    The gradient (Rasmussen & Williams 2006, eq. 5.9) is
    ``d/dC = (alpha alpha^T - C^{-1}) / 2`` and ``d/dy = -alpha`` with
    ``alpha = C^{-1} y``: one more ``cho_solve`` against the identity, about 4x
    cheaper on CPU than differentiating through the Cholesky factorisation.
    """
    return _gaussian_log_marginal_fwd(C, y)[0]


def _gaussian_log_marginal_fwd(C, y):
    L = jnp.linalg.cholesky(C)
    alpha = jax.scipy.linalg.cho_solve((L, True), y)
    value = -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * y.shape[0] * math.log(2 * math.pi)
    return value, (L, alpha)


def _gaussian_log_marginal_bwd(res, g):
    L, alpha = res
    c_inv = jax.scipy.linalg.cho_solve((L, True), jnp.eye(L.shape[0], dtype=L.dtype))
    return 0.5 * g * (jnp.outer(alpha, alpha) - c_inv), -g * alpha


gaussian_log_marginal.defvjp(_gaussian_log_marginal_fwd, _gaussian_log_marginal_bwd)


def kernel_matrix(name: str, lengthscale, variance, X1, X2) -> jax.Array:
    """``k(X1, X2)`` ``[N1, N2]`` for the ARD kernel ``name`` (``"se"``: ``v exp(-r^2/2)``, ``"matern32"``:
    ``v (1 + sqrt(3) r) exp(-sqrt(3) r)``, with ``r^2 = sum_d ((x_d - x'_d) / l_d)^2``), by tinygp."""
    return _tinygp_kernel(name, lengthscale, variance)(X1, X2)


class Hyperparameters(eqx.Module):
    """Constrained hyperparameters of one particle: ARD ``lengthscale`` ``[D]``, ``variance``, ``noise`` (or ``None``)."""

    lengthscale: jax.Array
    variance: jax.Array
    noise: jax.Array | None = None


def _softplus_inverse(c):
    c = jnp.asarray(c)
    return c + jnp.log(-jnp.expm1(-c))


def _gamma_logpdf(c):
    """Gamma(shape 1, scale 2) log-density (the paper's hyperparameter prior)."""
    return (_PRIOR_SHAPE - 1.0) * jnp.log(c) - c / _PRIOR_SCALE - _PRIOR_SHAPE * math.log(_PRIOR_SCALE) \
        - math.lgamma(_PRIOR_SHAPE)


def _check_inputs(X, y, name_X="X", name_y="y"):
    X = np.asarray(X, dtype=float) if is_concrete(X) else X
    y = np.asarray(y, dtype=float) if is_concrete(y) else y
    if np.ndim(X) == 1:
        X = X[:, None]
    if np.ndim(X) != 2:
        raise ValueError(f"`{name_X}` must be [N, D]; received shape {np.shape(X)}")
    if np.ndim(y) != 1:
        raise ValueError(f"`{name_y}` must be [N]; received shape {np.shape(y)}")
    if np.shape(X)[0] != np.shape(y)[0]:
        raise ValueError(
            f"`{name_X}` and `{name_y}` must have the same number of rows; received {np.shape(X)[0]} and {np.shape(y)[0]}"
        )
    if is_concrete(X):
        bad = np.flatnonzero(~np.all(np.isfinite(X), axis=1))
        if bad.size:
            raise ValueError(f"`{name_X}` must be finite; rows {bad[:5].tolist()} hold NaN or inf")
    if is_concrete(y):
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise ValueError(f"`{name_y}` must be finite; entries {bad[:5].tolist()} are NaN or inf")
    return jnp.asarray(X), jnp.asarray(y)


def _check_likelihood_data(likelihood, X, y):
    """:func:`_check_inputs`, then binary labels (mapped to {0, 1}) or non-negative integer counts."""
    X, y = _check_inputs(X, y)
    if likelihood.startswith("bernoulli") and is_concrete(y):
        from steinax.datasets import check_binary_labels

        y = jnp.asarray(check_binary_labels(np.asarray(y)), X.dtype)
    if likelihood == "poisson" and is_concrete(y):
        yn = np.asarray(y)
        bad = (yn < 0) | (yn != np.round(yn))
        if np.any(bad):
            raise ValueError("`y` must hold non-negative integer counts for a Poisson likelihood; "
                             f"received values such as {yn[bad][:5].tolist()}")
    return X, y


def _mixture_moments(mu, var):
    """Mean and variance ``[N*]`` of the equal-weight mixture of ``N(mu_j, var_j)`` (rows ``j``)."""
    mean = jnp.mean(mu, axis=0)
    return mean, jnp.mean(var + mu * mu, axis=0) - mean * mean


def _mixture_log_predictive(mu, var, y):
    """``mean_i log avg_j N(y_i | mu_ji, var_ji)``."""
    logp = -0.5 * (jnp.log(2 * jnp.pi * var) + (y[None] - mu) ** 2 / var)
    return jnp.mean(jax.scipy.special.logsumexp(logp, axis=0) - jnp.log(mu.shape[0]))


def _marginal_samples(rng_key, mu, var, num_samples):
    """``[J, K, N*]``: ``K`` draws of ``N(mu_j, var_j)`` per row ``j`` (Algorithm 2, marginal at each point)."""
    z = jax.random.normal(rng_key, (mu.shape[0], num_samples, mu.shape[1]), mu.dtype)
    return mu[:, None, :] + jnp.sqrt(jnp.maximum(var, 0.0))[:, None, :] * z


class _GPBase(AbstractTarget):
    X: jax.Array
    y: jax.Array
    kernel: str = eqx.field(static=True, default="se")
    ml: bool = eqx.field(static=True, default=False)
    jitter: float = eqx.field(static=True, default=1e-6)

    def _check_common(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"`kernel` must be one of {KERNELS}; received {self.kernel!r}")
        if not self.jitter >= 0:
            raise ValueError(f"`jitter` must be >= 0; received {self.jitter!r}")

    @property
    def num_inputs(self) -> int:
        return int(self.X.shape[1])

    @property
    def num_data(self) -> int:
        return int(self.X.shape[0])

    def _new_inputs(self, X_new, y_new=None):
        """``X_new`` (and ``y_new``) checked as the training inputs: ``[N*, D]`` with the model's ``D`` columns
        (a 1-D array is one column, so only for ``D = 1``; before, a wrong width broadcast to wrong numbers)."""
        X_new, y_checked = _check_inputs(X_new, np.zeros(np.shape(X_new)[0]) if y_new is None else y_new, "X_new", "y_new")
        if X_new.shape[1] != self.num_inputs:
            raise ValueError(f"`X_new` must have {self.num_inputs} columns, as the training inputs `X`; received shape "
                             f"{tuple(np.shape(X_new))}")
        return X_new if y_new is None else (X_new, y_checked)

    @property
    def _has_noise(self) -> bool:
        """Whether the hyperparameters include a Gaussian noise variance (the last one)."""
        return False

    @property
    def num_hyperparameters(self) -> int:
        return self.num_inputs + 1 + (1 if self._has_noise else 0)

    def hyperparameters(self, theta: jax.Array) -> Hyperparameters:
        """The constrained hyperparameters of one particle (``softplus`` of its first entries)."""
        c = jax.nn.softplus(theta[: self.num_hyperparameters])
        D = self.num_inputs
        return Hyperparameters(c[:D], c[D], c[D + 1] if self._has_noise else None)

    def _hyper_logprior(self, theta):
        """``log p_0(softplus(theta_u)) + log |J|`` (0 with ``ml=True``)."""
        if self.ml:
            return jnp.zeros((), theta.dtype)
        u = theta[: self.num_hyperparameters]
        return jnp.sum(_gamma_logpdf(jax.nn.softplus(u))) + jnp.sum(jax.nn.log_sigmoid(u))

    def _gram(self, hyp: Hyperparameters, X1, X2=None):
        return kernel_matrix(self.kernel, hyp.lengthscale, hyp.variance, X1, X1 if X2 is None else X2)

    def evaluate(self, rng_key, particles):
        """Log-densities and scores, one particle at a time (single-matrix Cholesky factorisations)."""
        del rng_key
        return per_particle(jax.value_and_grad(self.logdensity), particles)

    def _init_hyper(self, rng_key, n, dtype):
        """``[n, num_hyperparameters]`` unconstrained values drawn from the Gamma(1, scale 2) priors."""
        c = jax.random.gamma(rng_key, _PRIOR_SHAPE, (n, self.num_hyperparameters), dtype) * _PRIOR_SCALE
        return _softplus_inverse(jnp.maximum(c, 1e-3))


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
