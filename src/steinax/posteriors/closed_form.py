"""The suite's posteriors with exact draws and closed-form moments.

Each is a target with ``sample(rng_key, n)`` (exact, i.i.d.) and ``moments()``
(the exact per-coordinate mean and standard deviation), so its reference needs no MCMC.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from steinax.targets.toys import Gaussian, GaussianMixture, _ToyTarget

__all__ = ["Funnel", "Banana", "funnel", "banana", "separated_mixture", "ill_conditioned_gaussian", "moments"]


class Funnel(_ToyTarget):
    """Neal's funnel: ``v ~ N(0, 3^2)``, ``x_k | v ~ N(0, exp(v))`` for ``k = 1..d-1`` (Neal 2003)."""

    dim: int = 10

    def logdensity(self, x):
        v, rest = x[0], x[1:]
        return -(v**2) / 18.0 - 0.5 * jnp.sum(rest**2) * jnp.exp(-v) - 0.5 * (self.dim - 1) * v

    def sample(self, rng_key, n):
        kv, kx = jax.random.split(rng_key)
        v = 3.0 * jax.random.normal(kv, (n, 1))
        return jnp.concatenate([v, jnp.exp(v / 2.0) * jax.random.normal(kx, (n, self.dim - 1))], axis=1)

    def moments(self):
        """``v``: mean 0, sd 3; ``x_k``: mean 0, sd ``sqrt(E exp(v)) = exp(9 / 4)``."""
        sd = np.full(self.dim, np.exp(9.0 / 4.0))
        sd[0] = 3.0
        return np.zeros(self.dim), sd


class Banana(_ToyTarget):
    """The inference gym's banana: ``x_1 ~ N(0, 10^2)``, ``x_2 | x_1 ~ N(b (x_1^2 - 100), 1)``, ``b = 0.03``."""

    curvature: float = 0.03

    @property
    def dim(self) -> int:
        return 2

    def logdensity(self, x):
        return -0.5 * (x[0] / 10.0) ** 2 - 0.5 * (x[1] - self.curvature * (x[0] ** 2 - 100.0)) ** 2

    def sample(self, rng_key, n):
        k1, k2 = jax.random.split(rng_key)
        x1 = 10.0 * jax.random.normal(k1, (n,))
        x2 = self.curvature * (x1**2 - 100.0) + jax.random.normal(k2, (n,))
        return jnp.stack([x1, x2], axis=1)

    def moments(self):
        """``x_2``: mean 0, variance ``1 + b^2 Var(x_1^2) = 1 + 2 b^2 10^4``."""
        return np.zeros(2), np.array([10.0, np.sqrt(1.0 + 2.0 * self.curvature**2 * 1e4)])


def funnel(dim: int = 10) -> Funnel:
    return Funnel(dim=dim)


def banana() -> Banana:
    return Banana()


def separated_mixture() -> GaussianMixture:
    """Two unit Gaussians 8 sds apart in 2-D, weights 0.3 and 0.7 (a sampler must split the particles 30/70)."""
    return GaussianMixture(jnp.array([0.3, 0.7]), jnp.array([[-4.0, 0.0], [4.0, 0.0]]), jnp.stack([jnp.eye(2)] * 2))


def ill_conditioned_gaussian(dim: int = 100, seed: int = 0) -> Gaussian:
    """``N(0, Q diag(s^2) Q^T)``, ``s`` log-spaced from 0.1 to 10 (condition number 1e4), ``Q`` a fixed random rotation."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    s = np.logspace(-1, 1, dim)
    cov = (q * s**2) @ q.T
    return Gaussian(jnp.zeros(dim), jnp.asarray(0.5 * (cov + cov.T)))


def moments(target) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-coordinate ``(mean, sd)`` of a closed-form target of this module."""
    if isinstance(target, Gaussian):
        return np.asarray(target.mean, np.float64), np.sqrt(np.diag(np.asarray(target.cov, np.float64)))
    if isinstance(target, GaussianMixture):
        w = np.asarray(target.weights, np.float64)
        mu = np.asarray(target.means, np.float64)
        var = np.stack([np.diag(np.asarray(c, np.float64)) for c in target.covs])
        mean = w @ mu
        return mean, np.sqrt(w @ (var + mu**2) - mean**2)
    return target.moments()
