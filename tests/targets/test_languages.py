"""One hierarchical model written in NumPyro, PyMC and TFP (JAX substrate) gives one target.

Eight schools, non-centred, with a HalfCauchy scale: all three languages map ``tau`` to the real line
by ``log`` (TFP's default bijector for HalfCauchy is ``exp``; for HalfNormal it would be softplus), so
the three unconstrained spaces are the same and their flat layouts agree site by site.
"""

import jax
import numpy as np
import pytest

pm = pytest.importorskip("pymc", reason="the optional extra steinax[pymc]")
tfp = pytest.importorskip("tensorflow_probability.substrates.jax", reason="the optional extra steinax[tfp]")
numpyro = pytest.importorskip("numpyro")

import numpyro.distributions as dist  # noqa: E402

import steinax  # noqa: E402
from steinax.targets import from_numpyro, from_pymc, from_tfp  # noqa: E402

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0], np.float32)
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0], np.float32)
SCHOOLS = [f"school {i}" for i in range(8)]


def numpyro_model(y=Y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("school", 8):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, SIGMA), obs=y)


def pymc_model():
    with pm.Model(coords={"school": SCHOOLS}) as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, dims="school")
        pm.Normal("obs", mu + tau * theta_tilde, SIGMA, observed=Y, dims="school")
    return model


def tfp_model():
    tfd = tfp.distributions
    return tfd.JointDistributionNamed(dict(
        mu=tfd.Normal(0.0, 5.0),
        tau=tfd.HalfCauchy(0.0, 5.0),
        theta_tilde=tfd.Sample(tfd.Normal(0.0, 1.0), 8),
        obs=lambda mu, tau, theta_tilde: tfd.Independent(tfd.Normal(mu + tau * theta_tilde, SIGMA), 1),
    ))


@pytest.fixture(scope="module")
def targets():
    return {"numpyro": from_numpyro(numpyro_model), "pymc": from_pymc(pymc_model()),
            "tfp": from_tfp(tfp_model(), observed={"obs": Y})}


def test_same_sites_and_layout(targets):
    for t in targets.values():
        assert t.site_names == ("mu", "tau", "theta_tilde") and t.dim == 10
    x = targets["numpyro"].init_particles(jax.random.key(0), 3)
    for t in targets.values():  # one flat layout: the same point reads as the same sites in every language
        sites = t.sites(x)
        np.testing.assert_array_equal(np.asarray(sites["tau"]), np.asarray(x[:, 1]))
        np.testing.assert_array_equal(np.asarray(t.ravel(sites)), np.asarray(x))


def test_scores_agree_at_100_points(targets):
    """Log-densities and scores at 100 shared points agree to float32 rounding: each is a sum of ~20 float32 terms
    of size up to ~50, so 2e-5 relative to the largest magnitude (about 100 ulps of it)."""
    x = 2.0 * jax.random.normal(jax.random.key(1), (100, 10))
    out = {k: t.evaluate(None, x) for k, t in targets.items()}
    lp0, s0 = (np.asarray(a, np.float64) for a in out["numpyro"])
    for k in ("pymc", "tfp"):
        lp, s = (np.asarray(a, np.float64) for a in out[k])
        np.testing.assert_allclose(lp, lp0, rtol=0, atol=2e-5 * np.abs(lp0).max(), err_msg=k)
        np.testing.assert_allclose(s, s0, rtol=0, atol=2e-5 * np.abs(s0).max(), err_msg=k)


