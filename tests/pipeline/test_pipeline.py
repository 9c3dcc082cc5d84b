"""The pipeline's first stages (issue 49): Pathfinder as a warm start recovers an unscaled, correlated Gaussian's
mean and covariance; SVGD in the coordinates it whitens gets the answer plain SVGD from N(0, I) does not."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.particles import Chain
from steinax.pipeline import PathfinderStart, WhitenedParticles
from steinax.targets import Gaussian

# sds 200, 1 and 0.01 (a predictor in the thousands beside one in hundredths), correlations 0.15 and 0.9
MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])
X0 = jax.random.normal(jax.random.key(0), (100, 3))


@pytest.mark.slow  # Pathfinder's compilation (about 20 s): CI's slow pass
def test_pathfinder_recovers_a_gaussian():
    with jax.enable_x64(True):
        out = PathfinderStart()(Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64)), X0.astype(jnp.float64),
                                jax.random.key(1))
        learnt = out.learnt["warm_start"]
        a = learnt["affine"]
        # what the map is for: in its coordinates the target is N(0, I). One of the four paths fits the Gaussian to
        # float64 rounding (its log-weights are constant) and the fresh lower-bound score must pick it; measured 3e-7
        # sd in the mean and 1e-9 in the whitened covariance. Picking by BlackJAX's own ELBOs (each the best of its
        # path's noisy estimates) kept a path that read 0.040 and was 0.37 off here: the bounds below fail for that
        sd = np.sqrt(np.diag(COV))
        assert np.max(np.abs(np.asarray(a.shift) - np.asarray(MEAN)) / sd) < 1e-5
        white = np.linalg.solve(np.asarray(a.matrix), np.linalg.solve(np.asarray(a.matrix), np.asarray(COV, np.float64)).T)
        np.testing.assert_allclose(white, np.eye(3), atol=1e-6)
        assert np.argmax(learnt["scores"]) != np.argmax(learnt["elbos"])  # the case this test is about
        assert out.particles.shape == (100, 3) and len(learnt["elbos"]) == 4 and learnt["elbo_evaluations"] > 0 and min(learnt["lbfgs_iterations"]) >= 1


@pytest.mark.slow  # two runs until settled (about 30 s)
def test_svgd_in_the_warm_starts_coordinates_is_right_where_plain_svgd_is_not():
    warnings.simplefilter("ignore")
    target, sd = Gaussian(MEAN, COV), np.sqrt(np.diag(COV))
    plain = steinax.run(steinax.svgd(), target, X0, rng_key=jax.random.key(1))
    out = Chain(PathfinderStart(), WhitenedParticles(steinax.svgd()))(target, X0, jax.random.key(1))
    assert np.max(np.abs(np.mean(plain.particles, 0) - MEAN) / sd) > 1.0  # the README's recipe on unscaled data
    err = np.abs(np.mean(out.particles, 0) - MEAN) / sd
    ratio = np.std(out.particles, 0) / sd
    # 100 particles of SVGD with the median bandwidth: sd ratio about 0.96 in 3-D (its known small under-dispersion)
    assert err.max() < 0.05 and 0.9 < ratio.min() and ratio.max() < 1.05, (err, ratio)
    assert out.learnt["particles"]["result"].converged
    np.testing.assert_allclose(out.learnt["particles"]["result"].samples, out.particles, rtol=1e-6)


@pytest.mark.slow  # a run until settled
def test_whitened_particles_alone_use_the_particles_own_moments():
    warnings.simplefilter("ignore")
    target, sd = Gaussian(MEAN, COV), np.sqrt(np.diag(COV))
    start = MEAN[None] + jax.random.normal(jax.random.key(5), (100, 3)) * jnp.asarray(sd)[None] * 2.0  # wide, uncorrelated
    out = WhitenedParticles(steinax.svgd())(target, start, jax.random.key(2))
    assert np.max(np.abs(np.mean(out.particles, 0) - MEAN) / sd) < 0.1


@pytest.mark.slow  # Pathfinder's compilation (about 12 s): CI's slow pass
def test_pathfinder_names_a_target_it_cannot_start_on():
    with pytest.raises(FloatingPointError, match="no finite ELBO"):
        PathfinderStart(paths=2, maxiter=5)(lambda x: jnp.sum(x) * jnp.inf, X0, jax.random.key(0))
