import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.kernels import IMQ, RBF
from steinax.particles.multiple_kernel import MKState
from steinax.stein import kernel_ksds, mksd
from reference import naive_ksd, naive_svgd_direction
from conftest import tolerance


def _data(key, n=8, d=3, dtype=jnp.float32):
    x = jax.random.normal(key, (n, d), dtype) * 1.5
    return x, -x + 0.2 * jnp.sin(3 * x)


def _mk_direction(method, x, s, weights=None):
    aux = method.init_aux(x) if weights is None else MKState(jnp.asarray(weights, x.dtype), None)
    return method.direction(jax.random.key(0), x, s, aux)


def test_mk_with_one_kernel_equals_svgd(key):
    x, s = _data(key)
    for k in (RBF(0.8), RBF("liu"), IMQ()):
        phi, _, _ = _mk_direction(steinax.mk_svgd([k]), x, s)  # w = 1/m = 1
        np.testing.assert_allclose(phi, steinax.svgd_direction(x, s, k), **tolerance(jnp.float32, 0.1))
    x0 = jax.random.normal(key, (20, 2))
    kw = dict(steps=20, optimizer=optax.sgd(0.1), rng_key=key, progress=False)
    a = steinax.run(steinax.mk_svgd([RBF(1.0)]), lambda z: -0.5 * jnp.sum(z * z), x0, **kw)
    b = steinax.run(steinax.svgd(RBF(1.0)), lambda z: -0.5 * jnp.sum(z * z), x0, **kw)
    np.testing.assert_allclose(a.particles, b.particles, **tolerance(jnp.float32, 0.1))


def test_mk_with_fixed_equal_weights_is_svgd_with_the_sum_kernel(key):
    x, s = _data(key)
    kernels = [RBF(0.25), RBF(1.0), RBF(4.0)]
    w = 1.0 / np.sqrt(3.0)
    method = steinax.mk_svgd(kernels, weights="fixed", initial_weights=[w, w, w])
    phi, aux, _ = _mk_direction(method, x, s)
    np.testing.assert_allclose(aux.weights, [w, w, w], rtol=1e-6)  # fixed: unchanged

    def k_sum(a, b):
        return sum(w * k(a, b) for k in kernels)

    np.testing.assert_allclose(phi, naive_svgd_direction(x, s, k_sum), **tolerance(jnp.float32))


def test_eq21_weights_from_naive_per_kernel_ksds(key):
    x, s = _data(key)
    kernels = [RBF(0.5), RBF(2.0), RBF(8.0)]
    naive = np.array([naive_ksd(x, s, lambda a, b, k=k: k(a, b)) for k in kernels])
    np.testing.assert_allclose(kernel_ksds(x, s, kernels), naive, rtol=1e-4)
    _, aux, info = _mk_direction(steinax.mk_svgd(kernels), x, s)
    np.testing.assert_allclose(info["kernel_ksd"], naive, rtol=1e-4)
    np.testing.assert_allclose(aux.weights, np.sqrt(naive / naive.sum()), rtol=1e-4)  # eq. 21
    _, aux_n, _ = _mk_direction(steinax.mk_svgd(kernels, weights="normalized"), x, s)
    np.testing.assert_allclose(aux_n.weights, naive / np.linalg.norm(naive), rtol=1e-4)
    # MKSD with one kernel is KSD; weighted MKSD is the weighted sum
    np.testing.assert_allclose(mksd(x, s, [RBF(2.0)], [1.0]), steinax.ksd(x, s, RBF(2.0)), rtol=1e-5)
    np.testing.assert_allclose(mksd(x, s, kernels, "normalized"), np.linalg.norm(naive), rtol=1e-4)


def test_mk_gradient_weights_stay_on_the_unit_sphere(key):
    x, s = _data(key)
    method = steinax.mk_svgd([RBF(0.5), RBF(2.0)], weights="gradient")
    aux = method.init_aux(x)
    for _ in range(3):
        _, aux, _ = method.direction(key, x, s, aux)
    assert bool(jnp.all(aux.weights >= 0))
    np.testing.assert_allclose(jnp.linalg.norm(aux.weights), 1.0, rtol=1e-5)


def test_mk_weights_recorded_in_trace(key):
    x0 = jax.random.normal(key, (30, 2))
    res = steinax.run(steinax.mk_svgd(), lambda z: -0.5 * jnp.sum(z * z), x0, steps=10,
                      optimizer=optax.sgd(0.1), rng_key=key, trace_every=5, progress=False)
    assert res.trace.method["weights"].shape == (3, 10)
    assert bool(jnp.all(jnp.isnan(res.trace.method["weights"][0])))
    np.testing.assert_allclose(jnp.linalg.norm(res.state.aux.weights), 1.0, rtol=1e-5)


