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


def _two_modes(weights=(0.1, 0.9)):
    """Two unit Gaussians 12 apart in the first coordinate (issue 56's target), weights as given."""
    from jax.scipy.special import logsumexp

    means, logw = jnp.array([[0.0, 0.0], [12.0, 0.0]]), jnp.log(jnp.asarray(weights))

    def logp(x):
        return logsumexp(logw - 0.5 * jnp.sum((x[None] - means) ** 2, axis=1))

    return logp


def test_every_distinct_optimum_seeds_its_own_particles():
    """Issue 56: a warm start that kept only the best optimum handed on one mode of two. From starts that reach both,
    both are kept, with their Laplace shares (exact here: equal unit Gaussians), and each seeds particles near it."""
    with jax.enable_x64(True):
        x0 = 10.0 * jax.random.normal(jax.random.key(100), (100, 2), jnp.float64)
        out = LaplaceStart()(_two_modes(), x0, jax.random.key(0))
        learnt = out.learnt["warm_start"]
        optima = learnt["optima"]
        assert learnt["method"] == "laplace" and len(optima) == 2
        # the Laplace mass of a unit Gaussian component is exact up to the other component's tail (e^-72): the shares
        # are the weights to rounding
        np.testing.assert_allclose([o["share"] for o in optima], [0.9, 0.1], atol=1e-12)
        # half equally, half by share: 100 * (0.25 + 0.45) = 70 and 100 * (0.25 + 0.05) = 30
        assert [o["particles"] for o in optima] == [70, 30]
        x = np.asarray(out.particles)
        assert np.sum(x[:, 0] > 6.0) == 70 and np.sum(x[:, 0] < 6.0) == 30
        assert sum(o["starts"] for o in optima) == learnt["search"]["converged"] == 16
        assert learnt["search"] == {"from_start": 4, "wide": 12, "spread": 3.0, "converged": 16}
        # the map is the mixture's: mean 0.7 * 12 = 8.4, variance 1 + 0.21 * 144 in the first coordinate
        a = learnt["affine"]
        np.testing.assert_allclose(np.asarray(a.shift), [8.4, 0.0], atol=1e-6)
        np.testing.assert_allclose(np.asarray(a.matrix @ a.matrix.T), np.diag([1 + 0.21 * 144, 1.0]), atol=1e-6)


def test_one_mode_found_from_many_starts_is_one_optimum():
    """Sixteen starts on a Gaussian converge to one optimum (within a sd of each other), counted once, and one Hessian
    is computed; the log-density evaluations of every L-BFGS run are counted."""
    with jax.enable_x64(True):
        target = Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64))
        learnt = LaplaceStart()(target, jax.random.normal(jax.random.key(0), (50, 3), jnp.float64),
                                jax.random.key(1)).learnt["warm_start"]
        assert len(learnt["optima"]) == 1 and learnt["optima"][0]["starts"] == 16
        assert learnt["hessian_evaluations"] == 3
        # at least one evaluation per iteration, plus one to start and one at the optimum per run
        assert learnt["evaluations"] >= sum(learnt["lbfgs_iterations"]) + 2 * 16


@pytest.mark.parametrize("kwargs, match", [({"starts": 0}, "`starts`"), ({"wide_starts": -1}, "`wide_starts`"),
                                           ({"spread": float("nan")}, "`spread`"), ({"min_share": 1.0}, "`min_share`"),
                                           ({"num_particles": 1}, "`num_particles`")])
def test_bad_settings_are_refused_when_made(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LaplaceStart(**kwargs)
