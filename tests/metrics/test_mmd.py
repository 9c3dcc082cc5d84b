import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tolerance

from steinax.metrics import mmd2


def _naive(x, y, h, estimator):
    k = lambda a, b: np.exp(-np.sum((a - b) ** 2) / h)  # noqa: E731
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n, m = len(x), len(y)
    skip = estimator == "u"
    kxx = sum(k(x[i], x[j]) for i in range(n) for j in range(n) if not (skip and i == j))
    kyy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if not (skip and i == j))
    kxy = sum(k(x[i], y[j]) for i in range(n) for j in range(m))
    dx, dy = (n * (n - 1), m * (m - 1)) if skip else (n * n, m * m)
    return kxx / dx + kyy / dy - 2 * kxy / (n * m)


@pytest.mark.parametrize("estimator", ["u", "v"])
def test_mmd_equals_naive(estimator, key):
    x = jax.random.normal(key, (9, 2))
    y = jax.random.normal(jax.random.fold_in(key, 1), (7, 2)) + 0.5
    np.testing.assert_allclose(mmd2(x, y, 1.5, estimator), _naive(x, y, 1.5, estimator), **tolerance(jnp.float32, 0.1))


def test_mmd_properties(key):
    x = jax.random.normal(key, (50, 2))
    assert abs(float(mmd2(x, x))) < 1e-6
    assert float(mmd2(x, x + 2.0)) > 0.1
    with pytest.raises(ValueError, match="dimension"):
        mmd2(x, x[:, :1])
    with pytest.raises(ValueError, match="bandwidth"):
        mmd2(x, x, -1.0)


def test_blocked_equals_dense(key):
    from steinax.metrics import mmd2

    x = jax.random.normal(key, (23, 3))
    y = jax.random.normal(jax.random.fold_in(key, 1), (17, 3)) + 0.3
    for estimator in ("u", "v"):
        dense = mmd2(x, y, 1.3, estimator)
        for block in (1, 5, 16):
            np.testing.assert_allclose(mmd2(x, y, 1.3, estimator, block_size=block), dense, **tolerance(x.dtype))