def test_mk_bad_input():
    with pytest.raises(ValueError, match="at least one kernel"):
        steinax.mk_svgd([])
    with pytest.raises(TypeError, match="one kind"):
        steinax.mk_svgd([RBF(1.0), IMQ()])
    with pytest.raises(TypeError, match="single kernel"):
        steinax.mk_svgd(RBF(1.0))
    with pytest.raises(ValueError, match="initial_weights"):
        steinax.mk_svgd([RBF(1.0), RBF(2.0)], initial_weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="initial_weights"):
        steinax.mk_svgd([RBF(1.0), RBF(2.0)], initial_weights=[1.0, float("nan")])
    with pytest.raises(ValueError, match="initial_weights"):
        steinax.mk_svgd([RBF(1.0), RBF(2.0)], initial_weights=[1.0])
    with pytest.raises(ValueError, match="weights"):
        steinax.mk_svgd(weights="adam")


def test_cc_svgd_in_one_dimension_is_svgd(key):
    x, s = _data(key, n=12, d=1)
    for k in (RBF("liu"), RBF("pairs"), RBF(0.7), IMQ()):
        np.testing.assert_allclose(steinax.cc_svgd_direction(x, s, k), steinax.svgd_direction(x, s, k), **tolerance(jnp.float32, 0.1))
    # the default per-coordinate rule is the 'pairs' rule in one dimension
    np.testing.assert_allclose(
        steinax.cc_svgd_direction(x, s), steinax.svgd_direction(x, s, RBF("pairs")), **tolerance(jnp.float32, 0.1)
    )


@pytest.mark.parametrize("kernel", [RBF("per_dimension"), RBF(jnp.array([0.5, 1.0, 2.0])), IMQ()], ids=["median", "fixed", "imq"])
def test_cc_svgd_equals_naive_loop(kernel, key):
    x, s = _data(key, n=7, d=3)
    got = steinax.cc_svgd_direction(x, s, kernel)
    if isinstance(kernel, RBF):
        h = np.asarray(kernel.resolve(x).bandwidth) * np.ones(3)
        k1 = lambda a, b, i: np.exp(-((a - b) ** 2) / h[i])  # noqa: E731
        dk1 = lambda a, b, i: -2.0 * (a - b) / h[i] * k1(a, b, i)  # d/da  # noqa: E731
    else:
        k1 = lambda a, b, i: (1.0 + (a - b) ** 2) ** -0.5  # noqa: E731
        dk1 = lambda a, b, i: -(a - b) * (1.0 + (a - b) ** 2) ** -1.5  # noqa: E731
    xn, sn = np.asarray(x, np.float64), np.asarray(s, np.float64)
    n, d = xn.shape
    want = np.zeros((n, d))
    for a in range(n):
        for i in range(d):
            for l in range(n):
                want[a, i] += k1(xn[l, i], xn[a, i], i) * sn[l, i] + dk1(xn[l, i], xn[a, i], i)
    np.testing.assert_allclose(got, want / n, **tolerance(jnp.float32))


def test_cc_svgd_runs_and_records_bandwidth(key):
    x0 = jax.random.normal(key, (30, 3)) + 1.0
    res = steinax.run(steinax.cc_svgd(), lambda z: -0.5 * jnp.sum(z * z), x0, steps=300,
                      optimizer=optax.adam(0.05), rng_key=key, progress=False)
    assert float(jnp.abs(res.particles.mean(0)).max()) < 0.05
    assert "bandwidth" in res.trace.method
    with pytest.raises(TypeError, match="kernel"):
        steinax.cc_svgd("rbf")


@pytest.mark.slow  # ~15 s a kernel: CI's slow pass runs both
@pytest.mark.parametrize("kind", ["rbf", "imq"])
def test_multi_kernel_engine_blocked_equals_naive(key, kind):
    """Per-kernel U and V KSDs and the MK direction, dense and in padded/unpadded row blocks, = naive loops."""
    x, s = _data(key, n=13)
    kernels = [RBF(0.5), RBF(2.0), RBF(8.0)] if kind == "rbf" else [IMQ(0.5), IMQ(1.0, -0.3), IMQ(2.0)]
    naive = {est: np.array([naive_ksd(x, s, lambda a, b, k=k: k(a, b), est) for k in kernels]) for est in "vu"}
    w = np.array([0.2, 0.5, 0.3])

    def k_sum(a, b):
        return sum(wi * k(a, b) for wi, k in zip(w, kernels))

    naive_phi = naive_svgd_direction(x, s, k_sum)
    for block_size in (None, 4, 5, 13):  # 4 and 5: blocks of 4 and 5 with padding; 13: one block
        for est in "vu":
            got = kernel_ksds(x, s, kernels, est, block_size=block_size)
            np.testing.assert_allclose(got, naive[est], rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(mksd(x, s, kernels, [1.0, 2.0, 3.0], est, block_size=block_size),
                                       naive[est] @ np.array([1.0, 2.0, 3.0]), rtol=1e-4, atol=1e-6)
        method = steinax.mk_svgd(kernels, weights="fixed", initial_weights=w, block_size=block_size)
        phi, _, info = _mk_direction(method, x, s)
        np.testing.assert_allclose(phi, naive_phi, **tolerance(jnp.float32))
        np.testing.assert_allclose(info["kernel_ksd"], naive["v"], rtol=1e-4, atol=1e-6)
