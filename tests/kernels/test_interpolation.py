"""Chebyshev-interpolated univariate RBF sums (steinax.kernels.interpolation) and CC-SVGD's use of them.

References: the kernel sums summed pair by pair in float64, and ``cc_svgd_direction(sums="direct")``.
Tolerances: the interpolation's a-priori bound is unit roundoff per kernel value; the
float32 results are compared with the float64 reference at the size of the direct
float32 sums' own error (measured on the same data, a factor 4 above it), never looser.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax import cc_svgd, cc_svgd_direction
from steinax.kernels import RBF, median_bandwidth
from steinax.kernels.interpolation import chebyshev_nodes, interpolated_rbf_sums, omega_limit


def _barycentric(points, degree):
    """[len(points), D + 1] Lagrange basis at the first-kind nodes, in float64."""
    z, w = chebyshev_nodes(degree)
    diff = points[:, None] - z[None, :]
    exact = diff == 0
    terms = w / np.where(exact, 1.0, diff)
    basis = terms / terms.sum(axis=1, keepdims=True)
    return np.where(exact.any(axis=1, keepdims=True), exact.astype(float), basis)


@pytest.mark.parametrize("second", [False, True])
@pytest.mark.parametrize("degree", [31, 63, 119])
def test_bound_holds_on_a_fine_grid(degree, second):
    # at the largest omega the bound allows, the tensor interpolant of k and of g (and of g2 with ``second``)
    # errs by at most 2^-24
    omega = omega_limit(degree, "float32", second)
    assert omega > 0
    grid = np.linspace(-1, 1, 801)
    basis = _barycentric(grid, degree)
    z, _ = chebyshev_nodes(degree)
    gap, node_gap = grid[:, None] - grid[None, :], z[:, None] - z[None, :]
    k, k_nodes = np.exp(-omega * gap**2), np.exp(-omega * node_gap**2)
    g, g_nodes = np.sqrt(omega) * gap * k, np.sqrt(omega) * node_gap * k_nodes
    pairs = [(k, k_nodes), (g, g_nodes)]
    if second:
        assert omega < omega_limit(degree, "float32")  # g2 is larger on the ellipse: a smaller limit
        pairs.append((omega * gap**2 * k, omega * node_gap**2 * k_nodes))
    for exact, nodes in pairs:
        assert np.abs(basis @ nodes @ basis.T - exact).max() <= 2.0**-24


def test_limits_grow_with_degree_and_shrink_with_precision():
    degrees = [31, 47, 63, 95, 127, 255]
    f32 = [omega_limit(d, "float32") for d in degrees]
    f64 = [omega_limit(d, "float64") for d in degrees]
    assert all(a < b for a, b in zip(f32, f32[1:]))
    assert all(a < b for a, b in zip(f64, f64[1:]))
    assert all(b < a for a, b in zip(f32, f64))


def _reference_sums(t, omega, v, c):
    t, v = np.asarray(t, np.float64), np.asarray(v, np.float64)
    gap = t[:, :, None] - t[:, None, :]
    k = np.exp(-np.asarray(omega, np.float64)[:, None, None] * gap**2)
    g = np.sqrt(np.asarray(omega, np.float64))[:, None, None] * gap * k
    return (k * v[:, None, :]).sum(-1) + np.asarray(c, np.float64)[:, None] * g.sum(-1)


def test_sums_equal_pairwise_sums_float64():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        t = jnp.asarray(rng.uniform(-1, 1, (3, 200)))
        omega, v, c = jnp.array([0.5, 20.0, 70.0]), jnp.asarray(rng.normal(size=(3, 200))), jnp.array([1.0, -2.0, 0.3])
        degree = next(d for d in (31, 63, 127, 191) if omega_limit(d, "float64") >= 70.0)
        got = interpolated_rbf_sums(t, omega, v, c, degree)
        want = _reference_sums(t, omega, v, c)
        # per value: (n terms) x (bound 2^-53 per kernel value) x (|v| + |c|), plus float64 rounding of the passes
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)


def test_points_on_nodes_are_finite_and_exact():
    degree = 31
    z, _ = chebyshev_nodes(degree)
    t = jnp.asarray(np.concatenate([z, np.linspace(-1, 1, 40)]), jnp.float32)[None, :]
    omega, v, c = jnp.array([5.0], jnp.float32), jnp.ones_like(t), jnp.array([0.5], jnp.float32)
    got = np.asarray(interpolated_rbf_sums(t, omega, v, c, degree))
    want = _reference_sums(t, omega, v, c)
    assert np.isfinite(got).all()
    # float32: sums of ~72 terms of size <= 1, a few ulps each
    np.testing.assert_allclose(got, want, rtol=0, atol=72 * 8 * 2.0**-24)


def _direction_errors(x, kernel, **kw):
    x64 = np.asarray(x, np.float64)
    with jax.enable_x64(True):
        want = np.asarray(cc_svgd_direction(jnp.asarray(x64), jnp.asarray(-x64), _as64(kernel), sums="direct"))
    fast = np.asarray(cc_svgd_direction(x, -x, kernel, **kw))
    direct = np.asarray(cc_svgd_direction(x, -x, kernel, sums="direct"))
    return np.abs(fast - want).max(), np.abs(direct - want).max(), np.abs(want).max()


def _interpolated(x, h):
    """Whether every coordinate of ``x`` is within the largest ladder degree's limit (the interpolation is used)."""
    from steinax.kernels.interpolation import LADDER as _LADDER

    n = x.shape[0]
    degree = max(d for d in _LADDER if 4 * (d + 1) <= n)
    half = (np.asarray(x).max(0) - np.asarray(x).min(0)) / 2
    return bool(np.all(half**2 / np.asarray(h) <= omega_limit(degree, np.dtype(x.dtype).name)))


