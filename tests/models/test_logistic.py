"""Bayesian logistic regression (Liu & Wang's model and the N(0, I)-prior variant)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tolerance

import steinax
from steinax.models import LogisticRegression


def _data(n=60, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    w = np.array([1.5, -2.0, 0.5])[:p]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ w))).astype(float)
    return X, y


def test_log_posterior_matches_a_hand_computation_and_scores_are_its_gradient():
    X, y = _data()
    with jax.enable_x64(True):
        model = LogisticRegression(3)
        theta = jnp.array([0.3, -0.2, 0.1, np.log(2.0)])
        target = model.target(jnp.asarray(X), y, batch_size=None)
        w, alpha = np.asarray(theta[:3]), 2.0
        z = X @ w
        loglik = np.sum(y * -np.log1p(np.exp(-z)) + (1 - y) * -np.log1p(np.exp(z)))
        # N(0, I/alpha) prior (up to constants), Gamma(1, rate 0.01) on alpha, log-Jacobian of log alpha
        logprior = 1.5 * np.log(alpha) - 0.5 * alpha * w @ w + (1.0 - 1.0) * np.log(alpha) - 0.01 * alpha + np.log(alpha)
        np.testing.assert_allclose(target.logdensity(theta), loglik + logprior, **tolerance(jnp.float64))
        _, scores = target.evaluate(jax.random.key(0), theta[None])
        np.testing.assert_allclose(scores[0], jax.grad(lambda t: loglik_fn(model, X, y, t))(theta), **tolerance(jnp.float64))
        normal = LogisticRegression(3, prior="normal")
        np.testing.assert_allclose(normal.target(jnp.asarray(X), y, None).logdensity(theta[:3]), loglik - 0.5 * w @ w,
                                   **tolerance(jnp.float64))


def loglik_fn(model, X, y, t):
    w = t[:3]
    z = jnp.asarray(X) @ w
    ll = jnp.sum(jnp.asarray(y) * jax.nn.log_sigmoid(z) + (1 - jnp.asarray(y)) * jax.nn.log_sigmoid(-z))
    alpha = jnp.exp(t[-1])
    return ll + 1.5 * t[-1] - 0.5 * alpha * w @ w + t[-1] - 0.01 * alpha


def test_minibatch_score_is_unbiased():
    """Mean of 4000 minibatch scores (B = 10 of N = 60) = the full score within 4 standard errors per coordinate."""
    X, y = _data()
    model = LogisticRegression(3)
    theta = jnp.array([[0.3, -0.2, 0.1, 0.5]])
    full = model.target(jnp.asarray(X, jnp.float32), y, batch_size=None).evaluate(None, theta)[1][0]
    mini = model.target(jnp.asarray(X, jnp.float32), y, batch_size=10)
    draws = jax.vmap(lambda k: mini.evaluate(k, theta)[1][0])(jax.random.split(jax.random.key(0), 4000))
    se = np.asarray(draws.std(0)) / np.sqrt(4000)
    assert np.all(np.abs(np.asarray(draws.mean(0) - full)) < 4 * se + 1e-5)


def test_predictions_and_metrics_by_hand():
    X, y = _data(n=8)
    model = LogisticRegression(3, prior="normal")
    particles = jnp.array([[1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    p1 = 0.5 * (1 / (1 + np.exp(-X[:, 0])) + 1 / (1 + np.exp(X[:, 1])))
    np.testing.assert_allclose(model.predict_proba(particles, jnp.asarray(X, jnp.float32)), p1, **tolerance(jnp.float32))
    ev = model.evaluate(particles, jnp.asarray(X, jnp.float32), 2 * y - 1)  # {-1, 1} labels accepted
    p_obs = np.where(y > 0.5, p1, 1 - p1)
    np.testing.assert_allclose(ev.loglik, np.mean(np.log(p_obs)), **tolerance(jnp.float32))
    np.testing.assert_allclose(ev.accuracy, np.mean(p_obs > 0.5))
    assert ev.rmse is None


def test_svgd_agrees_with_nuts_on_a_small_problem():
    """N(0, I)-prior logistic regression, N = 60, p = 3: the SVGD particle mean (200 particles) is within 0.1 of
    the NUTS posterior mean (2 x 1000 draws; posterior sds are about 0.3-0.4, so 0.1 is < 0.35 sd)."""
    from numpyro.infer import MCMC, NUTS

    X, y = _data()
    model = LogisticRegression(3, prior="normal")
    target = model.target(jnp.asarray(X, jnp.float32), y, batch_size=None)
    res = steinax.run(steinax.svgd(), target, model.init_particles(jax.random.key(0), 200), steps=1500,
                      optimizer=steinax.adagrad_momentum(0.05), rng_key=jax.random.key(1), progress=False)
    mcmc = MCMC(NUTS(potential_fn=lambda w: -target.logdensity(w)), num_warmup=500, num_samples=1000, num_chains=2,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.key(2), init_params=jnp.zeros((2, 3)))
    nuts = np.asarray(mcmc.get_samples())
    np.testing.assert_array_less(np.abs(np.asarray(res.particles.mean(0)) - nuts.mean(0)), 0.1)


def test_bad_input():
    model = LogisticRegression(3)
    X, y = _data()
    with pytest.raises(ValueError, match=r"binary labels in \{0, 1\} or \{-1, 1\}"):
        model.target(jnp.asarray(X), y + 1)
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(ValueError, match="`X` must be finite"):
        model.target(jnp.asarray(Xn), y)
    with pytest.raises(ValueError, match=r"`X` must be \[N, 3\]"):
        model.target(jnp.zeros((5, 4)), np.zeros(5))
    with pytest.raises(ValueError, match="`prior` must be one of"):
        LogisticRegression(3, prior="laplace")
    x0 = model.init_particles(jax.random.key(0), 500)
    assert x0.shape == (500, 4)
    # prior draws: alpha ~ Gamma(1, rate 0.01) has mean 100 (log-mean E log alpha = digamma(1) + log 100)
    assert abs(float(jnp.mean(x0[:, -1])) - (-0.5772 + np.log(100.0))) < 0.25  # 4 se (sd of log Gamma(1) is 1.28)


def test_confident_wrong_prediction_has_a_finite_log_likelihood():
    """sigma(-30) = 9e-14 rounds 1 - sigma(30) to 0 in float32; the test LL must stay finite (log p = -30)."""
    model = LogisticRegression(1, prior="normal")
    ev = model.evaluate(jnp.array([[30.0], [30.0]]), jnp.array([[1.0]], jnp.float32), np.array([0.0]))
    np.testing.assert_allclose(ev.loglik, -30.0, rtol=1e-5)
    assert float(ev.accuracy) == 0.0
