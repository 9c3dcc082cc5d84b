"""The correction's start (steinax.pipeline.choose_start): the hand-off with the smaller KSD in the warm start's
whitened coordinates; the same choice and values in any linear coordinates; a candidate with a non-finite score
loses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import IMQ
from steinax.pipeline import choose_start
from steinax.stein import ksd
from steinax.targets import AffineMap, Gaussian

MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])


def _draws(key, n, mean, cov):
    return mean[None] + jax.random.normal(key, (n, mean.shape[0]), mean.dtype) @ jnp.linalg.cholesky(cov).T


def test_the_better_candidate_wins_and_its_ksd_is_the_whitened_one():
    with jax.enable_x64(True):
        mean, cov = MEAN.astype(jnp.float64), COV.astype(jnp.float64)
        target = Gaussian(mean, cov)
        exact = _draws(jax.random.key(0), 200, mean, cov)
        collapsed = mean[None] + 0.2 * (exact - mean[None])  # the right mean, a fifth of the spread (SVGD's failure in high d)
        affine = AffineMap.from_moments(mean, cov)
        name, values = choose_start(target, {"collapsed": collapsed, "exact": exact}, affine)
        assert name == "exact" and values["exact"] < values["collapsed"]
        # the value is the squared V-statistic KSD with IMQ(1, -1/2) of the whitened points (N(0, I): score -z)
        z = affine.inverse(exact)
        np.testing.assert_allclose(values["exact"], float(ksd(z, -z, IMQ())), rtol=1e-10)  # float64 rounding


def test_the_choice_does_not_depend_on_the_targets_coordinates():
    """x = A y + b with a dense A (scales 1e-2 to 1e2): the same candidates, the same map refitted in y, the same
    values to float64 rounding (whitened coordinates differ by a rotation, which IMQ's KSD does not see)."""
    with jax.enable_x64(True):
        mean, cov = MEAN.astype(jnp.float64), COV.astype(jnp.float64)
        rng = np.random.default_rng(0)
        a = jnp.asarray(np.linalg.qr(rng.normal(size=(3, 3)))[0] @ np.diag([1e-2, 1.0, 1e2]))
        b = jnp.asarray(rng.normal(size=3))
        a_inv = jnp.linalg.inv(a)
        exact = _draws(jax.random.key(1), 150, mean, cov)
        shifted = exact + 0.5 * jnp.sqrt(jnp.diag(cov))[None]
        values = []
        for to, t_mean, t_cov in ((lambda x: x, mean, cov),
                                  (lambda x: (x - b[None]) @ a_inv.T, a_inv @ (mean - b), a_inv @ cov @ a_inv.T)):
            cands = {"shifted": to(shifted), "exact": to(exact)}
            values.append(choose_start(Gaussian(t_mean, t_cov), cands, AffineMap.from_particles(cands["exact"])))
        assert values[0][0] == values[1][0] == "exact"
        for k in ("shifted", "exact"):
            np.testing.assert_allclose(values[0][1][k], values[1][1][k], rtol=1e-7)  # measured 1.5e-8: rounding amplified by the covariance's condition number in y (1e8)


def test_a_candidate_with_a_non_finite_score_loses():
    target = Gaussian(jnp.zeros(2), jnp.eye(2))
    good = jax.random.normal(jax.random.key(2), (50, 2))
    bad = good.at[3].set(jnp.nan)
    name, values = choose_start(target, {"bad": bad, "good": good + 2.0}, AffineMap.from_particles(good))
    assert name == "good" and values["bad"] == np.inf
    with pytest.raises(ValueError, match="candidates"):
        choose_start(target, {}, AffineMap.from_particles(good))
