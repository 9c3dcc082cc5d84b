"""steinax.gp: GP targets against direct Cholesky computations, SciPy, hand predictions and optimisers.

Tolerances: float64 with ``tolerance(float64)`` (sums of O(N) terms) unless a
comparison involves an iterative optimiser, whose stopping rule is stated.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize
import scipy.stats

import steinax
from steinax.gp import GPRegression, LatentGP, kernel_matrix
from conftest import tolerance


def _data(key, n=25, d=2, dtype=jnp.float64):
    X = jax.random.normal(key, (n, d), dtype)
    f = jnp.sin(2 * X[:, 0]) + 0.5 * X[:, 1]
    y = f + 0.1 * jax.random.normal(jax.random.fold_in(key, 1), (n,), dtype)
    return X, y


def _softplus(u):
    return np.log1p(np.exp(u))


@pytest.mark.parametrize("kernel", ["se", "matern32"])
def test_log_marginal_likelihood_equals_cholesky_and_scipy(key, kernel):
    with jax.enable_x64(True):
        X, y = _data(key)
        model = GPRegression(X, y, kernel)
        theta = jnp.array([0.3, -0.4, 0.8, -1.2])
        ls, var, noise = _softplus(np.asarray(theta[:2])), _softplus(0.8), _softplus(-1.2)
        Xn = np.asarray(X)
        r = np.sqrt((((Xn[:, None] - Xn[None]) / ls) ** 2).sum(-1))
        K = var * (np.exp(-0.5 * r**2) if kernel == "se" else (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r))
        np.testing.assert_allclose(kernel_matrix(kernel, ls, var, X, X), K, **tolerance(jnp.float64))
        C = K + (noise + model.jitter) * np.eye(len(y))
        L = np.linalg.cholesky(C)
        alpha = np.linalg.solve(L, np.asarray(y))
        direct = -0.5 * alpha @ alpha - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)
        lml = model.log_marginal_likelihood(theta)
        np.testing.assert_allclose(lml, direct, **tolerance(jnp.float64, 10.0))  # log det: a sum of N logs
        np.testing.assert_allclose(lml, scipy.stats.multivariate_normal(np.zeros(len(y)), C).logpdf(np.asarray(y)),
                                   **tolerance(jnp.float64, 10.0))
        # tinygp's GaussianProcess gives the same value, and the analytic gradient equals autodiff through Cholesky
        from tinygp import GaussianProcess, kernels, transforms

        tgp = GaussianProcess(var * transforms.Linear(1.0 / jnp.asarray(ls), kernels.ExpSquared() if kernel == "se" else
                                                      kernels.Matern32(distance=kernels.distance.L2Distance())),
                              X, diag=noise + model.jitter)
        np.testing.assert_allclose(lml, tgp.log_probability(y), **tolerance(jnp.float64, 10.0))

        def plain(t):
            h = model.hyperparameters(t)
            Cm = kernel_matrix(kernel, h.lengthscale, h.variance, X, X) + (h.noise + model.jitter) * jnp.eye(len(y))
            Lm = jnp.linalg.cholesky(Cm)
            a = jax.scipy.linalg.solve_triangular(Lm, y, lower=True)
            return -0.5 * a @ a - jnp.sum(jnp.log(jnp.diag(Lm))) - 0.5 * len(y) * jnp.log(2 * jnp.pi)

        np.testing.assert_allclose(jax.grad(model.log_marginal_likelihood)(theta), jax.grad(plain)(theta),
                                   **tolerance(jnp.float64, 100.0))  # two O(N^3) routes, cond(C) ~ 1e2
        # the posterior adds Gamma(1, scale 2) priors on softplus(theta) and the log-Jacobian log sigmoid(theta)
        c = _softplus(np.asarray(theta))
        prior = scipy.stats.gamma(a=1.0, scale=2.0).logpdf(c).sum() + np.sum(np.log(1 / (1 + np.exp(-np.asarray(theta)))))
        np.testing.assert_allclose(model.logdensity(theta), direct + prior, **tolerance(jnp.float64, 10.0))
        np.testing.assert_allclose(GPRegression(X, y, kernel, ml=True).logdensity(theta), direct,
                                   **tolerance(jnp.float64, 10.0))
        # scores by the target's evaluate (one particle at a time) equal jax.grad
        parts = jnp.stack([theta, theta + 0.1])
        logp, scores = model.evaluate(key, parts)
        np.testing.assert_allclose(scores, jax.vmap(jax.grad(model.logdensity))(parts), **tolerance(jnp.float64))


def test_whitening_round_trips(key):
    with jax.enable_x64(True):
        X, y = _data(key, n=12)
        model = LatentGP(X, (y > 0).astype(jnp.float64), "bernoulli_probit")
        theta = model.init_particles(key, 1)[0]
        f = model.latent(theta)
        np.testing.assert_allclose(model.whiten(theta, f), theta, **tolerance(jnp.float64, 100.0))  # triangular solve
        g = jax.random.normal(key, (12,), jnp.float64)
        np.testing.assert_allclose(model.latent(model.whiten(theta, g)), g, **tolerance(jnp.float64, 100.0))
        # f = L nu with L L^T = K + jitter I
        hyp = model.hyperparameters(theta)
        K = kernel_matrix("se", hyp.lengthscale, hyp.variance, X, X) + model.jitter * jnp.eye(12)
        L = np.linalg.cholesky(np.asarray(K))
        np.testing.assert_allclose(f, L @ np.asarray(theta[model.num_hyperparameters:]), **tolerance(jnp.float64, 10.0))


@pytest.mark.parametrize("likelihood", ["bernoulli_probit", "bernoulli_logit", "poisson"])
def test_latent_logdensity_by_hand(key, likelihood):
    with jax.enable_x64(True):
        X, y = _data(key, n=10)
        yy = (y > 0).astype(jnp.float64) if likelihood != "poisson" else jnp.round(jnp.exp(y))
        model = LatentGP(X, yy, likelihood, "matern32")
        theta = model.init_particles(key, 1)[0]
        f = np.asarray(model.latent(theta))
        yn = np.asarray(yy)
        if likelihood == "bernoulli_probit":
            ll = scipy.stats.norm.logcdf((2 * yn - 1) * f).sum()
        elif likelihood == "bernoulli_logit":
            ll = -np.log1p(np.exp(-(2 * yn - 1) * f)).sum()
        else:
            ll = scipy.stats.poisson(np.exp(f)).logpmf(yn).sum()
        nu = np.asarray(theta[model.num_hyperparameters:])
        u = np.asarray(theta[: model.num_hyperparameters])
        prior = scipy.stats.gamma(a=1.0, scale=2.0).logpdf(_softplus(u)).sum() + np.sum(-np.log1p(np.exp(-u)))
        np.testing.assert_allclose(model.logdensity(theta), ll - 0.5 * nu @ nu + prior, **tolerance(jnp.float64, 10.0))


def test_predictions_equal_hand_computation_for_one_particle(key):
    with jax.enable_x64(True):
        X, y = _data(key)
        Xs = jax.random.normal(jax.random.fold_in(key, 5), (7, 2), jnp.float64)
        model = GPRegression(X, y)
        theta = jnp.array([0.2, 0.5, 0.1, -2.0])
        hyp = model.hyperparameters(theta)
        K = np.asarray(kernel_matrix("se", hyp.lengthscale, hyp.variance, X, X))
        Ks = np.asarray(kernel_matrix("se", hyp.lengthscale, hyp.variance, X, Xs))
        C = K + (float(hyp.noise) + model.jitter) * np.eye(len(y))
        mean = Ks.T @ np.linalg.solve(C, np.asarray(y))
        var = float(hyp.variance) - np.sum(Ks * np.linalg.solve(C, Ks), axis=0)
        m, v = model.predict(theta[None], Xs)
        np.testing.assert_allclose(m, mean, **tolerance(jnp.float64, 100.0))  # solves with cond(C) ~ 1e2
        np.testing.assert_allclose(v, var, **tolerance(jnp.float64, 100.0))
        _, vy = model.predict(theta[None], Xs, include_noise=True)
        np.testing.assert_allclose(vy, var + float(hyp.noise), **tolerance(jnp.float64, 100.0))
        ys = jnp.asarray(mean + 0.3)
        lp = scipy.stats.norm(mean, np.sqrt(var + float(hyp.noise))).logpdf(np.asarray(ys)).mean()
        np.testing.assert_allclose(model.log_predictive(theta[None], Xs, ys), lp, **tolerance(jnp.float64, 100.0))
        # mixture moments over two particles
        t2 = jnp.stack([theta, theta.at[0].add(0.7)])
        m2, v2 = model.predict(t2, Xs)
        mus, vs = zip(*[model.predict(t[None], Xs) for t in t2])
        mix_mean = np.mean(mus, axis=0)
        np.testing.assert_allclose(m2, mix_mean, **tolerance(jnp.float64, 100.0))
        np.testing.assert_allclose(v2, np.mean(np.array(vs) + np.array(mus) ** 2, axis=0) - mix_mean**2,
                                   **tolerance(jnp.float64, 1e3))
        # Algorithm 2's samples have these moments
        s = model.predictive_samples(key, theta[None], Xs, num_samples=20000)
        assert s.shape == (1, 20000, 7)
        np.testing.assert_allclose(np.mean(s, axis=(0, 1)), mean, atol=5 * np.sqrt(var.max() / 20000))
        # the latent GP's predictive mean by hand: K*^T K^{-1} f
        lg = LatentGP(X, (y > 0).astype(jnp.float64))
        th = lg.init_particles(key, 1)[0]
        hp = lg.hyperparameters(th)
        Kl = np.asarray(kernel_matrix("se", hp.lengthscale, hp.variance, X, X)) + lg.jitter * np.eye(len(y))
        Ksl = np.asarray(kernel_matrix("se", hp.lengthscale, hp.variance, X, Xs))
        f = np.asarray(lg.latent(th))
        mu_l, var_l = lg._predict_one(th, Xs)
        np.testing.assert_allclose(mu_l, Ksl.T @ np.linalg.solve(Kl, f), **tolerance(jnp.float64, 1e4))
        np.testing.assert_allclose(var_l, float(hp.variance) - np.sum(Ksl * np.linalg.solve(Kl, Ksl), 0),
                                   **tolerance(jnp.float64, 1e4))


def _argmax(fn, x0):
    res = scipy.optimize.minimize(lambda t: -float(fn(jnp.asarray(t))), np.asarray(x0),
                                  jac=lambda t: -np.asarray(jax.grad(fn)(jnp.asarray(t))), method="L-BFGS-B",
                                  options=dict(gtol=1e-10, ftol=1e-14, maxiter=2000))
    return res.x


@pytest.mark.slow  # ~20 s: 3000 SVGD steps and L-BFGS; run by CI's slow-test step
@pytest.mark.parametrize("ml", [False, True])
def test_one_particle_svgd_reaches_the_map_or_the_ml_optimum(key, ml):
    """With one particle, k(x, x) = 1 and grad k = 0: SVGD is gradient ascent on the log-density, so it ends at the
    MAP (or, with ml=True, the type-II ML optimum) found by L-BFGS; agreement to 1e-4 in the unconstrained values
    (Adam's last steps are ~1e-5)."""
    with jax.enable_x64(True):
        X, y = _data(key, n=20)
        model = GPRegression(X, y, ml=ml)
        x0 = jnp.zeros((1, model.dim))
        res = steinax.run(steinax.svgd(), model, x0, steps=3000, optimizer=optax.adam(optax.cosine_decay_schedule(0.05, 3000)),
                          rng_key=key, progress=False)
        best = _argmax(model.logdensity, x0[0])
        np.testing.assert_allclose(res.particles[0], best, atol=1e-4)


def test_bad_input(key):
    X, y = _data(key, n=8, dtype=jnp.float32)
    with pytest.raises(ValueError, match=r"`X` must be finite; rows \[3\]"):
        GPRegression(X.at[3, 1].set(jnp.nan), y)
    with pytest.raises(ValueError, match="`y` must be finite"):
        GPRegression(X, y.at[0].set(jnp.inf))
    with pytest.raises(ValueError, match="same number of rows; received 8 and 7"):
        GPRegression(X, y[:7])
    with pytest.raises(ValueError, match="binary labels"):
        LatentGP(X, jnp.arange(8.0))
    with pytest.raises(ValueError, match="non-negative integer counts"):
        LatentGP(X, jnp.full(8, 0.5), "poisson")
    with pytest.raises(ValueError, match="`kernel` must be one of"):
        GPRegression(X, y, "rbf")
    with pytest.raises(ValueError, match="`likelihood` must be one of"):
        LatentGP(X, (y > 0), "student")


@pytest.mark.slow  # ~35 s: 4000 minibatch scores per likelihood; run by CI's slow-test step
def test_sparse_minibatch_score_is_unbiased(key):
    """Eq. 10: the mean of 4000 minibatch scores (B = 10 of N = 60) equals the full-data score within 4 standard
    errors in every coordinate (failure rate < 1e-3 for 12 roughly normal coordinates)."""
    from steinax.gp import SparseGP

    with jax.enable_x64(True):
        X, y = _data(key, n=60)
        for likelihood, yy in [("gaussian", y), ("bernoulli_logit", (y > 0).astype(jnp.float64))]:
            model = SparseGP(X, yy, likelihood, num_inducing=8, batch_size=10)
            theta = model.init_particles(key, 1)
            full = jax.grad(model.logdensity)(theta[0])
            scores = jax.jit(jax.vmap(lambda k: model.evaluate(k, theta)[1][0]))(jax.random.split(key, 4000))
            se = np.std(scores, axis=0, ddof=1) / np.sqrt(4000)
            assert np.all(np.abs(np.mean(scores, axis=0) - full) < 4 * se + 1e-12)
            # the batch is one per step, shared by the particles
            two = jnp.concatenate([theta, theta])
            _, s2 = model.evaluate(key, two)
            np.testing.assert_array_equal(s2[0], s2[1])


@pytest.mark.slow  # ~18 s; CI's slow pass runs it (the default suite must stay under 10 minutes)
def test_sparse_model_with_inducing_points_at_the_data_is_the_whitened_model(key):
    """Z = X: u = f, the conditional variance is ~0 and the log-density is sum log N(y | L nu, sigma^2) - |nu|^2/2 +
    priors; for Bernoulli the Gauss-Hermite expectation reduces to log p(y | f)."""
    from steinax.gp import SparseGP

    with jax.enable_x64(True):
        X, y = _data(key, n=15)
        model = SparseGP(X, y, "gaussian", "se", inducing=X, batch_size=None, jitter=1e-10)
        theta = model.init_particles(key, 1)[0]
        hyp = model.hyperparameters(theta)
        K = np.asarray(kernel_matrix("se", hyp.lengthscale, hyp.variance, X, X)) + 1e-10 * np.eye(15)
        f = np.linalg.cholesky(K) @ np.asarray(theta[model.num_hyperparameters:])
        u = np.asarray(theta[: model.num_hyperparameters])
        prior = scipy.stats.gamma(a=1.0, scale=2.0).logpdf(_softplus(u)).sum() + np.sum(-np.log1p(np.exp(-u)))
        nu = np.asarray(theta[model.num_hyperparameters:])
        expected = scipy.stats.norm(f, np.sqrt(float(hyp.noise))).logpdf(np.asarray(y)).sum() - 0.5 * nu @ nu + prior
        np.testing.assert_allclose(model.logdensity(theta), expected, rtol=1e-6)  # conditional variance ~1e-10
        yb = (y > 0).astype(jnp.float64)
        mb = SparseGP(X, yb, "bernoulli_probit", "se", inducing=X, batch_size=None, jitter=1e-10)
        lg = LatentGP(X, yb, "bernoulli_probit", "se", jitter=1e-10)
        tb = lg.init_particles(key, 1)[0]
        np.testing.assert_allclose(mb.logdensity(tb), lg.logdensity(tb), rtol=1e-6)


@pytest.mark.slow  # ~12 s: adaptive quadrature for 11 cases; run by CI's slow-test step
def test_expected_log_likelihood_against_quadrature():
    from scipy.integrate import quad

    from steinax.gp.sparse import _expected_log_likelihood

    with jax.enable_x64(True):
        for name in ("bernoulli_probit", "bernoulli_logit", "poisson", "gaussian"):
            for y, m, v in [(1.0, 0.3, 0.5), (0.0, -1.2, 2.0), (3.0, 0.8, 0.1)]:
                if name.startswith("bernoulli") and y > 1:
                    continue
                from steinax.gp.latent import _log_likelihood

                def integrand(f):
                    if name == "gaussian":
                        ll = scipy.stats.norm(f, np.sqrt(0.4)).logpdf(y)
                    else:
                        ll = float(_log_likelihood(name, jnp.asarray(y), jnp.asarray(f)))
                    return ll * scipy.stats.norm(m, np.sqrt(v)).pdf(f)

                ref = quad(integrand, m - 12 * np.sqrt(v), m + 12 * np.sqrt(v), limit=200)[0]
                got = _expected_log_likelihood(name, jnp.asarray(y), jnp.asarray(m), jnp.asarray(v), jnp.asarray(0.4))
                np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-8)  # 20-point Gauss-Hermite on smooth terms


