"""The samplers' yardstick (issue 50): squared biases of E[x] and E[x^2] in units of Var[x] and Var[x^2], and the
cost at which a trace falls below 0.01 and stays there."""

import dataclasses

import numpy as np
import pytest

from steinax.metrics.posterior import (
    BIAS_THRESHOLD,
    cost_to_threshold,
    reference_moments,
    squared_bias,
)
from steinax.posteriors import Reference


def test_squared_bias_is_the_naive_weighted_formula():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(30, 4)) * [1.0, 10.0, 0.1, 3.0], rng.uniform(size=30)
    m = {"mean": rng.normal(size=4), "var": rng.uniform(1, 2, 4), "mean2": rng.uniform(1, 2, 4),
         "var2": rng.uniform(1, 2, 4)}
    b = squared_bias(x, m, weights=w)
    for i in range(4):  # coordinate by coordinate, sums written out
        e1 = sum(w[j] * x[j, i] for j in range(30)) / sum(w)
        e2 = sum(w[j] * x[j, i] ** 2 for j in range(30)) / sum(w)
        assert b["x"][i] == pytest.approx((e1 - m["mean"][i]) ** 2 / m["var"][i], rel=1e-12)
        assert b["x2"][i] == pytest.approx((e2 - m["mean2"][i]) ** 2 / m["var2"][i], rel=1e-12)


def test_exact_draws_give_one_over_n():
    """n exact draws of N(mu, s^2): each squared bias is chi^2_1 / n in expectation (x: (mean error)^2 / s^2; x^2: the
    sample mean of x^2 has variance Var[x^2] / n), so the average over 4000 repetitions x 3 coordinates is 1/n within
    4% (its relative sd is sqrt(2 / 12000) = 1.3%: a 3-sd band, failure rate about 0.3% for this fixed seed's draw)."""
    rng = np.random.default_rng(1)
    mu, s, n = np.array([2.0, -1.0, 0.0]), np.array([0.5, 3.0, 1.0]), 100
    ref = Reference(mean=mu, sd=s, draws=mu + s * rng.normal(size=(400_000, 3)), meta={})
    m = reference_moments(ref)
    np.testing.assert_allclose(m["var2"], 4 * mu**2 * s**2 + 2 * s**4, rtol=0.02)  # Var[x^2] of a normal
    b = [squared_bias(mu + s * rng.normal(size=(n, 3)), m) for _ in range(4000)]
    assert np.mean([v["x"] for v in b]) * n == pytest.approx(1.0, abs=0.04)
    assert np.mean([v["x2"] for v in b]) * n == pytest.approx(1.0, abs=0.06)  # plus the reference's own error
    assert BIAS_THRESHOLD == 0.01  # an ESS of 100


def test_cost_to_threshold_is_where_the_trace_stays_below():
    assert cost_to_threshold([10, 20, 30, 40], [0.5, 0.005, 0.02, 0.004]) == 40.0
    assert cost_to_threshold([10, 20], [0.001, 0.002]) == 10.0
    assert cost_to_threshold([10, 20, 30], [0.5, 0.001, 0.5]) == np.inf  # not below at the end: not reached
    assert cost_to_threshold([10, 20, 30], [0.001, np.nan, 0.001]) == 30.0  # NaN is not below
    # a bias the sampler declares it does not estimate costs NaN, "not measured"; one that is NaN because the run
    # went non-finite from its first step is "not reached", never passed off as not measured
    from steinax.posteriors.yardstick.bench import fmt_cost
    from steinax.posteriors.yardstick.trace import BIASES, Trace

    nan3 = np.full(3, np.nan)
    t = Trace(sampler="s", chains=2, biases={b: nan3 if b == "x_max" else np.array([0.5, 0.001, 0.001]) for b in BIASES},
              gradient_evaluations=np.array([2.0, 4.0, 6.0]), sequential_steps=np.array([1.0, 2.0, 3.0]),
              seconds=np.array([0.1, 0.2, 0.3]), compile_seconds=0.0,
              tuning={"gradient_evaluations": 10, "sequential_steps": 5, "seconds": 0.0}, info={})
    assert t.cost("x_max") == np.inf and fmt_cost(t.cost("x_max")) == "not reached"
    t = dataclasses.replace(t, unmeasured=("x_max",))
    assert np.isnan(t.cost("x_max")) and fmt_cost(t.cost("x_max")) == "not measured"
    assert t.cost("x2_max") == 14.0 and fmt_cost(float("inf")) == "not reached"
    with pytest.raises(ValueError, match="non-decreasing"):
        cost_to_threshold([20, 10], [0.0, 0.0])
    with pytest.raises(ValueError, match="one length"):
        cost_to_threshold([10, 20], [0.0])
    with pytest.raises(ValueError, match="weights"):
        squared_bias(np.zeros((3, 1)), {"mean": np.zeros(1), "var": np.ones(1), "mean2": np.ones(1),
                                        "var2": np.ones(1)}, weights=[1.0, -1.0, 1.0])


