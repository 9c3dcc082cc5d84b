"""The flow target's log-density: the target at ``F(u)`` plus ``log |det dF/du|``, the determinant taken from
``jax.jacfwd``'s full Jacobian (float64: the determinant of a 4 x 4 matrix and a few spline evaluations, rounding
about 1e-13 relative); its maps invert each other; bad input is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from random_flow import random_flow

from steinax.pipeline.transport import AffineThenFlow
from steinax.targets import AffineMap, FlowTarget, Gaussian

flowjax = pytest.importorskip("flowjax")


@pytest.mark.slow  # compiles jacfwd through a spline coupling flow (about 20-40 s on 2 cores): CI's slow pass
def test_log_density_is_the_target_plus_the_jacobians_log_determinant():
    with jax.enable_x64(True):
        flow = random_flow(dtype=jnp.float64)
        affine = AffineMap(jnp.array([1.0, -2.0, 0.5, 3.0]), jnp.array([[2.0, 0, 0, 0], [0.3, 1.0, 0, 0],
                                                                        [0.0, -0.4, 0.5, 0], [0.1, 0.2, 0.3, 4.0]]))
        bij = AffineThenFlow(affine, flow.bijection)
        target = Gaussian(jnp.array([0.0, 1.0, -1.0, 2.0]), jnp.diag(jnp.array([1.0, 4.0, 0.25, 9.0])))
        tgt = FlowTarget(target, bij)
        u = 1.5 * jax.random.normal(jax.random.key(3), (6, 4), jnp.float64)  # some beyond the splines' interval
        def by_jacobian(v):
            return target.logdensity(bij.transform(v)) + jnp.linalg.slogdet(jax.jacfwd(bij.transform)(v))[1]

        want, want_score = jax.jit(jax.vmap(jax.value_and_grad(by_jacobian)))(u)
        logd, scores = jax.jit(lambda v: tgt.evaluate(None, v))(u)
        np.testing.assert_allclose(logd, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(scores, want_score, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(tgt.inverse(tgt.forward(u)), u, rtol=1e-10, atol=1e-10)
        # the inverse's log-determinant is minus the forward's
        x = tgt.forward(u)
        back = jax.jit(jax.vmap(bij.inverse_and_log_det))(x)[1]
        np.testing.assert_allclose(back, -jax.jit(jax.vmap(bij.transform_and_log_det))(u)[1], rtol=1e-10)


def test_bad_bijection_is_named():
    with pytest.raises(TypeError, match="`bijection`"):
        FlowTarget(lambda x: -0.5 * jnp.sum(x * x), object())
