"""The relaxation check (steinax.diagnostics.relaxation_check): calibration, power, errors, and its place in sample_quality."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.diagnostics import relaxation_check, sample_quality
from steinax.diagnostics.relaxation import _sign_flip_p_values

SCALES = jnp.array([0.1, 1.0, 10.0])


def _logp(x):
    return -0.5 * jnp.sum((x / SCALES) ** 2)


def _draws(key, n=100, factor=1.0):
    return factor * SCALES[None] * jax.random.normal(key, (n, 3))


@pytest.mark.slow  # compiles MALA (about 5 s): CI's slow pass
def test_relaxation_flags_shrunk_and_widened_draws_not_exact_ones():
    """Exact draws of an anisotropic Gaussian pass; shrunk to 0.6 (a collapsed run) they grow under MALA,
    widened to 1.6 they contract. Effects of this size give p ~ 1/2001 at n = 100 (the check's own
    figures on the suite), far below the level 0.01."""
    key = jax.random.key(0)
    exact = relaxation_check(_logp, _draws(key), rng_key=jax.random.key(1))
    shrunk = relaxation_check(_logp, _draws(key, factor=0.6), rng_key=jax.random.key(1))
    wide = relaxation_check(_logp, _draws(key, factor=1.6), rng_key=jax.random.key(1))
    assert not exact.collapsed and not exact.overdispersed
    assert shrunk.collapsed and shrunk.growth > 0.5
    assert wide.overdispersed and wide.growth < -0.3
    assert 0.3 < exact.acceptance < 0.9  # the pilot found MALA's working range


@pytest.mark.slow  # 40 checks (about 15 s): CI's slow pass
def test_relaxation_false_alarms_on_exact_draws():
    """40 independent sets of 100 exact draws at level 0.05: the number flagged is Binomial(40, <= 0.05) if the
    sign-flip null is right (the whitening and step size read from the draws make it approximate). Failure rate
    of this test: P(Binomial(40, 0.05) >= 7) = 0.0034."""
    flagged = sum(relaxation_check(_logp, _draws(jax.random.key(100 + i)), level=0.05, rng_key=jax.random.key(i)).collapsed
                  for i in range(40))
    assert flagged <= 6, flagged


def test_sign_flip_p_values_against_an_exact_enumeration():
    """Against the exact randomisation distribution of n = 10 values (all 1024 sign patterns): the Monte
    Carlo p-value with 20000 flips is within 4 se (se <= 0.0036) of it."""
    u = jnp.asarray(np.random.default_rng(0).normal(0.3, 1.0, 10))
    signs = np.array([[1 if (m >> i) & 1 else -1 for i in range(10)] for m in range(1024)])
    null = signs @ np.asarray(u) / 10
    exact = np.mean(null >= float(jnp.mean(u)))
    p_grow, p_shrink = _sign_flip_p_values(u, jax.random.key(0), 20000, 1)
    assert abs(p_grow - exact) < 4 * 0.0036
    assert abs(p_shrink - np.mean(null <= float(jnp.mean(u)))) < 4 * 0.0036


def test_relaxation_refuses_bad_input():
    x = _draws(jax.random.key(0))
    with pytest.raises(ValueError, match="at least 10 rows"):
        relaxation_check(_logp, x[:5])
    with pytest.raises(ValueError, match="`steps` must be a multiple of 10; received 15"):
        relaxation_check(_logp, x, steps=15)
    with pytest.raises(ValueError, match=r"`level` must be in \(0, 1\); received 1.5"):
        relaxation_check(_logp, x, level=1.5)
    with pytest.raises(ValueError, match="`block_length` must be an integer >= 1; received 0"):
        relaxation_check(_logp, x, block_length=0)


@pytest.mark.slow  # compiles MALA and the KSD (about 6 s): CI's slow pass
def test_sample_quality_reports_both_collapse_checks():
    res = sample_quality(_draws(jax.random.key(0), 200, factor=0.5), _logp, spread=True)
    assert res.collapsed and res.spread.collapsed and res.relaxation.collapsed
    assert "relaxation:" in res.summary() and "COLLAPSED" in res.summary()
    assert sample_quality(_draws(jax.random.key(0), 200), _logp).collapsed is None  # not asked for


@pytest.mark.slow  # compiles MALA (about 5 s): CI's slow pass
def test_relaxation_is_untestable_where_mala_cannot_move():
    """Particles spread 10^4 times wider than a stiff target: MALA's tuned step (at most ~10^-3 of its
    start after the pilot) still rejects nearly every move. No decision, not a pass, and sample_quality
    counts it as collapsed."""
    def stiff(x):
        return -0.5 * jnp.sum((x / 1e-4) ** 2)

    x = jax.random.normal(jax.random.key(0), (50, 2))
    res = relaxation_check(stiff, x)
    assert res.untestable is not None and "UNTESTABLE" in res.summary()
    assert not res.collapsed and not res.overdispersed and res.acceptance < 0.2
