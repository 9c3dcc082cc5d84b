import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from steinax.targets import DoubleBanana, Gaussian, GaussianMixture, MinibatchTarget, Sine, as_target, gmm_1d, star
from conftest import tolerance


def test_gaussian_matches_scipy(key):
    mean = jnp.array([-0.6871, 0.8010])
    cov = jnp.array([[0.2260, 0.1652], [0.1652, 0.6779]])
    g = Gaussian(mean, cov)
    x = jax.random.normal(key, (5, 2))
    want = stats.multivariate_normal(np.asarray(mean), np.asarray(cov)).logpdf(np.asarray(x))
    np.testing.assert_allclose(jax.vmap(g.logdensity)(x), want, rtol=1e-5)
    # precision reading (Liu & Wang demo): score -(x - mu) A
    gp = Gaussian.from_precision(mean, cov)
    np.testing.assert_allclose(gp.score(x[0]), -(x[0] - mean) @ cov, **tolerance(jnp.float32))
    np.testing.assert_allclose(g.hessian(x[0]), jax.hessian(g.logdensity)(x[0]), rtol=1e-4, atol=1e-4)


def test_gaussian_samples_moments(key):
    g = Gaussian(jnp.array([1.0, -1.0]), jnp.array([[1.0, 0.8], [0.8, 1.0]]))
    s = g.sample(key, 20000)
    # 20000 samples: SE of the mean 0.007, of a covariance entry <= 0.01; 5 SE bounds (failure rate < 1e-5)
    np.testing.assert_allclose(s.mean(0), g.mean, atol=0.035)
    np.testing.assert_allclose(jnp.cov(s.T), g.cov, atol=0.05)


def test_mixture_matches_scipy(key):
    mix = gmm_1d()
    x = np.linspace(-5, 5, 11)
    want = np.log(0.25 * stats.norm(-2, 1).pdf(x) + 0.75 * stats.norm(2.5, 1).pdf(x))
    np.testing.assert_allclose(jax.vmap(mix.logdensity)(jnp.asarray(x)[:, None]), want, rtol=1e-5)
    s = mix.sample(key, 20000)
    se = np.sqrt(float(0.25 * 5 + 0.75 * 7.25 - (0.25 * -2 + 0.75 * 2.5) ** 2) / 20000)
    assert abs(float(s.mean()) - (0.25 * -2 + 0.75 * 2.5)) < 5 * se
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture(jnp.array([1.0, -1.0]), jnp.zeros((2, 1)), jnp.ones((2, 1, 1)))


def test_star_variants():
    paper, code = star(), star(variant="code")
    np.testing.assert_allclose(paper.means[0], [0.0, 1.5], atol=1e-7)
    np.testing.assert_allclose(code.means[0], [1.5, 0.0], atol=1e-7)
    np.testing.assert_allclose(paper.covs[0], np.diag([1.0, 0.01]), atol=1e-7)
    th = 2 * np.pi / 5
    rot = np.array([[np.cos(th), np.sin(th)], [-np.sin(th), np.cos(th)]])
    np.testing.assert_allclose(paper.means[1], rot @ np.array([0.0, 1.5]), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(paper.means, axis=1), 1.5, rtol=1e-6)
    with pytest.raises(ValueError, match="variant"):
        star(variant="figure")


def test_toy_formulas():
    x = jnp.array([0.3, -0.7])
    db, dbc = DoubleBanana(), DoubleBanana("code")
    f = lambda a, eps: np.log((a - 0.3) ** 2 + 100 * (-0.7 - 0.09) ** 2 + eps)  # noqa: E731
    want = lambda a, eps: -0.5 * (0.09 + 0.49) - (np.log(30) - f(a, eps)) ** 2 / (2 * 0.09)  # noqa: E731
    np.testing.assert_allclose(db.logdensity(x), want(1.0, 0.0), rtol=1e-5)
    np.testing.assert_allclose(dbc.logdensity(x), want(0.0, 1e-10), rtol=1e-5)
    r = -0.7 + np.sin(0.3)
    np.testing.assert_allclose(Sine().logdensity(x), -(r**2) / 0.006 - 0.5 * 0.58, rtol=1e-5)
    np.testing.assert_allclose(Sine("code").logdensity(x), -(r**4) / 0.006 - 0.5 * 0.58, rtol=1e-5)


