"""Matrix-valued kernels, matrix SVGD and SVN against SVGD, CC-SVGD, naive loops over eq. 9-10 and Theorem 3.

Tolerances: ``tolerance(dtype)`` (conftest: sums of O(n) terms in a different
order). The naive loops run in float64 numpy; the fast paths are compared in
float64 where a test says so, otherwise with ``tolerance(float32, scale)``
where ``scale`` is stated.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

import steinax
from steinax.kernels import RBF, IMQ
from steinax.kernels.matrix import (
    AbstractMatrixKernel,
    DiagonalMatrixKernel,
    MixtureKernel,
    PreconditionedKernel,
    Preconditioner,
    ScalarMatrixKernel,
    positive_definite,
)
from steinax.particles.matrix_valued import matrix_svgd_direction, svn_direction
from steinax.targets import DoubleBanana, Gaussian, MinibatchTarget, gmm_2d
from conftest import tolerance
from reference import naive_matrix_svgd_direction, naive_svn_direction


def _data(key, n=7, d=3, dtype=jnp.float64):
    x = jax.random.normal(key, (n, d), dtype) * 1.3
    return x, -x + 0.3 * jnp.sin(2 * x)


def _spd(key, d, dtype=jnp.float64, cond=5.0):
    a = jax.random.normal(key, (d, d), dtype)
    q, _ = jnp.linalg.qr(a)
    vals = jnp.linspace(1.0, cond, d, dtype=dtype)
    return (q * vals[None, :]) @ q.T


def test_scalar_kernel_times_identity_is_svgd(key):
    with jax.enable_x64(True):
        x, s = _data(key)
        for k in (RBF(0.9), RBF("liu"), IMQ()):
            ref = steinax.svgd_direction(x, s, k)
            np.testing.assert_allclose(matrix_svgd_direction(x, s, ScalarMatrixKernel(k)), ref, **tolerance(jnp.float64))
            # K_Q with Q = I is the same kernel
            eye = PreconditionedKernel(jnp.eye(3), k)
            np.testing.assert_allclose(matrix_svgd_direction(x, s, eye), ref, **tolerance(jnp.float64))


def test_diagonal_kernel_is_cc_svgd(key):
    with jax.enable_x64(True):
        x, s = _data(key)
        for k in (RBF("per_dimension"), RBF(jnp.array([0.5, 1.0, 2.0])), IMQ()):
            np.testing.assert_allclose(matrix_svgd_direction(x, s, DiagonalMatrixKernel(k)),
                                       steinax.cc_svgd_direction(x, s, k), **tolerance(jnp.float64))


@pytest.mark.parametrize("metric", [True, False])
def test_preconditioned_kernel_equals_naive_eq_9_10(key, metric):
    """The matrix-product form (Theorem 3 / eq. 14) against the double loop over K's entries and divergence."""
    with jax.enable_x64(True):
        x, s = _data(key)
        q = _spd(jax.random.fold_in(key, 1), 3)
        kern = PreconditionedKernel(q, RBF(1.7), metric=metric)
        ref = naive_matrix_svgd_direction(x, s, kern)
        np.testing.assert_allclose(matrix_svgd_direction(x, s, kern), ref, **tolerance(jnp.float64))
        # a median bandwidth is resolved on the Q-distances; check through the resolved kernel
        med = PreconditionedKernel(q, RBF("liu"), metric=metric)
        ref = naive_matrix_svgd_direction(x, s, med.resolve(x))
        np.testing.assert_allclose(matrix_svgd_direction(x, s, med), ref, **tolerance(jnp.float64))
        # blocked rows give the same direction
        np.testing.assert_allclose(matrix_svgd_direction(x, s, med, block_size=3), ref, **tolerance(jnp.float64))


