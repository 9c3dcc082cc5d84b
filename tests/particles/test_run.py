import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.targets import Gaussian, MinibatchTarget, ScoreTarget
from conftest import tolerance


def _std_normal(x):
    return -0.5 * jnp.sum(x * x)


def test_trace_contents_and_determinism(key):
    x0 = jax.random.normal(key, (30, 2)) + 2.0
    kw = dict(steps=25, optimizer=optax.sgd(0.1), rng_key=jax.random.key(3), trace_every=10, progress=False)
    a = steinax.run(steinax.svgd(), _std_normal, x0, **kw)
    b = steinax.run(steinax.svgd(), _std_normal, x0, **kw)
    np.testing.assert_array_equal(a.particles, b.particles)
    assert a.trace.step.tolist() == [0, 10, 20, 25]
    assert a.trace.ksd.shape == (4,) and bool(jnp.all(a.trace.ksd >= 0))
    assert bool(jnp.isnan(a.trace.direction_norm[0])) and bool(jnp.all(a.trace.direction_norm[1:] > 0))
    assert set(a.trace.method) == {"bandwidth"}
    assert float(a.trace.ksd[-1]) < float(a.trace.ksd[0])
    assert a.wall_time > 0
    # the trace's KSD is the IMQ(1, -1/2) V-statistic of the recorded particles
    np.testing.assert_allclose(a.trace.ksd[-1], steinax.ksd(a.particles, -a.particles, steinax.IMQ()), rtol=1e-5)


def test_no_recompilation_on_second_call(key):
    x0 = jax.random.normal(key, (20, 2))
    method, opt, target = steinax.svgd(), optax.sgd(0.1), steinax.targets.LogDensityTarget(_std_normal)
    kw = dict(steps=10, optimizer=opt, rng_key=key, progress=False)
    steinax.run(method, target, x0, **kw)
    with jax.log_compiles(True):
        import logging

        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("jax").addHandler(handler)
        try:
            steinax.run(method, target, x0 + 1.0, **kw)
        finally:
            logging.getLogger("jax").removeHandler(handler)
    compiled = [r for r in records if "Compiling" in r.getMessage() and "_loop" in r.getMessage()]
    assert compiled == [], [r.getMessage() for r in compiled]


def test_plain_sgd_matches_manual_updates(key):
    x0 = jax.random.normal(key, (10, 2))
    res = steinax.run(steinax.svgd(steinax.RBF(1.0)), _std_normal, x0, steps=3, optimizer=optax.sgd(0.2), rng_key=key, progress=False)
    x = x0
    for _ in range(3):
        x = x + 0.2 * steinax.svgd_direction(x, -x, steinax.RBF(1.0))
    np.testing.assert_allclose(res.particles, x, **tolerance(jnp.float32, 0.1))


def test_resume_reproduces_uninterrupted_run(key):
    x0 = jax.random.normal(key, (15, 2))
    opt = optax.adam(0.05)
    full = steinax.run(steinax.svgd(), _std_normal, x0, steps=20, optimizer=opt, rng_key=key, trace_every=5, progress=False)
    half = steinax.run(steinax.svgd(), _std_normal, x0, steps=10, optimizer=opt, rng_key=key, trace_every=5, progress=False)
    rest = steinax.run(
        steinax.svgd(), _std_normal, None, steps=10, optimizer=opt, rng_key=key, trace_every=5,
        initial_state=half.state, progress=False,
    )
    np.testing.assert_allclose(rest.particles, full.particles, rtol=1e-6, atol=1e-6)
    assert rest.trace.step.tolist() == [10, 15, 20]


def test_float64_run(key):
    with jax.enable_x64(True):
        x0 = jax.random.normal(key, (10, 2), jnp.float64)
        res = steinax.run(steinax.svgd(), _std_normal, x0, steps=5, optimizer=optax.sgd(0.1), rng_key=key, progress=False)
        assert res.particles.dtype == jnp.float64
        assert res.trace.ksd.dtype == jnp.float64


def test_stochastic_scores_use_the_key(key):
    def noisy_score(k, x):
        return -x + 0.1 * jax.random.normal(k, x.shape)

    target = ScoreTarget(noisy_score, stochastic=True)
    x0 = jax.random.normal(key, (20, 2))
    kw = dict(steps=50, optimizer=optax.sgd(0.1), progress=False)
    a = steinax.run(steinax.svgd(), target, x0, rng_key=jax.random.key(1), **kw)
    b = steinax.run(steinax.svgd(), target, x0, rng_key=jax.random.key(2), **kw)
    assert not np.allclose(a.particles, b.particles)
    assert float(jnp.abs(a.particles.mean(0)).max()) < 0.2


