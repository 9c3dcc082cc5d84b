"""The suite's posteriors with exact draws and closed-form moments.

Each is a target with ``sample(rng_key, n)`` (exact, i.i.d.) and ``moments()``
(the exact per-coordinate mean and standard deviation), so its reference needs no MCMC.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from steinax.targets.toys import Gaussian, GaussianMixture, _ToyTarget

__all__ = ["Funnel", "Banana", "funnel", "banana", "separated_mixture", "ill_conditioned_gaussian", "moments",
           "brownian_motion_moments"]


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


def brownian_motion_moments(observed, observed_mask, *, grid_size: int = 300, log_scale_range=(-16.0, 3.0),
                            prior_sd: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-coordinate ``(mean, sd)`` of the Brownian-motion posterior (:func:`~steinax.posteriors.models.brownian_motion`)
    in its unconstrained coordinates ``(log sigma_inn, locs[0..T-1], log sigma_obs)`` (the target's flat order), by
    quadrature: an independent ground truth for the NUTS reference.

    Given the two scales the model is linear-Gaussian, so the locations integrate out exactly. With
    ``u = log sigma_inn``, ``v = log sigma_obs`` (each ``N(0, prior_sd^2)``: the ``LogNormal(0, 2)`` priors in
    log space), ``A_ts = min(t, s) + 1`` the random walk's covariance and ``o`` the observed indices,

    .. math::

        p(u, v \\mid y) \\propto N(y_o; 0, e^{2u} A_{oo} + e^{2v} I)\\, N(u; 0, 2^2)\\, N(v; 0, 2^2),

    and ``x | u, v, y`` is Gaussian with precision ``P = e^{-2u} A^{-1} + e^{-2v} M`` (``M`` the
    observation mask) and mean ``P^{-1} e^{-2v} M y``. The ``(u, v)`` integrals are sums over a
    ``grid_size^2`` grid on ``log_scale_range`` (the integrand is smooth and decays like a Gaussian,
    so the sum converges fast: on the suite's data 300 and 900 points agree to 1e-11 sd). The range
    must hold the left tail of ``log sigma_obs``, where the prior alone decays (the likelihood stays
    finite as the observation noise vanishes): cut at -7, its sd would be 0.8% low. The locations'
    moments are the grid-weighted mixture of the conditional Gaussians'.
    """
    y = np.asarray(observed, np.float64)
    mask = np.asarray(observed_mask, bool)
    t = np.arange(y.shape[0])
    a = np.minimum.outer(t, t) + 1.0
    w, vecs = np.linalg.eigh(a[np.ix_(mask, mask)])
    z = vecs.T @ y[mask]
    g = np.linspace(*log_scale_range, grid_size)
    u, v = (c.ravel() for c in np.meshgrid(g, g, indexing="ij"))
    lam = np.exp(2 * u)[:, None] * w[None, :] + np.exp(2 * v)[:, None]
    logp = (-0.5 * np.sum(np.log(lam) + z**2 / lam, axis=1) - 0.5 * (u**2 + v**2) / prior_sd**2)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    keep = p > 1e-14 * p.max()  # the conditional Gaussians only where the weight counts
    u, v, p = u[keep], v[keep], p[keep] / p[keep].sum()
    a_inv = np.linalg.inv(a)
    prec = np.exp(-2 * u)[:, None, None] * a_inv[None] + (np.exp(-2 * v)[:, None] * mask[None, :])[:, :, None] * np.eye(t.size)
    cov = np.linalg.inv(prec)
    mean_x = np.einsum("gij,gj->gi", cov, np.exp(-2 * v)[:, None] * np.where(mask, y, 0.0)[None, :])
    ex = p @ mean_x
    ex2 = p @ (mean_x**2 + np.diagonal(cov, axis1=1, axis2=2))
    eu, ev = p @ u, p @ v
    mean = np.concatenate([[eu], ex, [ev]])
    sd = np.sqrt(np.concatenate([[p @ u**2 - eu**2], ex2 - ex**2, [p @ v**2 - ev**2]]))
    return mean, sd
