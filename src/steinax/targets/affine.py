"""A target in affine coordinates: ``x = shift + L z``, so that a method run on ``z`` sees a whitened target.

Real posteriors are not standardised: scales differ by orders of magnitude and coordinates correlate near +-1, and
no particle method's kernel, step or settle rule is invariant to an affine change of coordinates. Given an estimate
of the posterior's location and shape (a warm start's mean and covariance, or the particles' own), running the
method on

.. math::

    \\log q(z) = \\log p(\\mathrm{shift} + L z) + \\log |\\det L|, \\qquad
    \\nabla_z \\log q(z) = L^\\top \\nabla_x \\log p(x)

makes it see a target with about unit scale and no correlation: for a Gaussian ``p = N(m, L L^T)`` exactly
``N(0, I)``. The particles map back by :meth:`AffineMap.forward` (``postprocess`` does it for results).

**Decided here:** ``L`` is lower triangular with a positive diagonal (a Cholesky factor of the covariance), so
``log |det L|`` is the sum of the logs of its diagonal and the inverse map is one triangular solve. One score per
particle per step: the scores of ``p`` at ``x`` times ``L`` (a ``[n, d] x [d, d]`` product).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.targets.base import AbstractTarget, as_target, evaluate

__all__ = ["AffineMap", "AffineTarget"]


class AffineMap(eqx.Module):
    """``x = shift + z L^T`` (rows), ``L`` lower triangular with a positive diagonal (module docstring).

    Attributes:
        shift: ``[d]``.
        matrix: ``[d, d]`` ``L``.
    """

    shift: jax.Array
    matrix: jax.Array

    def __check_init__(self):
        shift, matrix = jnp.asarray(self.shift), jnp.asarray(self.matrix)
        d = shift.shape[-1] if shift.ndim == 1 else -1
        if shift.ndim != 1 or matrix.shape != (d, d):
            raise ValueError(f"`shift` must be [d] and `matrix` [d, d]; received shapes {tuple(shift.shape)} and "
                             f"{tuple(matrix.shape)}")

    @classmethod
    def from_moments(cls, mean, cov) -> AffineMap:
        """The map of ``N(mean, cov)`` to ``N(0, I)``: ``L`` the Cholesky factor of ``cov`` (symmetrised; a matrix
        that is not positive definite raises, naming its smallest eigenvalue)."""
        return _checked(cls(*_factor(jnp.asarray(mean), jnp.asarray(cov))), cov)

    @classmethod
    def from_particles(cls, particles, ridge: float = 1e-6) -> AffineMap:
        """The particles' mean and covariance. With no more particles than dimensions the sample covariance is
        singular, and ``ridge`` times its mean diagonal is added; otherwise nothing is (a ridge ``c I`` would make the
        map depend on the coordinate axes: the map of linearly reparameterised particles would not be the
        reparameterised map)."""
        mean, cov = _moments(jnp.asarray(particles), ridge)
        return cls.from_moments(mean, cov)

    def compose(self, inner: AffineMap) -> AffineMap:
        """The map ``z -> self.forward(inner.forward(z))``: shift ``self.forward(inner.shift)``, matrix
        ``self.matrix @ inner.matrix`` (lower triangular with a positive diagonal, as both are)."""
        if not isinstance(inner, AffineMap) or inner.dim != self.dim:
            raise ValueError(f"`inner` must be an AffineMap of {self.dim} coordinates; received "
                             f"{getattr(inner, 'dim', type(inner).__name__)}")
        return _compose(self, inner)

    def refit(self, particles) -> AffineMap:
        """This map composed with the particles' own mean and covariance in its coordinates, the covariance shrunk
        toward this map's (the identity there) with weight ``d / (n + d)``: ``n`` particles see at most ``n - 1``
        directions, and a direction they do not see keeps the scale this map gave it instead of a ridge's.

        Equivariant: particles and map reparameterised by ``x = A y + b`` give the reparameterised refit (the
        sample covariance and the identity both rotate with the coordinates). One compiled program."""
        refit, cov = _refit(self, jnp.asarray(particles))
        return _checked(refit, cov)

    @property
    def dim(self) -> int:
        return int(self.shift.shape[0])

    @eqx.filter_jit
    def forward(self, z: jax.Array) -> jax.Array:
        """``x`` of ``z`` (``[d]`` or ``[n, d]``)."""
        return z @ self.matrix.T + self._shift_like(z)

    @eqx.filter_jit
    def inverse(self, x: jax.Array) -> jax.Array:
        """``z`` of ``x`` (``[d]`` or ``[n, d]``): one triangular solve."""
        rows = jnp.atleast_2d(x - self._shift_like(x))
        z = jax.scipy.linalg.solve_triangular(self.matrix, rows.T, lower=True).T
        return z if jnp.ndim(x) == 2 else z[0]

    def _shift_like(self, a) -> jax.Array:
        return self.shift.reshape((1,) * (jnp.ndim(a) - 1) + (-1,))

    def log_det(self) -> jax.Array:
        """``log |det L|``."""
        return jnp.sum(jnp.log(jnp.abs(jnp.diag(self.matrix))))

    def pull_back_scores(self, scores: jax.Array) -> jax.Array:
        """Scores in ``z``: ``L^T s`` per row (``[d]`` or ``[n, d]``)."""
        return scores @ self.matrix


def _checked(affine: AffineMap, cov) -> AffineMap:
    """``affine``, or the error naming ``cov``'s smallest eigenvalue where its Cholesky factor is not finite."""
    if not bool(jnp.all(jnp.isfinite(affine.matrix))):
        cov = jnp.asarray(cov)
        raise ValueError(f"`cov` must be symmetric positive definite; its smallest eigenvalue is "
                         f"{float(jnp.linalg.eigvalsh(0.5 * (cov + cov.T))[0]):.3g}")
    return affine