def test_minibatch_target_is_unbiased_and_runs(key):
    # Bayesian mean of N(theta, 1) data with N(0, 10^2) prior
    data = 1.5 + jax.random.normal(key, (500,))
    target = MinibatchTarget(
        logprior_fn=lambda th: -0.5 * jnp.sum(th**2) / 100.0,
        loglik_fn=lambda th, y: -0.5 * (y - th[0]) ** 2,
        data=data,
        batch_size=50,
    )
    th = jnp.array([[0.3]])
    full = jax.grad(target.logdensity)(th[0])
    keys = jax.random.split(key, 2000)
    est = jax.vmap(lambda k: target.evaluate(k, th)[1][0])(keys)
    se = float(jnp.std(est[:, 0])) / np.sqrt(2000)
    assert abs(float(est[:, 0].mean() - full[0])) < 4 * se  # unbiased minibatch score (failure rate ~6e-5)
    # decaying steps (0.05 -> 5e-4) average out the minibatch noise
    # plain SGD below the stability limit 2/500 of the posterior precision, decayed
    # 100-fold so the minibatch noise averages out
    opt = optax.sgd(optax.exponential_decay(2e-3, 500, 0.01))
    res = steinax.run(steinax.svgd(), target, jax.random.normal(key, (20, 1)), steps=500,
                      optimizer=opt, rng_key=key, progress=False)
    post_mean, post_sd = float(jnp.sum(data) / (500 + 0.01)), 1.0 / np.sqrt(500)
    assert abs(float(res.particles.mean()) - post_mean) < post_sd  # within one posterior sd


def test_numpyro_model_constrained_output(key):
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist

    def model(y):
        scale = numpyro.sample("scale", dist.LogNormal(0.0, 1.0))
        loc = numpyro.sample("loc", dist.Normal(0.0, 10.0))
        numpyro.sample("y", dist.Normal(loc, scale), obs=y)

    y = 2.0 + 0.5 * jax.random.normal(key, (100,))
    target = steinax.targets.from_numpyro(model, y)
    assert target.dim == 2
    x0 = target.init_particles(key, 30, radius=0.5)
    opt = optax.adam(optax.exponential_decay(0.05, 1000, 0.01))
    res = steinax.run(steinax.svgd(), target, x0, steps=1000, optimizer=opt, rng_key=key, progress=False)
    assert set(res.samples) == {"scale", "loc"}
    assert res.samples["scale"].shape == (30,) and bool(jnp.all(res.samples["scale"] > 0))
    # posterior sds: loc ~ 0.5/sqrt(100) = 0.05, scale ~ 0.5/sqrt(200) = 0.035
    assert abs(float(res.samples["loc"].mean()) - float(y.mean())) < 0.02
    assert abs(float(res.samples["scale"].mean()) - float(y.std())) < 0.05
    # the log-density is NumPyro's potential (with log-Jacobian) in unconstrained space
    from numpyro.infer.util import potential_energy

    z = target.unravel_fn(x0[0])
    np.testing.assert_allclose(target.logdensity(x0[0]), -potential_energy(model, (y,), {}, z), rtol=1e-5)


def test_to_datatree(key):
    pytest.importorskip("arviz_base")
    res = steinax.run(steinax.svgd(), _std_normal, jax.random.normal(key, (12, 3)), steps=2,
                      optimizer=optax.sgd(0.1), rng_key=key, progress=False)
    tree = res.to_datatree()
    assert tree.posterior["x"].shape == (1, 12, 3)


def test_progress_bar_runs(key, capsys):
    pytest.importorskip("tqdm")
    x0 = jax.random.normal(key, (10, 2))
    steinax.run(steinax.svgd(), _std_normal, x0, steps=20, optimizer=optax.sgd(0.1), rng_key=key,
                trace_every=5, progress=True)
    err = capsys.readouterr().err
    assert "20/20" in err