@pytest.mark.parametrize("metric,weight_variance", [(True, None), (False, 1.0), (True, 0.5)])
def test_mixture_kernel_equals_naive_eq_9_10(key, metric, weight_variance):
    """Eq. 18 (anchor by anchor, weights inside the Stein operator) equals eq. 9-10 applied to eq. 16's kernel."""
    with jax.enable_x64(True):
        x, s = _data(key, n=6, d=2)
        anchors = x[:4] + 0.1
        qs = jnp.stack([_spd(jax.random.fold_in(key, i), 2, cond=3.0) for i in range(4)])
        pre = Preconditioner(*reversed(jnp.linalg.eigh(qs)))
        kern = MixtureKernel(anchors, pre, RBF(1.3), metric=metric, weight_variance=weight_variance)
        ref = naive_matrix_svgd_direction(x, s, kern)
        # scale 10: sums over m anchors of n-term sums, each through a whitening and its inverse
        np.testing.assert_allclose(matrix_svgd_direction(x, s, kern), ref, **tolerance(jnp.float64, 10.0))


def test_mixture_with_fewer_anchors(key):
    """num_anchors = m uses m evenly strided particles (and their curvature mixed with the average) as anchors."""
    x, s = _data(key, n=9, d=2, dtype=jnp.float32)
    curv = jnp.einsum("ni,nj->nij", x, x) + jnp.broadcast_to(jnp.eye(2), (9, 2, 2))
    method = steinax.matrix_svgd(mode="mixture", num_anchors=3)
    phi = method.direction(None, x, s, None, curv)[0]
    idx = np.array([0, 4, 8])
    q, _ = positive_definite(0.5 * curv[idx] + 0.5 * jnp.mean(curv, axis=0, keepdims=True))
    ref = matrix_svgd_direction(x, s, MixtureKernel(x[idx], q, RBF("liu")))
    np.testing.assert_allclose(phi, ref, **tolerance(jnp.float32))
    with pytest.raises(ValueError, match="`num_anchors`"):
        steinax.matrix_svgd(mode="mixture", num_anchors=0)


def test_mixture_weights_sum_to_one(key):
    x, _ = _data(key, n=20, d=3, dtype=jnp.float32)
    qs = jnp.stack([_spd(jax.random.fold_in(key, i), 3, jnp.float32, cond=50.0) for i in range(20)])
    for wv in (None, 1.0):
        w = MixtureKernel(x, Preconditioner(*reversed(jnp.linalg.eigh(qs))), weight_variance=wv).weights(x * 3.0)
        assert w.shape == (20, 20)
        assert bool(jnp.all(w >= 0))
        np.testing.assert_allclose(jnp.sum(w, axis=0), 1.0, **tolerance(jnp.float32))


class _ScaledByNorm(AbstractMatrixKernel):
    """A kernel with no structured path: ``K(x, y) = k(x, y) (B + ||x + y||^2 I) / (1 + ||x + y||^2)``."""

    B: jax.Array

    def __call__(self, x, y):
        r = jnp.sum((x + y) ** 2)
        return jnp.exp(-jnp.sum((x - y) ** 2) / 2.0) * (self.B + r * jnp.eye(x.shape[0])) / (1.0 + r)


def test_general_matrix_kernel_uses_the_reference_path(key):
    with jax.enable_x64(True):
        x, s = _data(key, n=5, d=2)
        kern = _ScaledByNorm(jnp.array([[2.0, 0.3], [0.3, 1.0]]))
        ref = naive_matrix_svgd_direction(x, s, kern)
        np.testing.assert_allclose(matrix_svgd_direction(x, s, kern), ref, **tolerance(jnp.float64))


def test_callable_kernel_is_the_general_interface(key):
    """A non-radial scalar kernel times I through CallableMatrixKernel equals SVGD's double loop with that kernel."""
    from steinax.kernels import CallableMatrixKernel
    from reference import naive_svgd_direction

    with jax.enable_x64(True):
        x, s = _data(key, n=5, d=2)
        k = lambda a, b: (1.0 + a @ b / 4.0) * jnp.exp(-jnp.sum((a - b) ** 2) / 2.0)  # noqa: E731
        kern = CallableMatrixKernel(lambda a, b: k(a, b) * jnp.eye(2))
        np.testing.assert_allclose(matrix_svgd_direction(x, s, kern), naive_svgd_direction(x, s, k),
                                   **tolerance(jnp.float64))


