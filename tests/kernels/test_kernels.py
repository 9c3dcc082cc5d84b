import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import IMQ, RBF, map_row_blocks, squared_distances


def _kernels(dtype):
    return {
        "rbf": RBF(0.7),
        "rbf_vector": RBF(jnp.array([0.5, 1.3, 2.0], dtype)),
        "imq": IMQ(1.0, -0.5),
        "imq_other": IMQ(0.6, -0.3),
    }


@pytest.mark.parametrize("name", ["rbf", "rbf_vector", "imq", "imq_other"])
def test_analytic_derivatives_match_autodiff(name, dtype, tols, key):
    x, y = jax.random.normal(key, (2, 3), dtype)
    kernel = _kernels(dtype)[name].resolve(x[None])
    np.testing.assert_allclose(kernel.grad_x(x, y), jax.grad(kernel, 0)(x, y), **tols)
    np.testing.assert_allclose(kernel.grad_y(x, y), jax.grad(kernel, 1)(x, y), **tols)
    mixed = jax.jacfwd(jax.grad(kernel, 0), 1)(x, y)  # d^2 k / dx_a dy_b
    np.testing.assert_allclose(kernel.trace_grad_xy(x, y), jnp.trace(mixed), **tols)
    # at coincident points (Stein methods differentiate k(x, x))
    np.testing.assert_allclose(kernel.trace_grad_xy(x, x), jnp.trace(jax.jacfwd(jax.grad(kernel, 0), 1)(x, x)), **tols)
    assert bool(jnp.all(jnp.isfinite(jax.grad(kernel, 0)(x, x))))


def test_rbf_form_matches_paper():
    # k(x, y) = exp(-||x - y||^2 / h), the MK-SVGD paper's form
    x, y = jnp.array([1.0, 2.0]), jnp.array([0.0, 0.0])
    assert float(RBF(2.0)(x, y)) == pytest.approx(np.exp(-5.0 / 2.0), rel=1e-6)
    assert float(IMQ(1.0, -0.5)(x, y)) == pytest.approx((1.0 + 5.0) ** -0.5, rel=1e-6)


def test_gram_matches_numpy():
    # NumPyro's test particles, far apart, against a direct numpy evaluation of exp(-||x-y||^2 / h)
    x = jnp.array([[1.0, 2.0], [10.0, 5.0], [7.0, 3.0], [2.0, -1.0]])
    k = RBF(3.0)
    expected = np.exp(-((np.asarray(x)[:, None] - np.asarray(x)[None]) ** 2).sum(-1) / 3.0)
    np.testing.assert_allclose(k.gram(x, x), expected, rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("scale", [None, 0.5, "vector"])
def test_squared_distances_naive(scale, dtype, tols, key):
    x = jax.random.normal(key, (7, 3), dtype) * 3.0 + 10.0
    y = jax.random.normal(jax.random.fold_in(key, 1), (5, 3), dtype) + 10.0
    s = jnp.array([0.5, 1.0, 2.0], dtype) if scale == "vector" else scale
    got = squared_distances(x, y, s)
    xn, yn = np.asarray(x, np.float64), np.asarray(y, np.float64)
    div = 1.0 if s is None else np.asarray(s, np.float64)
    want = np.array([[np.sum((a - b) ** 2 / div) for b in yn] for a in xn])
    np.testing.assert_allclose(got, want, rtol=tols["rtol"] * 10, atol=tols["atol"] * 100)
    assert got.dtype == x.dtype
    assert bool(jnp.all(squared_distances(x, x) >= 0))


@pytest.mark.parametrize("block_size", [1, 3, 4, 7, 100])
def test_map_row_blocks_equals_dense(block_size, key):
    x = jax.random.normal(key, (7, 2))
    fn = lambda rows: squared_distances(rows, x)  # noqa: E731
    np.testing.assert_allclose(map_row_blocks(fn, 7, block_size, x), fn(x), rtol=1e-6, atol=1e-6)


def test_bad_kernel_parameters():
    with pytest.raises(ValueError, match="bandwidth"):
        RBF(-1.0)
    with pytest.raises(ValueError, match="bandwidth"):
        RBF(0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        RBF(float("nan"))
    with pytest.raises(ValueError, match="bandwidth.*'mean'"):
        RBF("mean")
    with pytest.raises(ValueError, match="bandwidth"):
        RBF(jnp.array([1.0, -2.0]))
    with pytest.raises(ValueError, match="`c`"):
        IMQ(c=0.0)
    with pytest.raises(ValueError, match="`beta`"):
        IMQ(beta=0.5)
    with pytest.raises(ValueError, match="resolved"):
        RBF("liu").scale


def test_kernels_are_pytrees_and_jit_arguments(key):
    x = jax.random.normal(key, (5, 2))
    for k in [RBF(1.0), IMQ(), RBF("liu").resolve(x)]:
        leaves = jax.tree_util.tree_leaves(k)
        assert all(isinstance(l, jax.Array) for l in leaves)
        np.testing.assert_allclose(jax.jit(lambda k, x: k.gram(x, x))(k, x), k.gram(x, x), rtol=1e-6)


def test_self_distances_are_exactly_zero(key):
    """The expanded form leaves ~eps ||x||^2 on the diagonal; self-distances are set to 0 (dense and blocked)."""
    x = 3.0 + jax.random.normal(key, (6, 400))
    assert bool(jnp.all(jnp.diag(squared_distances(x, x)) == 0.0))
    blocked = squared_distances(x[2:5], x, row_index=jnp.array([2, 3, 4]))
    assert bool(jnp.all(jnp.array([blocked[0, 2], blocked[1, 3], blocked[2, 4]]) == 0.0))
    np.testing.assert_allclose(blocked, squared_distances(x, x)[2:5], rtol=1e-5)


def test_imq_half_power_fast_path_matches_general_power_and_its_derivatives():
    """``beta = -1/2`` runs an ``rsqrt`` copy (``imq_fast_path``): same values and derivatives, also in ``beta``."""
    from steinax.kernels.base import imq_fast_path

    s = jnp.linspace(0.0, 5.0, 11)
    half = IMQ(0.7, -0.5)

    def total(kernel):
        return sum(jnp.sum(p) for p in kernel.profile(s))

    fast = jax.jit(lambda k: imq_fast_path(k, total))
    np.testing.assert_allclose(fast(half), total(half), rtol=1e-6)
    np.testing.assert_allclose(fast(IMQ(0.7, -0.3)), total(IMQ(0.7, -0.3)), rtol=1e-6)
    # d/dbeta and d/dc through the fast branch equal the general power's (float64 closed form)
    c, b = 0.7, -0.5
    base = c * c + np.linspace(0.0, 5.0, 11)
    want_beta = np.sum(base**b * np.log(base) * (1 + b / base + (b - 1) * b / base**2)
                       + base**b * (1 / base + (2 * b - 1) / base**2))
    g = jax.grad(lambda beta: fast(IMQ(0.7, beta)))(-0.5)
    np.testing.assert_allclose(g, want_beta, rtol=1e-4)
    g_c = jax.grad(lambda cc: fast(IMQ(cc, -0.5)))(0.7)
    g_c_general = jax.grad(lambda cc: total(IMQ(cc, -0.5)))(0.7)
    np.testing.assert_allclose(g_c, g_c_general, rtol=1e-5)
