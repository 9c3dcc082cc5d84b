"""The multi-chain effective sample size of a mean: arviz-stats on shared inputs, the AR(1) closed form, chains
that disagree, edge inputs."""

import numpy as np
import pytest

from steinax.diagnostics.ess import effective_sample_size, mean_standard_error


def _ar1(rng, chains, draws, phi, p=None):
    shape = (chains, draws) if p is None else (chains, draws, p)
    x = np.empty(shape)
    e = rng.normal(size=shape)
    x[:, 0] = e[:, 0] / np.sqrt(1 - phi * phi)  # stationary start
    for i in range(1, draws):
        x[:, i] = phi * x[:, i - 1] + e[:, i]
    return x


def test_equals_arviz_stats_ess_mean():
    """arviz-stats' ``ess(method="mean")`` (Stan's estimator) on 200 random cases: 1-5 chains, 4-400 draws
    (odd lengths: the split drops the middle draw), AR(1) coefficients from -0.95 (antithetic: ESS > N) to
    0.99, chain offsets; float64 rounding (1e-9 relative: FFTs of at most 1024 values and one division)."""
    array_stats = pytest.importorskip("arviz_stats.base").array_stats
    rng = np.random.default_rng(0)
    for _ in range(200):
        chains, draws, phi = int(rng.integers(1, 6)), int(rng.integers(4, 400)), float(rng.uniform(-0.95, 0.99))
        x = _ar1(rng, chains, draws, phi) + rng.normal(size=(chains, 1)) * rng.uniform(0.0, 2.0)
        ours = effective_sample_size(x)
        theirs = array_stats.ess(x, chain_axis=0, draw_axis=1, method="mean")
        assert ours == pytest.approx(theirs, rel=1e-9), (chains, draws, phi)


def test_columns_are_functions():
    rng = np.random.default_rng(1)
    x = _ar1(rng, 3, 101, 0.5, p=3)
    np.testing.assert_allclose(effective_sample_size(x), [effective_sample_size(x[:, :, j]) for j in range(3)], rtol=1e-12)
    se = mean_standard_error(x)
    np.testing.assert_allclose(se, x.reshape(-1, 3).std(axis=0, ddof=1) / np.sqrt(effective_sample_size(x)), rtol=1e-12)


def test_ar1_closed_form():
    """4 stationary AR(1) chains of 20,000 draws, phi = 0.8: ESS = N (1 - phi) / (1 + phi) = 8889. The estimator's
    relative sd at this length is about 3% (checked over seeds), so 10% is more than three sds (fixed seed)."""
    x = _ar1(np.random.default_rng(2), 4, 20_000, 0.8)
    assert effective_sample_size(x) == pytest.approx(80_000 * 0.2 / 1.8, rel=0.10)
    iid = np.random.default_rng(3).normal(size=(4, 5000))
    assert effective_sample_size(iid) == pytest.approx(20_000, rel=0.10)


def test_chains_that_disagree_have_few_effective_draws():
    """Four well-mixed chains (independent draws each) about two different means: each chain alone looks
    perfect, but the mean of all of them is known only to about the spread of the chain means. Sokal's
    per-chain estimate (the dependent bootstrap's block length) cannot see that; this one gives ESS < 2% of N."""
    from steinax.stein.gof import integrated_autocorrelation_time

    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 500)) + np.array([0.0, 0.0, 3.0, 3.0])[:, None]
    assert effective_sample_size(x) < 0.02 * x.size
    assert integrated_autocorrelation_time(x[:, :, None]) < 1.5


def test_edge_inputs():
    assert effective_sample_size(np.ones((2, 10))) == 20
    assert np.isnan(effective_sample_size(np.r_[np.arange(9.0), np.nan].reshape(1, 10)))
    with pytest.raises(ValueError, match=r"`chains` must have shape .* received shape \(2, 3\)"):
        effective_sample_size(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"`chains`.*received shape \(10,\)"):
        mean_standard_error(np.zeros(10))