@pytest.mark.slow  # ~16-18 s; CI's slow pass runs it (the default suite must stay under 10 minutes)
def test_theorem_3_whitened_svgd_step_for_step(key):
    """Gaussian target, fixed Q and bandwidth, plain SGD: matrix SVGD with K_Q equals vanilla SVGD run on
    y = Q^{1/2} x (the target p(Q^{-1/2} y)) and mapped back, step for step."""
    with jax.enable_x64(True):
        d = 3
        cov = _spd(jax.random.fold_in(key, 7), d, cond=8.0)
        target = Gaussian(jnp.array([1.0, -0.5, 0.2]), cov)
        q = _spd(jax.random.fold_in(key, 8), d, cond=4.0)
        root = jnp.asarray(np.real(scipy.linalg.sqrtm(np.asarray(q))))
        root_inv = jnp.linalg.inv(root)
        x0 = jax.random.normal(key, (30, d), jnp.float64) * 2.0
        kw = dict(optimizer=optax.sgd(0.5), rng_key=key, progress=False, trace_every=1)
        h = 2.5
        xs, ys = [x0], [x0 @ root.T]
        for t in range(10):  # one step at a time, to compare every iterate
            xs.append(steinax.run(steinax.matrix_svgd(q, kernel=RBF(h)), target, xs[-1], steps=1, **kw).particles)
            ys.append(steinax.run(steinax.svgd(RBF(h)), lambda y: target.logdensity(root_inv @ y), ys[-1],
                                  steps=1, **kw).particles)
        for x, y in zip(xs, ys):  # scale 10: rounding compounds over the 10 steps
            np.testing.assert_allclose(x, y @ root_inv.T, **tolerance(jnp.float64, 10.0))
        assert float(jnp.max(jnp.abs(xs[-1] - xs[0]))) > 0.1  # the particles did move


