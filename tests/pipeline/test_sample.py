"""``steinax.sample`` (issue 49): one call gives the right answer on an unscaled, correlated target, with every
stage's draws, gradient evaluations and seconds; a budget too small for its checks says so (``ok=False`` and a
warning), never a bare success; bad arguments are named."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.particles import ConvergenceWarning
from steinax.pipeline import HMCCorrection
from steinax.targets import Gaussian

MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])
SD = np.sqrt(np.diag(np.asarray(COV)))


@pytest.fixture(scope="module")
def result():
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a run that reports success must not warn
        target = Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64))
        # every stage, the particles included (on a Gaussian `particles="auto"` skips them: tests/pipeline/test_sizing.py)
        return steinax.sample(target, rng_key=jax.random.key(0), progress=False, particles=True)


def test_the_answer_is_right_and_says_so(result):
    assert result.ok and result.message.startswith("converged")
    x = result.draws
    # Monte Carlo sd of a mean is 1 / sqrt(ESS) <= 0.05 sd (ESS >= 400 by the stopping rule): 0.2 is 4 of them
    assert np.max(np.abs(x.mean(0) - np.asarray(MEAN)) / SD) < 0.2
    np.testing.assert_allclose(x.std(0) / SD, 1.0, atol=0.15)
    assert result.chains.shape[0] == 100 and result.chains.shape[2] == 3


def test_every_stage_is_accounted_for(result):
    assert set(result.stage_draws) == {"warm_start", "particles"}
    assert result.particles.shape == (100, 3)
    g = result.gradient_evaluations
    assert set(g) == {"arguments", "warm_start", "sizing", "particles", "checks", "correction", "total"}
    assert g["arguments"] == 100  # the starting points' log-densities, checked before any stage
    assert g["total"] == sum(v for k, v in g.items() if k != "total") and g["particles"] > 0
    assert set(result.seconds) == {"warm_start", "sizing", "particles", "checks", "correction", "total"}
    assert result.stages["correction"]["stopped"] == "converged"
    # the correction's start is recorded with both candidates' KSDs; on a Gaussian the Laplace normal is exact, so
    # its draws are no worse a start than the particles (either may win by sampling noise), and both are finite
    checks = result.stages["checks"]
    assert checks["start"] in ("warm_start", "particles") and set(checks["start_ksd"]) == {"warm_start", "particles"}
    assert all(np.isfinite(v) for v in checks["start_ksd"].values())
    assert g["checks"] == 3 * 100  # two candidates' scores and the hand-off's log-densities


def test_the_chains_go_to_arviz_as_chains(result):
    tree = result.to_datatree()
    x = tree.posterior["x"]
    assert x.sizes["chain"] == 100 and x.sizes["draw"] == result.chains.shape[1]
    assert tree.posterior.attrs["steinax_ok"] == 1


def test_a_budget_too_small_for_the_checks_says_so():
    target = Gaussian(jnp.zeros(2), jnp.eye(2))
    with pytest.warns(ConvergenceWarning, match="stopped at its budget"):
        res = steinax.sample(target, rng_key=jax.random.key(1), num_particles=20, warm_start=False, particles=False,
                             progress=False,
                             corrector=HMCCorrection(warmup=30, round_steps=20, max_steps=20, min_ess=1000))
    assert not res.ok and "budget" in res.message and res.stages["correction"]["stopped"] == "max_steps"


@pytest.mark.parametrize("kwargs, match", [({"num_particles": 1}, "`num_particles`"),
                                           ({"correction": "sometimes"}, "`correction`"),
                                           ({"init": jnp.zeros(3)}, "`init`")])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        steinax.sample(Gaussian(jnp.zeros(3), jnp.eye(3)), rng_key=jax.random.key(0), **kwargs)
