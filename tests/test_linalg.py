"""steinax._linalg: batched decompositions handed to LAPACK one matrix at a time.

jaxlib 0.10's CPU LAPACK kernels split a batch over XLA's thread pool and block
on it; several such calls at once stalled the KFAC mixture (2 threads, every
thread idle). These tests check the helpers equal the batched calls, and that
no curvature method's compiled step contains a batched decomposition, the
structural cause (a test that waited for a stall would hang, not fail).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax import _linalg
from conftest import tolerance

def _spd_batch(key, batch, m, dtype):
    a = jax.random.normal(key, batch + (m, m), dtype)
    return a @ jnp.swapaxes(a, -1, -2) + m * jnp.broadcast_to(jnp.eye(m, dtype=dtype), a.shape)


@pytest.mark.parametrize("batch", [(), (4,), (2, 3)])
def test_serial_decompositions_equal_batched(key, batch):
    with jax.enable_x64(True):
        h = _spd_batch(key, batch, 5, jnp.float64)
        np.testing.assert_allclose(_linalg.cholesky(h), jnp.linalg.cholesky(h), **tolerance(jnp.float64))
        vals, vecs = _linalg.eigh(h)
        ref_vals, _ = jnp.linalg.eigh(h)
        np.testing.assert_allclose(vals, ref_vals, **tolerance(jnp.float64, 10.0))
        rebuilt = jnp.einsum("...ik,...k,...jk->...ij", vecs, vals, vecs)
        np.testing.assert_allclose(rebuilt, h, **tolerance(jnp.float64, 10.0))
        # extra arguments ride along: a batched solve against vectors
        v = jax.random.normal(key, batch + (5,), jnp.float64)
        x = _linalg.serial_batch(jnp.linalg.solve, h, v)
        np.testing.assert_allclose(jnp.einsum("...ij,...j->...i", h, x), v, **tolerance(jnp.float64, 10.0))


def _bnn():
    from steinax.models import BNNRegression

    model = BNNRegression(3, hidden=(4, 5), bias=False)
    X = jax.random.normal(jax.random.key(0), (30, 3))
    target = model.target(X, X[:, 0], 10)
    return target, model.init_particles(jax.random.key(1), 4, X, X[:, 0])


@pytest.mark.parametrize(
    "make",
    [
        lambda: (steinax.matrix_svgd("kfac", "mixture"), *_bnn()),
        lambda: (steinax.matrix_svgd("kfac", "average"), *_bnn()),
        lambda: (steinax.matrix_svgd("hessian", "mixture"), steinax.targets.DoubleBanana(), jnp.ones((5, 2))),
        lambda: (steinax.svn("hessian"), steinax.targets.DoubleBanana(), jnp.ones((5, 2))),
    ],
    ids=["kfac-mixture", "kfac-average", "hessian-mixture", "svn"],
)
def test_curvature_steps_have_no_batched_decomposition(make):
    method, target, x0 = make()
    opt = optax.sgd(1e-3)
    state = method.init(x0, opt, target)
    step = lambda s: method.step(jax.random.key(0), s, target, opt)  # noqa: E731
    assert _linalg.lapack_calls(step, state), "expected the step to factorise its curvature"
    batched = _linalg.lapack_calls(step, state, batched_only=True)
    assert not batched, f"batched LAPACK calls in the step: {batched}"
