import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import RBF, kth_smallest, median_bandwidth, squared_distances


def _np_sqdist(x):
    x = np.asarray(x, np.float64)
    return ((x[:, None] - x[None]) ** 2).sum(-1)


@pytest.mark.parametrize("n", [2, 3, 50, 101])
def test_liu_rule_is_numpy_median_over_all_entries(n, dtype, key):
    # Liu & Wang svgd.py: h_paper = median(D incl. diagonal zeros) / log(n + 1)
    x = jax.random.normal(key, (n, 3), dtype)
    d2 = np.asarray(squared_distances(x, x))  # the same matrix our rule reads
    want = np.median(d2) / np.log(n + 1)
    got = median_bandwidth(x, "liu")
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)
    np.testing.assert_allclose(want, np.median(_np_sqdist(x)) / np.log(n + 1), rtol=1e-4)


@pytest.mark.parametrize("n", [2, 3, 50, 101])
def test_pairs_rule(n, key):
    x = jax.random.normal(key, (n, 3))
    d2 = np.asarray(squared_distances(x, x))
    want = np.median(d2[np.triu_indices(n, 1)]) / np.log(n + 1)
    np.testing.assert_allclose(median_bandwidth(x, "pairs"), want, rtol=1e-6)


def test_per_dimension_rule(key):
    n = 40
    x = np.asarray(jax.random.normal(key, (n, 3))) * np.array([0.1, 1.0, 10.0])
    iu = np.triu_indices(n, 1)
    want = [np.median(((x[:, None, k] - x[None, :, k]) ** 2)[iu]) / np.log(n + 1) for k in range(3)]
    np.testing.assert_allclose(median_bandwidth(jnp.asarray(x), "per_dimension"), want, rtol=1e-5)


@pytest.mark.parametrize("rule", ["liu", "pairs"])
@pytest.mark.parametrize("block_size", [1, 7, 16])
def test_blocked_median_equals_dense(rule, block_size, key):
    x = jax.random.normal(key, (37, 4))
    # same multiset of distances up to the rounding of block-wise matrix products
    np.testing.assert_allclose(
        median_bandwidth(x, rule, block_size=block_size), median_bandwidth(x, rule), rtol=1e-6
    )


@pytest.mark.parametrize("n", [3, 400])
@pytest.mark.parametrize("host", [True, False])
def test_blocked_median_reads_each_pair_once_and_matches_numpy(n, host, monkeypatch):
    """The blocked median folds over the packed upper triangle (top rows with the reversed bottom rows, the
    middle row last for odd n): every pair once, plus n // 2 zeros that shift the ranks. Against numpy's
    float64 median of the exact distances (n = 400 has more pairs than the host partitions whole, so the
    bracket-and-compact path runs), on the host and on the device path, for block sizes 1 and 10."""
    from steinax.kernels import bandwidth

    monkeypatch.setattr(bandwidth, "use_host", lambda dtype, axis_name=None: host)
    x = jax.random.normal(jax.random.key(n), (n, 3))
    xd = np.asarray(x, np.float64)
    d = ((xd[:, None, :] - xd[None, :, :]) ** 2).sum(-1)
    for rule, values in (("liu", d.reshape(-1)), ("pairs", d[np.triu_indices(n, 1)])):
        want = np.median(values) / np.log(n + 1.0)
        if want <= 0:
            want = 1.0
        for block_size in (1, 10):
            got = float(median_bandwidth(x, rule, block_size=block_size))
            np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=f"{rule}, block_size={block_size}")


def test_kth_smallest_with_ties(dtype):
    v = jnp.array([3.0, 1.0, 2.0, 2.0, 5.0, 0.0, 2.0, 1e-30, 7e5], dtype)
    ref = np.sort(np.asarray(v))
    kth = jax.jit(jax.vmap(kth_smallest, in_axes=(None, 0, None)))
    assert kth(v, jnp.arange(v.size), None).tolist() == ref.tolist()
    mask = jnp.array([True, False] * 4 + [True])
    ref_m = np.sort(np.asarray(v)[np.asarray(mask)])
    assert kth(v, jnp.arange(ref_m.size), mask).tolist() == ref_m.tolist()


def test_fallback_single_and_coincident_particles():
    assert float(median_bandwidth(jnp.ones((1, 3)))) == 1.0
    assert float(median_bandwidth(jnp.ones((6, 2)), "liu")) == 1.0
    assert float(median_bandwidth(jnp.ones((6, 2)), "pairs")) == 1.0
    np.testing.assert_array_equal(median_bandwidth(jnp.ones((6, 2)), "per_dimension"), [1.0, 1.0])


def test_permutation_invariant_and_gradient_stopped(key):
    x = jax.random.normal(key, (30, 2))
    perm = jax.random.permutation(jax.random.fold_in(key, 1), 30)
    for rule in ("liu", "pairs", "per_dimension"):  # invariant up to float rounding of the distances
        np.testing.assert_allclose(median_bandwidth(x, rule), median_bandwidth(x[perm], rule), rtol=1e-6)
    g = jax.grad(lambda x: median_bandwidth(x))(x)
    assert float(jnp.abs(g).max()) == 0.0


