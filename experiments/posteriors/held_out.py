"""Three models a new user writes (held out of every choice of defaults): steinax's defaults against NumPyro NUTS.

    python experiments/posteriors/held_out.py [--particles 100] [--methods svgd cc_svgd] [--out DIR]

The issue-25 report's three models, with seeded synthetic data (the radon and rat-tumour data
sets are not shipped offline): a radon varying-intercept regression with a county-level
predictor (85 counties of 1 to 60 houses), a 3-component Gaussian mixture with Dirichlet
weights (ordered locations, 300 points), and a Beta-Binomial with a Pareto prior on the
concentration (71 experiments, BDA3's rat-tumour model). For each: NumPyro NUTS (4 chains,
1000 warm-up, 2000 draws) as the reference, then each steinax method run **as a new user
would: no step size, no step count** (``steinax.run(method, target, x0, rng_key=key)``:
Adam 0.05 until the moment rule holds), checked by both collapse diagnostics
(``sample_quality(..., spread=True)``). Prints and writes ``held_out.csv`` and
``held_out.png`` (sd ratio per coordinate, per method) to ``--out``.
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


def radon(county, uranium, floor, y, n_counties):
    import numpyro
    import numpyro.distributions as dist

    g0 = numpyro.sample("gamma_0", dist.Normal(0.0, 10.0))
    g1 = numpyro.sample("gamma_1", dist.Normal(0.0, 10.0))
    sigma_a = numpyro.sample("sigma_a", dist.HalfCauchy(5.0))
    a = numpyro.sample("a", dist.Normal(g0 + g1 * uranium, sigma_a).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 10.0))
    sigma_y = numpyro.sample("sigma_y", dist.HalfCauchy(5.0))
    numpyro.sample("y", dist.Normal(a[county] + b * floor, sigma_y).to_event(1), obs=y)


def radon_data(seed=0, n_counties=85):
    rng = np.random.default_rng(seed)
    sizes = np.minimum(1 + rng.geometric(0.09, n_counties), 60)
    county = np.repeat(np.arange(n_counties), sizes)
    uranium = rng.normal(0.0, 0.35, n_counties)
    a = 1.45 + 0.7 * uranium + 0.15 * rng.standard_normal(n_counties)
    floor = rng.binomial(1, 0.15, county.size).astype(np.float64)
    y = a[county] - 0.67 * floor + 0.76 * rng.standard_normal(county.size)
    return dict(county=county, uranium=uranium, floor=floor, y=y, n_counties=n_counties)


def mixture(y):
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions.transforms import OrderedTransform

    w = numpyro.sample("weights", dist.Dirichlet(jnp.ones(3)))
    locs = numpyro.sample("locs", dist.TransformedDistribution(dist.Normal(0.0, 10.0).expand([3]), OrderedTransform()))
    scale = numpyro.sample("scale", dist.HalfNormal(2.0))
    numpyro.sample("y", dist.MixtureSameFamily(dist.Categorical(w), dist.Normal(locs, scale)).expand([y.shape[0]]).to_event(1),
                   obs=y)


def mixture_data(seed=0, n=300):
    rng = np.random.default_rng(seed)
    comp = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    return dict(y=np.array([-3.0, 0.5, 4.0])[comp] + 0.8 * rng.standard_normal(n))


def beta_binomial(y, n):
    import numpyro
    import numpyro.distributions as dist

    mean = numpyro.sample("mean", dist.Beta(1.0, 1.0))
    kappa = numpyro.sample("kappa", dist.Pareto(1.0, 1.5))
    ones = jnp.ones(y.shape[0])  # full-shape concentrations (NumPyro's Beta stacks them without broadcasting)
    theta = numpyro.sample("theta", dist.Beta(mean * kappa * ones, (1.0 - mean) * kappa * ones).to_event(1))
    numpyro.sample("y", dist.Binomial(n, theta).to_event(1), obs=y)


def beta_binomial_data(seed=0, experiments=71):
    rng = np.random.default_rng(seed)
    n = rng.integers(14, 53, experiments)
    theta = rng.beta(2.4, 14.0, experiments)
    return dict(y=rng.binomial(n, theta).astype(np.float64), n=n.astype(np.float64))


MODELS = {"radon": (radon, radon_data), "dirichlet_mixture": (mixture, mixture_data),
          "beta_binomial_pareto": (beta_binomial, beta_binomial_data)}


def reference_of(target, dim, seed, warmup=1000, samples=2000):
    from steinax.baselines.mcmc import nuts
    from steinax.posteriors import Reference

    x0 = target.init_particles(jax.random.key(seed), 4)
    t0 = time.perf_counter()
    draws = np.asarray(nuts(target, x0, num_warmup=warmup, num_samples=samples, rng_key=jax.random.key(seed + 1)), np.float64)
    flat = draws.reshape(-1, dim)
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    meta = {"max_rhat": float(np.max(split_gelman_rubin(draws))), "min_ess": float(np.min(effective_sample_size(draws))),
            "seconds": time.perf_counter() - t0}
    return Reference(flat.mean(0), flat.std(0, ddof=1), flat[:: max(1, flat.shape[0] // 1000)], meta)


def main(argv=None):
    import steinax
    from steinax.diagnostics import sample_quality
    from steinax.metrics.posterior import posterior_errors
    from steinax.targets.numpyro_adapter import from_numpyro

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--methods", nargs="+", default=["svgd", "cc_svgd"], choices=["svgd", "cc_svgd", "mk_svgd", "sliced_svgd"])
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=20000)
    p.add_argument("--nuts-warmup", type=int, default=1000)
    p.add_argument("--nuts-samples", type=int, default=2000)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("held-out models: steinax defaults (no step size, no step count) against NumPyro NUTS",
           {"models": a.models, "methods": a.methods, "particles": a.particles, "max steps": a.max_steps,
            "optimizer": "default (Adam 0.05, halved on plateaus)", "reference": f"NumPyro NUTS 4 x {a.nuts_samples} after {a.nuts_warmup} warm-up",
            "data": "seeded synthetic (not shipped offline)"})
    rows, ratios = [], {}
    for name in a.models:
        model, data = MODELS[name]
        target = from_numpyro(model, **{k: (jnp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in data().items()})
        dim = target.dim
        ref = reference_of(target, dim, 0, a.nuts_warmup, a.nuts_samples)
        print(f"{name} (d = {dim}): NUTS R-hat <= {ref.meta['max_rhat']:.3f}, min ESS {ref.meta['min_ess']:.0f}, "
              f"{ref.meta['seconds']:.0f}s", flush=True)
        for method in a.methods:
            x0 = jax.random.normal(jax.random.key(1), (a.particles, dim))
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", steinax.ConvergenceWarning)
                res = steinax.run_until_converged(getattr(steinax, method)(), target, x0, rng_key=jax.random.key(2),
                                                  max_steps=a.max_steps, progress=False)
            wall = time.perf_counter() - t0
            q = sample_quality(res.particles, target, spread=True, rng_key=jax.random.key(3))
            err = posterior_errors(res.particles, ref)
            ratios[(name, method)] = np.asarray(res.particles).std(0, ddof=1) / ref.sd
            row = {"model": name, "d": dim, "method": method, "converged": res.converged,
                   "steps": res.convergence["steps"], "warned": bool(caught), **err, "ksd_u": q.discrepancy,
                   "spread_T": q.spread.median_ratio, "relax_growth": q.relaxation.growth, "relax_p": q.relaxation.p_value,
                   "flagged": q.collapsed, "wall_s": round(wall, 1), "nuts_s": round(ref.meta["seconds"], 1)}
            rows.append(row)
            print(f"  {method:8s} converged {res.converged} after {row['steps']} steps; max mean err "
                  f"{err['mean_error_max']:.2f} sd, sd ratio {err['sd_ratio_median']:.2f} (min {err['sd_ratio_min']:.2f}); "
                  f"flagged {q.collapsed} (T {q.spread.median_ratio:.2f}, growth {q.relaxation.growth:+.2f}, "
                  f"p {q.relaxation.p_value:.3g}); {wall:.0f}s", flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "held_out.csv"), rows)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(a.models), figsize=(5 * len(a.models), 3.5), squeeze=False)
    for ax, name in zip(axes[0], a.models):
        for method in a.methods:
            ax.plot(np.sort(ratios[(name, method)]), "o-", ms=3, label=method)
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("coordinate (sorted)")
        ax.set_ylabel("sd ratio to NUTS")
        ax.legend()
    save_figure(fig, os.path.join(a.out, "held_out.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
