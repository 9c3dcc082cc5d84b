"""KSDAgg (Schrab, Guedj & Gretton 2022) against a naive reference written from the paper's Algorithm 1."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import IMQ
from steinax.stein.gof import wild_bootstrap_multipliers
from steinax.stein import GofResult
from steinax.stein.ksdagg import (AggregatedTest, aggregated_decision, aggregated_p_value, aggregation_weights, ksdagg_bandwidths,
                                  ksdagg_test)


def _stein_imq(x, s, lam):
    """The IMQ Stein kernel ``(1 + |D|^2 / lam^2)^{-1/2}`` pair by pair, derivatives by hand (NumPy loops)."""
    n, d = x.shape
    g = 1.0 / lam**2
    h = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            dd = x[a] - x[b]
            q = 1.0 + g * dd @ dd
            grad_x = -g * q**-1.5 * dd  # d/dx of q^{-1/2}
            trace = g * d * q**-1.5 - 3.0 * g * g * (dd @ dd) * q**-2.5
            h[a, b] = q**-0.5 * s[a] @ s[b] + grad_x @ s[b] - grad_x @ s[a] + trace
    return h


def _naive_ksdagg(x, s, lams, w, mult, b1, alpha, steps):
    """Algorithm 1 with Python loops: U-statistics, the B1 + 1 sorted values, the bisection over u, the decision."""
    n = x.shape[0]
    stats, boots = [], []
    for lam in lams:
        h = _stein_imq(x, s, lam)
        np.fill_diagonal(h, 0.0)
        stats.append(h.sum() / (n * (n - 1)))
        boots.append(np.array([m @ h @ m for m in mult]) / (n * (n - 1)))
    stats, boots = np.array(stats), np.array(boots)
    m1 = np.sort(np.concatenate([boots[:, :b1], stats[:, None]], axis=1), axis=1)
    m2 = boots[:, b1:]

    def q(u):
        return np.array([m1[i, int(np.ceil((b1 + 1) * (1 - u * w[i]))) - 1] for i in range(len(lams))])

    lo, hi = 0.0, float(np.min(1 / w))
    for _ in range(steps):
        u = (lo + hi) / 2
        p_u = np.mean([np.max(m2[:, b] - q(u)) > 0 for b in range(m2.shape[1])])
        lo, hi = (u, hi) if p_u <= alpha else (lo, u)
    p_values = np.mean(m1 >= stats[:, None], axis=1)
    return bool(np.any(p_values <= lo * w)), lo, p_values, stats


@pytest.mark.parametrize("shift, weights", [(0.0, "uniform"), (0.6, "uniform"), (0.6, "centred")])
def test_equals_the_naive_algorithm(shift, weights):
    """float64, the same multipliers (the test's own key): statistics to 1e-10 relative (sums of 60^2 terms of
    size ~1), p-values (their counts), the correction u and the decision exactly (they compare sorted values)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)) + shift
    s = -(x - 0.0)
    b1, b2, steps = 99, 80, 20
    with jax.enable_x64(True):
        key = jax.random.key(3)
        res = ksdagg_test(x, s, rng_key=key, bandwidths=4, weights=weights, n_bootstrap=(b1, b2), bisection_steps=steps)
        mult = np.asarray(wild_bootstrap_multipliers(key, b1 + b2, 60, jnp.float64))
        lams = np.asarray(ksdagg_bandwidths(jnp.asarray(x), 4))
    reject, u, p_values, stats = _naive_ksdagg(x, s, lams, aggregation_weights(4, weights), mult, b1, 0.05, steps)
    np.testing.assert_allclose(np.asarray(res.discrepancies), stats, rtol=1e-10)
    # the same counts of bootstrap values >= the statistic: equal up to the mean's summation order
    np.testing.assert_allclose(np.asarray(res.p_values) * (b1 + 1), p_values * (b1 + 1), rtol=1e-12)
    assert res.u == pytest.approx(u, rel=1e-12) and res.reject == reject
    assert reject == (shift > 0)  # the data: N(0, I) or shifted by 0.6 in both coordinates, n = 60


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p_value_is_the_smallest_level_that_rejects(seed):
    """On random statistics and bootstrap copies (N = 4, B1 = 99, B2 = 80, float64), the decision at each of
    400 levels in (0, 0.6) is ``p_value <= level``: the p-value is the closed form of the nested decisions.
    Levels within 1e-9 of the p-value are skipped (the bisection resolves u to 2^-50)."""
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        boot1, boot2 = jnp.asarray(rng.normal(size=(4, 99))), jnp.asarray(rng.normal(size=(4, 80)))
        stats = jnp.asarray(rng.normal(size=4) + 1.0 + seed * 0.5)
        w = jnp.asarray(aggregation_weights(4, "centred"))
        p = float(aggregated_p_value(stats, boot1, boot2, w))
        levels = np.array([a for a in np.linspace(1e-3, 0.6, 400) if abs(a - p) > 1e-9])
        decide = jax.jit(jax.vmap(lambda a: aggregated_decision(stats, boot1, boot2, w, a)[0]))  # level traced
        decisions = np.asarray(decide(jnp.asarray(levels)))
    np.testing.assert_array_equal(decisions, p <= levels)
    assert 0.0 < p <= 1.0