def test_subsampled_rule(key):
    x = jax.random.normal(key, (300, 2))
    h = median_bandwidth(x, "liu_subsampled", rng_key=key, max_points=100)
    assert 0.5 * median_bandwidth(x) < h < 2.0 * median_bandwidth(x)
    # without a key: the strided rows 0, 3, 6, ... (regression: RBF("liu_subsampled") used to always raise)
    strided = median_bandwidth(x, "liu_subsampled", max_points=100)
    sub = x[::3]
    expected = jnp.median(jnp.sum((sub[:, None] - sub[None]) ** 2, -1)) / jnp.log(301.0)
    np.testing.assert_allclose(strided, expected, rtol=1e-5)
    k = RBF("liu_subsampled").resolve(jax.random.normal(key, (1500, 2)))
    assert k.is_resolved and float(k.bandwidth) > 0


def test_rbf_resolves_rule(key):
    x = jax.random.normal(key, (20, 2))
    k = RBF("pairs").resolve(x)
    np.testing.assert_array_equal(k.bandwidth, median_bandwidth(x, "pairs"))
    with pytest.raises(ValueError, match="rule"):
        median_bandwidth(x, "mean")


@pytest.mark.parametrize("n", [2, 3, 8, 9, 257, 1000])
@pytest.mark.parametrize("host", [True, False])
def test_stored_median_reads_the_packed_upper_triangle_and_equals_the_full_matrix_median(n, host, monkeypatch):
    """``"liu"``/``"pairs"`` on a stored matrix select among the ``i < j`` entries only (half the data).

    The packed rectangle holds exactly the upper entries of any matrix plus ``n // 2`` diagonal zeros; the
    stored matrix is symmetric bit for bit (the assumption that lets the lower triangle go unread), so the
    result equals numpy's median of all ``n^2`` entries and of the pairs exactly, on the host (NumPy) and on
    the device path.
    """
    from steinax.kernels import bandwidth
    from steinax.kernels.bandwidth import _middle_ranks, _packed_upper_triangle, _stored_median
    from steinax.kernels.pairwise import squared_distances

    monkeypatch.setattr(bandwidth, "use_host", lambda dtype, axis_name=None: host)
    iu = np.triu_indices(n, 1)
    any_matrix = np.asarray(jax.random.uniform(jax.random.key(1), (n, n)) + 1.0) * (1 - np.eye(n, dtype=np.float32))
    values, zeros = _packed_upper_triangle(jnp.asarray(any_matrix))
    assert zeros == n // 2 and values.size == iu[0].size + zeros
    np.testing.assert_array_equal(np.sort(np.asarray(values)), np.concatenate([np.zeros(zeros), np.sort(any_matrix[iu])]))
    for dim in (5, 100):
        x = jax.random.normal(jax.random.key(n), (n, dim)) * 3.0 + 1.0
        d = np.asarray(squared_distances(x, x))
        np.testing.assert_array_equal(d, d.T)
        assert not d.diagonal().any()
        for pairs, values in ((False, d.reshape(-1)), (True, d[iu])):
            want = np.sort(values)[_middle_ranks(values.size)]
            want = want[0] if want.size == 1 else np.float32(0.5) * (want[0] + want[1])
            assert float(jax.jit(_stored_median, static_argnums=1)(jnp.asarray(d), pairs)) == float(want)


@pytest.mark.parametrize("rule", ["liu", "pairs"])
def test_median_gradient_passes_through_the_median_pair_as_torch_median_does(rule):
    """``stop_gradient=False``: the same value; the gradient is that of the middle distance(s) over log(n + 1),
    reaching only the particles of the median pair(s) (PyTorch's ``torch.median`` semantics)."""
    n = 9 if rule == "liu" else 10  # an odd count of values in each case: one middle value
    x = jax.random.normal(jax.random.key(3), (n, 2))
    h_stop = median_bandwidth(x, rule)
    h = median_bandwidth(x, rule, stop_gradient=False)
    np.testing.assert_allclose(h, h_stop, rtol=1e-6)
    grad = np.asarray(jax.grad(lambda x: median_bandwidth(x, rule, stop_gradient=False))(x), np.float64)
    # brute force in float64: the pair whose distance is the median
    x64 = np.asarray(x, np.float64)
    d2 = ((x64[:, None] - x64[None]) ** 2).sum(-1)
    i, j = np.triu_indices(n, 1)
    med = float(np.median(d2.reshape(-1) if rule == "liu" else d2[i, j]))
    k = np.argmin(np.abs(d2[i, j] - med))
    a, b = i[k], j[k]
    expected = np.zeros_like(x64)
    expected[a] = 2.0 * (x64[a] - x64[b]) / np.log(n + 1.0)
    expected[b] = -expected[a]
    np.testing.assert_allclose(grad, expected, atol=1e-5 * np.abs(expected).max())
    assert not np.any(np.asarray(jax.grad(lambda x: median_bandwidth(x, rule))(x)))  # the default stops it


def test_median_gradient_is_refused_where_it_is_not_defined():
    with pytest.raises(ValueError, match="stop_gradient"):
        median_bandwidth(jnp.ones((4, 2)), "per_dimension", stop_gradient=False)
    with pytest.raises(ValueError, match="median_gradient"):
        RBF(2.0, median_gradient=True)
