"""Regression tests for the user-facing paths (issue 13, first list and item 1).

Each test names the defect it guards against: a wrong or silent answer a user met.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.interfaces import cli
from steinax._validation import PrecisionWarning
from steinax.diagnostics import load_samples, sample_quality

EIGHT_SCHOOLS = '''
import jax.numpy as jnp
import numpyro, numpyro.distributions as dist
from steinax.targets import from_numpyro

y = jnp.array([28., 8., -3., 7., -1., 1., 18., 12.])
sigma = jnp.array([15., 10., 16., 11., 9., 11., 10., 18.])

def eight_schools(y, sigma):
    mu = numpyro.sample("mu", dist.Normal(0, 5))
    tau = numpyro.sample("tau", dist.HalfCauchy(5))
    with numpyro.plate("J", 8):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0, 1))
        numpyro.sample("obs", dist.Normal(mu + tau * theta_tilde, sigma), obs=y)

target = from_numpyro(eight_schools, y, sigma)
'''


def _discrepancy(out: str) -> float:
    return float(out.split("-statistic): ")[1].split()[0])


@pytest.fixture(scope="module")
def eight_schools_draws(tmp_path_factory):
    """NUTS draws of the non-centred eight schools model, saved as an ArviZ NetCDF file next to the model file."""
    import importlib.util

    import arviz_base
    from numpyro.infer import MCMC, NUTS

    folder = tmp_path_factory.mktemp("eight_schools")
    (folder / "es_model.py").write_text(EIGHT_SCHOOLS)
    spec = importlib.util.spec_from_file_location("es_model", folder / "es_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # 400 draws a chain: the dependent bootstrap needs 10 blocks, and these chains' block length is 15-26
    # depending on the last bits of the compiled arithmetic (200 draws left it untestable at 26)
    mcmc = MCMC(NUTS(module.eight_schools), num_warmup=200, num_samples=400, num_chains=2,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.key(0), module.y, module.sigma)
    tree = arviz_base.from_numpyro(mcmc)
    tree.to_netcdf(str(folder / "draws.nc"))
    return folder, module, tree


@pytest.mark.slow  # ~27 s with its NUTS fixture: CI's slow pass runs it
def test_cli_and_python_agree_on_numpyro_nuts_netcdf(eight_schools_draws, capsys, monkeypatch):
    """Was: the CLI flattened the NetCDF file (constrained tau, no Jacobian): a dimension error without
    --var-names and KSD 2.3e7 (or nan, "reject") with them. Now the CLI hands the DataTree to sample_quality."""
    folder, module, tree = eight_schools_draws
    monkeypatch.chdir(folder)  # `es_model:target` is imported from the current folder
    expected = sample_quality(tree, module.target, test=True, rng_key=jax.random.key(0))
    assert expected.chains == 2 and expected.test.bootstrap == "dependent"
    for extra in ([], ["--var-names", "mu", "tau", "theta_tilde"]):
        for spec in ("es_model:target", "es_model.py:target"):
            assert cli.main(["ksd", "draws.nc", "--target", spec, *extra]) == 0
            out = capsys.readouterr().out
            # float32 sums in the same order: equal to rounding
            np.testing.assert_allclose(_discrepancy(out), expected.discrepancy, rtol=1e-5)
            assert "dependent (block length" in out and "do not reject" in out
    assert abs(expected.discrepancy) < 0.05  # NUTS draws of the model itself


def test_overflowing_discrepancy_is_an_error_that_says_why(tmp_path, capsys):
    """Was: finite scores of 8e27 gave KSD = inf (V) / nan (U), reported as a rejection."""
    x = np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32)

    def logp(z):
        return -4e27 * jnp.sum(z * z)

    for estimator in ("u", "v"):
        with pytest.raises(FloatingPointError, match=r"scores reach \|s\| = .*overflow float32.*float64"):
            steinax.ksd(jnp.asarray(x), jax.vmap(jax.grad(logp))(jnp.asarray(x)), steinax.IMQ(), estimator)
        with pytest.raises(FloatingPointError, match="not finite"):
            sample_quality(x, logp, estimator=estimator, test=True, rng_key=jax.random.key(0))
        with pytest.raises(FloatingPointError, match="KCC-SD is not finite"):
            sample_quality(x, logp, kind="kcc_sd", estimator=estimator)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "huge.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -4e27 * jnp.sum(z * z)\n")
    assert cli.main(["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 'huge.py'}:logp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("steinax ksd: error:") and err.count("\n") == 1 and "overflow" in err
    # in float64 the same statistic is finite: the error's advice works
    with jax.enable_x64(True):
        res = sample_quality(x.astype(np.float64), logp, test=True, rng_key=jax.random.key(0), n_bootstrap=50)
        assert np.isfinite(res.discrepancy) and res.reject


def test_cli_target_module_from_current_folder_and_import_errors(tmp_path, capsys, monkeypatch):
    """Was: `--target mymodule:fn` could not import from the current folder (20-line traceback, exit 1)."""
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(40, 2)))
    (tmp_path / "mymodule_cwd.py").write_text("import jax.numpy as jnp\ndef fn(z):\n    return -0.5 * jnp.sum(z * z)\n")
    (tmp_path / "broken_cwd.py").write_text("import jax.numpy as jnp\nraise RuntimeError('boom at import')\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["ksd", "x.npy", "--target", "mymodule_cwd:fn", "--no-test"]) == 0
    assert "KSD (squared, U-statistic)" in capsys.readouterr().out
    for spec, message in [("broken_cwd:fn", "RuntimeError: boom at import"), ("no_such_module_xyz:fn", "ModuleNotFoundError"),
                          ("mymodule_cwd:nope", "has no attribute 'nope'"), ("mymodule_cwd", "module:function"),
                          ("missing.py:fn", "not found")]:
        assert cli.main(["ksd", "x.npy", "--target", spec, "--no-test"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_vector_logdensity_given_to_run_is_named():
    """Was: JAX's raw "Gradient only defined for scalar-output functions" from deep inside the loop."""
    x0 = jnp.zeros((5, 2))
    with pytest.raises(ValueError, match=r"`target` must return a scalar log-density .* returned shape \(2,\)"):
        steinax.run(steinax.svgd(), lambda x: -0.5 * x * x, x0, steps=2, optimizer=steinax.adagrad_momentum(0.1),
                    rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"`target` could not be evaluated at one point of shape \(2,\): TypeError: dot_general"):
        steinax.run(steinax.svgd(), lambda x: x @ jnp.ones(3), x0 + 1.0, steps=2, optimizer=steinax.adagrad_momentum(0.1),
                    rng_key=jax.random.key(0))
    with pytest.raises(ValueError, match="must return a scalar log-density"):
        sample_quality(np.ones((5, 2)), lambda x: -0.5 * x * x)


