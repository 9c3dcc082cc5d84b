"""Nested R-hat (Margossian et al. 2024, eqs. 15-19) against a naive loop over the paper's sums, its degenerate cases,
and its behaviour on exact draws against chains stuck where they started."""

import numpy as np
import pytest

from steinax.diagnostics import nested_rhat


def _naive(x, k):
    """The paper's sums written out, one coordinate: x [C, N]."""
    c, n = x.shape
    m = c // k
    f = [[x[kk * m + mm] for mm in range(m)] for kk in range(k)]
    chain = [[sum(f[kk][mm]) / n for mm in range(m)] for kk in range(k)]
    sup = [sum(chain[kk]) / m for kk in range(k)]
    overall = sum(sup) / k
    b = sum((s - overall) ** 2 for s in sup) / (k - 1)
    w = 0.0
    for kk in range(k):
        bk = sum((chain[kk][mm] - sup[kk]) ** 2 for mm in range(m)) / (m - 1) if m > 1 else 0.0
        wk = sum(sum((v - chain[kk][mm]) ** 2 for v in f[kk][mm]) / (n - 1) for mm in range(m)) / m if n > 1 else 0.0
        w += (bk + wk) / k
    return np.sqrt(1 + b / w)


@pytest.mark.parametrize("c, n, k", [(12, 7, 3), (8, 1, 4), (6, 5, 6), (20, 3, 2)])
def test_equals_the_papers_sums(c, n, k):
    x = np.random.default_rng(c * n + k).standard_normal((c, n, 2)) + np.arange(c)[:, None, None] * 0.1
    got = nested_rhat(x, superchains=k)
    np.testing.assert_allclose(got, [_naive(x[..., j], k) for j in range(2)], rtol=1e-12)
    np.testing.assert_allclose(nested_rhat(x[..., 0], superchains=k), got[0], rtol=1e-15)


def test_exact_draws_pass_and_stuck_superchains_do_not():
    """Exact draws: B estimates Var / (M N) against W ~ Var, so nR - 1 ~ 1 / (2 M N), small; superchains that never
    left four different starting points 3 sds apart: large, however short the chains."""
    rng = np.random.default_rng(0)
    exact = rng.standard_normal((256, 5, 3))
    assert np.all(nested_rhat(exact, superchains=16) < 1.02)
    stuck = rng.standard_normal((256, 5, 3)) * 0.1 + np.repeat(3.0 * np.arange(16) % 4, 16)[:, None, None]
    assert np.all(nested_rhat(stuck, superchains=16) > 2.0)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`superchains`"):
        nested_rhat(np.zeros((10, 4)), superchains=3)
    with pytest.raises(ValueError, match="`chains`"):
        nested_rhat(np.zeros(10), superchains=2)
    assert np.isnan(nested_rhat(np.ones((4, 3)), superchains=2))
