"""The suite's posteriors written as NumPyro models, with their data (all offline).

Where the inference gym (PyPI ``inference-gym``) has the same model and data, the model
here is written to be the same distribution (same priors, likelihood and preprocessing),
so its Stan ground truth cross-checks our NUTS references
(:func:`steinax.posteriors.reference.inference_gym_check`); its data files are read
with :func:`steinax.datasets.inference_gym_arrays`. Data no package ships offline are
drawn from the model with a fixed seed (the varying-intercept model, GP classification).

Every model takes no arguments: its data are bound by :func:`data_for` and the
posterior is the model's latent sites in NumPyro's unconstrained space, flattened in
sorted site order (:func:`steinax.targets.from_numpyro`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from steinax import datasets
from steinax.posteriors.hard import HARD
from steinax.posteriors.real_data import EIGHT_SCHOOLS_SIGMA, EIGHT_SCHOOLS_Y, REAL_DATA

__all__ = ["MODELS", "data_for"]



def _np():
    import numpyro
    import numpyro.distributions as dist

    return numpyro, dist


def eight_schools_centered(y, sigma):
    """Rubin's eight schools, centred; the inference gym's priors: ``mu ~ N(0, 10)``,
    ``log_tau ~ N(5, 1)``, ``theta_j ~ N(mu, exp(log_tau))``, ``y_j ~ N(theta_j, sigma_j)``."""
    numpyro, dist = _np()
    mu = numpyro.sample("avg_effect", dist.Normal(0.0, 10.0))
    log_tau = numpyro.sample("log_stddev", dist.Normal(5.0, 1.0))
    theta = numpyro.sample("school_effects", dist.Normal(mu, jnp.exp(log_tau)).expand([8]).to_event(1))
    numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)


def eight_schools_noncentered(y, sigma):
    """The same posterior with ``theta_j = mu + exp(log_tau) z_j``, ``z_j ~ N(0, 1)``."""
    numpyro, dist = _np()
    mu = numpyro.sample("avg_effect", dist.Normal(0.0, 10.0))
    log_tau = numpyro.sample("log_stddev", dist.Normal(5.0, 1.0))
    z = numpyro.sample("school_effects_std", dist.Normal(0.0, 1.0).expand([8]).to_event(1))
    theta = numpyro.deterministic("school_effects", mu + jnp.exp(log_tau) * z)
    numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)


def varying_intercept(group, floor, y, n_groups):
    """A radon-style varying-intercept regression (centred): ``mu_a ~ N(0, 5)``, ``sigma_a ~ HalfNormal(1)``,
    ``a_j ~ N(mu_a, sigma_a)``, ``b ~ N(0, 1)``, ``sigma_y ~ HalfNormal(1)``, ``y_i ~ N(a_{g_i} + b floor_i, sigma_y)``."""
    numpyro, dist = _np()
    mu_a = numpyro.sample("mu_a", dist.Normal(0.0, 5.0))
    sigma_a = numpyro.sample("sigma_a", dist.HalfNormal(1.0))
    a = numpyro.sample("a", dist.Normal(mu_a, sigma_a).expand([n_groups]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma_y = numpyro.sample("sigma_y", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(a[group] + b * floor, sigma_y).to_event(1), obs=y)


def _varying_intercept_data(seed: int = 0, n_groups: int = 20):
    """Seeded synthetic data: 20 groups of 3 to 40 houses (uneven, as the radon counties are)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 41, n_groups)
    group = np.repeat(np.arange(n_groups), sizes)
    floor = rng.binomial(1, 0.3, group.size).astype(np.float64)
    a = 1.5 + 0.3 * rng.standard_normal(n_groups)
    y = a[group] - 0.6 * floor + 0.7 * rng.standard_normal(group.size)
    return dict(group=group, floor=floor, y=y, n_groups=n_groups)


