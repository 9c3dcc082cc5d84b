"""The missing-mode check (steinax.diagnostics.mode_check): Laplace shares against closed forms, power, false alarms,
errors, and its place in sample_quality and the suite's scores."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.diagnostics import mode_check, sample_quality
from steinax.targets import Gaussian, GaussianMixture

MIX = GaussianMixture(jnp.array([0.3, 0.7]), jnp.array([[-4.0, 0.0], [4.0, 0.0]]),
                      jnp.stack([jnp.eye(2), jnp.diag(jnp.array([0.25, 4.0]))]))


@pytest.mark.slow  # compiles the ascent (seconds; the docstring example covers the default pass): CI's slow pass
def test_mode_check_finds_both_modes_with_their_masses():
    """Two Gaussian components (different covariances, so the Laplace log-determinant matters): the modes are the
    component means and the Laplace shares their weights. At 8 sds apart the other component changes each
    mode's log-density by < exp(-30), so float32 rounding (shares within 1e-3) is the tolerance."""
    x = MIX.sample(jax.random.key(0), 100)
    res = mode_check(MIX, x)
    assert res.shares.shape == (2,)
    np.testing.assert_allclose(np.asarray(res.shares), [0.7, 0.3], atol=1e-3)
    np.testing.assert_allclose(np.asarray(res.modes), [[4.0, 0.0], [-4.0, 0.0]], atol=1e-3)
    assert int(np.sum(np.asarray(res.counts))) + res.unassigned == 100 and res.unassigned == 0
    # counts are the particles on each side of the basin boundary (x_0 near -0.1)
    assert int(res.counts[1]) == int(np.sum(np.asarray(x[:, 0]) < 0))
    assert not res.mismatch


@pytest.mark.slow  # compiles the ascent (seconds; the docstring example covers the default pass): CI's slow pass
def test_mode_check_flags_particles_in_one_mode_or_split_evenly():
    """All 100 particles in the heavy mode: P(Binomial(100, 0.3) = 0) ~ 3e-16. Split 50/50 over modes of mass 30/70:
    P(Binomial(100, 0.7) <= 50) ~ 2e-5, below 0.01 / 2."""
    x = np.asarray(MIX.sample(jax.random.key(1), 400))
    heavy, light = x[x[:, 0] > 0], x[x[:, 0] < 0]
    one = mode_check(MIX, heavy[:100])
    assert one.mismatch and one.p_value < 1e-10 and int(one.counts[1]) == 0
    even = mode_check(MIX, np.concatenate([heavy[:50], light[:50]]))
    assert even.mismatch and even.p_value < 1e-3
    assert "MISMATCH" in one.summary()


@pytest.mark.slow  # compiles the ascent (seconds; the docstring example covers the default pass): CI's slow pass
def test_mode_check_false_alarms_on_exact_draws():
    """30 independent sets of 100 exact draws at level 0.05: with exact Laplace shares, the number flagged is at
    most Binomial(30, 0.05) (Bonferroni and a discrete tail make it smaller). Failure rate of this test:
    P(Binomial(30, 0.05) >= 6) = 0.0033."""
    flagged = sum(mode_check(MIX, MIX.sample(jax.random.key(10 + i), 100), level=0.05).mismatch for i in range(30))
    assert flagged <= 5, flagged


@pytest.mark.slow  # compiles the ascent (seconds; the docstring example covers the default pass): CI's slow pass
def test_mode_check_passes_one_mode_and_unbounded_densities():
    """A Gaussian has one mode: nothing to compare, p = 1. A log-density that grows without bound along one
    direction (``z_0 - z_1^2 / 2``, as a funnel's grows down its neck) has no settled mode and passes."""
    g = Gaussian(jnp.zeros(3), jnp.diag(jnp.array([0.01, 1.0, 100.0])))
    one = mode_check(g, g.sample(jax.random.key(0), 50))
    assert one.shares.shape == (1,) and one.p_value == 1.0 and not one.mismatch
    np.testing.assert_allclose(np.asarray(one.modes[0]), 0.0, atol=1e-3)

    def unbounded(z):
        return z[0] - 0.5 * z[1] ** 2

    none = mode_check(unbounded, jax.random.normal(jax.random.key(0), (30, 2)), ascent_steps=50)
    assert none.shares.shape == (0,) and none.unassigned == 30 and not none.mismatch
    assert "no settled mode" in none.summary()


def test_mode_check_refuses_bad_input():
    x = MIX.sample(jax.random.key(0), 20)
    with pytest.raises(ValueError, match="at least 10 rows"):
        mode_check(MIX, x[:5])
    with pytest.raises(ValueError, match="`n_starts`"):
        mode_check(MIX, x, n_starts=-1)
    with pytest.raises(ValueError, match="`inflate`"):
        mode_check(MIX, x, inflate=0.0)
    with pytest.raises(ValueError, match="`level`"):
        mode_check(MIX, x, level=1.5)
    with pytest.raises(ValueError, match="`max_rows`"):
        mode_check(MIX, x, max_rows=3)


@pytest.mark.slow  # compiles the ascent (seconds; the docstring example covers the default pass): CI's slow pass
def test_mode_check_thins_to_max_rows():
    """10 000 draws are thinned to ``max_rows`` evenly spaced rows before the ascents (the counts say how many)."""
    x = MIX.sample(jax.random.key(3), 10_000)
    res = mode_check(MIX, x, max_rows=200)
    assert int(np.sum(np.asarray(res.counts))) + res.unassigned == 200
    assert not res.mismatch


@pytest.mark.slow  # the relaxation check's MALA compile (about 10 s): CI's slow pass
def test_sample_quality_reports_the_mode_check():
    x = np.asarray(MIX.sample(jax.random.key(4), 400))
    heavy = x[x[:, 0] > 0][:100]
    res = sample_quality(heavy, MIX, spread=True, rng_key=jax.random.key(0))
    assert res.modes is not None and res.modes.mismatch and res.flagged
    assert "modes:" in res.summary()
    assert sample_quality(heavy, MIX).flagged is None
