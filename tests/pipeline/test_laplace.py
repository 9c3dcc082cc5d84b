"""The MAP-and-Laplace warm start (issue 49): exact on a Gaussian whatever its units; Pathfinder where the density
has no maximum (a funnel's neck), saying so."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.pipeline import LaplaceStart
from steinax.targets import Gaussian

MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])


def test_the_laplace_normal_of_a_gaussian_is_the_gaussian():
    with jax.enable_x64(True):
        target = Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64))
        out = LaplaceStart()(target, jax.random.normal(jax.random.key(0), (50, 3), jnp.float64), jax.random.key(1))
        learnt = out.learnt["warm_start"]
        assert learnt["method"] == "laplace" and all(learnt["converged"]) and learnt["fallback_reason"] is None
        a = learnt["affine"]
        # L-BFGS stops at gradient norm 1e-6 |log p|: the MAP is within ~1e-6 of the mean in whitened units; the
        # Hessian of a quadratic is exact to rounding (its inverse's condition number is 4e8: float64 keeps ~8 digits)
        np.testing.assert_allclose(np.asarray(a.shift - MEAN) / np.sqrt(np.diag(COV)), 0.0, atol=1e-4)
        np.testing.assert_allclose(np.asarray(a.matrix @ a.matrix.T), np.asarray(COV), rtol=1e-6, atol=1e-12)
        assert out.particles.shape == (50, 3)


@pytest.mark.slow  # Pathfinder's compilation (about 20 s): CI's slow pass
def test_a_density_without_a_maximum_falls_back_to_pathfinder():
    def neck(x):  # y_j ~ N(theta_j, 1), theta_j ~ N(0, exp(tau)), tau flat: unbounded as tau -> -inf at theta = 0
        tau, theta = x[0], x[1:]
        y = jnp.array([1.0, -0.5, 0.8])
        return -0.5 * jnp.sum((y - theta) ** 2) - 0.5 * jnp.sum(theta**2) * jnp.exp(-2.0 * tau) - theta.size * tau

    with jax.enable_x64(True):
        x0 = jax.random.normal(jax.random.key(2), (40, 4), jnp.float64)
        learnt = LaplaceStart(maxiter=200)(neck, x0, jax.random.key(3)).learnt["warm_start"]
        assert learnt["method"] == "pathfinder" and learnt["fallback_reason"]
        assert "elbo" in learnt and learnt["affine"].dim == 4