def test_type2_ml_reaches_the_ml_optimum(key):
    from steinax.gp import type2_ml

    with jax.enable_x64(True):
        X, y = _data(key, n=20)
        theta = type2_ml(X, y, steps=3000, learning_rate=0.05)
        model = GPRegression(X, y, ml=True)
        best = _argmax(model.log_marginal_likelihood, theta)
        np.testing.assert_allclose(theta, best, atol=1e-3)  # Adam at a fixed step 0.05 hovers within ~1e-4


def test_sparse_bad_input(key):
    from steinax.gp import SparseGP

    X, y = _data(key, n=8, dtype=jnp.float32)
    with pytest.raises(ValueError, match=r"`num_inducing` \(9\) must not exceed the number of data points \(8\)"):
        SparseGP(X, y, num_inducing=9)
    with pytest.raises(ValueError, match="more than the 8 data points"):
        SparseGP(X, y, inducing=jnp.zeros((9, 2)))
    with pytest.raises(ValueError, match=r"`inducing` must be \[M, 2\]"):
        SparseGP(X, y, inducing=jnp.zeros((3, 3)))
    with pytest.raises(ValueError, match="binary labels"):
        SparseGP(X, jnp.arange(8.0), "bernoulli_probit", num_inducing=3)
    with pytest.raises(ValueError, match="`likelihood` must be one of"):
        SparseGP(X, y, "student", num_inducing=3)
