"""The unit in which ``steinax ksd`` reads KSD² (issue 59): the U-statistic's sd for exact independent draws of the
same size (:func:`steinax.diagnostics.quality.null_sd`), checked against the spread of the statistic over repeated
exact samples, and the CLI's verdict-first summary."""

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import sample_quality
from steinax.diagnostics.quality import null_sd
from steinax.kernels import IMQ
from steinax.stein.ksd import ksd


def test_null_sd_is_the_spread_of_the_u_statistic_over_exact_samples():
    """200 exact samples of n = 100 from N(0, I_3): the sd of KSD²_U across them against null_sd's mean. The sd of an
    sd estimated from 200 draws is about 5% of it; 20% is four of those (and the degenerate-U variance is exact, not
    asymptotic), so a false failure has probability below 1e-4."""
    n, d, reps = 100, 3, 200
    x = jax.random.normal(jax.random.key(0), (reps, n, d))
    kernel = IMQ()
    values = np.array([float(ksd(xi, -xi, kernel, "u")) for xi in x])
    predicted = np.mean([null_sd(xi, -xi, kernel) for xi in x[:20]])
    assert abs(values.std(ddof=1) / predicted - 1.0) < 0.2
    assert abs(values.mean()) < 4 * predicted / np.sqrt(reps)  # unbiased: mean 0 within four standard errors


def test_the_summary_leads_with_the_verdict_and_reads_ksd_in_null_sds():
    x = jax.random.normal(jax.random.key(1), (300, 2))
    target = lambda z: -0.5 * jnp.sum(z**2)  # noqa: E731
    good = sample_quality(x, target, test=True, rng_key=jax.random.key(2))
    lines = good.summary().splitlines()
    assert lines[0].startswith(("do not reject", "REJECT")) and "p-value" in lines[0]
    assert "sds of what exact independent draws of this size give" in lines[1]
    bad = sample_quality(x + 0.5, target, test=True, rng_key=jax.random.key(2))
    assert bad.reject and bad.discrepancy / bad.null_sd > 5.0
    assert abs(good.discrepancy / good.null_sd) < 4.0


def test_rank_split_rhat_is_arvizs():
    """ArviZ's rank-normalised split R-hat (``arviz_stats.rhat``), vectorised: equal to rounding on few long chains,
    many short ones, an odd length and a shifted chain."""
    import pytest

    azs = pytest.importorskip("arviz_stats")
    from steinax.diagnostics.rhat import rank_split_rhat

    rng = np.random.default_rng(0)
    for shape in [(4, 101, 3), (64, 20, 2), (4, 100, 1)]:
        x = rng.normal(size=shape)
        x[0] += 0.3
        theirs = np.array([float(azs.rhat(x[:, :, k], method="rank")) for k in range(shape[2])])
        np.testing.assert_allclose(rank_split_rhat(x), theirs, rtol=1e-12)
