"""Toy targets with closed-form log-densities and, where possible, exact samples.

* :class:`Gaussian` (any dimension, by covariance or precision),
* :class:`GaussianMixture` (any dimension; :func:`gmm_1d` and :func:`gmm_2d` build the usual ones),
* the 2-D toys of the matrix-SVGD paper (Wang et al. 2019, appendix B):
  :func:`star`, :class:`DoubleBanana`, :class:`Sine`.

Where the authors' code and the paper differ (ALGORITHMS.md section C) the
default is the paper's formula and ``variant="code"`` gives the code's.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax.targets.base import AbstractTarget

__all__ = ["Gaussian", "GaussianMixture", "gmm_1d", "gmm_2d", "star", "DoubleBanana", "Sine"]


def _check_variant(variant: str) -> None:
    if variant not in ("paper", "code"):
        raise ValueError(f"`variant` must be 'paper' or 'code'; received {variant!r}")


class _ToyTarget(AbstractTarget):
    """A target with an analytic log-density; scores by ``jax.grad``."""

    def evaluate(self, rng_key, particles):
        del rng_key
        return jax.vmap(jax.value_and_grad(self.logdensity))(particles)

    @property
    def has_samples(self) -> bool:
        return True

    def sample(self, rng_key: jax.Array, n: int) -> jax.Array:
        """``[n, d]`` exact samples."""
        raise NotImplementedError


class Gaussian(_ToyTarget):
    """Multivariate normal ``N(mean, cov)``; normalised log-density.

    Use :meth:`from_precision` when the matrix at hand is a precision (the
    Liu & Wang demo's ``A``; ALGORITHMS.md section A).
    """

    mean: jax.Array
    cov: jax.Array
    chol: jax.Array
    precision: jax.Array

    def __init__(self, mean, cov):
        mean = jnp.asarray(mean, dtype=jnp.result_type(float))
        cov = jnp.asarray(cov, dtype=mean.dtype)
        if mean.ndim != 1 or cov.shape != (mean.shape[0], mean.shape[0]):
            raise ValueError(
                f"`mean` must have shape [d] and `cov` shape [d, d]; received {mean.shape} and {cov.shape}"
            )
        chol = jnp.linalg.cholesky(cov)
        if not bool(jnp.all(jnp.isfinite(chol))):
            raise ValueError("`cov` must be symmetric positive definite; its Cholesky factorisation failed")
        self.mean, self.cov, self.chol = mean, cov, chol
        eye = jnp.eye(mean.shape[0], dtype=mean.dtype)
        self.precision = jax.scipy.linalg.cho_solve((chol, True), eye)

    @classmethod
    def from_precision(cls, mean, precision) -> "Gaussian":
        return cls(mean, jnp.linalg.inv(jnp.asarray(precision, dtype=jnp.result_type(float))))

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def logdensity(self, x):
        z = jax.scipy.linalg.solve_triangular(self.chol, x - self.mean, lower=True)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(self.chol)))
        return -0.5 * (jnp.sum(z * z) + logdet + self.dim * math.log(2 * math.pi))

    def sample(self, rng_key, n):
        z = jax.random.normal(rng_key, (n, self.dim), self.mean.dtype)
        return self.mean[None, :] + z @ self.chol.T

    def hessian(self, x):
        return -self.precision


class GaussianMixture(_ToyTarget):
    """Mixture ``sum_k w_k N(mu_k, Sigma_k)``; normalised log-density."""

    weights: jax.Array
    means: jax.Array
    covs: jax.Array
    chols: jax.Array

    def __init__(self, weights, means, covs):
        dt = jnp.result_type(float)
        weights = jnp.asarray(weights, dt)
        means = jnp.asarray(means, dt)
        covs = jnp.asarray(covs, dt)
        if means.ndim != 2 or weights.shape != (means.shape[0],) or covs.shape != means.shape + (means.shape[1],):
            raise ValueError(
                "`weights` [K], `means` [K, d] and `covs` [K, d, d] must agree; received "
                f"{weights.shape}, {means.shape}, {covs.shape}"
            )
        if bool(jnp.any(weights <= 0)):
            raise ValueError(f"`weights` must be positive; received {np.asarray(weights).tolist()}")
        self.weights = weights / jnp.sum(weights)
        self.means, self.covs = means, covs
        self.chols = jnp.linalg.cholesky(covs)

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def logdensity(self, x):
        def comp(mu, chol):
            z = jax.scipy.linalg.solve_triangular(chol, x - mu, lower=True)
            return -0.5 * jnp.sum(z * z) - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * self.dim * math.log(2 * math.pi)

        return jax.scipy.special.logsumexp(jnp.log(self.weights) + jax.vmap(comp)(self.means, self.chols))

    def sample(self, rng_key, n):
        k_comp, k_z = jax.random.split(rng_key)
        comp = jax.random.choice(k_comp, self.weights.shape[0], (n,), p=self.weights)
        z = jax.random.normal(k_z, (n, self.dim), self.means.dtype)
        return self.means[comp] + jnp.einsum("nij,nj->ni", self.chols[comp], z)


def gmm_1d(weights=(0.25, 0.75), means=(-2.0, 2.5), stds=(1.0, 1.0)) -> GaussianMixture:
    """1-D mixture; the default is the DUSVGD paper's ``1/4 N(-2, 1) + 3/4 N(2.5, 1)`` (ALGORITHMS.md section E)."""
    means = jnp.asarray(means, jnp.result_type(float))[:, None]
    covs = (jnp.asarray(stds, means.dtype) ** 2)[:, None, None]
    return GaussianMixture(weights, means, covs)


def gmm_2d(weights=(0.5, 0.5), means=((-2.0, 0.0), (2.0, 0.0)), cov_scale=1.0) -> GaussianMixture:
    """2-D mixture of isotropic components (default: two unit Gaussians at ``(+-2, 0)``)."""
    means = jnp.asarray(means, jnp.result_type(float))
    covs = jnp.broadcast_to(cov_scale * jnp.eye(2, dtype=means.dtype), (means.shape[0], 2, 2))
    return GaussianMixture(weights, means, covs)


def star(n_components: int = 5, skewness: float = 100.0, radius: float = 1.5, variant: str = "paper") -> GaussianMixture:
    """The "star" mixture of the matrix-SVGD paper (appendix B.3).

    ``p(x) = (1/K) sum_i N(x; mu_i, Sigma_i)``, ``mu_{i+1} = U mu_i``,
    ``Sigma_{i+1} = U Sigma_i U^T``, ``U`` the rotation by ``theta = 2 pi / K``.

    Variants (ALGORITHMS.md section C):

    * ``"paper"`` (default): the text, ``mu_1 = [0, 1.5]``,
      ``Sigma_1 = diag(1, 1/100)``. Taken literally each component is
      elongated across its radius, so the five arms are tangential.
    * ``"code"``: the authors' code, ``mu_1 = [1.5, 0]``,
      ``Sigma_1 = diag(1, 1/100)``: components elongated along the radius,
      the star of the paper's figures (which swap the plot axes).
    """
    _check_variant(variant)
    dt = jnp.result_type(float)
    mu = jnp.array([0.0, radius] if variant == "paper" else [radius, 0.0], dt)
    sig = jnp.diag(jnp.array([1.0, 1.0 / skewness], dt))
    th = 2 * math.pi / n_components
    rot = jnp.array([[math.cos(th), math.sin(th)], [-math.sin(th), math.cos(th)]], dt)
    means, covs = [], []
    for _ in range(n_components):
        means.append(mu)
        covs.append(sig)
        mu, sig = rot @ mu, rot @ sig @ rot.T
    return GaussianMixture(jnp.ones(n_components, dt), jnp.stack(means), jnp.stack(covs))


def _rejection_from_prior(rng_key, n, dim, prior_var, loglik_fn, dtype, max_rounds=1000):
    """Exact samples of ``N(0, prior_var I) * exp(loglik)`` when ``loglik <= 0``, by rejection."""
    out, have = [], 0
    batch = max(4096, 20 * n)
    loglik = jax.jit(jax.vmap(loglik_fn))
    for i in range(max_rounds):
        k1, k2 = jax.random.split(jax.random.fold_in(rng_key, i))
        prop = math.sqrt(prior_var) * jax.random.normal(k1, (batch, dim), dtype)
        acc = jnp.log(jax.random.uniform(k2, (batch,), dtype)) < loglik(prop)
        got = np.asarray(prop)[np.asarray(acc)]
        out.append(got)
        have += got.shape[0]
        if have >= n:
            return jnp.asarray(np.concatenate(out)[:n])
    raise RuntimeError(f"rejection sampling accepted only {have} of {n} samples after {max_rounds} rounds")


class _ResidualTarget(_ToyTarget):
    """``log p(x) = -||x||^2 / (2 sigma_prior) - r(x)^q / (2 sigma_lik)`` for a residual ``r``.

    The shared structure of the matrix-SVGD toys: exact samples by rejection
    from the ``N(0, sigma_prior I)`` prior (the likelihood factor is at most 1),
    and the Gauss-Newton matrix ``I / sigma_prior + J J^T / sigma_lik`` with
    ``J = nabla r`` (the negative Hessian for ``q = 2`` wherever ``r = 0``).
    """

    dim = 2

    @abc.abstractmethod
    def residual(self, x: jax.Array) -> jax.Array:
        """The scalar residual ``r(x)``."""

    power: eqx.AbstractVar[int]
    sigma_prior: eqx.AbstractVar[float]
    sigma_lik: eqx.AbstractVar[float]

    def _loglik(self, x):
        return -(self.residual(x) ** self.power) / (2 * self.sigma_lik)

    def logdensity(self, x):
        return -jnp.sum(x * x) / (2 * self.sigma_prior) + self._loglik(x)

    def gauss_newton(self, x):
        j = jax.grad(self.residual)(x)
        return jnp.eye(2, dtype=x.dtype) / self.sigma_prior + jnp.outer(j, j) / self.sigma_lik

    def sample(self, rng_key, n):
        return _rejection_from_prior(rng_key, n, 2, self.sigma_prior, self._loglik, jnp.result_type(float))


class DoubleBanana(_ResidualTarget):
    """The "double banana" of Detommaso et al. (2018), matrix-SVGD paper appendix B.2.

    ``log p(x) = -||x||^2 / (2 sigma_1) - (y - F(x))^2 / (2 sigma_2)``,
    ``F(x) = log((a - x_1)^2 + 100 (x_2 - x_1^2)^2 + eps)``,
    ``y = log 30``, ``sigma_1 = 1``, ``sigma_2 = 0.09``.

    ``variant="paper"`` (default): ``a = 1``, ``eps = 0``.
    ``variant="code"``: the authors' code, ``a = 0``, ``eps = 1e-10``.
    """

    a: float = eqx.field(static=True)
    eps: float = eqx.field(static=True)
    y: float = eqx.field(static=True)
    power: int = eqx.field(static=True)
    sigma_prior: float = eqx.field(static=True)
    sigma_lik: float = eqx.field(static=True)

    def __init__(self, variant: str = "paper"):
        _check_variant(variant)
        self.a, self.eps = (1.0, 0.0) if variant == "paper" else (0.0, 1e-10)
        self.y, self.power, self.sigma_prior, self.sigma_lik = math.log(30.0), 2, 1.0, 0.09

    def residual(self, x):
        return jnp.log((self.a - x[0]) ** 2 + 100.0 * (x[1] - x[0] ** 2) ** 2 + self.eps) - self.y


class Sine(_ResidualTarget):
    """The "sine" toy of the matrix-SVGD paper, appendix B.1.

    ``log p(x) = -(x_2 + sin(alpha x_1))^q / (2 sigma_1) - (x_1^2 + x_2^2) / (2 sigma_2)``,
    ``alpha = 1``, ``sigma_1 = 0.003``, ``sigma_2 = 1``.

    ``variant="paper"`` (default): ``q = 2``, as printed.
    ``variant="code"``: ``q = 4``; the authors' code squares the already squared residual.
    """

    alpha: float = eqx.field(static=True)
    power: int = eqx.field(static=True)
    sigma_prior: float = eqx.field(static=True)
    sigma_lik: float = eqx.field(static=True)

    def __init__(self, variant: str = "paper"):
        _check_variant(variant)
        self.power = 2 if variant == "paper" else 4
        self.alpha, self.sigma_lik, self.sigma_prior = 1.0, 0.003, 1.0

    def residual(self, x):
        return x[1] + jnp.sin(self.alpha * x[0])
