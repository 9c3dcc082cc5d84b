"""The correction stage (issue 49): ChEES-HMC chains from collapsed particles get an unscaled, correlated Gaussian's
moments right; a straggler far out in the tail is moved into the bulk; a chain in a minor mode it cannot leave is
named."""

import jax
import jax.numpy as jnp
import numpy as np

from steinax.pipeline import HMCCorrection
from steinax.targets import Gaussian, GaussianMixture

MEAN = jnp.array([2.0e3, -1.0, 0.05])
COV = jnp.array([[4.0e4, 30.0, 0.0], [30.0, 1.0, 0.009], [0.0, 0.009, 1.0e-4]])
SD = np.sqrt(np.diag(np.asarray(COV)))


def _collapsed(n=100, shrink=0.1, seed=0):
    """Particles at the right place with a tenth of the right spread (a collapsed particle method's answer)."""
    z = jax.random.normal(jax.random.key(seed), (n, 3))
    return MEAN[None] + shrink * z @ jnp.linalg.cholesky(COV).T


def test_chains_from_collapsed_particles_get_the_moments_right():
    with jax.enable_x64(True):
        target = Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64))
        out = HMCCorrection()(target, _collapsed().astype(jnp.float64), jax.random.key(1))
        c = out.learnt["correction"]
        x = c["draws"].reshape(-1, 3)
        assert c["stopped"] == "converged" and c["rhat"] <= 1.01 and c["ess_bulk"] >= 400
        # the mean's Monte Carlo sd is 1 / sqrt(ESS) <= 0.05 sd; 0.2 is 4 of them. The sd's relative error is about
        # 1 / sqrt(2 ESS) <= 0.035; 0.15 is 4 of them
        assert np.max(np.abs(x.mean(0) - np.asarray(MEAN)) / SD) < 0.2
        np.testing.assert_allclose(x.std(0) / SD, 1.0, atol=0.15)
        assert c["stragglers"] == [] and c["divergences"] == 0
        assert c["gradient_evaluations"]["warmup"] > 0 and c["gradient_evaluations"]["sampling"] > 0


def test_a_straggler_in_the_tail_is_moved_into_the_bulk():
    with jax.enable_x64(True):
        target = Gaussian(MEAN.astype(jnp.float64), COV.astype(jnp.float64))
        x0 = _collapsed(shrink=1.0).astype(jnp.float64).at[7].set(MEAN + 12.0 * jnp.asarray(SD))  # 12 sds out
        logd = jax.vmap(target.logdensity)(x0)
        from steinax.pipeline import find_stragglers

        assert find_stragglers(logd, 3).tolist() == [7]
        out = HMCCorrection()(target, x0, jax.random.key(2))
        c = out.learnt["correction"]
        assert c["stragglers"] == []
        assert find_stragglers(jax.vmap(target.logdensity)(out.particles), 3).size == 0  # chain 7 ends in the bulk


def test_a_chain_stuck_in_a_minor_mode_is_named():
    with jax.enable_x64(True):
        # a minor mode of weight 1e-8, 30 units from the bulk: 18 nats below it in log-density (the threshold in 2-D
        # is 13.1), and a chain started there cannot leave in any feasible number of transitions
        mix = GaussianMixture(jnp.array([1.0 - 1e-8, 1e-8]), jnp.array([[0.0, 0.0], [30.0, 30.0]]),
                              jnp.stack([jnp.eye(2), jnp.eye(2)]))
        x0 = jax.random.normal(jax.random.key(3), (60, 2), jnp.float64).at[5].set(jnp.array([30.0, 30.0]))
        out = HMCCorrection(max_steps=200)(mix, x0, jax.random.key(4))
        assert 5 in out.learnt["correction"]["stragglers"]


def test_a_start_where_the_log_density_is_not_finite_is_named():
    import pytest

    logp = lambda x: jnp.where(x[0] > 3.0, jnp.nan, -0.5 * jnp.sum(x**2))  # noqa: E731
    x0 = jax.random.normal(jax.random.key(5), (20, 2)).at[4].set(jnp.array([5.0, 0.0]))
    with pytest.raises(FloatingPointError, match=r"not finite at particles \[4\]"):
        HMCCorrection(warmup=30, max_steps=20, round_steps=20)(logp, x0, jax.random.key(6))
