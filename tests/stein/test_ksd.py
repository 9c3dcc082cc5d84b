import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.kernels import IMQ, RBF
from steinax.stein import ksd, stein_kernel_matrix
from reference import kernel_zoo, naive_ksd
from conftest import tolerance


def _data(key, dtype, n=9, d=3):
    x = jax.random.normal(key, (n, d), dtype) + 2.0
    s = -1.3 * x + 0.4 * jnp.sin(x)  # any score field
    return x, s


@pytest.mark.parametrize("kname", ["rbf", "rbf_median", "rbf_vector", "imq", "imq_other"])
@pytest.mark.parametrize("estimator", ["u", "v"])
def test_ksd_equals_naive_double_loop(kname, estimator, dtype, tols, key):
    x, s = _data(key, dtype)
    kernel = kernel_zoo(kname, dtype, h=1.5)
    resolved = kernel.resolve(x)
    want = naive_ksd(x, s, lambda a, b: resolved(a, b), estimator)
    np.testing.assert_allclose(ksd(x, s, kernel, estimator), want, **tols)
    assert ksd(x, s, kernel, estimator).dtype == x.dtype


@pytest.mark.parametrize("kname", ["rbf", "rbf_median", "rbf_vector", "imq", "imq_other"])
@pytest.mark.parametrize("estimator", ["u", "v"])
def test_ksd_row_sums_path_equals_naive_double_loop(kname, estimator, dtype, tols, key):
    # d >= 32 takes the products-of-kernel-matrices path (stein_kernel_row_sums); d = 3 above takes the terms
    x, s = _data(key, dtype, d=40)
    kernel = RBF(jnp.linspace(0.5, 2.0, 40, dtype=dtype)) if kname == "rbf_vector" else kernel_zoo(kname, dtype, h=30.0)
    resolved = kernel.resolve(x)
    want = naive_ksd(x, s, lambda a, b: resolved(a, b), estimator)
    np.testing.assert_allclose(ksd(x, s, kernel, estimator), want, **tols)


def test_row_sums_over_row_blocks_total_the_stein_kernel_matrix(key):
    from steinax.stein.ksd import stein_kernel_row_sums

    x, s = _data(key, "float32", n=20, d=5)

    @jax.jit
    def totals(kernel):  # three row blocks (7, 7, 6 rows) against the Stein kernel matrix's total
        blocks = sum(jnp.sum(stein_kernel_row_sums(x[a:a + 7], s[a:a + 7], x, s, kernel, row_index=jnp.arange(a, min(a + 7, 20))))
                     for a in range(0, 20, 7))
        return blocks, jnp.sum(stein_kernel_matrix(x, s, x, s, kernel))

    for kernel in (IMQ(0.8, -0.3), RBF(2.0), RBF(jnp.linspace(1.0, 3.0, 5))):
        got, want = totals(kernel)
        np.testing.assert_allclose(got, want, **tolerance(jnp.float32))


def test_stein_kernel_matrix_is_symmetric_psd(key):
    x, s = _data(key, "float32", n=30)
    u = stein_kernel_matrix(x, s, x, s, IMQ())
    np.testing.assert_allclose(u, u.T, **tolerance(jnp.float32))
    assert float(jnp.linalg.eigvalsh(u.astype(jnp.float32)).min()) > -1e-3 * float(jnp.abs(u).max())


@pytest.mark.parametrize("block_size", [1, 7])
@pytest.mark.parametrize("estimator", ["u", "v"])
def test_blocked_equals_dense(block_size, estimator, key):
    x, s = _data(key, "float32", n=23)
    for kernel in (IMQ(), RBF("liu"), RBF("pairs")):
        np.testing.assert_allclose(
            ksd(x, s, kernel, estimator, block_size=block_size), ksd(x, s, kernel, estimator), **tolerance(jnp.float32, 0.1)
        )


