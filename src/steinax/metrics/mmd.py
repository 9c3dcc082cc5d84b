"""Maximum mean discrepancy between two particle sets."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from steinax._validation import check_particles
from steinax.kernels.base import RBF, AbstractKernel

__all__ = ["mmd2"]


def mmd2(x: jax.Array, y: jax.Array, bandwidth: float | AbstractKernel = 1.0, estimator: str = "v") -> jax.Array:
    """Squared MMD between the samples ``x`` ``[n, d]`` and ``y`` ``[m, d]`` (Gretton et al. 2012).

    .. math::

        \\widehat{\\mathrm{MMD}}^2_V = \\frac{1}{n^2}\\sum_{i,j} k(x_i, x_j)
            + \\frac{1}{m^2}\\sum_{i,j} k(y_i, y_j) - \\frac{2}{nm}\\sum_{i,j} k(x_i, y_j),

    the U-statistic (``estimator="u"``) drops the diagonals of the first two sums.
    The kernel is ``RBF(bandwidth)``, ``exp(-||x - y||^2 / h)`` (or any resolved kernel).
    """
    x = check_particles(x, "x")
    y = check_particles(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"`x` and `y` must have the same dimension; received {x.shape} and {y.shape}")
    if estimator not in ("u", "v"):
        raise ValueError(f"`estimator` must be 'u' or 'v'; received {estimator!r}")
    kernel = bandwidth if isinstance(bandwidth, AbstractKernel) else RBF(bandwidth)
    kernel = kernel.resolve(jnp.concatenate([x, y]).astype(jnp.result_type(x, y)))
    n, m = x.shape[0], y.shape[0]
    kxx, kyy, kxy = kernel.gram(x, x), kernel.gram(y, y), kernel.gram(x, y)
    if estimator == "v":
        return jnp.sum(kxx) / float(n * n) + jnp.sum(kyy) / float(m * m) - 2.0 * jnp.sum(kxy) / float(n * m)
    if n < 2 or m < 2:
        raise ValueError("the U-statistic MMD needs at least 2 samples in each set")
    return (
        (jnp.sum(kxx) - jnp.trace(kxx)) / float(n * (n - 1))
        + (jnp.sum(kyy) - jnp.trace(kyy)) / float(m * (m - 1))
        - 2.0 * jnp.sum(kxy) / float(n * m)
    )
