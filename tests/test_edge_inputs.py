"""Bad or unusual inputs that used to give silent wrong answers or raw errors (issue 24): each now gets a clear
error naming the argument, or the right answer."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.interfaces import cli
from steinax.diagnostics import load_samples, sample_quality

X = jnp.ones((4, 2)) * jnp.arange(4.0)[:, None]


def _logp(z):
    return -0.5 * jnp.sum(z * z)


def _run(**kw):
    args = dict(steps=3, optimizer=optax.sgd(0.1), rng_key=jax.random.key(0), progress=False) | kw
    particles = args.pop("particles", X)
    return steinax.run(steinax.svgd(), _logp, particles, **args)


# ---------------------------------------------------------------- one dtype policy


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_is_refused_everywhere(dtype):
    x = X.astype(dtype)
    for call in (lambda: steinax.ksd(x, -x, steinax.IMQ()), lambda: steinax.svgd_direction(x, -x),
                 lambda: _run(particles=x), lambda: steinax.stein.gof_test(x, -x, rng_key=jax.random.key(0))):
        with pytest.raises(TypeError, match="must have dtype float32 or float64; .*half precision"):
            call()


# ---------------------------------------------------------------- run's arguments


@pytest.mark.parametrize("optimizer", [optax.lbfgs(), optax.contrib.reduce_on_plateau(),
                                       optax.chain(optax.sgd(0.1), optax.contrib.reduce_on_plateau())],
                         ids=["lbfgs", "reduce_on_plateau", "chained"])
def test_optimizers_that_need_a_value_are_refused_by_name(optimizer):
    with pytest.raises(TypeError, match="`optimizer` needs the objective's value .*'value'"):
        _run(optimizer=optimizer)


@pytest.mark.parametrize("key", [jnp.zeros(2), jnp.zeros(2, jnp.int32), jax.random.split(jax.random.key(0), 3), 7],
                         ids=["float", "int32", "batch", "int"])
def test_bad_keys_are_refused(key):
    with pytest.raises(TypeError, match="`rng_key` must be one JAX PRNG key"):
        _run(rng_key=key)
    with pytest.raises(TypeError, match="`rng_key` must be one JAX PRNG key"):
        steinax.stein.gof_test(X, -X, rng_key=key)


def test_a_legacy_key_still_works_and_absurd_step_counts_are_refused():
    assert _run(rng_key=jax.random.PRNGKey(0)).particles.shape == (4, 2)
    with pytest.raises(ValueError, match="`steps` must be at most 2147483646"):
        _run(steps=10**12)


def test_cli_seed_out_of_range(capsys):
    with pytest.raises(SystemExit):
        cli.main(["ksd", "x.npy", "--target", "t:f", "--seed", "99999999999999999999"])
    assert "must be an integer in [0, 2**63)" in capsys.readouterr().err


# ---------------------------------------------------------------- GP inputs, unfolding, messages


def test_gp_predict_checks_the_width_of_x_new():
    from steinax.gp import GPRegression

    Xtr = np.random.default_rng(0).normal(size=(20, 2))
    gp = GPRegression(Xtr, Xtr[:, 0])
    particles = gp.init_particles(jax.random.key(0), 3)
    assert gp.predict(particles, Xtr[:5])[0].shape == (5,)
    for bad in (Xtr[:5, :1], Xtr[:5, 0], np.ones((5, 3))):
        with pytest.raises(ValueError, match="`X_new` must have 2 columns, as the training inputs"):
            gp.predict(particles, bad)


def test_unfold_accepts_a_plain_log_density():
    x = jax.random.normal(jax.random.key(0), (10, 2))
    out = steinax.unfold.unroll(jnp.full((3,), 0.1), steinax.svgd(), _logp, x, jax.random.key(1))
    traj = steinax.unfold.trajectory(steinax.svgd(), _logp, x, optax.sgd(0.1), jax.random.key(1), 3)
    np.testing.assert_allclose(out, traj, rtol=1e-6)


def test_kfac_error_suggests_only_what_the_target_provides():
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    def model():
        numpyro.sample("a", dist.Normal(0.0, 1.0).expand([2]))

    target = steinax.targets.from_numpyro(model)
    assert target.available_curvatures() == ("hessian",)
    with pytest.raises(NotImplementedError, match="this target provides preconditioner='hessian'$"):
        target.kfac(jax.random.key(0), jnp.zeros((3, 2)))


# ---------------------------------------------------------------- readers


def test_csv_with_a_byte_order_mark_keeps_its_first_sample_and_chain_column(tmp_path):
    path = tmp_path / "draws.csv"
    path.write_bytes("\ufeffchain,x,y\n0,0.5,1.5\n0,0.25,1.25\n1,0.75,1.75\n1,0.125,1.125\n".encode("utf-8"))
    data = load_samples(str(path))
    assert data.shape == (2, 2, 2)  # two chains of two draws, the chain column recognised
    np.testing.assert_array_equal(data[0, 0], [0.5, 1.5])


def test_a_positional_header_as_pandas_writes_it_is_a_header(tmp_path):
    path = tmp_path / "draws.csv"
    path.write_text("0,1\n0.5,1.5\n0.25,1.25\n0.75,1.75\n")
    data = load_samples(str(path))
    assert data.shape == (3, 2)
    np.testing.assert_array_equal(data[0], [0.5, 1.5])


def test_discrete_posterior_variables_are_refused_by_name():
    draws = {"mu": np.random.default_rng(0).normal(size=(50, 2)), "k": np.arange(50), "flag": np.ones(50, bool)}
    with pytest.raises(ValueError, match=r"posterior variables \['k', 'flag'\] are integer or boolean"):
        sample_quality(draws, lambda z: -0.5 * jnp.sum(z * z))
    assert sample_quality(draws, lambda z: -0.5 * jnp.sum(z * z), var_names=["mu"]).d == 2


def test_a_file_too_large_for_memory_is_refused_before_reading(tmp_path, monkeypatch, capsys):
    """The one memory budget (STEINAX_MEMORY_BUDGET as the limit) refuses a samples file from its header, in Python
    and from the shell; an exact KSD over more draws than EXACT_MAX is refused before any pair is computed (was: a
    134-million-row file climbed past 9 GB with no refusal of an O(n^2) job), and a large file gets a progress line."""
    from steinax._memory import MemoryBudgetError
    from steinax.diagnostics import quality

    path = tmp_path / "big.npy"
    np.save(path, np.zeros((1000, 10)))
    monkeypatch.setenv("STEINAX_MEMORY_BUDGET", "10000")
    with pytest.raises(MemoryBudgetError, match=r"`samples` = .*big.npy' needs about .* checking its 10,000 values"):
        load_samples(str(path))
    (tmp_path / "t.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum(z * z)\n")
    assert cli.main(["ksd", str(path), "--target", f"{tmp_path / 't.py'}:logp"]) == 2
    assert "nothing was allocated" in capsys.readouterr().err
    monkeypatch.delenv("STEINAX_MEMORY_BUDGET")
    monkeypatch.setattr(quality, "EXACT_MAX", 500)
    x = np.random.default_rng(0).normal(size=(600, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=r"`method`='exact' on n = 600 draws: .* refused above n = 500"):
        sample_quality(x, lambda z: -0.5 * jnp.sum(z * z), method="exact")
    np.save(path, np.random.default_rng(0).normal(size=(500_001, 2)).astype(np.float32))
    assert cli.main(["ksd", str(path), "--target", f"{tmp_path / 't.py'}:logp", "--no-test"]) == 0
    assert "500,001 draws, shape (500001, 2); computing the Nystrom KSD (linear in n)" in capsys.readouterr().err


_EXITS = "import sys\nsys.exit(0)\n"
_SIBLING = "from helper import logp\n"


def test_cli_targets_that_exit_or_import_siblings(tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(30, 2)).astype(np.float32))
    (tmp_path / "exits.py").write_text(_EXITS)
    (tmp_path / "helper.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum(z * z)\n")
    (tmp_path / "model.py").write_text(_SIBLING)
    (tmp_path / "xarray.py").write_text("raise RuntimeError('a stray xarray.py was imported')\n")
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "steinax.interfaces.cli", *args], cwd=tmp_path, env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=300)
    out = run("ksd", "x.npy", "--target", "exits.py:logp", "--no-test")
    assert out.returncode == 2 and "called sys.exit(0)" in out.stderr, out.stderr
    out = run("ksd", "x.npy", "--target", str(tmp_path / "model.py") + ":logp", "--no-test")
    assert out.returncode == 0, out.stderr  # the sibling `helper` is found; the stray xarray.py is not imported
    assert sorted(os.listdir(tmp_path)) == ["exits.py", "helper.py", "model.py", "x.npy", "xarray.py"]  # no __pycache__
    help_text = run("ksd", "--help").stdout
    assert "RUNS" in help_text and help_text.count("(default") >= 6


# ---------------------------------------------------------------- blocks everywhere, and the mesh in a checkpoint


def _largest_intermediate(fn, *args) -> int:
    import jax.extend

    biggest = 0

    def walk(jx):
        nonlocal biggest
        for eqn in jx.eqns:
            for v in eqn.outvars:
                biggest = max(biggest, int(np.prod(getattr(v.aval, "shape", ()) or (1,))))
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return biggest


def test_mmd2_blocks_by_default_and_equals_the_dense_sum():
    """Was: the default stored n x m (6.15 GB at n = m = 15,000). Now automatic row blocks: at n = m = 3000 no
    intermediate holds n * m values, and the value equals the one-block sum."""
    from steinax.metrics import mmd2
    from steinax.metrics.mmd import _mmd2

    x = jax.random.normal(jax.random.key(0), (3000, 3))
    y = jax.random.normal(jax.random.key(1), (3000, 3)) + 0.1
    biggest = _largest_intermediate(lambda a, b: _mmd2(a, b, steinax.RBF(1.0), "v", None), x, y)
    assert biggest < 3000 * 3000, biggest
    np.testing.assert_allclose(mmd2(x, y), mmd2(x, y, block_size=3000), rtol=1e-4, atol=1e-6)


def test_bootstrap_multipliers_in_batches_when_b_n_exceeds_the_budget(monkeypatch):
    """B n multipliers beyond a quarter of the budget: batches of draws, one pass each; same statistic, a p-value
    from all B draws, and the same decision on a clear alternative and a clear null."""
    from steinax.stein import gof_test

    x = jax.random.normal(jax.random.key(2), (400, 2))
    one = gof_test(x + 1.0, -(x + 1.0) + 1.0, rng_key=jax.random.key(3), n_bootstrap=200)
    monkeypatch.setenv("STEINAX_MEMORY_BUDGET", str(4 * 400 * 4 * 50))  # 50 draws of 400 float32 values a batch
    batched = gof_test(x + 1.0, -(x + 1.0) + 1.0, rng_key=jax.random.key(3), n_bootstrap=200)
    np.testing.assert_allclose(batched.statistic, one.statistic, rtol=1e-5)
    assert 0.0 < float(batched.p_value) <= 1.0
    assert not bool(batched.reject)  # x + 1 tested against N(1, I) (score -(z - 1)): the null
    shifted = gof_test(x + 1.0, -(x + 1.0), rng_key=jax.random.key(3), n_bootstrap=200)  # against N(0, I)
    assert bool(shifted.reject)


def test_a_checkpoint_names_the_mesh_when_it_changed(tmp_path):
    from jax.sharding import Mesh

    from steinax.runtime.checkpoint import CheckpointMismatchError

    path = tmp_path / "run.npz"
    x0 = jax.random.normal(jax.random.key(0), (8, 2))
    kw = dict(optimizer=optax.sgd(0.1), rng_key=jax.random.key(0), trace_every=5, checkpoint=path, checkpoint_every=5,
              progress=False)
    steinax.run(steinax.svgd(), _logp, x0, steps=10, **kw)
    mesh = Mesh(np.array(jax.devices()[:1]), ("particles",))
    with pytest.raises(CheckpointMismatchError, match="mesh: None in the checkpoint, .*over 1 cpu devices"):
        steinax.run(steinax.svgd(mesh=mesh), _logp, x0, steps=20, **kw)


def _gauss(z):
    return -0.5 * jnp.sum(z**2)


def test_a_nan_log_density_at_draws_is_named_by_every_tool_that_takes_a_target():
    """Was: a log-density that is NaN at some draws was unseen by the KSD, thinning and importance weights (the gradient
    of ``jnp.where`` is 0 there, so the score is finite). Every tool reads draws through ``draws_and_scores``, which now
    checks the log-density too and names the rows."""
    from steinax.diagnostics import (sample_quality, stein_control_variates, stein_importance_weights,
                                     stein_thinning)

    def logp(z):
        return jnp.where(z[0] > 2.9, jnp.nan, -0.5 * jnp.sum(z**2))

    x = np.random.default_rng(0).normal(size=(200, 2)).astype(np.float32)
    x = np.clip(x, -2.5, 2.5)
    x[[7, 31], 0] = 3.0
    assert np.all(np.isfinite(jax.vmap(jax.grad(logp))(jnp.asarray(x))))  # the score alone cannot see it
    calls = [lambda: sample_quality(x, logp), lambda: stein_thinning(x, logp, 10),
             lambda: stein_importance_weights(x, logp), lambda: stein_control_variates(x, logp, x[:, 0])]
    for call in calls:
        with pytest.raises(ValueError, match=r"log-density or score is not finite at 2 sample row\(s\) \[7, 31\]"):
            call()


def test_one_input_dtype_policy_for_draws_and_function_values():
    """Was: integer, boolean and complex inputs were taken as continuous coordinates (sample_quality(spread=True),
    steinax thin, stein_control_variates' f). Now integers are converted with a warning, booleans and complex refused."""
    from steinax._validation import InputDtypeWarning
    from steinax.diagnostics import sample_quality, stein_control_variates, stein_thinning

    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 2))
    with pytest.warns(InputDtypeWarning, match="`samples` are integers"):
        stein_thinning(np.round(3 * x).astype(np.int64), _gauss, 5)
    for bad, word in ((x > 0, "booleans"), (x + 1j, "complex")):
        with pytest.raises(TypeError, match=f"`samples` must be real numbers; received {word}"):
            sample_quality(bad, _gauss)
    x32 = x.astype(np.float32)
    with pytest.raises(TypeError, match="`f` must be real numbers; received complex"):
        stein_control_variates(x32, _gauss, x32[:, 0] + 1j, tail_draws=0)
    with pytest.raises(TypeError, match="`f` must be real numbers; received booleans"):
        stein_control_variates(x32, _gauss, x32[:, 0] > 0, tail_draws=0)
    for ridge in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="`ridge` must be a finite number >= 0"):
            stein_control_variates(x32, _gauss, x32[:, 0], ridge=ridge, tail_draws=0)


def test_a_huge_tail_draws_is_refused_before_allocating(monkeypatch):
    """Was: ``stein_control_variates(..., tail_draws=10**9)`` was killed by the kernel at 15-16 GB."""
    from steinax._memory import MemoryBudgetError
    from steinax.diagnostics import stein_control_variates

    x = np.random.default_rng(0).normal(size=(300, 2)).astype(np.float32)
    f = lambda z: z[0] ** 2  # noqa: E731
    with pytest.raises(MemoryBudgetError, match=r"`tail_draws` = 1000000000 needs about .* GiB"):
        stein_control_variates(x, _gauss, f, tail_draws=10**9)
    monkeypatch.setenv("STEINAX_MEMORY_BUDGET", str(2**20))  # 4 MiB in all
    with pytest.raises(MemoryBudgetError, match="`tail_draws` = 100000 "):
        stein_control_variates(x, _gauss, f, tail_draws=10**5)