def test_u_statistic_unbiased_on_exact_samples(key):
    """Mean of the U-statistic over R = 400 independent sets is 0 within 3.29 standard errors.

    Under the hypothesis that the U-statistic is unbiased, the replicate mean
    is approximately normal (CLT over 400 replicates), so this check fails with
    probability about 0.1% (two-sided 3.29 sigma). The V-statistic, biased
    upwards by the diagonal, must fail the same check (so the check has power).
    """
    reps, n, d = 400, 50, 2
    xs = jax.random.normal(key, (reps, n, d))
    for kernel in (IMQ(), RBF(1.0)):
        u = jax.jit(jax.vmap(lambda x: ksd(x, -x, kernel, "u")))(xs)
        v = jax.jit(jax.vmap(lambda x: ksd(x, -x, kernel, "v")))(xs)
        se_u = float(jnp.std(u)) / np.sqrt(reps)
        se_v = float(jnp.std(v)) / np.sqrt(reps)
        assert abs(float(jnp.mean(u))) < 3.29 * se_u
        assert float(jnp.mean(v)) > 3.29 * se_v


def test_ksd_detects_shift(key):
    x = jax.random.normal(key, (300, 2))  # samples of N(0, I)
    assert abs(float(ksd(x, -x, IMQ(), "u"))) < 0.01  # target N(0, I)
    assert float(ksd(x, -(x - 1.0), IMQ(), "u")) > 0.1  # target N(1, I)


def test_errors(key):
    x, s = _data(key, "float32")
    with pytest.raises(ValueError, match="estimator"):
        ksd(x, s, IMQ(), "w")
    with pytest.raises(ValueError, match="same shape"):
        ksd(x, s[:, :2], IMQ())
    with pytest.raises(ValueError, match=r"shape \[n, d\]"):
        ksd(x[0], s[0], IMQ())
    with pytest.raises(ValueError, match="finite"):
        ksd(x.at[0, 0].set(jnp.nan), s, IMQ())
    with pytest.raises(ValueError, match="finite"):
        ksd(x, s.at[1, 1].set(jnp.inf), IMQ())
    with pytest.raises(TypeError, match="must have dtype float32 or float64"):
        ksd(jnp.ones((3, 2), jnp.int32), jnp.ones((3, 2), jnp.int32), IMQ())
    with pytest.raises(ValueError, match="at least 2"):
        ksd(x[:1], s[:1], IMQ(), "u")


def test_block_ksd_is_the_mean_of_block_u_statistics(key):
    from steinax.stein import block_ksd

    x = jax.random.normal(key, (103, 3)) + 0.4
    s = -x
    k = IMQ()
    blocks = [steinax.ksd(x[i * 10:(i + 1) * 10], s[i * 10:(i + 1) * 10], k, "u") for i in range(10)]
    np.testing.assert_allclose(block_ksd(x, s, k, block=10), np.mean(blocks), rtol=1e-5)
    perm = jax.random.permutation(jax.random.key(4), 103)
    np.testing.assert_allclose(block_ksd(x, s, k, block=10, rng_key=jax.random.key(4)),
                               block_ksd(x[perm], s[perm], k, block=10), rtol=1e-6)
    with pytest.raises(ValueError, match="`block` must be an integer >= 2"):
        block_ksd(x, s, k, block=1)


@pytest.mark.slow
def test_block_ksd_is_unbiased_at_scale(key):
    """n = 200,000 in d = 10 in linear time. Exact N(0, I) samples: the estimate is within 4 standard
    errors of 0 (SE estimated from the block values' spread; failure rate ~6e-5); with one mean shifted
    by 0.5 it is within 4 SE of the U-statistic of a 4,000-sample subset's expectation (both unbiased)."""
    from steinax.stein import block_ksd

    n, d, b = 200_000, 10, 50
    x = jax.random.normal(key, (n, d))
    k = IMQ()
    est = float(block_ksd(x, -x, k, block=b))
    per_block = jax.vmap(lambda xx: steinax.ksd(xx, -xx, k, "u"))(x.reshape(-1, b, d))
    se = float(jnp.std(per_block) / jnp.sqrt(per_block.shape[0]))
    np.testing.assert_allclose(est, float(jnp.mean(per_block)), rtol=1e-4, atol=1e-7)
    assert abs(est) < 4 * se, (est, se)
    mu = jnp.zeros((1, d)).at[0, 0].set(0.5)
    shifted_est = float(block_ksd(x, -(x - mu), k, block=b))
    full_u = float(steinax.ksd(x[:4000], -(x[:4000] - mu), k, "u"))
    assert shifted_est > 10 * se and abs(shifted_est - full_u) < 4 * se + 0.01, (shifted_est, full_u, se)
