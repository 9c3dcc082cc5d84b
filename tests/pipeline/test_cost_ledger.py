"""``steinax.sample``'s cost ledger (issue 56): every evaluation of the target is counted by the stage that makes it.
The ledger is compared with a count taken inside the log-density (a host callback per evaluated point, charged to the
stage the main thread is in: ``experiments/trust/cost_ledger.py``). The two are the same numbers, not estimates of
each other: they must agree exactly, except that a Hessian is one call to the counter and ``d`` evaluations in the
ledger (its cost), which the comparison adds back from what the warm start reports."""

import jax
import jax.numpy as jnp
import pytest

from steinax.pipeline import HMCCorrection
from steinax.targets import Gaussian, GaussianMixture
from experiment_loader import load

experiment = load("trust/cost_ledger.py")


def _compare(res, counts, relative: float = 0.0):
    """Every stage's ledger against the count: equal (``relative=0``), or within ``relative`` of it."""
    seen = experiment.hessian_calls(res)
    ledger = res.gradient_evaluations
    assert set(counts) <= set(ledger), (counts, ledger)  # no evaluation outside a stage
    for stage, value in ledger.items():
        expected = counts.get(stage, 0) + seen.get(stage, 0)
        assert abs(value - expected) <= relative * expected, (stage, counts, ledger)


def test_the_ledger_is_the_count_on_every_stage():
    """A correlated Gaussian with unequal scales, a short correction: every stage's count, exactly."""
    with jax.enable_x64(True):
        target = Gaussian(jnp.array([3.0, -1.0, 0.5]), jnp.array([[4.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 0.01]]))
        init = jax.random.normal(jax.random.key(3), (24, 3), jnp.float64)
        res, counts = experiment.count(target, jax.random.key(0), init, particles=True,
                                       corrector=HMCCorrection(warmup=30, round_steps=20, max_steps=200, min_ess=30))
    assert set(counts) == {"arguments", "warm_start", "sizing", "particles", "checks", "correction", "total"}
    _compare(res, counts)


def test_the_ledger_is_the_count_where_the_particle_stage_is_skipped():
    """The same Gaussian with ``particles="auto"``: the warm start's normal is exact, the particle stage is skipped
    (and absent from both), the warm start's importance draws are in its count and the tail probe's in its own."""
    with jax.enable_x64(True):
        target = Gaussian(jnp.array([3.0, -1.0, 0.5]), jnp.array([[4.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 0.01]]))
        init = jax.random.normal(jax.random.key(3), (24, 3), jnp.float64)
        res, counts = experiment.count(target, jax.random.key(0), init,
                                       corrector=HMCCorrection(warmup=30, round_steps=20, max_steps=200, min_ess=30))
    assert res.stages["particles"]["skipped"]
    assert set(counts) == {"arguments", "warm_start", "sizing", "checks", "correction", "total"}
    _compare(res, counts)


@pytest.mark.slow  # bridge sampling evaluates its log-densities outside a compiled loop: 10^4 host calls, 2 min
def test_the_ledger_counts_bridge_sampling():
    """Two separated modes from a wide start: the correction's bridge sampling is in its count."""
    with jax.enable_x64(True):
        target = GaussianMixture(jnp.array([0.3, 0.7]), jnp.array([[0.0, 0.0], [12.0, 0.0]]),
                                 jnp.stack([jnp.eye(2)] * 2))
        init = 10.0 * jax.random.normal(jax.random.key(3), (24, 2), jnp.float64)
        res, counts = experiment.count(target, jax.random.key(0), init,
                                       corrector=HMCCorrection(warmup=30, round_steps=20, max_steps=400, rhat=1.05,
                                                               min_ess=30))
    assert res.stages["correction"]["gradient_evaluations"]["bridge"] > 0  # the modes were weighed
    _compare(res, counts)


@pytest.mark.slow  # two posteriors at 64 chains, about 3 min
@pytest.mark.parametrize("name", ["german_logistic", "eight_schools_noncentered"])
def test_the_ledger_is_the_count_on_posteriors(name):
    from steinax.posteriors import get

    with jax.enable_x64(True):
        post = get(name)
        res, counts = experiment.count(post.target, jax.random.key(0),
                                       post.target.init_particles(jax.random.key(1000), 64))
    # the bound, 1%: on non-centred eight schools at 256 chains the correction's ledger read 80 more than the
    # count (of 462,336; equal at 64 chains), the leapfrog steps BlackJAX reports for some trajectories exceeding
    # the evaluations made (not pinned down further)
    _compare(res, counts, relative=0.01)
