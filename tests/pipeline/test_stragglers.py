"""Stragglers (issue 49): the threshold against its closed form, its false-alarm rate on exact draws, and a planted
straggler named (the found case: log-density -146 beside a bulk at -87, d = 6)."""

import numpy as np
import pytest
from scipy import stats

from steinax.pipeline import find_stragglers, straggler_threshold


def test_the_threshold_is_the_gaussian_spread_of_log_densities():
    # d = 2: -log p above its minimum is Exp(1): quantile -log(level), median log 2
    assert straggler_threshold(2, 1e-6) == pytest.approx(-np.log(1e-6) - np.log(2.0), rel=1e-10)
    assert straggler_threshold(6) == pytest.approx(stats.gamma(3).ppf(1 - 1e-6) - stats.gamma(3).median(), rel=1e-12)


@pytest.mark.parametrize("d", [2, 10, 100])
def test_exact_gaussian_draws_are_not_named(d):
    # 200 subsets of 100 exact draws: each names one with probability about 100 * 1e-6, so P(any of 200) ~ 2%;
    # with seed 0 none is named
    x = np.random.default_rng(0).standard_normal((200, 100, d))
    logd = -0.5 * np.sum(x**2, axis=-1)
    assert sum(find_stragglers(row, d).size for row in logd) == 0


def test_a_planted_straggler_is_named_and_a_non_finite_one_too():
    rng = np.random.default_rng(1)
    bulk = -87.0 - stats.gamma(3).rvs(99, random_state=rng) + stats.gamma(3).median()
    assert find_stragglers(np.append(bulk, -146.0), 6).tolist() == [99]
    assert find_stragglers(np.append(bulk, np.nan), 6).tolist() == [99]
    assert find_stragglers(bulk, 6).size == 0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`dim`"):
        straggler_threshold(0)
    with pytest.raises(ValueError, match="`level`"):
        straggler_threshold(3, 0.7)
