"""``steinax.sample``'s one argument check (issue 56): every case a hostile user tried gets a message naming the
argument, before any stage runs (each case here fails in well under a second: no warm start compiles)."""

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.pipeline import HMCCorrection, LaplaceStart
from steinax.targets import Gaussian

TARGET = Gaussian(jnp.zeros(2), jnp.eye(2))
INIT = jax.random.normal(jax.random.key(0), (20, 2))


def _refused(error, match, *, target=TARGET, **kwargs):
    kwargs.setdefault("rng_key", jax.random.key(0))
    kwargs.setdefault("progress", False)
    t0 = time.perf_counter()
    with pytest.raises(error, match=match):
        steinax.sample(target, **kwargs)
    assert time.perf_counter() - t0 < 20.0  # refused before any stage (a warm start alone compiles for seconds)


@pytest.mark.parametrize("init", [jnp.zeros((20, 2), jnp.int32), jnp.zeros((20, 2), jnp.float16),
                                  jnp.zeros((20, 2), jnp.bfloat16), jnp.zeros((20, 2), jnp.complex64)],
                         ids=["int", "float16", "bfloat16", "complex"])
def test_an_init_of_the_wrong_dtype_is_named(init):
    _refused(TypeError, "`init` must have dtype float32 or float64", init=init)


@pytest.mark.parametrize("rng_key", [0, jnp.zeros(2), None], ids=["int", "float array", "None"])
def test_a_key_that_is_not_a_key_is_named(rng_key):
    _refused(TypeError, "`rng_key` must be one JAX PRNG key", init=INIT, rng_key=rng_key)


@pytest.mark.parametrize("logdensity, match", [
    (lambda x: -0.5 * x**2, "must return a scalar log-density"),
    (lambda x: jnp.sum(x).astype(jnp.int32), "must return a real floating-point log-density"),
    (lambda x: -0.5 * float(np.sum(np.asarray(x) ** 2)), "not JAX-traceable"),
], ids=["vector", "integer", "numpy"])
def test_a_log_density_that_is_not_one_is_named_target(logdensity, match):
    _refused(ValueError, f"`target`.*{match}|`target` could not be evaluated.*{match}", target=logdensity, init=INIT)


def test_a_numpyro_model_passed_as_it_is_is_named_with_the_wrapper():
    import numpyro
    import numpyro.distributions as dist

    def model():
        numpyro.sample("x", dist.Normal(0.0, 1.0).expand([2]))

    _refused(ValueError, "`target` is a probabilistic-programming model.*from_numpyro", target=model, init=INIT)
    _refused(ValueError, "`target` is a probabilistic-programming model.*from_numpyro", target=model)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"corrector": "chees"}, TypeError, "`corrector` must be an HMCCorrection"),
    ({"particles": "no"}, ValueError, "`particles` must be 'auto', True or False"),
    ({"warm_start": "laplace"}, TypeError, "`warm_start` must be"),
    ({"method": "svgd"}, TypeError, "`method` must be a steinax particle method"),
    ({"progress": "yes"}, ValueError, "`progress`"),
    ({"correction": "sometimes"}, ValueError, "`correction`"),
    ({"num_particles": 1}, ValueError, "`num_particles`"),
    ({"num_particles": 50}, ValueError, "`num_particles` \\(50\\) and `init` \\(20 rows\\) disagree"),
    ({"init": jnp.zeros(3)}, ValueError, "`init` must have shape"),
    ({"init": jnp.zeros((20, 3))}, ValueError, "`init` must have shape \\[n, 2\\]"),
    ({"init": jnp.full((20, 2), jnp.nan)}, ValueError, "`init` must be finite"),
    ({"warm_start": False, "particles": False, "correction": "never"}, ValueError, "runs no stage"),
    ({"corrector": HMCCorrection(min_ess=1e12)}, ValueError, "`min_ess` = 1e\\+12 can never be reached"),
])
def test_each_setting_is_named(kwargs, error, match):
    kwargs = {"init": INIT, **kwargs}
    _refused(error, match, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"warmup": 0}, "`warmup`"), ({"max_steps": -5}, "`max_steps`"), ({"round_steps": 0}, "`round_steps`"),
    ({"rhat": 0.5}, "`rhat`"), ({"rhat": float("nan")}, "`rhat`"), ({"min_ess": -1}, "`min_ess`"),
    ({"max_steps": 10**9}, "`max_steps` must be at most"), ({"max_steps": 10}, "`max_steps` \\(10\\) must be at least"),
    ({"min_steps": -1}, "`min_steps`"),
])
def test_correction_settings_are_refused_when_made(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HMCCorrection(**kwargs)


def test_a_start_outside_the_support_names_its_rows_of_init():
    def half_plane(x):  # log-density -inf for x_0 < 0
        return jnp.where(x[0] > 0, -0.5 * jnp.sum(x**2) + jnp.log(jnp.where(x[0] > 0, x[0], 1.0)), -jnp.inf)

    init = jnp.abs(INIT).at[3, 0].set(-1.0).at[7, 0].set(-2.0)
    _refused(ValueError, r"`init`: the target's log-density is not finite at rows \[3, 7\]", target=half_plane,
             init=init)


def test_many_particles_come_with_the_cost_per_step():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="`num_particles` = 1000000: .*per step"):
            steinax.sample(TARGET, rng_key=jax.random.key(0), num_particles=10**6, progress=False)


def test_the_warm_start_settings_are_refused_when_made():
    with pytest.raises(ValueError, match="`wide_starts`"):
        LaplaceStart(wide_starts=-1)


@pytest.mark.slow  # sample_quality's collapse and mode checks: about 20 s
def test_without_a_correction_the_answer_is_checked_with_sample_quality():
    """Issue 56: warm_start=False, particles=False, correction="never" handed back init as "the particles passed the
    checks" with no check run; that combination is refused (above), and any run without a correction has its answer
    checked by sample_quality(spread=True): here the warm start's draws alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = steinax.sample(TARGET, rng_key=jax.random.key(0), init=INIT, particles=False, correction="never",
                             progress=False)
    checks = res.stages["checks"]
    assert {"collapsed", "flagged", "ksd"} <= set(checks) and res.chains is None
    assert res.ok == (not checks["flagged"] and not checks["stragglers"])
    assert res.gradient_evaluations["checks"] > 1000 * 20  # the mode check's ascents are in the ledger


def test_a_numpyro_model_with_data_arguments_is_named_with_the_wrapper():
    """The docs' own style, ``eight_schools(y, sigma)``: the check calls it with ``None`` data (issue 59: it used to
    call it bare, fail on the missing arguments and say nothing)."""
    import numpyro
    import numpyro.distributions as dist

    def eight_schools(y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        numpyro.sample("obs", dist.Normal(mu, sigma), obs=y)

    _refused(ValueError, "`target` is a probabilistic-programming model.*from_numpyro", target=eight_schools,
             init=jnp.zeros((20, 1)))
