"""Nested R-hat (Margossian et al. 2024, eqs. 15-19) against a naive loop over the paper's sums, its degenerate cases,
and its behaviour on exact draws against chains stuck where they started."""

import numpy as np
import pytest

from steinax.diagnostics import neighbour_superchains, nested_rhat, rank_nested_rhat


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


@pytest.mark.parametrize("shape, m", [((16, 9, 2), 4), ((12, 20, 1), 3), ((8, 6, 3), 1)])
def test_rank_version_is_arviz_rank_nested_rhat(shape, m):
    arviz_stats = pytest.importorskip("arviz_stats")
    rng = np.random.default_rng(shape[0] + m)
    x = rng.standard_normal(shape) + 0.2 * rng.standard_normal((shape[0], 1, shape[2]))
    x[0, 0, 0] = x[1, 0, 0]  # a tie: ranks averaged in both
    ids = rng.permutation(np.repeat(np.arange(shape[0] // m), m))  # superchains need not be contiguous
    got = rank_nested_rhat(x, ids)
    want = [float(arviz_stats.rhat_nested(x[..., j], superchain_ids=list(ids), method="rank", chain_axis=0,
                                          draw_axis=1)) for j in range(shape[2])]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # a left-out chain (id -1) is as if it were not there
    ids2 = np.concatenate([ids, [-1]])
    x2 = np.concatenate([x, rng.standard_normal((1,) + shape[1:]) + 50.0])
    np.testing.assert_allclose(rank_nested_rhat(x2, ids2), got, rtol=1e-12)


def test_neighbour_superchains_are_equal_compact_groups():
    rng = np.random.default_rng(1)
    starts = rng.standard_normal((100, 3)) * [5.0, 1.0, 1.0]
    ids = neighbour_superchains(starts, size=16)  # 100 // 16 = 6 -> K = 4 groups of 25
    labels, counts = np.unique(ids, return_counts=True)
    assert labels.tolist() == [0, 1, 2, 3] and counts.tolist() == [25] * 4
    # the first cut is along the widest axis: the groups' means of coordinate 0 are far apart
    means = np.array([starts[ids == k, 0].mean() for k in range(4)])
    assert np.ptp(means) > 5.0
    odd = neighbour_superchains(rng.standard_normal((101, 2)), size=16)
    assert (odd == -1).sum() <= 2 and np.unique(np.bincount(odd[odd >= 0])).size == 1
    with pytest.raises(ValueError, match="`size`"):
        neighbour_superchains(starts, size=0)
    with pytest.raises(ValueError, match="`superchain_ids`"):
        rank_nested_rhat(rng.standard_normal((4, 8)), [0, 0, 0, 1])


def test_rank_nested_rhat_flags_chains_that_remember_their_starts():
    """Chains that stayed near where they started (neighbour superchains of a spread start) against chains that
    forgot it (exact draws): 256 chains of 20 draws."""
    rng = np.random.default_rng(2)
    starts = rng.standard_normal((256, 2))
    ids = neighbour_superchains(starts, size=16)
    stuck = starts[:, None, :] + 0.3 * rng.standard_normal((256, 20, 2))
    mixed = rng.standard_normal((256, 20, 2))
    assert np.max(rank_nested_rhat(stuck, ids)) > 1.1
    assert np.max(rank_nested_rhat(mixed, ids)) < 1.01