def test_non_finite_logdensity_stops_with_step(key):
    # finite for the first steps, then the particles cross x0 > 1.5 where log p = nan
    def logp(x):
        return jnp.where(x[0] > 1.5, jnp.nan, -0.5 * jnp.sum((x - 5.0) ** 2))

    x0 = 0.1 * jax.random.normal(key, (10, 2))
    with pytest.raises(steinax.NonFiniteError, match="step") as info:
        steinax.run(steinax.svgd(), logp, x0, steps=100, optimizer=optax.sgd(0.1), rng_key=key, progress=False)
    err = info.value
    assert 1 < err.step < 100
    assert bool(jnp.all(jnp.isfinite(err.result.particles)))
    assert int(err.result.state.step) == err.step - 1
    assert bool(jnp.all(err.result.trace.step < err.step))


def test_bad_inputs(key):
    x0 = jax.random.normal(key, (10, 2))
    kw = dict(steps=5, optimizer=optax.sgd(0.1), rng_key=key, progress=False)
    with pytest.raises(ValueError, match="finite"):
        steinax.run(steinax.svgd(), _std_normal, x0.at[3, 1].set(jnp.nan), **kw)
    with pytest.raises(ValueError, match="finite"):
        steinax.run(steinax.svgd(), _std_normal, x0.at[3, 1].set(jnp.inf), **kw)
    with pytest.raises(ValueError, match=r"shape \[n, d\]"):
        steinax.run(steinax.svgd(), _std_normal, x0[0], **kw)
    with pytest.raises(TypeError, match="must have dtype float32 or float64"):
        steinax.run(steinax.svgd(), _std_normal, jnp.ones((4, 2), jnp.int32), **kw)
    with pytest.raises(ValueError, match=r"\[n, 3\]"):
        steinax.run(steinax.svgd(), Gaussian(jnp.zeros(3), jnp.eye(3)), x0, **kw)
    with pytest.raises(ValueError, match="not finite at the initial"):
        steinax.run(steinax.svgd(), lambda x: jnp.log(x[0]), x0, **kw)
    with pytest.raises(ValueError, match="steps"):
        steinax.run(steinax.svgd(), _std_normal, x0, steps=0, optimizer=optax.sgd(0.1), rng_key=key)
    with pytest.raises(TypeError, match="rng_key"):
        steinax.run(steinax.svgd(), _std_normal, x0, steps=3, optimizer=optax.sgd(0.1), rng_key=0)
    with pytest.raises(TypeError, match="method"):
        steinax.run("svgd", _std_normal, x0, **kw)
    with pytest.raises(TypeError, match="target"):
        steinax.run(steinax.svgd(), 3.0, x0, **kw)


def test_default_trace_spacing_is_every_20th_step_and_divides_given_checkpoints(tmp_path):
    """Default ``max(20, steps // 100)`` (a trace point costs ~1.2 steps: ~6% of a run); with an explicit
    ``checkpoint_every`` the default shrinks to a divisor of it, so a resumed trace equals an uninterrupted one."""
    x0 = jax.random.normal(jax.random.key(0), (20, 2))
    args = dict(optimizer=optax.sgd(1e-2), rng_key=jax.random.key(1), progress=False)
    res = steinax.run(steinax.svgd(), lambda x: -0.5 * jnp.sum(x * x), x0, steps=100, **args)
    np.testing.assert_array_equal(np.asarray(res.trace.step), np.arange(0, 101, 20))
    res = steinax.run(steinax.svgd(), lambda x: -0.5 * jnp.sum(x * x), x0, steps=100,
                      checkpoint=tmp_path / "c.npz", checkpoint_every=50, **args)
    np.testing.assert_array_equal(np.asarray(res.trace.step), np.arange(0, 101, 10))


# ---------------------------------------------------------------- issue 24: runs that go wrong say so, and soon


def test_a_failing_run_stops_computing_and_keeps_each_record_once():
    """Was: a run non-finite at step 11 went on computing its whole segment (10.5 s where the healthy run takes
    5.3 s) and `err.result.trace` repeated the last good record. Now the steps after the failure are skipped:
    a host callback counts the target evaluations actually made."""
    calls = []

    def logp(x):
        jax.debug.callback(lambda: calls.append(1))  # once per (vmapped) evaluation of the particles
        return jnp.where(x[0] > 1.5, jnp.nan, -0.5 * jnp.sum((x - 5.0) ** 2))

    x0 = jnp.zeros((4, 2))
    with pytest.raises(steinax.NonFiniteError) as info:
        steinax.run(steinax.svgd(), logp, x0, steps=2000, optimizer=optax.sgd(0.1), rng_key=jax.random.key(0),
                    trace_every=50, progress=False)
    jax.effects_barrier()
    err = info.value
    assert err.step < 50
    steps = np.asarray(err.result.trace.step)
    assert np.all(np.diff(steps) > 0) and steps[-1] < err.step
    # evaluations: the failing steps' (<= 50 steps) and one per trace record (41), not 2000 steps'
    assert len(calls) < 200, len(calls)