def test_default_bandwidths_are_the_authors_collection():
    """``lambda_max^{i/(N-1)} / d`` with ``lambda_max = max(2, max distance among the first 500 rows)``."""
    x = np.random.default_rng(1).normal(size=(700, 3)) * 3.0
    lam = np.asarray(ksdagg_bandwidths(jnp.asarray(x, jnp.float32), 5))
    from scipy.spatial.distance import pdist

    lam_max = max(2.0, pdist(x[:500]).max())
    np.testing.assert_allclose(lam, lam_max ** (np.arange(5) / 4) / 3, rtol=1e-5)


def test_weights_sum_to_one_and_follow_the_named_shapes():
    for kind in ("uniform", "decreasing", "increasing", "centred"):
        for n in (4, 5):
            assert aggregation_weights(n, kind).sum() == pytest.approx(1.0)
    assert np.all(np.diff(aggregation_weights(5, "decreasing")) < 0)
    c = aggregation_weights(5, "centred")
    assert np.argmax(c) == 2 and c[0] == pytest.approx(c[4])


@pytest.mark.slow  # about 15 s (a parametric bootstrap of 59 fresh samples): CI's slow pass
def test_dependent_and_parametric_bootstraps_run_and_decide():
    """A chain of N(0, 1) (AR(1), phi = 0.5) is not rejected by the dependent bootstrap; the parametric
    bootstrap with exact target draws rejects a scaled sample (sd 1.6 against 1)."""
    rng = np.random.default_rng(2)
    z = np.zeros((2, 400, 1))
    for t in range(1, 400):
        z[:, t] = 0.5 * z[:, t - 1] + np.sqrt(0.75) * rng.normal(size=(2, 1))
    x = z.reshape(800, 1).astype(np.float32)
    res = ksdagg_test(x, -x, rng_key=jax.random.key(0), bootstrap="dependent", chains=2, block_length=10,
                      n_bootstrap=200)
    assert not res.reject and res.block_length == 10 and "do not reject" in res.summary()

    def sampler(key, n):
        y = jax.random.normal(key, (n, 1))
        return y, -y

    y = (1.6 * rng.normal(size=(100, 1))).astype(np.float32)
    par = ksdagg_test(y, -y, rng_key=jax.random.key(1), bootstrap="parametric", target_sampler=sampler,
                      n_bootstrap=(39, 20), bandwidths=2)
    assert par.reject and par.bootstrap == "parametric"