@pytest.mark.parametrize("logdensity, what", [
    (lambda x: -0.5 * float(np.sum(np.asarray(x) ** 2)), "TracerArrayConversionError"),
    (lambda x: -0.5 * jnp.sum(x**2) if x[0] > 0 else -jnp.sum(jnp.abs(x)), "TracerBoolConversionError"),
])
def test_untraceable_logdensity_is_named(logdensity, what):
    """A log-density written with NumPy or a Python branch on the input: the error says it is not JAX-traceable
    and what to write instead (was: JAX's tracer error from deep inside the compiled loop)."""
    with pytest.raises(ValueError, match=rf"{what}: .* the log-density is not JAX-traceable: .* jnp.where or jax.lax.cond"):
        steinax.run(steinax.svgd(), logdensity, jnp.ones((5, 2)), steps=2, optimizer=steinax.adagrad_momentum(0.1),
                    rng_key=jax.random.key(0))


def test_float64_input_without_x64_warns():
    """Was: float64 particles ran in float32 without a word."""
    x64 = np.random.default_rng(2).normal(size=(10, 2))
    assert not jax.config.jax_enable_x64
    with pytest.warns(PrecisionWarning, match="float64 but JAX's 64-bit mode is off"):
        steinax.run(steinax.svgd(), lambda x: -0.5 * jnp.sum(x * x), x64, steps=1,
                    optimizer=steinax.adagrad_momentum(0.1), rng_key=jax.random.key(0))
    with pytest.warns(PrecisionWarning):
        steinax.ksd(x64, -x64, steinax.IMQ())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        steinax.ksd(x64.astype(np.float32), -x64.astype(np.float32), steinax.IMQ())  # float32: no warning
        with jax.enable_x64(True):
            assert steinax.ksd(x64, -x64, steinax.IMQ()).dtype == jnp.float64  # x64 on: no warning, float64
        sample_quality(x64, lambda x: -0.5 * jnp.sum(x * x))  # sample_quality casts explicitly (its dtype argument)


