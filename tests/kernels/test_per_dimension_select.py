"""Exact per-coordinate medians (``RBF("per_dimension")``): host and device paths against NumPy.

Both paths select ``fl(x_i - x_j)^2`` order statistics exactly (sorted-row binary
searches with the exact predicate), so they must equal ``np.median`` of the
materialised squared differences bit for bit, including ties (integer data) and
values where ``xs[j] <= xs[i] + t`` and ``xs[j] - xs[i] <= t`` round differently.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels.bandwidth import _host_per_dimension_median, _median_pairwise_1d, median_bandwidth


def _naive(x):
    n = x.shape[0]
    iu, ju = np.triu_indices(n, 1)
    return np.array([np.median((x[iu, c] - x[ju, c]) ** 2) for c in range(x.shape[1])], x.dtype)


def _data(kind, n, d, rng):
    if kind == "ints":  # many ties
        return rng.integers(0, 5, (n, d)).astype(np.float32)
    if kind == "offset":  # differences far below the values' ulp scale: rounding matters
        return (1e4 + 1e-3 * rng.normal(size=(n, d))).astype(np.float32)
    return rng.normal(size=(n, d)).astype(np.float32)


@pytest.mark.parametrize("kind", ["normal", "ints", "offset"])
@pytest.mark.parametrize("n", [2, 3, 8, 101, 700])
def test_host_and_device_equal_numpy_median(kind, n):
    x = _data(kind, n, 3, np.random.default_rng(n))
    want = _naive(x)
    np.testing.assert_array_equal(_host_per_dimension_median(x)[0], want)
    got = jax.jit(jax.vmap(_median_pairwise_1d))(jnp.asarray(x.T))
    np.testing.assert_array_equal(np.asarray(got), want)


def test_host_path_split_over_threads_equals_numpy_median():
    # n^2 d >= 2^22: the coordinates are split into groups run on the thread pool
    x = _data("normal", 300, 50, np.random.default_rng(7))
    np.testing.assert_array_equal(_host_per_dimension_median(x)[0], _naive(x))


def test_rule_is_permutation_invariant_and_jit_equals_eager():
    x = jnp.asarray(_data("normal", 600, 4, np.random.default_rng(0)))
    perm = jax.random.permutation(jax.random.key(1), 600)
    a = median_bandwidth(x, "per_dimension")
    np.testing.assert_array_equal(a, median_bandwidth(x[perm], "per_dimension"))
    np.testing.assert_array_equal(a, jax.jit(lambda y: median_bandwidth(y, "per_dimension"))(x))


@pytest.mark.parametrize("kind", ["cauchy", "scales", "bimodal"])
def test_host_path_on_heavy_tails_mixed_scales_and_two_modes(kind):
    # the bracket's proposals come from estimates; whatever they miss, the exact counts decide
    rng = np.random.default_rng(11)
    if kind == "cauchy":
        x = rng.standard_cauchy((900, 4))
    elif kind == "scales":
        x = rng.normal(size=(900, 4)) * np.array([[1e-8, 1e-2, 1e3, 1e8]])
    else:
        x = np.concatenate([rng.normal(size=(600, 4)), 50 + rng.normal(size=(300, 4))])
    x = x.astype(np.float32)
    np.testing.assert_array_equal(_host_per_dimension_median(x)[0], _naive(x))


def test_host_path_large_n_and_a_non_finite_coordinate():
    x = _data("normal", 2000, 3, np.random.default_rng(5))
    x[7, 1] = np.nan
    got = _host_per_dimension_median(x)[0]
    want = _naive(x)
    np.testing.assert_array_equal(got[[0, 2]], want[[0, 2]])
    assert np.isnan(got[1])  # median_bandwidth then falls back to h = 1


def test_device_path_counts_past_2_to_31_pairs():
    # Regression (GPU grid, run 4): at n = 10^5 the device path compared an int32 pair count with the
    # rank 2,499,974,999 and failed to trace; counts are now int32 limbs. Integers 0..n-1: the gap g
    # occurs n - g times, so the middle ranks' gaps follow from a cumulative count in int64.
    n = 100_000  # the middle rank n (n - 1) / 4 = 2.5e9 > 2^31
    x = np.arange(n, dtype=np.float32)[::-1].copy()
    gaps = np.arange(1, n, dtype=np.int64)
    below = np.cumsum(n - gaps)  # pairs with gap <= g
    count = n * (n - 1) // 2
    ranks = [count // 2] if count % 2 else [count // 2 - 1, count // 2]
    sq = [np.float32(gaps[np.searchsorted(below, r, side="right")]) ** 2 for r in ranks]
    want = np.float32(np.mean(np.asarray(sq, np.float64)))
    got = jax.jit(_median_pairwise_1d)(jnp.asarray(x))
    assert float(got) == pytest.approx(float(want), rel=1e-7)


def test_limb_sums_equal_int64_sums():
    from steinax.kernels.select import limbs_le, limbs_sum

    rng = np.random.default_rng(0)
    for size in [1, 7, 2**15, 2**15 + 1, 3 * 2**16 + 5]:
        x = rng.integers(0, 2**30, size).astype(np.int32)
        hi, lo = jax.jit(limbs_sum)(jnp.asarray(x))
        total = int(x.astype(np.int64).sum())
        assert int(hi) * 2**30 + int(lo) == total and 0 <= int(lo) < 2**30
        assert bool(limbs_le((hi, lo), total)) and not bool(limbs_le((hi, lo), total - 1))