def logistic_regression(features, labels):
    """German credit logistic regression, the inference gym's: ``w ~ N(0, I_25)`` on the 24 standardised
    features and a column of ones, ``y ~ Bernoulli(logit = X w)``."""
    numpyro, dist = _np()
    w = numpyro.sample("weights", dist.Normal(0.0, 1.0).expand([features.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=features @ w).to_event(1), obs=labels)


def probit_regression(features, labels):
    """The same with the probit link ``P(y = 1) = Phi(X w)``."""
    numpyro, dist = _np()
    w = numpyro.sample("weights", dist.Normal(0.0, 1.0).expand([features.shape[1]]).to_event(1))
    eta = features @ w
    log_p1 = jax.scipy.stats.norm.logcdf(eta)
    log_p0 = jax.scipy.stats.norm.logcdf(-eta)
    numpyro.factor("y", jnp.sum(labels * log_p1 + (1.0 - labels) * log_p0))


def sparse_logistic_regression(features, labels):
    """German credit with a sparsity prior, the inference gym's: ``global ~ Gamma(0.5, 0.5)``,
    ``local_i ~ Gamma(0.5, 0.5)``, ``u_i ~ N(0, 1)``, ``w = u * local * global`` (51 coordinates)."""
    numpyro, dist = _np()
    k = features.shape[1]
    g = numpyro.sample("global_scale", dist.Gamma(0.5, 0.5))
    local = numpyro.sample("local_scales", dist.Gamma(0.5, 0.5).expand([k]).to_event(1))
    u = numpyro.sample("unscaled_weights", dist.Normal(0.0, 1.0).expand([k]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=features @ (u * local * g)).to_event(1), obs=labels)


def _german_data():
    X, y = datasets.load("german_credit")
    X = (X - X.mean(0)) / X.std(0)
    return dict(features=np.concatenate([X, np.ones((X.shape[0], 1))], axis=1), labels=y)


def stochastic_volatility(returns):
    """The inference gym's stochastic volatility model of the last 100 S&P 500 daily returns (centred AR(1);
    103 coordinates): ``(phi + 1) / 2 ~ Beta(20, 1.5)``, ``mu ~ Cauchy(0, 5)``, ``sigma ~ HalfCauchy(2)``,
    ``h_0 ~ N(mu, sigma / sqrt(1 - phi^2))``, ``h_t ~ N(mu + phi (h_{t-1} - mu), sigma)``, ``r_t ~ N(0, exp(h_t / 2))``."""
    numpyro, dist = _np()
    p = numpyro.sample("persistence_raw", dist.Beta(20.0, 1.5))
    phi = numpyro.deterministic("persistence_of_volatility", 2.0 * p - 1.0)
    mu = numpyro.sample("mean_log_volatility", dist.Cauchy(0.0, 5.0))
    sigma = numpyro.sample("white_noise_shock_scale", dist.HalfCauchy(2.0))
    T = returns.shape[0]
    h = numpyro.sample("log_volatility", dist.ImproperUniform(dist.constraints.real_vector, (), (T,)))
    numpyro.factor("h0", dist.Normal(mu, sigma / jnp.sqrt(1.0 - phi**2)).log_prob(h[0]))
    numpyro.factor("h", jnp.sum(dist.Normal(mu + phi * (h[:-1] - mu), sigma).log_prob(h[1:])))
    numpyro.sample("r", dist.Normal(0.0, jnp.exp(h / 2.0)).to_event(1), obs=returns)


def _sv_data(num_points: int = 100):
    prices = datasets.inference_gym_arrays("internal/datasets/sp500_closing_prices")["CLOSING_PRICES"]
    r = np.diff(prices.astype(np.float64))[-num_points:]
    return dict(returns=r - r.mean())


def brownian_motion(observed, observed_mask):
    """The inference gym's Brownian motion with unknown scales and the middle ten of 30 observations missing
    (32 coordinates): ``sigma_inn, sigma_obs ~ LogNormal(0, 2)``, ``x_0 ~ N(0, sigma_inn)``,
    ``x_t ~ N(x_{t-1}, sigma_inn)``, observed ``y_t ~ N(x_t, sigma_obs)``."""
    numpyro, dist = _np()
    s_inn = numpyro.sample("innovation_noise_scale", dist.LogNormal(0.0, 2.0))
    s_obs = numpyro.sample("observation_noise_scale", dist.LogNormal(0.0, 2.0))
    T = observed.shape[0]
    x = numpyro.sample("locs", dist.ImproperUniform(dist.constraints.real_vector, (), (T,)))
    prev = jnp.concatenate([jnp.zeros(1), x[:-1]])
    numpyro.factor("walk", jnp.sum(dist.Normal(prev, s_inn).log_prob(x)))
    obs = jnp.where(observed_mask, observed, 0.0)
    numpyro.factor("obs", jnp.sum(jnp.where(observed_mask, dist.Normal(x, s_obs).log_prob(obs), 0.0)))


def _bm_data():
    y = datasets.inference_gym_arrays("internal/datasets/brownian_motion_missing_middle_observations")["OBSERVED_LOC"]
    y = y.astype(np.float64)
    return dict(observed=np.nan_to_num(y), observed_mask=~np.isnan(y))


def item_response_theory(correct, answered):
    """The inference gym's one-parameter item-response model of its synthetic data (400 students, 100
    questions, 30012 answers; 501 coordinates): ``delta ~ N(0.75, 1)``, ``alpha_j ~ N(0, 1)``,
    ``beta_k ~ N(0, 1)``, ``P(correct) = sigmoid(delta + alpha_j - beta_k)``.

    The answers are held as dense ``[students, questions]`` matrices (``answered`` masks the 30012
    answered pairs of 40000; no pair is answered twice) and the likelihood is the masked Bernoulli sum
    ``sum answered * (correct * l - softplus(l))``, ``l = delta + alpha[:, None] - beta[None, :]``. It
    equals the gym's per-answer form with gathered ``alpha[student] - beta[question]``, whose gradient
    is a scatter-add: on CPU that scatter made every score evaluation about 5 times slower."""
    numpyro, dist = _np()
    n_students, n_questions = correct.shape
    delta = numpyro.sample("mean_student_ability", dist.Normal(0.75, 1.0))
    alpha = numpyro.sample("centered_student_ability", dist.Normal(0.0, 1.0).expand([n_students]).to_event(1))
    beta = numpyro.sample("question_difficulty", dist.Normal(0.0, 1.0).expand([n_questions]).to_event(1))
    logits = delta + alpha[:, None] - beta[None, :]
    numpyro.factor("y", jnp.sum(answered * (correct * logits - jax.nn.softplus(logits))))


def irt_answers(student, question, correct, n_students: int = 400, n_questions: int = 100):
    """The per-answer arrays as the dense ``(correct, answered)`` matrices :func:`item_response_theory` takes."""
    pairs = np.asarray(student) * n_questions + np.asarray(question)
    if np.unique(pairs).size != pairs.size:
        raise ValueError("`student`, `question`: a (student, question) pair is answered more than once; the dense "
                         "form holds one answer per pair")
    c = np.zeros((n_students, n_questions))
    m = np.zeros((n_students, n_questions))
    c[student, question] = correct
    m[student, question] = 1.0
    return dict(correct=c, answered=m)


def _irt_data():
    a = datasets.inference_gym_arrays("internal/datasets/synthetic_item_response_theory")
    return irt_answers(a["STUDENT_IDS"].astype(np.int64), a["QUESTION_IDS"].astype(np.int64),
                       a["CORRECT"].astype(np.float64))


def gp_classification(chol, labels):
    """GP classification's latent posterior (whitened): ``z ~ N(0, I_50)``, ``f = L z`` with ``L L^T`` an RBF
    Gram matrix (lengthscale 0.25, variance 2, jitter 1e-6) on 50 inputs in ``[0, 1]``, ``y ~ Bernoulli(logit f)``."""
    numpyro, dist = _np()
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([chol.shape[0]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=chol @ z).to_event(1), obs=labels)


def _gp_data(seed: int = 0, n: int = 50):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.0, 1.0, n))
    K = 2.0 * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.25**2) + 1e-6 * np.eye(n)
    L = np.linalg.cholesky(K)
    f = L @ rng.standard_normal(n)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-f))).astype(np.float64)
    return dict(chol=L, labels=y)


