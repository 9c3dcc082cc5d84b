"""SG-MCMC and NUTS baselines (steinax.baselines.mcmc): stationary moments, preconditioning, clear errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.baselines import mcmc

SCALES = jnp.array([0.1, 3.0])  # an anisotropic Gaussian: standard deviations 0.1 and 3


def _logp(x):
    return -0.5 * jnp.sum((x / SCALES) ** 2)


def test_sgld_samples_an_anisotropic_gaussian():
    """SGLD (BlackJAX's Euler step) on N(0, diag(0.01, 9)), 20 chains x 6000 steps of 3e-3, 100 thinned draws
    each from the second half. Euler's stationary variance is sd^2 / (1 - eps / (2 sd^2)): 0.0118 and 9.0;
    the relative se of a variance from ~2000 nearly independent draws is ~3% (the wide coordinate, with
    relaxation time 3000 steps, has fewer: ~15%), so rtol 0.1 and 0.35."""
    x0 = jax.random.normal(jax.random.key(3), (20, 2)) * SCALES[None, :]
    draws = mcmc.sgld(_logp, x0, steps=6000, step_size=3e-3, rng_key=jax.random.key(0), keep=100)
    var = np.asarray(draws.reshape(-1, 2).var(0))
    np.testing.assert_allclose(var[0], 0.01 / (1 - 3e-3 / 0.02), rtol=0.1)
    np.testing.assert_allclose(var[1], 9.0, rtol=0.35)


def test_psgld_step_is_li_et_al_eq4_by_hand():
    rng = np.random.default_rng(0)
    x, v, s, xi = (rng.normal(size=3) for _ in range(4))
    v = v * v
    new_x, new_v = mcmc.psgld_step(jnp.asarray(x), jnp.asarray(v), jnp.asarray(s), jnp.asarray(xi), 0.01, 0.9, 1e-5)
    v_ref = 0.9 * v + 0.1 * s * s
    g = 1 / (1e-5 + np.sqrt(v_ref))
    np.testing.assert_allclose(new_v, v_ref, rtol=1e-6)
    np.testing.assert_allclose(new_x, x + 0.01 * g * s + np.sqrt(0.02 * g) * xi, rtol=1e-5)


def test_psgld_chain_runs_and_equalises_scales():
    """pSGLD's preconditioner makes both coordinates move: after 4000 steps of 1e-3 from N(0, 1) starts the
    narrow coordinate's variance is within 40% of 0.01 and the wide one has spread out past 4 (it is biased
    upwards, towards ~16, without the Gamma term: see psgld_step)."""
    x0 = jax.random.normal(jax.random.key(3), (20, 2))
    draws = mcmc.sgld(_logp, x0, steps=4000, step_size=1e-3, rng_key=jax.random.key(0), keep=100, preconditioned=True)
    var = np.asarray(draws.reshape(-1, 2).var(0))
    np.testing.assert_allclose(var[0], 0.01, rtol=0.4)
    assert var[1] > 4.0


def test_sgld_uses_the_targets_minibatch_scores():
    """On a MinibatchTarget the chain sees the N/B-rescaled scores: the posterior of a Gaussian mean with
    N = 200 unit-variance observations and a flat-ish N(0, 100) prior has sd ~ 1/sqrt(200) = 0.071."""
    from steinax.targets import MinibatchTarget

    y = jax.random.normal(jax.random.key(1), (200,)) + 1.0
    target = MinibatchTarget(lambda m: -0.5 * jnp.sum(m * m) / 100.0, lambda m, yi: -0.5 * jnp.sum((yi - m) ** 2), y, 20)
    draws = mcmc.sgld(target, jnp.zeros((10, 1)), steps=3000, step_size=2e-4, rng_key=jax.random.key(2), keep=50)
    assert abs(float(draws.mean()) - float(y.mean())) < 0.05  # posterior mean = ybar (prior negligible), 3 se
    assert 0.05 < float(draws.std()) < 0.12  # sd 0.071, inflated a little by minibatch noise at this step


def test_errors_name_the_argument():
    x0 = jnp.zeros((3, 2))
    with pytest.raises(FloatingPointError, match="smaller `step_size`"):
        mcmc.sgld(lambda x: -0.5 * jnp.sum((x / 0.01) ** 2), x0 + 1.0, steps=200, step_size=1.0,
                  rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match="`step_size` must be positive"):
        mcmc.sgld(_logp, x0, steps=40, step_size=0.0, rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match="`keep` must be at most the 5 steps after burn-in"):
        mcmc.sgld(_logp, x0, steps=10, step_size=0.1, rng_key=jax.random.key(0), keep=6)
    with pytest.raises(ValueError, match="`burn_in` must be an integer in"):
        mcmc.sgld(_logp, x0, steps=10, step_size=0.1, rng_key=jax.random.key(0), burn_in=10)
    with pytest.raises(ValueError, match="`num_samples` must be a positive integer"):
        mcmc.nuts(_logp, x0, num_samples=0, rng_key=jax.random.key(0))


def test_nuts_one_chain_starts_where_asked():
    """Was: one chain's ``[1, d]`` start reached the log-density as a batch of one (NumPyro takes one chain's
    start as ``[d]``), so a target that checks its input failed. The draws of N(0, diag(0.01, 9)) keep the scales
    (200 draws after 200 warmup; the se of an sd from ~100 effective draws is ~7%, so rtol 0.3)."""

    def strict_logp(x):
        assert x.shape == (2,), x.shape
        return _logp(x)

    draws = mcmc.nuts(strict_logp, jnp.ones((1, 2)), num_warmup=200, num_samples=200, rng_key=jax.random.key(0))
    assert draws.shape == (1, 200, 2)
    np.testing.assert_allclose(np.asarray(draws[0].std(0)), np.asarray(SCALES), rtol=0.3)


@pytest.mark.slow  # compiles NUTS in float64 (about 5 s): CI's slow pass
def test_nuts_float32_start_inside_enable_x64():
    """Was: a float32 start (a target built before ``jax.enable_x64``) met NumPyro's float64 momenta and its
    tree-building ``cond`` refused branches of different dtypes (CI, make_references.py in a float32 worker).
    The start is cast to the default float dtype, so the draws come back in float64."""
    x0 = jnp.ones((1, 2), jnp.float32)
    with jax.enable_x64(True):
        draws = mcmc.nuts(_logp, x0, num_warmup=20, num_samples=20, rng_key=jax.random.key(0))
        assert draws.dtype == jnp.float64


@pytest.mark.slow  # several NUTS compilations (about 12 s): CI's slow pass
def test_nuts_continues_its_chains_until_the_bulk_ess_is_reached():
    from steinax.baselines.mcmc import nuts

    logp = lambda x: -0.5 * jnp.sum(x**2)  # noqa: E731
    draws, info = nuts(logp, jnp.zeros((2, 2)), num_warmup=100, num_samples=100, rng_key=jax.random.key(0),
                       return_info=True, min_ess=600)
    # 200 draws of N(0, I) carry an ESS of about 200-300: the chains must continue past their first block
    assert draws.shape[1] > 100 and draws.shape[1] % 100 == 0 and info["min_ess_bulk"] >= 600
    assert info["num_steps"].shape == draws.shape[:2]


def test_nutpie_samples_a_gaussian_in_the_callers_precision():
    """nutpie on a steinax-style target: 2 chains of 500 draws of N(mu, diag(sd^2)); every mean within 5 Monte
    Carlo standard errors (sd / sqrt(ESS), ESS at least 200 here; 5 MCSE: a failure rate far below 1e-4 per
    coordinate), and the log-density traced in float64 inside ``enable_x64`` although nutpie calls it from its own
    threads (the scoped precision does not cross threads: it was float32 there, with a truncation warning)."""
    pytest.importorskip("nutpie")
    from steinax.baselines.nutpie import nutpie

    mu, sd = np.array([1.0, -2.0, 30.0]), np.array([0.5, 2.0, 10.0])
    seen = set()

    def logdensity(x):
        seen.add(x.dtype)
        return -0.5 * jnp.sum(((x - mu) / sd) ** 2)

    with jax.enable_x64(True):
        draws, info = nutpie(logdensity, np.zeros((2, 3)), tune=300, draws=500, seed=1)
    assert draws.shape == (2, 500, 3) and seen == {jnp.dtype("float64")}
    assert info["num_steps"] >= 2 * 800 and info["diverging"].shape == (2, 500)
    assert np.all(np.abs(draws.reshape(-1, 3).mean(0) - mu) < 5 * sd / np.sqrt(200))
    with pytest.raises(ValueError, match="initial_positions"):
        nutpie(logdensity, np.zeros(3))
    with pytest.raises(ValueError, match="`tune`"):
        nutpie(logdensity, np.zeros((2, 3)), tune=0)