def test_diverging_finite_particles_warn_with_the_step():
    """Particles that explode but stay finite (here: a log-density that pushes them out exponentially) warn."""
    def logp(x):
        return 5.0 * jnp.sum(x * x)  # not a density: with 8 particles the score 10 x grows them ~2.25x a step

    x0 = jax.random.normal(jax.random.key(0), (8, 2))
    with pytest.warns(steinax.DivergenceWarning, match=r"diverge.* at step \d+|from step \d+ on"):
        res = steinax.run(steinax.svgd(), logp, x0, steps=20, optimizer=optax.sgd(1.0), rng_key=jax.random.key(1),
                          trace_every=5, progress=False)
    assert bool(jnp.all(jnp.isfinite(res.particles)))


def test_a_healthy_run_does_not_warn():
    import warnings

    x0 = jax.random.normal(jax.random.key(0), (20, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", steinax.DivergenceWarning)
        res = steinax.run(steinax.svgd(), _std_normal, x0, steps=50, optimizer=steinax.adagrad_momentum(0.05),
                          rng_key=jax.random.key(1), progress=False)
    assert res.trace.max_abs.shape == res.trace.step.shape


_CTRL_C = """
import os, signal, sys, threading, time
import jax, jax.numpy as jnp, steinax

x0 = jax.random.normal(jax.random.key(0), (200, 10))
logp = lambda x: -0.5 * jnp.sum(x * x)
opt = steinax.adagrad_momentum(0.05)


def press():
    time.sleep(float(sys.argv[1]))
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=press, daemon=True).start()
t0 = time.perf_counter()
try:
    steinax.run(steinax.svgd(), logp, x0, steps=10**6, optimizer=opt, rng_key=jax.random.key(1), progress=False)
except steinax.RunInterrupted as err:
    assert isinstance(err, KeyboardInterrupt)
    assert 0 < err.step == int(err.result.state.step) < 10**6
    assert bool(jnp.all(jnp.isfinite(err.result.particles)))
    print("stopped", time.perf_counter() - t0, err.step)
"""


@pytest.mark.slow  # ~11 s (a subprocess and its compilation); CI's slow pass runs it
def test_ctrl_c_stops_the_compiled_loop_soon_and_keeps_the_particles():
    """Was: Ctrl-C took effect when the compiled loop ended (67.8 s later in one trial) and the work was lost.
    Now it stops within max(2 s, 100 steps) of the press, with the particles (a 10^6-step run; compilation
    takes ~1-3 s here, so the press comes 6 s in and the run must end by 6 + 2 s + margin for a loaded machine)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CTRL_C, "6"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    _, seconds, step = out.stdout.split()
    assert float(seconds) < 6 + 2 + 4, out.stdout


def test_sampling_algorithm_loop_equals_run():
    """The BlackJAX-style pair in a user's own loop, with run's key schedule, gives run's particles (float32: the
    same operations in the same order, so equal to a few ulps)."""
    import optax

    target = lambda x: -0.5 * jnp.sum((x - 1.0) ** 2)  # noqa: E731
    x0 = jax.random.normal(jax.random.key(0), (30, 3))
    key = jax.random.key(7)
    ref = steinax.run(steinax.svgd(), target, x0, steps=25, optimizer=optax.adam(0.05), rng_key=key)
    algo = steinax.sampling_algorithm(steinax.svgd(), target, optax.adam(0.05))
    state = algo.init(x0)
    key_steps = jax.random.split(key)[0]
    step = jax.jit(algo.step)
    for t in range(25):
        state, info = step(jax.random.fold_in(key_steps, t), state)
    assert bool(info.finite) and int(state.step) == 25
    np.testing.assert_allclose(np.asarray(state.particles), np.asarray(ref.particles), rtol=0, atol=1e-5)
    with pytest.raises(TypeError, match="`optimizer` must be an optax"):
        steinax.sampling_algorithm(steinax.svgd(), target, 0.1)
    with pytest.raises(TypeError, match="`method` must be a steinax particle method"):
        steinax.sampling_algorithm("svgd", target, optax.adam(0.1))
