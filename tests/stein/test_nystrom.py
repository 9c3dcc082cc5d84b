"""Nyström KSD (Kalinke, Szabó & Sriperumbudur 2025): the statistic and bootstrap against a dense reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import IMQ
from steinax.stein import ksd
from steinax.stein.ksd import stein_kernel_matrix
from steinax.stein.nystrom import _packed_rademacher, nystrom_ksd, nystrom_ksd_test


def test_statistic_and_bootstrap_equal_a_dense_reference():
    """n = 90 draws, m = 12 landmarks (rows 0, 7, ..., 77), one row block: NumPy's pseudo-inverse of the dense
    landmark Stein matrix, the V-statistic beta^T K^+ beta / n'^2 over the 78 other draws, and the B bootstrap
    statistics with the same multipliers (the pass's first block key). float64, 1e-9 relative."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(90, 2)) + 0.3
    s = -x
    with jax.enable_x64(True):
        key = jax.random.key(5)
        res = nystrom_ksd_test(x, s, rng_key=key, landmarks=12, n_bootstrap=50)
        idx = np.arange(12) * 7
        rest = np.setdiff1d(np.arange(90), idx)
        kmm = np.asarray(stein_kernel_matrix(jnp.asarray(x[idx]), jnp.asarray(s[idx]), jnp.asarray(x[idx]),
                                             jnp.asarray(s[idx]), IMQ()))
        knm = np.array(stein_kernel_matrix(jnp.asarray(x), jnp.asarray(s), jnp.asarray(x[idx]), jnp.asarray(s[idx]),
                                             IMQ()))
        w = np.asarray(_packed_rademacher(jax.random.fold_in(jax.random.split(key, 3)[0], 0), 50, 90, jnp.float64))
    pinv = np.linalg.pinv(kmm, rcond=1e-12, hermitian=True)
    knm[idx] = 0.0
    nr = 78
    beta, sw = knm.sum(0), w @ knm
    stat = beta @ pinv @ beta / nr**2
    boot = np.sum((sw @ pinv) * sw, axis=1) / nr**2
    np.testing.assert_allclose(float(res.discrepancy), stat, rtol=1e-9)
    assert float(res.p_value) == pytest.approx((1 + np.sum(boot >= stat)) / 51)
    assert res.kind == "nystrom_ksd" and res.statistic == pytest.approx(stat * nr)


def test_projection_never_exceeds_the_full_discrepancy():
    """``||P mu||^2 <= ||mu||^2`` for the empirical embedding of the non-landmark draws (P an orthogonal
    projection): the Nyström V-statistic is at most the full V-statistic KSD of the same draws. float64."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 3)) * 1.3
    with jax.enable_x64(True):
        u = float(nystrom_ksd(x, -x, landmarks=40))
        keep = np.setdiff1d(np.arange(400), np.arange(40) * 10)
        full_v = float(ksd(jnp.asarray(x[keep]), jnp.asarray(-x[keep]), IMQ(), "v"))
        res = nystrom_ksd_test(x, -x, rng_key=jax.random.key(0), landmarks=40, n_bootstrap=1)
    assert u > 0.0  # sd 1.3 against N(0, I): a clear discrepancy
    assert u <= full_v * (1 + 1e-10)
    assert float(res.discrepancy) == pytest.approx(u)


def test_dependent_bootstrap_over_several_blocks_keeps_the_level_on_a_chain(monkeypatch):
    """One AR(1) chain (phi = 0.9) of N(0, 1), 6000 draws in blocks of 1000 (the sign process carried across
    blocks): the dependent bootstrap does not reject, the i.i.d. one does (the chain's autocorrelation inflates
    the statistic). A fixed chain: deterministic."""
    from steinax.stein import nystrom

    monkeypatch.setattr(nystrom, "ROW_BLOCK", 1000)
    rng = np.random.default_rng(2)
    z = np.zeros(6000)
    for t in range(1, 6000):
        z[t] = 0.9 * z[t - 1] + np.sqrt(0.19) * rng.normal()
    x = z[:, None].astype(np.float32)
    dep = nystrom_ksd_test(x, -x, rng_key=jax.random.key(0), bootstrap="dependent", block_length=100)
    iid = nystrom_ksd_test(x, -x, rng_key=jax.random.key(0))
    assert not bool(dep.reject) and dep.block_length == 100
    assert float(iid.p_value) < float(dep.p_value)


def test_packed_signs_are_fair_and_independent():
    """100 x 3200 packed signs: the mean within 4 standard errors of 0 and the lag-1 and bit-32-apart correlations
    within 4 standard errors of 0 (fixed key: deterministic)."""
    w = np.asarray(_packed_rademacher(jax.random.key(0), 100, 3200, jnp.float32))
    assert set(np.unique(w)) == {-1.0, 1.0}
    se = 1 / np.sqrt(w.size)
    assert abs(w.mean()) < 4 * se
    assert abs(np.mean(w[:, 1:] * w[:, :-1])) < 4 * se and abs(np.mean(w[:, 32:] * w[:, :-32])) < 4 * se


@pytest.mark.parametrize("kwargs, match", [
    (dict(landmarks=1), "`landmarks` must be an integer"),
    (dict(landmarks=60), r"\[2, n / 2 = 50\]"),
    (dict(n_bootstrap=0), "`n_bootstrap`"),
    (dict(bootstrap="block"), "`bootstrap` must be one of"),
])
def test_bad_input_names_the_argument(kwargs, match):
    x = np.random.default_rng(3).normal(size=(100, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        nystrom_ksd_test(x, -x, rng_key=jax.random.key(0), **kwargs)


def test_sample_quality_switches_to_nystrom_above_the_stated_n(monkeypatch):
    """``method="auto"`` uses the exact statistic up to NYSTROM_ABOVE samples and the Nyström test beyond
    (the threshold lowered here to keep the test small); the Nyström result equals nystrom_ksd_test's."""
    from steinax.diagnostics import quality, sample_quality

    x = np.random.default_rng(4).normal(size=(3000, 2)).astype(np.float32)
    logp = lambda v: -0.5 * jnp.sum(v**2)  # noqa: E731
    exact = sample_quality(x, logp, test=True, rng_key=jax.random.key(0), n_bootstrap=100)
    assert exact.method == "exact"
    monkeypatch.setattr(quality, "NYSTROM_ABOVE", 2000)
    auto = sample_quality(x, logp, test=True, rng_key=jax.random.key(0), n_bootstrap=100)
    direct = nystrom_ksd_test(x, -x, rng_key=jax.random.key(0), n_bootstrap=100)
    assert auto.method == "nystrom" and auto.estimator == "v" and "(Nyström)" in auto.summary()
    assert auto.discrepancy == pytest.approx(float(direct.discrepancy), rel=1e-5)
    assert auto.p_value == pytest.approx(float(direct.p_value))
    with pytest.raises(ValueError, match="needs kind='ksd'"):
        sample_quality(x, logp, kind="kcc_sd", method="nystrom")


def test_overflowing_statistic_stops_with_a_reason():
    x = np.random.default_rng(8).normal(size=(400, 2)).astype(np.float32)
    with pytest.raises(FloatingPointError, match="Nyström KSD"):
        nystrom_ksd_test(x, np.full_like(x, 1e30), rng_key=jax.random.key(0), n_bootstrap=20)