def test_reference_moments_keep_the_references_mean_and_sd_over_its_draws():
    """Thinned reference draws can be off the reference's own (exact or full-run) moments: E[x^2] is mu^2 + s^2 from
    the moments, and Var[x^2] is the draws' moved and rescaled to them (for a normal 4 mu^2 s^2 + 2 s^4, within the
    2% of 400,000 draws' estimate: its relative sd is about 0.3-0.4%)."""
    rng = np.random.default_rng(2)
    mu, s = np.array([2.0, -1.0, 0.0]), np.array([0.5, 3.0, 1.0])
    off = (mu + 0.3) + 0.84 * s * rng.normal(size=(400_000, 3))  # shifted and shrunk draws
    m = reference_moments(Reference(mean=mu, sd=s, draws=off, meta={}))
    np.testing.assert_allclose(m["mean2"], mu**2 + s**2, rtol=1e-12)
    np.testing.assert_allclose(m["var"], s**2, rtol=1e-12)
    np.testing.assert_allclose(m["var2"], 4 * mu**2 * s**2 + 2 * s**4, rtol=0.02)


def test_the_goal_counts_against_the_cheaper_nuts_and_the_best_many_chain_sampler():
    """summary's counts on hand-made rows: NUTS is the cheaper of BlackJAX's (this table's chains) and NumPyro's (4
    chains, whichever table it is in); a posterior where neither NUTS reaches 0.01 is not counted; sequential steps
    are compared with the best of the many-chain samplers present."""
    from steinax.posteriors.yardstick.bench import summary

    inf = float("inf")

    def row(post, sampler, chains, grads, seq):
        return {"posterior": post, "d": 2, "chains": str(chains), "sampler": sampler, "seed": "0", "note": "",
                "grads_to_x2_max": grads, "sequential_to_x2_max": seq, "seconds_to_x2_max": 1.0}

    rows = [row("a", "steinax.sample", 256, 60, 5), row("a", "nuts", 256, 100, 50), row("a", "numpyro_nuts", 256, 50, 40),
            row("a", "chees", 256, 200, 10),
            row("b", "steinax.sample", 256, 70, 30), row("b", "nuts", 256, inf, inf), row("b", "mams", 256, 90, 20),
            row("a", "steinax.sample", 1024, 80, 4), row("a", "chees", 1024, 300, 3)]
    text = summary(rows, [256, 1024])
    assert "reaches 0.01 on 1 of the 1 posteriors" in text and "at most NUTS's on 0 of 1" in text
    assert "sequential steps at most the best many-chain sampler's on 1 of the 2 where either reached" in text
    at_1024 = text.split("Goal at 1024")[1]  # NumPyro's 4 chains count at 1024 too
    assert "reaches 0.01 on 1 of the 1 posteriors" in at_1024 and "at most NUTS's on 0 of 1" in at_1024
    assert "sampler's on 0 of the 1 where" in at_1024
    # issue 56: where neither reached 0.01, no one won (inf <= inf was counted as a win), and the posterior is left
    # out of the count
    rows_inf = [row("c", "steinax.sample", 256, inf, inf), row("c", "chees", 256, inf, inf),
                row("c", "nuts", 256, inf, inf)]
    assert "sampler's on 0 of the 0 where" in summary(rows_inf, [256])
    assert "at most NUTS's on 0 of 0" in summary(rows_inf, [256])
    # the first moment's table: a row without the column is blank, not zero
    rows[0]["grads_to_x_max"], rows[3]["grads_to_x_max"] = inf, 1234
    first = summary(rows, [256]).split("to b2(x) < 0.01")[1]
    assert "| a | not reached |  |  | 1,234 |" in first and "| b |  |  |  |" in first
    # runs that wrote no trace: stopped at the cap, or the sampler raised (its error is in the row's note)
    rows[3]["note"], rows[2]["note"] = "failed: ValueError: pvary should be called under jax.shard_map.", "stopped: cap"
    text = summary(rows, [256])
    # columns in the registry's order: steinax.sample, numpyro_nuts, nuts, chees, mams
    assert "| a | 2 | 60 / 5 / 1 | over the time cap | 100 / 50 / 1 | failed |" in text
    assert "| a | not reached | over the time cap |  | failed |" in text