MODELS = {
    "eight_schools_centered": (eight_schools_centered, lambda: dict(y=EIGHT_SCHOOLS_Y, sigma=EIGHT_SCHOOLS_SIGMA)),
    "eight_schools_noncentered": (eight_schools_noncentered, lambda: dict(y=EIGHT_SCHOOLS_Y, sigma=EIGHT_SCHOOLS_SIGMA)),
    "varying_intercept": (varying_intercept, _varying_intercept_data),
    "german_logistic": (logistic_regression, _german_data),
    "german_probit": (probit_regression, _german_data),
    "german_sparse_logistic": (sparse_logistic_regression, _german_data),
    "stochastic_volatility": (stochastic_volatility, _sv_data),
    "brownian_motion": (brownian_motion, _bm_data),
    "item_response_theory": (item_response_theory, _irt_data),
    "gp_classification": (gp_classification, _gp_data),
}
"""name -> (NumPyro model, a function returning its data as keyword arguments)."""
MODELS.update({name: (model, data) for name, (model, data, _) in (REAL_DATA | HARD).items()})


@functools.lru_cache(maxsize=None)
def _cached_data(name: str):
    return MODELS[name][1]()


def data_for(name: str) -> dict:
    """The model's data (keyword arguments; integer counts stay Python ints, arrays become float arrays)."""
    out = {}
    for k, v in _cached_data(name).items():
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            v = jnp.asarray(v, jnp.result_type(float))
        elif isinstance(v, np.ndarray):
            v = jnp.asarray(v)
        out[k] = v
    return out