def test_positive_definite_floor_and_report():
    h = jnp.array([[[4.0, 0.0], [0.0, -1.0]], [[2.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])
    q, floored = positive_definite(h, floor=0.1)
    vals = np.sort(np.asarray(q.vals), axis=1)
    np.testing.assert_allclose(vals[0], [0.4, 4.0], rtol=1e-6)  # -1 raised to 0.1 * 4
    np.testing.assert_allclose(vals[1], [1.0, 2.0], rtol=1e-6)  # untouched
    np.testing.assert_allclose(q.matrix[2], jnp.eye(2), atol=1e-7)  # no scale at all: identity
    assert float(floored) == pytest.approx(1.0 / 6.0)
    np.testing.assert_allclose(q.matrix[1], h[1], atol=1e-6)
    np.testing.assert_allclose(q.inverse[1] @ h[1], jnp.eye(2), atol=1e-6)
    q2, _ = positive_definite(h[1], damping=0.5)
    np.testing.assert_allclose(q2.matrix, h[1] + 0.5 * jnp.eye(2), atol=1e-6)


def test_svn_equals_naive_loop(key):
    with jax.enable_x64(True):
        x, s = _data(key, n=6, d=2)
        hm = jnp.stack([_spd(jax.random.fold_in(key, i), 2, cond=3.0) for i in range(6)])
        pre = Preconditioner(*reversed(jnp.linalg.eigh(hm)))
        for outer in ("mean", "sum"):
            phi, _ = svn_direction(x, s, pre, RBF(1.4), outer)
            # scale 10: a d x d solve after n-term sums (condition number of H~ up to ~3)
            np.testing.assert_allclose(phi, naive_svn_direction(x, s, hm, 1.4, outer), **tolerance(jnp.float64, 10.0))


def test_methods_run_and_report(key):
    target = Gaussian(jnp.zeros(2), jnp.array([[1.0, 0.9], [0.9, 1.0]]))
    x0 = jax.random.normal(key, (40, 2)) + 2.0
    kw = dict(steps=100, optimizer=optax.adagrad(0.3), rng_key=key, progress=False, trace_every=50)
    for method in (steinax.matrix_svgd("hessian"), steinax.matrix_svgd("hessian", "mixture"),
                   steinax.matrix_svgd(jnp.linalg.inv(target.cov)), steinax.svn("hessian")):
        res = steinax.run(method, target, x0, **kw)
        assert bool(jnp.all(jnp.isfinite(res.particles)))
        assert set(res.trace.method) == {"bandwidth", "floored"}
        assert float(res.trace.ksd[-1]) < 0.2 * float(res.trace.ksd[0])
        assert float(res.trace.method["floored"][-1]) == 0.0  # a Gaussian's Hessian needs no floor


@pytest.mark.parametrize("target", [
    pytest.param(DoubleBanana(), marks=pytest.mark.slow),  # ~20 s each; CI's slow pass runs them (default suite < 10 min)
    pytest.param(gmm_2d(), marks=pytest.mark.slow),
    pytest.param(DoubleBanana("code"), marks=pytest.mark.slow),
], ids=["banana", "gmm", "banana-code"])
def test_indefinite_hessians_stay_finite_and_bounded(key, target):
    """Default settings (exact Hessian, eigenvalue floor) on targets whose Hessian is indefinite: no NaN, no
    particle leaves the target's bulk, with AdaGrad and with plain SGD."""
    x0 = jax.random.normal(key, (50, 2)) * 1.5
    for method in (steinax.matrix_svgd(), steinax.matrix_svgd(mode="mixture"), steinax.svn()):
        for opt in (optax.adagrad(0.5), optax.sgd(0.05)):
            res = steinax.run(method, target, x0, steps=200, optimizer=opt, rng_key=key, progress=False)
            assert bool(jnp.all(jnp.isfinite(res.particles))), (type(method).__name__, opt)
            assert float(jnp.max(jnp.abs(res.particles))) < 8.0, (type(method).__name__, opt)


def test_fisher_running_average_and_minibatch_curvature(key):
    data = jax.random.normal(key, (64, 2)) + 1.0
    tgt = MinibatchTarget(lambda th: -0.5 * jnp.sum(th**2), lambda th, y: -0.5 * jnp.sum((y - th) ** 4), data, 16)
    x = jax.random.normal(jax.random.fold_in(key, 1), (5, 2))
    # the hook evaluates curvature on the same minibatch as the scores
    k = jax.random.key(3)
    batch, factor = tgt._batch(k)
    hess = jax.vmap(jax.hessian(lambda th: tgt._logdensity_on(th, batch, factor)))(x)
    np.testing.assert_allclose(tgt.curvature("hessian", k, x), -hess, **tolerance(jnp.float32, 10.0))
    # EMA with rho_t = min(1 - 1/t, decay): three steps by hand
    method = steinax.matrix_svgd("fisher", decay=0.6)
    state = method.init(x, optax.sgd(0.0), tgt)
    expect = jnp.zeros((2, 2))
    for t in range(1, 4):
        kt = jax.random.key(10 + t)
        f = jnp.mean(tgt.curvature("fisher", kt, x), axis=0)
        rho = min(1.0 - 1.0 / t, 0.6)
        expect = rho * expect + (1 - rho) * f
        _, aux, _ = method.direction(None, x, -x, state.aux, tgt.curvature("fisher", kt, x))
        state = eqx_replace(state, aux)
        np.testing.assert_allclose(aux.average, expect, **tolerance(jnp.float32, 10.0))
        assert int(aux.count) == t


def eqx_replace(state, aux):
    import equinox as eqx

    return eqx.tree_at(lambda s: s.aux, state, aux)


def test_bad_input(key):
    x = jax.random.normal(key, (10, 3))
    with pytest.raises(ValueError, match="one of .*hessian.*received 'newton'"):
        steinax.matrix_svgd("newton")
    with pytest.raises(ValueError, match="square"):
        steinax.matrix_svgd(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        steinax.matrix_svgd(jnp.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="positive definite; its smallest eigenvalue is -1"):
        steinax.matrix_svgd(jnp.diag(jnp.array([1.0, -1.0])))
    with pytest.raises(ValueError, match=r"shape \(2, 2\) but the particles have d = 3"):
        steinax.run(steinax.matrix_svgd(jnp.eye(2)), lambda z: -jnp.sum(z**2), x, steps=1,
                    optimizer=optax.sgd(0.1), rng_key=key, progress=False)
    with pytest.raises(ValueError, match="`mode` must be one of"):
        steinax.matrix_svgd("hessian", mode="local")
    with pytest.raises(ValueError, match="`floor`"):
        steinax.matrix_svgd("hessian", floor=0.0)
    with pytest.raises(ValueError, match="kfac.*metric=False"):
        steinax.matrix_svgd("kfac", metric=True)
    with pytest.raises(ValueError, match="`outer`"):
        steinax.svn(outer="total")
    with pytest.raises(TypeError, match="matrix-valued kernel"):
        matrix_svgd_direction(x, -x, RBF(1.0))
    with pytest.raises(ValueError, match="per_dimension"):
        PreconditionedKernel(jnp.eye(3), RBF("per_dimension"))
    with pytest.raises(NotImplementedError, match="Gauss-Newton"):
        steinax.run(steinax.matrix_svgd("gauss_newton"), lambda z: -jnp.sum(z**2), x, steps=1,
                    optimizer=optax.sgd(0.1), rng_key=key, progress=False)


@pytest.mark.slow  # ~19 s; CI's slow pass runs it (the default suite must stay under 10 minutes)
def test_kfac_factors_and_solve(key):
    """With one example, A (x) G is exactly N g_W g_W^T (g_W the example's log-likelihood gradient in one layer's
    weights, row-major); the Kronecker solve equals the dense inverse of the damped blocks."""
    from steinax.models import BNNRegression

    with jax.enable_x64(True):
        model = BNNRegression(3, hidden=4, noise_variance=0.5, prior_variance=1.0)
        X = jax.random.normal(key, (1, 3), jnp.float64)
        y = jnp.array([0.7])
        theta = model.init_particles(jax.random.fold_in(key, 1), 1, dtype=jnp.float64)[0]
        fac = model.kfac_factors(theta, X, y, num_data=50)
        grad = jax.grad(lambda t: model.loglik(t, (X[0], y[0])))(theta)
        from steinax.kernels.matrix import _layer_index

        for a, g, layer in zip(fac.a, fac.g, fac.layout):
            idx = _layer_index(layer).reshape(-1)
            np.testing.assert_allclose(jnp.kron(a, g), 50 * jnp.outer(grad[idx], grad[idx]), **tolerance(jnp.float64))
        # the Kronecker solve against the dense block inverse
        model2 = BNNRegression(3, hidden=4)
        X2 = jax.random.normal(key, (20, 3), jnp.float64)
        t2 = model2.init_particles(key, 1, X2, X2[:, 0], dtype=jnp.float64)[0]
        f2 = model2.kfac_factors(t2, X2, X2[:, 0], num_data=20)
        pre, _ = f2.preconditioner(0.1)
        v = jax.random.normal(key, (2, model2.dim), jnp.float64)
        out = pre.solve_rows(v)
        for a, g, layer in zip(f2.a, f2.g, f2.layout):
            idx = _layer_index(layer).reshape(-1)
            ea = 0.1 * jnp.trace(a) / a.shape[0]
            eg = 0.1 * jnp.trace(g) / g.shape[0]
            dense = jnp.kron(a + ea * jnp.eye(a.shape[0]), g + eg * jnp.eye(g.shape[0]))
            np.testing.assert_allclose(out[:, idx], jnp.linalg.solve(dense, v[:, idx].T).T, **tolerance(jnp.float64, 100.0))
        rest = np.setdiff1d(np.arange(model2.dim), np.concatenate([_layer_index(l).reshape(-1) for l in f2.layout]))
        np.testing.assert_allclose(out[:, rest], v[:, rest])  # log gamma, log lambda: identity


@pytest.mark.slow  # ~17-19 s; CI's slow pass runs it (the default suite must stay under 10 minutes)
def test_kfac_methods_run_on_the_bnn(key):
    from steinax.models import BNNRegression

    model = BNNRegression(3, hidden=(4, 5), bias=False, noise_variance=0.5, prior_variance=1.0)
    X = jax.random.normal(key, (40, 3))
    y = X[:, 0] - X[:, 1]
    target = model.target(X, y, 10)
    x0 = model.init_particles(jax.random.fold_in(key, 1), 6, X, y)
    for mode in ("average", "mixture"):
        res = steinax.run(steinax.matrix_svgd("kfac", mode), target, x0, steps=200, optimizer=optax.rmsprop(1e-2),
                          rng_key=key, progress=False)
        assert bool(jnp.all(jnp.isfinite(res.particles)))
        before, after = model.evaluate(x0, X, y), model.evaluate(res.particles, X, y)
        assert float(after.rmse) < 0.7 * float(before.rmse)
