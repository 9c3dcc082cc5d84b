"""Affine coordinates (``steinax.targets.affine``): the map and its inverse, the target's log-density and scores
against ``jax.grad`` and the change-of-variables formula, and the equivalence it exists for: a method run on a
Gaussian in its own whitened coordinates is the method on N(0, I), mapped back."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tolerance

import steinax
from steinax.targets import AffineMap, AffineTarget, Gaussian

MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])  # sds 200, 1, 0.01; correlations 0.15, 0.9


def test_map_inverse_and_log_det(dtype):
    affine = AffineMap.from_moments(MEAN.astype(dtype), COV.astype(dtype))
    z = jax.random.normal(jax.random.key(0), (7, 3), dtype)
    x = affine.forward(z)
    np.testing.assert_allclose(affine.inverse(x), z, **tolerance(dtype, 1e4))  # x ~ 2e3: its rounding, relative
    np.testing.assert_allclose(affine.inverse(x[0]), z[0], **tolerance(dtype, 1e4))
    np.testing.assert_allclose(2 * affine.log_det(), jnp.linalg.slogdet(COV.astype(dtype))[1], **tolerance(dtype, 10))


def test_target_is_the_change_of_variables(dtype):
    target = Gaussian(MEAN.astype(dtype), COV.astype(dtype))
    affine = AffineMap.from_moments(MEAN.astype(dtype), COV.astype(dtype))
    q = AffineTarget(target, affine)
    z = jax.random.normal(jax.random.key(1), (5, 3), dtype)
    logd, scores = q.evaluate(jax.random.key(0), z)
    # p = N(MEAN, COV) in z is N(0, I) up to its normalising constant: log q(z) = -|z|^2 / 2 + c, score -z
    np.testing.assert_allclose(scores, -z, **tolerance(dtype, 1e3))
    c = logd + 0.5 * jnp.sum(z * z, axis=1)
    np.testing.assert_allclose(c - c[0], 0.0, atol=tolerance(dtype, 1e3)["atol"] * 10)
    np.testing.assert_allclose(jax.vmap(jax.grad(q.logdensity))(z), scores, **tolerance(dtype, 1e3))
    np.testing.assert_allclose(q.postprocess(z), affine.forward(z), **tolerance(dtype))


def test_svgd_in_whitened_coordinates_is_svgd_on_the_standard_normal():
    """The reason for the module: the same particles (to rounding) as SVGD on N(0, I), whatever the scales."""
    key, z0 = jax.random.key(2), jax.random.normal(jax.random.key(3), (40, 3))
    affine = AffineMap.from_moments(MEAN, COV)
    on_x = steinax.run(steinax.svgd(), AffineTarget(Gaussian(MEAN, COV), affine), z0, steps=200, rng_key=key)
    on_z = steinax.run(steinax.svgd(), Gaussian(jnp.zeros(3), jnp.eye(3)), z0, steps=200, rng_key=key)
    np.testing.assert_allclose(on_x.state.particles, on_z.particles, rtol=1e-3, atol=1e-3)  # float32, 200 steps
    np.testing.assert_allclose(on_x.samples, affine.forward(on_z.particles), rtol=1e-3, atol=1e-3 * 200)


def test_bad_maps_are_refused():
    with pytest.raises(ValueError, match="positive definite"):
        AffineMap.from_moments(jnp.zeros(2), jnp.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"`shift` must be \[d\]"):
        AffineMap(shift=jnp.zeros(2), matrix=jnp.eye(3))
    with pytest.raises(ValueError, match="maps 2 coordinates; the target has 3"):
        AffineTarget(Gaussian(jnp.zeros(3), jnp.eye(3)), AffineMap(shift=jnp.zeros(2), matrix=jnp.eye(2)))


def test_compose_and_refit_are_maps_of_maps():
    import numpy as np

    from steinax.targets import AffineMap

    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        outer = AffineMap.from_moments(jnp.array([1.0, -2.0, 3.0]), jnp.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.3], [0.0, 0.3, 1.0]]))
        inner = AffineMap.from_moments(jnp.array([0.5, 0.0, -1.0]), jnp.array([[1.0, 0.2, 0.1], [0.2, 3.0, 0.0], [0.1, 0.0, 0.5]]))
        z = jnp.asarray(rng.standard_normal((5, 3)))
        np.testing.assert_allclose(outer.compose(inner).forward(z), outer.forward(inner.forward(z)), rtol=1e-13)
        # refit: the particles' own moments, shrunk toward the map's with weight d / (n + d)
        x = jnp.asarray(rng.standard_normal((40, 3)) @ np.diag([10.0, 0.1, 1.0]) + 7.0)
        refit = outer.refit(x)
        z = np.asarray(outer.inverse(x))
        w = 3 / 43
        want_cov_z = (1 - w) * np.cov(z.T) + w * np.eye(3)
        L = np.asarray(outer.matrix)
        np.testing.assert_allclose(np.asarray(refit.matrix @ refit.matrix.T), L @ want_cov_z @ L.T, rtol=1e-10)
        np.testing.assert_allclose(refit.shift, np.mean(np.asarray(x), 0), rtol=1e-12)