def test_cli_bandwidth_rule_names(tmp_path, capsys):
    """Was: `--bandwidth liu` failed with "could not convert string to float"."""
    np.save(tmp_path / "x.npy", np.random.default_rng(3).normal(size=(60, 2)))
    (tmp_path / "t.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum(z * z)\n")
    values = {}
    for bw in ("liu", "pairs", "per_dimension", "liu_subsampled", "0.7"):
        assert cli.main(["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 't.py'}:logp", "--kernel", "rbf",
                         "--bandwidth", bw, "--no-test"]) == 0
        values[bw] = _discrepancy(capsys.readouterr().out)
    assert values["liu"] == values["liu_subsampled"]  # n = 60 < 1000: the subsample is everything
    x = jnp.asarray(np.load(tmp_path / "x.npy"), jnp.float32)
    np.testing.assert_allclose(values["0.7"], steinax.ksd(x, -x, steinax.RBF(0.7), "u"), rtol=1e-5)
    assert cli.main(["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 't.py'}:logp", "--kernel", "rbf",
                     "--bandwidth", "wide", "--no-test"]) == 2
    assert "`--bandwidth` must be a positive number or one of" in capsys.readouterr().err


def test_csv_index_columns_are_not_dimensions(tmp_path):
    """Was: a CSV written with an index column (pandas, R) was read as one more dimension."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(30, 2))
    lines = [",x0,x1"] + [f"{i},{float(a)!r},{float(b)!r}" for i, (a, b) in enumerate(x)]  # pandas' DataFrame.to_csv
    (tmp_path / "pandas.csv").write_text("\n".join(lines) + "\n")
    r_lines = ['"","x0","x1"'] + [f'"{i + 1}",{float(a)!r},{float(b)!r}' for i, (a, b) in enumerate(x)]  # R's write.csv
    (tmp_path / "r.csv").write_text("\n".join(r_lines) + "\n")
    (tmp_path / "noheader.csv").write_text("\n".join(f"{i},{float(a)!r},{float(b)!r}" for i, (a, b) in enumerate(x)) + "\n")
    stan = ["lp__,accept_stat__,x0,x1"] + [f"-1.0,0.9,{float(a)!r},{float(b)!r}" for a, b in x]
    (tmp_path / "stan.csv").write_text("\n".join(stan) + "\n")
    for name in ("pandas.csv", "r.csv", "noheader.csv", "stan.csv"):
        np.testing.assert_array_equal(load_samples(str(tmp_path / name)), x, err_msg=name)
    np.testing.assert_array_equal(load_samples(str(tmp_path / "pandas.csv"), ["x1"]), x[:, 1:])
    chains = ["chain,draw,x0,x1"] + [f"{i // 15},{i % 15},{float(a)!r},{float(b)!r}" for i, (a, b) in enumerate(x)]
    (tmp_path / "chains.csv").write_text("\n".join(chains) + "\n")
    got = load_samples(str(tmp_path / "chains.csv"))
    assert got.shape == (2, 15, 2)
    np.testing.assert_array_equal(got.reshape(30, 2), x)
    with pytest.raises(ValueError, match=r"`var_names` \['z'\] are not columns"):
        load_samples(str(tmp_path / "pandas.csv"), ["z"])


def test_demo_figure_labels_legend_colorbar():
    """Was: the demo's panels had no axis labels, legend or colour bar (the demo draws them with plot_particles;
    its file mode, once 0600, is checked in tests/cli/test_cli.py)."""
    from steinax.interfaces.plot import plot_particles

    fig = plot_particles(np.random.default_rng(5).normal(size=(20, 2)), steinax.targets.star(), extent=(-3, 3, -3, 3))
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None
    assert len(fig.axes) == 2  # the panel and its colour bar
    assert fig.axes[1].get_ylabel() == "target density"