def test_gauss_newton_equals_negative_hessian_on_the_residual_zero_set():
    s = Sine()
    x = jnp.array([0.4, -np.sin(0.4)])  # residual x2 + sin x1 = 0
    np.testing.assert_allclose(s.gauss_newton(x), -s.hessian(x), rtol=1e-3)


@pytest.mark.parametrize("target", [DoubleBanana(), Sine(), Sine("code")], ids=["banana", "sine", "sine_code"])
def test_rejection_samples_match_quadrature(target, key):
    """Sample means and second moments against a 600 x 600 grid quadrature of the density.

    4000 samples: standard errors <= 0.02; we allow 5 standard errors of the
    sample (failure rate < 1e-5 per moment).
    """
    s = np.asarray(target.sample(key, 4000))
    g = np.linspace(-4, 4, 600)
    gx, gy = np.meshgrid(g, g)
    pts = jnp.stack([gx.ravel(), gy.ravel()], 1)
    logp = np.asarray(jax.vmap(target.logdensity)(pts), np.float64)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    pts = np.asarray(pts, np.float64)
    for f in (lambda p: p[:, 0], lambda p: p[:, 1], lambda p: p[:, 0] ** 2, lambda p: p[:, 1] ** 2):
        exact = float(np.sum(w * f(pts)))
        vals = f(s)
        assert abs(vals.mean() - exact) < 5 * vals.std() / np.sqrt(s.shape[0]) + 1e-3


def test_as_target_and_minibatch_fisher(key):
    t = as_target(lambda x: -0.5 * jnp.sum(x**2))
    logd, scores = t.evaluate(key, jnp.ones((3, 2)))
    np.testing.assert_allclose(scores, -jnp.ones((3, 2)))
    np.testing.assert_allclose(logd, -jnp.ones(3))
    with pytest.raises(TypeError, match="log-density"):
        as_target("gaussian")
    data = jax.random.normal(key, (100, 2))
    mb = MinibatchTarget(lambda th: -0.5 * jnp.sum(th**2), lambda th, y: -0.5 * jnp.sum((y - th) ** 2), data, 100)
    F = mb.fisher(key, jnp.zeros(2))
    # the likelihood's N * Cov_B plus the N(0, I) prior's curvature I
    np.testing.assert_allclose(F, 100 * np.cov(np.asarray(data).T, bias=True) + np.eye(2), rtol=1e-4)


def test_minibatch_sampling_with_replacement_is_unbiased_and_auto_switches():
    """Large N: O(B) sampling with replacement; the mean of 4000 minibatch scores equals the full score (4 SE)."""
    import pytest

    from steinax.targets import MinibatchTarget

    n = 30_000
    data = jnp.linspace(-2.0, 3.0, n)
    full_target = MinibatchTarget(lambda x: -0.5 * jnp.sum(x * x), lambda x, d: -0.5 * jnp.sum((x - d) ** 2), data, None)
    x = jnp.array([[0.3]])
    full = full_target.evaluate(None, x)[1][0, 0]
    for sampling in ("auto", "with_replacement"):
        t = MinibatchTarget(full_target.logprior_fn, full_target.loglik_fn, data, 100, sampling)
        draws = jax.vmap(lambda k: t.evaluate(k, x)[1][0, 0])(jax.random.split(jax.random.key(0), 4000))
        assert abs(float(draws.mean() - full)) < 4 * float(draws.std()) / np.sqrt(4000)
    # auto: a permutation (no repeated index) below 20,000 examples, independent draws above
    small = MinibatchTarget(full_target.logprior_fn, full_target.loglik_fn, data[:1000], 1000)
    assert float(small.evaluate(jax.random.key(1), x)[1][0, 0]) == pytest.approx(
        float(MinibatchTarget(full_target.logprior_fn, full_target.loglik_fn, data[:1000], None).evaluate(None, x)[1][0, 0]),
        rel=1e-5)  # B = N without replacement is the full data
    with pytest.raises(ValueError, match="`sampling` must be one of"):
        MinibatchTarget(full_target.logprior_fn, full_target.loglik_fn, data, 10, "stratified")