@jax.jit
def _factor(mean, cov):
    """``(mean, L)``, ``L`` the Cholesky factor of ``cov`` symmetrised (NaN where it is not positive definite)."""
    return mean, jnp.linalg.cholesky(0.5 * (cov + cov.T))


@functools.partial(jax.jit, static_argnums=1)
def _moments(x, ridge: float):
    """The mean and covariance of the rows of ``x`` (ridged when ``n <= d``, :meth:`AffineMap.from_particles`)."""
    cov = jnp.atleast_2d(jnp.cov(x.T))
    if x.shape[0] <= x.shape[1]:
        cov = cov + ridge * jnp.mean(jnp.diag(cov)) * jnp.eye(x.shape[1], dtype=x.dtype)
    return jnp.mean(x, axis=0), cov


@jax.jit
def _compose(outer: AffineMap, inner: AffineMap) -> AffineMap:
    return AffineMap(shift=outer.forward(inner.shift), matrix=outer.matrix @ inner.matrix)


@jax.jit
def _refit(affine: AffineMap, particles):
    """:meth:`AffineMap.refit`'s map (unchecked) and the shrunk covariance it factored."""
    z = affine.inverse(particles)
    n, d = z.shape
    weight = d / (n + d)
    cov = (1.0 - weight) * jnp.atleast_2d(jnp.cov(z.T)) + weight * jnp.eye(d, dtype=z.dtype)
    return _compose(affine, AffineMap(*_factor(jnp.mean(z, axis=0), cov))), cov


class AffineTarget(AbstractTarget):
    """``target`` in the coordinates ``z`` of ``affine`` (module docstring); ``postprocess`` maps back to ``x`` and on
    to the target's own space."""

    target: AbstractTarget
    affine: AffineMap

    def __init__(self, target, affine: AffineMap):
        self.target = as_target(target)
        if not isinstance(affine, AffineMap):
            raise TypeError(f"`affine` must be a steinax.targets.AffineMap; received {type(affine).__name__}")
        dim = getattr(self.target, "dim", None)
        if isinstance(dim, int) and dim != affine.dim:
            raise ValueError(f"`affine` maps {affine.dim} coordinates; the target has {dim}")
        self.affine = affine

    @property
    def dim(self) -> int:
        return self.affine.dim

    @property
    def labels(self):
        return getattr(self.target, "labels", None)

    def evaluate(self, rng_key, particles):
        logd, scores = evaluate(self.target, rng_key, self.affine.forward(particles))
        logd = None if logd is None else logd + self.affine.log_det()
        return logd, self.affine.pull_back_scores(scores)

    def logdensity(self, z):
        return self.target.logdensity(self.affine.forward(z)) + self.affine.log_det()

    def score(self, z):
        return self.affine.pull_back_scores(self.target.score(self.affine.forward(z)))

    def postprocess(self, particles):
        return self.target.postprocess(self.affine.forward(particles))