def test_svgd_particles_agree_after_100_steps(targets):
    """The same SVGD run in the three languages: particles within 1e-4 after 100 steps."""
    x0 = targets["numpyro"].init_particles(jax.random.key(2), 50)
    runs = {k: steinax.run(steinax.svgd(), t, x0, steps=100, optimizer=steinax.adagrad_momentum(0.05),
                           rng_key=jax.random.key(3)) for k, t in targets.items()}
    for k in ("pymc", "tfp"):
        np.testing.assert_allclose(np.asarray(runs[k].particles), np.asarray(runs["numpyro"].particles), rtol=0,
                                   atol=1e-4, err_msg=k)
    trees = {k: r.to_datatree() for k, r in runs.items()}
    names = {k: sorted(t["posterior"].data_vars) for k, t in trees.items()}
    assert names["numpyro"] == names["pymc"] == names["tfp"] == ["mu", "tau", "theta_tilde"]
    # PyMC's dims and coords, as pm.sample gives them
    assert trees["pymc"]["posterior"]["theta_tilde"].dims == ("chain", "draw", "school")
    assert list(trees["pymc"]["posterior"]["school"].values) == SCHOOLS
    np.testing.assert_allclose(np.asarray(trees["pymc"]["posterior"]["tau"]).ravel(),
                               np.exp(np.asarray(runs["pymc"].particles[:, 1])), rtol=1e-6)


def test_pymc_draws_through_arviz(targets, tmp_path):
    """The PyMC run's DataTree goes through arviz-stats' summary and arviz-plots' plot_dist and plot_pair."""
    azs = pytest.importorskip("arviz_stats")
    azp = pytest.importorskip("arviz_plots")
    import matplotlib

    matplotlib.use("Agg")
    x0 = targets["pymc"].init_particles(jax.random.key(4), 40)
    tree = steinax.run(steinax.svgd(), targets["pymc"], x0, steps=50, rng_key=jax.random.key(5)).to_datatree()
    table = azs.summary(tree, kind="stats")
    assert {"mu", "tau"} <= {str(i).split("[")[0] for i in table.index} and "mean" in table.columns
    assert len(table.index) == 10  # mu, tau and the 8 schools' theta_tilde
    azp.plot_dist(tree, var_names=["mu", "tau"])
    azp.plot_pair(tree, var_names=["mu", "tau"])


def test_pymc_named_draws_map_to_the_unconstrained_space(targets):
    t = targets["pymc"]
    x = t.init_particles(jax.random.key(6), 7)
    np.testing.assert_allclose(np.asarray(t.unconstrain(t.postprocess(x))), np.asarray(x), rtol=1e-5, atol=1e-5)


def test_discrete_variables_are_refused():
    with pm.Model() as model:
        pm.Poisson("n", 3.0)
        pm.Normal("mu", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"discrete free variables \['n'\]"):
        from_pymc(model)
    tfd = tfp.distributions
    jd = tfd.JointDistributionNamed(dict(n=tfd.Poisson(3.0), mu=tfd.Normal(0.0, 1.0)))
    with pytest.raises(ValueError, match=r"discrete latent parts \['n'\]"):
        from_tfp(jd)


def test_tfp_part_without_a_bijector_is_named():
    tfd = tfp.distributions

    class NoBijector(tfd.Normal):  # a distribution that does not say its support's bijector
        def _default_event_space_bijector(self):
            raise NotImplementedError("NoBijector has no default event-space bijector")

    jd = tfd.JointDistributionNamed(dict(mu=NoBijector(0.0, 1.0)))
    with pytest.raises(NotImplementedError, match="pass `bijector`"):
        from_tfp(jd)
    with pytest.raises(TypeError, match="must be a TFP joint distribution"):
        from_tfp(tfd.Normal(0.0, 1.0))
    with pytest.raises(TypeError, match="must be a pymc.Model"):
        from_pymc(numpyro_model)


def test_pymc_operation_without_jax_is_named():
    """A model with an operation PyMC cannot compile to JAX (a Python ``as_op``): the error says so."""
    import pytensor.tensor as pt
    from pytensor.compile.ops import as_op

    @as_op(itypes=[pt.dscalar], otypes=[pt.dscalar])
    def python_only(x):
        return np.asarray(-0.5 * x * x)

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Potential("extra", python_only(mu))
    with pytest.raises(NotImplementedError, match="PyMC cannot compile the model's log-density to JAX"):
        from_pymc(model)