@pytest.mark.parametrize("kwargs, match", [
    (dict(bandwidths=1), "at least 2 bandwidths"),
    (dict(bandwidths=np.array([1.0, -1.0])), "positive bandwidths"),
    (dict(weights="flat"), "`weights` must be one of"),
    (dict(weights=np.array([0.5, 0.6]), bandwidths=np.array([1.0, 2.0])), r"sum to 1"),
    (dict(n_bootstrap=(10, 0)), "`n_bootstrap` must be a positive integer"),
    (dict(bootstrap="parametric"), "needs `target_sampler`"),
    (dict(bootstrap="block"), "`bootstrap` must be one of"),
    (dict(bisection_steps=0), "`bisection_steps`"),
])
def test_bad_input_names_the_argument(kwargs, match):
    x = np.random.default_rng(3).normal(size=(40, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        ksdagg_test(x, -x, rng_key=jax.random.key(0), **kwargs)


def test_sample_quality_runs_the_aggregated_test_by_default():
    """``sample_quality(test=True)`` with no kernel: the decision and p-value are ksdagg_test's on the same
    draws and key, the reported discrepancy the IMQ(1, -1/2) U-statistic, and the summary shows the
    aggregated test; a kernel given (a bandwidth chosen) or ``aggregated=False`` runs the single-kernel test."""
    from steinax.diagnostics import sample_quality
    from steinax.stein import ksd

    x = (np.random.default_rng(6).normal(size=(150, 2)) + 0.5).astype(np.float32)
    logp = lambda v: -0.5 * jnp.sum(v**2)  # noqa: E731
    q = sample_quality(x, logp, test=True, rng_key=jax.random.key(2))
    direct = ksdagg_test(x, -x, rng_key=jax.random.key(2))
    assert q.reject == direct.reject and q.reject and "KSDAgg" in q.summary() and isinstance(q.test, AggregatedTest)
    assert q.p_value == direct.p_value <= 0.05
    for single in (sample_quality(x, logp, kernel=IMQ(), test=True, rng_key=jax.random.key(2)),
                   sample_quality(x, logp, test=True, aggregated=False, rng_key=jax.random.key(2))):
        assert isinstance(single.test, GofResult) and single.p_value == float(single.test.p_value)
    assert q.discrepancy == pytest.approx(float(ksd(jnp.asarray(x), -jnp.asarray(x), estimator="u")), rel=1e-5)


def test_multi_bandwidth_pass_equals_one_test_per_bandwidth():
    """n = 1100 > the tile (padding, off-diagonal tiles): every bandwidth's statistic and bootstrap copies equal
    gof's single-kernel pass with the same key (same multipliers), float64 to 1e-10."""
    from steinax.stein.gof import bootstrap_statistics
    from steinax.stein.ksdagg import multi_bandwidth_statistics

    with jax.enable_x64(True):
        x = jax.random.normal(jax.random.key(0), (1100, 2)) + 0.2
        lam = jnp.array([0.7, 2.5])
        key = jax.random.key(1)
        stats, boot = multi_bandwidth_statistics(key, 6, x, -x, lam)
        for k, l_k in enumerate(lam):
            t, b, _ = bootstrap_statistics(key, 6, "ksd", x, -x, IMQ(h=float(l_k) ** 2), "u", None, "iid", None, 1)
            np.testing.assert_allclose(float(stats[k]), float(t), rtol=1e-10)
            np.testing.assert_allclose(np.asarray(boot[k]), np.asarray(b), rtol=1e-10)


def test_overflowing_statistics_stop_with_a_reason():
    """Scores of 1e30 in float32: every Stein kernel product overflows; the test stops and says why, as gof_test."""
    x = np.random.default_rng(7).normal(size=(50, 2)).astype(np.float32)
    with pytest.raises(FloatingPointError, match="squared KSD"):
        ksdagg_test(x, np.full_like(x, 1e30), rng_key=jax.random.key(0), n_bootstrap=20)


def test_cli_runs_the_aggregated_test_unless_a_single_kernel_is_asked_for(tmp_path, capsys, monkeypatch):
    """``steinax ksd``: KSDAgg by default (IMQ), the single-kernel test with ``--single-kernel`` or
    ``--kernel rbf``, KSDAgg again with ``--kernel rbf --aggregated``; both flags at once are an error."""
    from steinax.interfaces import cli

    np.save(tmp_path / "x.npy", np.random.default_rng(8).normal(size=(80, 2)))
    (tmp_path / "t_agg.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum(z * z)\n")
    monkeypatch.chdir(tmp_path)
    base = ["ksd", "x.npy", "--target", "t_agg:logp", "--bootstrap", "100"]
    for extra, aggregated in [([], True), (["--single-kernel"], False), (["--kernel", "rbf"], False),
                              (["--kernel", "rbf", "--aggregated"], True)]:
        assert cli.main(base + extra) == 0
        out = capsys.readouterr().out
        assert ("KSDAgg" in out) == aggregated and ("wild-bootstrap test" in out) == (not aggregated), (extra, out)
    assert cli.main(base + ["--aggregated", "--single-kernel"]) == 2
    assert "exclude each other" in capsys.readouterr().err


def test_the_bootstrap_pass_equals_float64_at_the_size_where_xla_miscompiles_a_batched_form():
    """The bootstrap's quadratic forms ``w_b^T H_l w_b`` at n = 250, B = 4001, N = 10 (the speed benchmark's size)
    against a float64 reference. The same product written under ``vmap`` is miscompiled by XLA:CPU at this size (jax
    0.10.2: relative error 1.2); the library unrolls it (``fold_symmetric_tiles``), and this test fails if a rewrite
    takes the broken form. Tolerance: float32 sums of 250 terms of O(1), 1e-5 relative to the largest."""
    from steinax.kernels import IMQ
    from steinax.stein.ksd import stein_kernel_matrix
    from steinax.stein.ksdagg import TILE, _multi_bandwidth_pass, ksdagg_bandwidths

    rng = np.random.default_rng(0)
    for n, b in ((250, 4001), (1100, 300)):  # one tile, and several (the symmetric fold)
        x = jnp.asarray(rng.normal(size=(n, 2)), jnp.float32)
        w = jnp.asarray(rng.choice([-1.0, 1.0], size=(b, n)), jnp.float32)
        hs = ksdagg_bandwidths(x) ** 2
        _, _, boot = _multi_bandwidth_pass(x, -x, hs, w, TILE)
        with jax.enable_x64(True):
            x64 = jnp.asarray(x, jnp.float64)
            for k in (0, 5, 9):
                h = np.asarray(stein_kernel_matrix(x64, -x64, x64, -x64, IMQ(h=float(hs[k]))))
                want = np.einsum("bi,ij,bj->b", np.asarray(w, np.float64), h, np.asarray(w, np.float64))
                assert np.max(np.abs(np.asarray(boot[k]) - want)) <= 1e-5 * np.max(np.abs(want)), (n, k)
