import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.interfaces import cli
from steinax.diagnostics import as_sample_array, load_samples, sample_quality


def _logp(x):
    return -0.5 * jnp.sum(x * x)


def test_array_shapes_and_values_match_ksd():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 50, 3))
    flat = as_sample_array(x)
    assert flat.shape == (100, 3) and as_sample_array(x[0, :, 0]).shape == (50, 1)
    res = sample_quality(x, _logp, test=True, rng_key=jax.random.key(0), n_bootstrap=200)
    xf = jnp.asarray(flat, jnp.float32)
    np.testing.assert_allclose(res.discrepancy, steinax.ksd(xf, -xf, steinax.IMQ(), "u"), rtol=1e-5)
    assert (res.n, res.d, res.chains) == (100, 3, 2) and res.test is not None
    assert res.test.bootstrap == "dependent"  # chain-shaped input: autocorrelated-chain bootstrap, said in the result


def test_datatree_posterior_is_flattened_in_var_name_order():
    from arviz_base import from_dict

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 30)), rng.normal(size=(2, 30, 2))
    tree = from_dict({"posterior": {"a": a, "b": b}})
    arr = as_sample_array(tree, ["b", "a"])
    np.testing.assert_allclose(arr, np.concatenate([b.reshape(60, 2), a.reshape(60, 1)], axis=1))
    with pytest.raises(ValueError, match=r"\['c'\] are not variables"):
        as_sample_array(tree, ["c"])


def test_cli_reads_npy_csv_netcdf_and_reports(tmp_path, capsys):
    from arviz_base import from_dict

    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 2))
    np.save(tmp_path / "s.npy", x)
    np.savetxt(tmp_path / "s.csv", x, delimiter=",", header="x0,x1", comments="")
    from_dict({"posterior": {"theta": x.reshape(1, 200, 2)}}).to_netcdf(str(tmp_path / "s.nc"), engine="h5netcdf")
    (tmp_path / "tgt.py").write_text("import jax.numpy as jnp\ndef logp(x):\n    return -0.5 * jnp.sum(x * x)\n")
    values = []
    for name in ("s.npy", "s.csv", "s.nc"):
        assert cli.main(["ksd", str(tmp_path / name), "--target", f"{tmp_path / 'tgt.py'}:logp", "--bootstrap", "100"]) == 0
        out = capsys.readouterr().out
        assert "n = 200, d = 2" in out and "p-value" in out
        values.append(out.split("U-statistic): ")[1].split()[0])
    assert len(set(values)) == 1  # the same samples give the same discrepancy from every format
    np.testing.assert_allclose(load_samples(str(tmp_path / "s.csv")), x, rtol=1e-12)


def test_bad_input(tmp_path, capsys):
    x = np.random.default_rng(3).normal(size=(20, 2))
    with pytest.raises(ValueError, match="NaN|non-finite"):
        sample_quality(np.where(np.arange(40).reshape(20, 2) == 3, np.nan, x), _logp)
    with pytest.raises(ValueError, match=r"not finite at \d+ sample row"):
        sample_quality(x, lambda z: -0.5 * jnp.sum(z * z) + jnp.sum(jnp.sqrt(z)))  # NaN score at negative values
    with pytest.raises(ValueError, match="`test=True` needs `rng_key`"):
        sample_quality(x, _logp, test=True)
    (tmp_path / "bad.csv").write_text("1,2\n3,oops\n")
    with pytest.raises(ValueError, match="could not use samples file"):
        load_samples(str(tmp_path / "bad.csv"))
    with pytest.raises(ValueError, match="unsupported samples file type"):
        (tmp_path / "bad.txt").write_text("1")
        load_samples(str(tmp_path / "bad.txt"))
    assert cli.main(["ksd", str(tmp_path / "missing.npy"), "--target", "math:sqrt"]) == 2
    assert "not found" in capsys.readouterr().err


def test_numpyro_model_draws_are_measured_in_unconstrained_space():
    """mu ~ N(0, 1), y ~ N(mu, 1) (conjugate), sigma ~ LogNormal(0, 1) (prior = posterior): exact posterior
    draws, constrained, in a DataTree. The discrepancy must equal the KSD of (mu, log sigma) against the
    model's potential, and the draws must not be rejected (fixed seed; at level 0.01)."""
    import numpyro
    import numpyro.distributions as dist
    from arviz_base import from_dict

    from steinax.targets import from_numpyro

    y = jnp.array([0.3, 1.1, -0.4, 0.8])

    def model(y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("sigma", dist.LogNormal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)

    target = from_numpyro(model, y)
    k1, k2 = jax.random.split(jax.random.key(0))
    n = 400
    post_mean, post_sd = float(y.sum() / 5.0), float(1.0 / np.sqrt(5.0))
    mu = post_mean + post_sd * jax.random.normal(k1, (2, n // 2))
    sigma = jnp.exp(jax.random.normal(k2, (2, n // 2)))
    tree = from_dict({"posterior": {"mu": np.asarray(mu), "sigma": np.asarray(sigma)}})
    res = sample_quality(tree, target, test=True, rng_key=jax.random.key(1), n_bootstrap=500)
    z = jnp.stack([mu.reshape(-1), jnp.log(sigma.reshape(-1))], axis=1)  # sorted sites: mu, sigma
    _, s = target.evaluate(None, z)
    np.testing.assert_allclose(res.discrepancy, steinax.ksd(z, s, steinax.IMQ(), "u"), rtol=1e-4, atol=1e-7)
    assert res.p_value > 0.01
    with pytest.raises(ValueError, match=r"lack the model's latent sites \['sigma'\]"):
        sample_quality({"mu": np.zeros((5,))}, target)
    with pytest.raises(ValueError, match="site 'sigma' must have shape"):
        sample_quality({"mu": np.zeros(5), "sigma": np.ones((5, 2))}, target)


def test_bootstrap_choice_follows_the_input():
    """Chains (3-D arrays, MCMC DataTrees) get the dependent bootstrap; [n, d] arrays and steinax particles the i.i.d. one."""
    from arviz_base import from_dict

    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 40, 2))
    kw = dict(test=True, rng_key=jax.random.key(0), n_bootstrap=50)
    assert sample_quality(x, _logp, **kw).test.bootstrap == "dependent"
    assert sample_quality(x.reshape(80, 2), _logp, **kw).test.bootstrap == "iid"
    assert sample_quality(from_dict({"posterior": {"x": x}}), _logp, **kw).test.bootstrap == "dependent"
    res = steinax.run(steinax.svgd(), _logp, jnp.asarray(x[0], jnp.float32), steps=2,
                      optimizer=steinax.adagrad_momentum(0.1), rng_key=jax.random.key(1), progress=False)
    particles_tree = res.to_datatree()
    report = sample_quality(particles_tree, _logp, **kw)
    assert report.test.bootstrap == "iid" and report.chains == 1
    assert sample_quality(x, _logp, bootstrap="iid", **kw).test.bootstrap == "iid"  # explicit choice wins