def _as64(kernel):
    if kernel.bandwidth is None:
        return kernel
    return RBF(jnp.asarray(np.asarray(kernel.bandwidth), jnp.float64))


@pytest.mark.parametrize("n, kernel", [(600, "fixed"), (601, "median"),
                                       pytest.param(600, "median", marks=pytest.mark.slow),
                                       pytest.param(601, "fixed", marks=pytest.mark.slow)])
def test_cc_svgd_auto_equals_direct_to_float32_tolerance(n, kernel):
    x = jax.random.normal(jax.random.key(n), (n, 6), jnp.float32) * jnp.array([[1, 2, 0.1, 5, 1, 1]], jnp.float32)
    k = RBF("per_dimension") if kernel == "median" else RBF(median_bandwidth(x, "per_dimension"))
    assert _interpolated(x, median_bandwidth(x, "per_dimension"))
    fast, direct, scale = _direction_errors(x, k)
    # the interpolated float32 direction is as accurate as the direct float32 one (within 4x, on the same data)
    assert fast <= 4 * direct + 4 * 2.0**-24 * scale


@pytest.mark.slow  # ~6 s (float64 compilation); CI's slow pass runs it
def test_cc_svgd_auto_float64():
    with jax.enable_x64(True):
        x = jax.random.normal(jax.random.key(3), (600, 4), jnp.float64)
        assert _interpolated(x, median_bandwidth(x, "per_dimension"))
        fast = cc_svgd_direction(x, -x)
        direct = cc_svgd_direction(x, -x, sums="direct")
        np.testing.assert_allclose(fast, direct, rtol=0, atol=1e-12 * float(jnp.abs(direct).max()))


def test_uncovered_coordinates_are_summed_directly():
    # coordinate 0 has an outlier far beyond every degree's omega; coordinate 1 is constant (omega 0)
    x = jax.random.normal(jax.random.key(1), (200, 3), jnp.float32)
    x = x.at[0, 0].set(1e4).at[:, 1].set(2.5)
    h = median_bandwidth(x, "per_dimension")
    half = (x.max(0) - x.min(0)) / 2
    assert float(half[0] ** 2 / h[0]) > omega_limit(47, "float32")  # beyond the largest degree allowed at n = 200
    fast, direct, scale = _direction_errors(x, RBF("per_dimension"))
    assert fast <= 4 * direct + 4 * 2.0**-24 * scale


def test_chunks_of_coordinates_take_their_own_degrees():
    # 23 coordinates (three chunks of 10, the last padded): Student-t columns whose omegas span several ladder
    # limits, so the chunks pick different degrees, and one outlier coordinate that no degree covers
    rng = np.random.default_rng(5)
    x = rng.standard_t(df=np.linspace(2.5, 30, 23), size=(600, 23)).astype(np.float32)
    x[0, 7] = 40.0
    x = jnp.asarray(x)
    h = np.asarray(median_bandwidth(x, "per_dimension"))
    omega = np.sort(((np.asarray(x).max(0) - np.asarray(x).min(0)) / 2) ** 2 / h)
    limits = [omega_limit(deg, "float32") for deg in (63, 79, 95, 119)]
    used = {int(np.searchsorted(limits, chunk.max())) for chunk in (omega[:10], omega[10:20], omega[20:])}
    assert len(used) >= 2 and omega[-1] > limits[-1]
    # the dispatch itself: each coordinate gets the smallest ladder degree covering its chunk's largest omega
    from steinax.kernels.interpolation import LADDER, by_degree, scaled_coordinates

    t, om = scaled_coordinates(x, jnp.asarray(h, jnp.float32))
    degrees, covered = by_degree(lambda t_c, omega_c, degree: jnp.full(t_c.shape[0], degree), t, om)
    ladder = [deg for deg in LADDER if 4 * (deg + 1) <= 600]
    lims = np.array([omega_limit(deg, "float32") for deg in ladder])
    rank = np.argsort(np.argsort(np.asarray(om)))  # place in increasing omega: chunk = rank // 10
    for i in range(23):
        top = np.asarray(om)[rank // 10 == rank[i] // 10].max()
        assert int(degrees[i]) == ladder[min(int(np.sum(top > lims)), len(ladder) - 1)]
    assert np.array_equal(np.asarray(covered), np.asarray(om) <= lims[-1])
    fast, direct, scale = _direction_errors(x, RBF("per_dimension"))
    assert fast <= 4 * direct + 4 * 2.0**-24 * scale


@pytest.mark.slow  # ~4 s; CI's slow pass runs it
def test_vmapped_direction_matches():
    xs = jax.random.normal(jax.random.key(2), (2, 512, 3), jnp.float32)
    assert all(_interpolated(x, median_bandwidth(x, "per_dimension")) for x in xs)
    got = jax.vmap(lambda x: cc_svgd_direction(x, -x))(xs)
    for i in range(2):
        np.testing.assert_allclose(got[i], cc_svgd_direction(xs[i], -xs[i]), rtol=0, atol=1e-6)


def test_sums_must_be_a_known_mode():
    with pytest.raises(ValueError, match="`sums` must be one of"):
        cc_svgd(sums="fast")
    with pytest.raises(ValueError, match="received 'exact'"):
        cc_svgd_direction(jnp.zeros((4, 2)), jnp.zeros((4, 2)), sums="exact")
