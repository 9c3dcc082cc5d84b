"""ArviZ on a ``steinax.sample`` result (issue 59): the standard plots run on what ``.[all]`` resolves to, and the
DataTree carries ``sample_stats`` under ArviZ's names (divergences, energy, acceptance, step size, log-density)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.pipeline import HMCCorrection

azp = pytest.importorskip("arviz_plots")
azs = pytest.importorskip("arviz_stats")


@pytest.fixture(scope="module")
def datatree():
    logp = lambda x: -0.5 * jnp.sum(x**2 / jnp.array([1.0, 4.0]))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = steinax.sample(logp, rng_key=jax.random.key(0), init=jax.random.normal(jax.random.key(1), (32, 2)),
                             progress=False, corrector=HMCCorrection(warmup=30, round_steps=20, max_steps=200,
                                                                     min_ess=30))
    return res, res.to_datatree()


def test_sample_stats_are_arviz_s(datatree):
    res, dt = datatree
    stats = dt["sample_stats"]
    for name in ("lp", "acceptance_rate", "diverging", "n_steps", "energy", "step_size"):
        assert stats[name].shape == res.chains.shape[:2], name
    assert int(stats["diverging"].sum()) == res.stages["correction"]["divergences"] or res.stages["correction"]["thin"] > 1
    # lp is the target's log-density at the draws (the whitening's constant taken off)
    x = res.chains[0, :5]
    want = -0.5 * np.sum(x**2 / np.array([1.0, 4.0]), axis=1)
    np.testing.assert_allclose(np.asarray(stats["lp"])[0, :5], want, rtol=1e-4, atol=1e-4)
    bfmi = np.asarray(azs.bfmi(dt)["energy"])
    assert np.all(np.isfinite(bfmi)) and np.all(bfmi > 0.3)  # a Gaussian: no energy problem


@pytest.mark.parametrize("plot", ["plot_trace_dist", "plot_rank", "plot_ess", "plot_forest", "plot_energy"])
def test_arviz_standard_plots_run(datatree, plot):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    getattr(azp, plot)(datatree[1])
    plt.close("all")
