"""The Pareto k-hat: arviz-stats on shared inputs, generalized Pareto draws of known shape, edge inputs."""

import numpy as np
import pytest

from steinax.diagnostics.pareto import FINITE_VARIANCE_K, pareto_khat


def test_equals_arviz_stats_pareto_khat():
    """arviz-stats' ``pareto_khat`` (r_eff = 1) on 300 random cases, both tails and each one: 25-3000 draws of
    normal, Student-t (0.5-6 degrees of freedom), powers of exponential and log-normal laws; float64 rounding
    (1e-12: a mean of logs over at most 160 values, and one softmax over 70 grid points)."""
    import warnings

    array_stats = pytest.importorskip("arviz_stats.base").array_stats
    rng = np.random.default_rng(1)
    for i in range(300):
        s = int(rng.integers(25, 3000))
        x = [rng.standard_normal(s), rng.standard_t(rng.uniform(0.5, 6.0), s),
             rng.exponential(size=s) ** rng.uniform(0.5, 3.0), rng.lognormal(0.0, rng.uniform(0.1, 2.0), s)][i % 4]
        for tail in ("both", "right", "left"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # arviz-stats warns of its own tail-length rules
                theirs = float(array_stats.pareto_khat(x[None], r_eff=1.0, tail=tail))
            assert pareto_khat(x, tail=tail) == pytest.approx(theirs, abs=1e-12), (i, s, tail)


@pytest.mark.parametrize("k", [-0.2, 0.25, 0.75])
def test_recovers_the_shape_of_generalized_pareto_draws(k):
    """The top ``M = 3 sqrt(S)`` of ``S = 10^5`` generalized Pareto draws are again generalized Pareto with the same
    shape (threshold stability): the estimate's sd is about ``(1 + k) / sqrt(M) <= 0.06``; the tolerance 0.2 is
    over 3.3 sds (fixed seed)."""
    rng = np.random.default_rng(2)
    u = rng.uniform(size=100_000)
    x = np.expm1(-k * np.log1p(-u)) / k  # the GPD(k, sigma = 1) quantile function
    assert pareto_khat(x, tail="right") == pytest.approx(k, abs=0.2)


def test_columns_and_the_finite_variance_line():
    rng = np.random.default_rng(3)
    x = np.c_[rng.standard_normal(4000), rng.standard_t(1.0, 4000), rng.standard_t(5.0, 4000)]
    k = pareto_khat(x)
    np.testing.assert_array_equal(k, [pareto_khat(x[:, j]) for j in range(3)])
    assert k[0] < FINITE_VARIANCE_K < k[1]  # a Cauchy has no variance, a normal every moment
    assert pareto_khat(np.ones(100)) == -np.inf
    assert np.isnan(pareto_khat(np.r_[np.zeros(90), np.ones(10)]))  # the tail ties with its cutoff


@pytest.mark.parametrize("kwargs, match", [({"values": np.ones(5)}, "values"),
                                           ({"values": np.ones((20, 2, 2))}, "values"),
                                           ({"values": np.arange(50.0), "tail": "up"}, "tail"),
                                           ({"values": np.arange(50.0), "r_eff": 0.0}, "r_eff")])
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pareto_khat(**kwargs)
