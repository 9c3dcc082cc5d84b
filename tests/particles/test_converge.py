"""Runs until the particles settle (steinax.run with steps=None) and the warnings of runs that do not."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.particles.converge import moment_change, warn_if_unsettled

SCALES = jnp.array([0.1, 1.0, 10.0])


def _logp(x):
    return -0.5 * jnp.sum((x / SCALES) ** 2)


@pytest.mark.slow  # a few 500-step segments of SVGD (about 10 s): CI's slow pass
def test_run_without_steps_or_optimizer_settles_on_an_anisotropic_gaussian():
    """No step size, no step count: the default (Adam 0.05, halved on plateaus) stops by the moment rule.
    SVGD with 100 particles in 3-D keeps sds within 10% of the truth (its finite-n shrinkage here is
    ~2-6%), over a scale range of 100."""
    x0 = jax.random.normal(jax.random.key(0), (100, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", steinax.ConvergenceWarning)
        res = steinax.run(steinax.svgd(), _logp, x0, rng_key=jax.random.key(1), progress=False)
    assert res.converged and res.convergence["delta"] < 0.05
    assert res.convergence["steps"] == int(res.trace.step[-1]) <= 20000
    np.testing.assert_allclose(np.asarray(res.particles.std(0)), np.asarray(SCALES), rtol=0.1)
    assert np.all(np.diff(np.asarray(res.trace.step)) > 0)  # the segments' traces joined without repeats


@pytest.mark.slow  # two 500-step segments (about 6 s): CI's slow pass
def test_unconverged_run_says_so():
    x0 = jax.random.normal(jax.random.key(0), (50, 3))
    with pytest.warns(steinax.ConvergenceWarning, match="not converged after 1000 steps"):
        res = steinax.run_until_converged(steinax.svgd(), _logp, x0, rng_key=jax.random.key(1), max_steps=1000,
                                          optimizer=optax.sgd(1e-4), progress=False)
    assert res.converged is False


def test_moment_change_reads_mean_and_sd_moves_in_sds():
    before = (np.zeros(2), np.ones(2))
    assert moment_change(before, (np.array([0.0, 0.1]), np.ones(2))) == pytest.approx(0.1)
    assert moment_change(before, (np.zeros(2), np.array([1.0, 2.0]))) == pytest.approx(np.log(2.0))


def test_a_collapsed_coordinate_is_named_not_counted_in_astronomical_sds():
    """Seen in a BNN search: a coordinate whose particles had all taken one value (sd 0) and then moved read as
    'moved by 4.56e+306 sds'; the warning now says what happened."""
    from steinax.particles.converge import settled_over

    class State:
        step = 600
        particles = jnp.array([[0.0, 1.5], [0.1, 1.5], [0.2, 1.5]])

    snapshot = (100, np.array([0.1, 1.0]), np.array([0.08, 0.0]))
    with pytest.warns(steinax.ConvergenceWarning, match="more than 10\\^6 sds: .*collapsed onto one value") as w:
        converged, info = settled_over(snapshot, State(), 600)
    assert not converged and info["delta"] > 1e6
    assert "e+" not in str(w[0].message)  # the ratio to a zero sd is not printed


def test_fixed_run_whose_ksd_climbs_back_warns():
    """The issue's symptom: a final KSD many times the run's own minimum, silently. Now it warns."""
    trace = steinax.Trace(step=jnp.arange(20) * 100, ksd=jnp.r_[jnp.linspace(10.0, 1.0, 15), jnp.full(5, 7.0)],
                          direction_norm=jnp.zeros(20), method={})
    with pytest.warns(steinax.ConvergenceWarning, match="7.0 times its minimum"):
        warn_if_unsettled(trace)
    settled = steinax.Trace(step=jnp.arange(20), ksd=jnp.linspace(10.0, 1.0, 20), direction_norm=jnp.zeros(20), method={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_unsettled(settled)


def test_run_until_converged_refuses_a_checkpoint():
    with pytest.raises(ValueError, match="`checkpoint` needs a fixed `steps`"):
        steinax.run(steinax.svgd(), _logp, jnp.zeros((5, 3)), rng_key=jax.random.key(0), checkpoint="x.npz")


def _far_start(n=40):
    return 5.0 + jax.random.normal(jax.random.key(0), (n, 3))


def test_fixed_run_still_travelling_says_so_and_its_window_is_the_last_part_of_the_run():
    """Was: a fixed-length run whose particles were still travelling returned silently (sliced SVGD with SGD
    0.1 at 300 particles ended with twice the posterior's sd, ``converged`` None). The rule is the moment
    rule of steps=None over the last half of this 200-step run, from the trace record at step 100: the same
    ``Delta`` as the two halves run separately (same keys: equal to float32 rounding)."""
    x0, opt, key = _far_start(), optax.sgd(1e-3), jax.random.key(1)
    with pytest.warns(steinax.ConvergenceWarning, match="still moving: over the last 100 steps"):
        res = steinax.run(steinax.svgd(), _logp, x0, steps=200, optimizer=opt, rng_key=key, trace_every=20)
    assert res.converged is False
    assert res.convergence["window"] == 100 and res.convergence["tolerance"] == pytest.approx(0.05 * 100 / 500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", steinax.ConvergenceWarning)
        half = steinax.run(steinax.svgd(), _logp, x0, steps=100, optimizer=opt, rng_key=key, trace_every=20)
    moments = [tuple(np.asarray(a, np.float64) for a in (p.mean(0), p.std(0))) for p in (half.particles, res.particles)]
    assert res.convergence["delta"] == pytest.approx(moment_change(*moments), rel=1e-4)  # float32 moments
    assert res.convergence["delta"] > 0.05  # far from the target at this step size: not a borderline case


def test_fixed_run_that_settled_says_so_without_a_warning():
    x0 = jax.random.normal(jax.random.key(0), (40, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", steinax.ConvergenceWarning)
        res = steinax.run(steinax.svgd(), _logp, x0, steps=1000, optimizer=steinax.adagrad_momentum(0.1),
                          rng_key=jax.random.key(1))
    assert res.converged is True and res.convergence["delta"] < res.convergence["tolerance"] == 0.05


def test_short_fixed_run_is_not_judged():
    """Runs under MIN_JUDGED_STEPS (a user stepping a run in short calls) get ``converged`` None and no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", steinax.ConvergenceWarning)
        res = steinax.run(steinax.svgd(), _logp, _far_start(), steps=10, optimizer=optax.sgd(1e-3),
                          rng_key=jax.random.key(1))
    assert res.converged is None and res.convergence is None


def test_run_without_optimizer_takes_the_methods_default():
    """Sliced SVGD's default is clipped SGD 0.1 (Adam settled it on a false fixed point: the slices' marginals right,
    their dependence not); the others' is the injectable Adam. The run equals one with the optimizer given."""
    x0 = jax.random.normal(jax.random.key(0), (30, 3))
    for method, explicit in ((steinax.sliced_svgd(), optax.chain(optax.clip(1.0), optax.sgd(0.1))),
                             (steinax.svgd(), optax.inject_hyperparams(optax.adam)(learning_rate=0.05))):
        a = steinax.run(method, _logp, x0, steps=20, rng_key=jax.random.key(1))
        b = steinax.run(method, _logp, x0, steps=20, optimizer=explicit, rng_key=jax.random.key(1))
        np.testing.assert_array_equal(np.asarray(a.particles), np.asarray(b.particles))


def test_run_without_steps_or_optimizer_names_a_bad_method():
    """The default optimizer is the method's: a method that is not one still gets run's TypeError (not an
    AttributeError from looking up its default)."""
    with pytest.raises(TypeError, match="`method` must be a steinax particle method"):
        steinax.run("svgd", _logp, jnp.zeros((5, 3)), rng_key=jax.random.key(0))


def test_a_plateaued_segment_halves_the_step_by_its_own_trace():
    """The plateau rule reads the segment's own trace KSD. Read on the whole run's trace (whose first quarter holds the
    early, high KSD) it stopped halving: on this narrow target (sd 0.0005, Adam 0.05 jitters) the run then took 9000
    steps, or hit the 20000-step cap with an sd 1.8 times the target's, where halving settles it at 4500."""
    import warnings

    warnings.simplefilter("ignore")
    narrow = lambda x: -0.5 * jnp.sum(x * x) / 0.0005**2  # noqa: E731
    res = steinax.run(steinax.svgd(), narrow, jax.random.normal(jax.random.key(1), (24, 2)) * 0.01,
                      rng_key=jax.random.key(2))
    assert res.converged and res.convergence["learning_rate"] < 0.01, res.convergence
    assert res.convergence["steps"] <= 6000 and 0.8 < float(jnp.std(res.particles)) / 0.0005 < 1.2
