"""The divergence policy (``steinax.pipeline.divergences``): places spread like the draws are scattered at the
stated rate of false concentration; places piled at one end of a coordinate are named; the rate decides the rest."""

import numpy as np

from steinax.pipeline.divergences import MAX_DIVERGENCE_RATE, divergence_problem, where_divergences


def test_places_drawn_like_the_draws_are_scattered_at_the_stated_rate():
    """The concentration test's level is 1% per run (Bonferroni over coordinates: at most 1%); over 400 runs of 12
    places in 5 coordinates the count of false alarms is Binomial(400, <= 0.01): P(more than 12) < 1e-3."""
    rng = np.random.default_rng(0)
    alarms = 0
    for _ in range(400):
        draws = rng.standard_normal((2000, 5))
        places = draws[rng.choice(2000, 12, replace=False)]
        alarms += bool(where_divergences(places, draws, 12, 200_000)["concentrated"])
    assert alarms <= 12, alarms


def test_places_in_one_tail_are_named_and_make_a_problem():
    rng = np.random.default_rng(1)
    draws = rng.standard_normal((4000, 3))
    places = draws[np.argsort(draws[:, 2])[:8]]  # the 8 lowest in coordinate 2: a neck the chains avoid
    report = where_divergences(places, draws, 8, 200_000)
    assert report["concentrated"][0] == 2 and report["quantiles"][2] < 0.01
    problem, note = divergence_problem(report, names=["mu", "log_tau", "theta"])
    assert note is None and "concentrated in theta" in problem


def test_rate_decides_scattered_divergences():
    rng = np.random.default_rng(2)
    draws = rng.standard_normal((4000, 2))
    places = draws[:6]
    few = where_divergences(places, draws, 6, 200_000)
    assert divergence_problem(few)[0] is None and "6 divergent transitions, scattered" in divergence_problem(few)[1]
    many = where_divergences(places, draws, 500, 200_000)  # 6 places kept of 500
    assert many["rate"] > MAX_DIVERGENCE_RATE and "above" in divergence_problem(many)[0]
    none = where_divergences(np.zeros((0, 2)), draws, 0, 200_000)
    assert divergence_problem(none) == (None, None) and np.isnan(none["quantiles"]).all()


def test_thousands_of_places_at_both_ends_are_not_a_concentration():
    """A hard boundary on both sides (the uniform box): the places' mean quantile is 0.49, significant with 10,000
    places and meaningless; below ``MIN_SHIFT`` it is not called a concentration, and the rate rule decides."""
    from steinax.pipeline.divergences import MIN_SHIFT

    rng = np.random.default_rng(3)
    draws = rng.uniform(-1, 1, (20_000, 2))
    ends = np.concatenate([draws[draws[:, 0] < -0.98][:5100], draws[draws[:, 0] > 0.98][:4900]])
    report = where_divergences(ends, draws, 38_000, 60_000)
    assert abs(report["quantiles"][0] - 0.5) < MIN_SHIFT and report["concentrated"] == []
    assert "above" in divergence_problem(report)[0]
