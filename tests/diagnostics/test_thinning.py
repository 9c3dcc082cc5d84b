"""Stein thinning (Riabiz et al. 2022): the authors' package, a naive loop over the paper's objective, the KSD path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.diagnostics.thinning import stein_thinning, thinning_metric
from steinax.kernels import IMQ
from steinax.stein import ksd


def _biased_gaussian(n, d, seed=0):
    """Draws of a correlated Gaussian with a shifted 'burn-in' (the first 10%), and the target's scores."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    cov = a @ a.T + np.eye(d)
    x = rng.multivariate_normal(np.ones(d), cov, size=n) + np.where(np.arange(n)[:, None] < n // 10, 4.0, 0.0)
    return x, -(x - 1.0) @ np.linalg.inv(cov)


@pytest.mark.parametrize("standardize", [True, False])
@pytest.mark.parametrize("pre", ["id", "med", "sclmed", "smpcov"])
def test_same_indices_as_the_authors_package(pre, standardize):
    """The authors' stein-thinning 0.2.0 on shared inputs (n = 1500 > 1000: the medians read the evenly
    spaced subsample), float64: the same 60 indices, in order. An index mismatch would need two objective
    values within float64 rounding of each other."""
    st = pytest.importorskip("stein_thinning.thinning")
    x, s = _biased_gaussian(1500, 3)
    with jax.enable_x64(True):
        ours = np.asarray(stein_thinning(x, None, 60, scores=s, preconditioner=pre, standardize=standardize).indices)
    np.testing.assert_array_equal(ours, st.thin(x, s, 60, standardize=standardize, preconditioner=pre))


def _naive_stein_imq(x, s, inv_gamma):
    """``k_P(x_a, x_b)`` pair by pair, from the IMQ ``q^beta``, ``q = 1 + D^T L D`` (``D = x_a - x_b``,
    ``L = Gamma^{-1}``, ``beta = -1/2``) differentiated by hand: ``grad_x k = 2 beta q^(beta-1) L D``, and
    ``tr grad_x grad_y k = -2 beta q^(beta-1) tr L - 4 beta (beta-1) q^(beta-2) D^T L^2 D``."""
    b = -0.5
    n = x.shape[0]
    k = np.empty((n, n))
    for a in range(n):
        for c in range(n):
            dd = x[a] - x[c]
            q = 1.0 + dd @ inv_gamma @ dd
            gx = 2 * b * q ** (b - 1) * inv_gamma @ dd
            tr = -2 * b * q ** (b - 1) * np.trace(inv_gamma) - 4 * b * (b - 1) * q ** (b - 2) * dd @ inv_gamma @ inv_gamma @ dd
            k[a, c] = q ** b * s[a] @ s[c] + gx @ s[c] - gx @ s[a] + tr
    return k


@pytest.mark.parametrize("gamma", [np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.7]]), 1.7],
                         ids=["full-matrix", "scalar"])
def test_greedy_rule_and_ksd_path_equal_a_naive_loop(gamma):
    """Algorithm 1 as a Python loop over a Stein kernel written pair by pair from the paper's IMQ (a full
    metric Gamma, through the rotation path and four products per pick; a scalar, through SteinTerms.rescale
    and three), and the path against the V-statistic of the picks (repeats included). float64, 1e-10
    relative: sums of at most 30^2 entries of size ~1."""
    x, s = _biased_gaussian(120, 3, seed=1)
    k = _naive_stein_imq(x, s, np.linalg.inv(gamma * np.eye(3) if np.ndim(gamma) == 0 else gamma))
    picks, running = [], np.diag(k).copy()
    for _ in range(30):
        j = int(np.argmin(running))
        picks.append(j)
        running += 2.0 * k[j]
    with jax.enable_x64(True):
        th = stein_thinning(x, None, 30, scores=s, preconditioner=gamma, standardize=False)
    np.testing.assert_array_equal(np.asarray(th.indices), picks)
    for t in (1, 7, 30):
        p = np.asarray(picks[:t])
        np.testing.assert_allclose(float(th.ksd[t - 1]), k[np.ix_(p, p)].mean(), rtol=1e-10)


def test_thinning_beats_the_sample_and_drops_burn_in():
    """On the biased sample, 100 picks have a lower KSD than the 100 evenly spaced draws (standard thinning)
    and under-weight the burn-in (10% of the draws, 2% of the picks: a shift of 4 leaves some of it inside
    the target's bulk): deterministic (fixed data), margins of two times and more."""
    x, s = _biased_gaussian(4000, 2, seed=2)
    th = stein_thinning(x, None, 100, scores=s)
    idx = np.asarray(th.indices)
    assert np.mean(idx < 400) < 0.05
    even = np.linspace(0, 3999, 100).astype(int)
    xs, ss = jnp.asarray(x, jnp.float32), jnp.asarray(s, jnp.float32)
    assert float(ksd(xs[idx], ss[idx], IMQ(), "v")) < 0.5 * float(ksd(xs[even], ss[even], IMQ(), "v"))
    assert "100 of 4000 draws" in th.summary()


def test_chains_and_datatree_round_trip():
    """[chains, draws, d] input is read chain-major; the picks go back into a DataTree as a group whose values
    are the source draws at (source_chain, source_draw)."""
    from arviz_base import from_dict

    x, s = _biased_gaussian(800, 2, seed=3)
    chains = x.reshape(4, 200, 2)
    th = stein_thinning(chains, None, 30, scores=s.reshape(4, 200, 2))
    flat = stein_thinning(x, None, 30, scores=s)
    np.testing.assert_array_equal(np.asarray(th.indices), np.asarray(flat.indices))
    tree = from_dict({"posterior": {"theta": chains}})
    out = th.to_datatree(tree)
    g = out["thinned"]
    assert g.sizes["chain"] == 1 and g.sizes["draw"] == 30
    c, d = th.chain_draw()
    np.testing.assert_array_equal(g["theta"].values[0], chains[c, d])
    np.testing.assert_array_equal(g["source_chain"].values, c)
    assert "thinned" not in tree.children


def test_numpyro_model_named_draws_are_thinned_in_unconstrained_space():
    pytest.importorskip("numpyro")
    import numpyro
    import numpyro.distributions as dist

    from steinax.targets import from_numpyro

    def model():
        numpyro.sample("sigma", dist.HalfNormal(1.0))

    rng = np.random.default_rng(4)
    draws = {"sigma": np.abs(rng.normal(size=500))}
    th = stein_thinning(draws, from_numpyro(model), 20)
    np.testing.assert_allclose(np.exp(np.asarray(th.points[:, 0])), draws["sigma"][np.asarray(th.indices)], rtol=1e-5)


@pytest.mark.parametrize("kwargs, match", [
    (dict(m=0), "`m` must be a positive integer"),
    (dict(m=2.5), "`m` must be a positive integer"),
    (dict(m=101), r"`m` = 101 is larger than the number of draws n = 100"),
    (dict(m=5, preconditioner="median"), "`preconditioner` must be one of"),
    (dict(m=5, preconditioner=-1.0), "must be positive and finite"),
    (dict(m=5, preconditioner=np.eye(3)), r"\[d, d\] = \[2, 2\]"),
    (dict(m=5, preconditioner=np.array([[1.0, 2.0], [2.0, 1.0]])), "not positive definite"),
    (dict(m=5, scores=np.ones((100, 3))), "`scores` must have the samples' shape"),
    (dict(m=5, scores=np.full((100, 2), np.nan)), r"score is not finite at 100 sample row\(s\)"),
])
def test_bad_input_names_the_argument(kwargs, match):
    x = np.random.default_rng(5).normal(size=(100, 2))
    kwargs = {"scores": -x, **kwargs}
    m = kwargs.pop("m")
    with pytest.raises(ValueError, match=match):
        stein_thinning(x, None, m, **kwargs)


def test_constant_coordinate_and_identical_draws_are_refused():
    x = np.zeros((50, 2))
    with pytest.raises(ValueError, match="do not vary"):
        stein_thinning(x, None, 5, scores=-x)
    with pytest.raises(ValueError, match="median distance between the draws is 0"):
        thinning_metric(jnp.asarray(x), "med")
    with pytest.raises(ValueError, match="median distance between the draws is 0"):  # the one-program path
        stein_thinning(x, None, 5, scores=-x, standardize=False, preconditioner="sclmed")


@pytest.mark.parametrize("n", [1, 5, 1024, 1025, 3000, 100_000])
def test_two_level_argmin_is_jnp_argmin(n):
    """The greedy pick's argmin (two levels: XLA:CPU's variadic argmin is 20x slower) returns jnp.argmin's
    index, the first minimum, with ties, infinities and a NaN (which ranks first, as in jnp.argmin)."""
    from steinax.diagnostics.thinning import _first_argmin

    rng = np.random.default_rng(n)
    f = jax.jit(_first_argmin)
    for trial in range(12):
        v = rng.integers(0, 5, n).astype(np.float32)
        if trial % 4 == 1:
            v[rng.integers(n, size=2)] = np.nan
        elif trial % 4 == 2:
            v[:] = np.inf
        elif trial % 4 == 3:
            v[rng.integers(n)] = -np.inf
        assert int(f(jnp.asarray(v))) == int(jnp.argmin(jnp.asarray(v)))


def test_cli_thin_writes_the_same_picks_as_the_function(tmp_path, capsys):
    from steinax.interfaces import cli

    x, _ = _biased_gaussian(600, 2, seed=6)
    np.save(tmp_path / "x.npy", x.reshape(2, 300, 2))
    (tmp_path / "tgt.py").write_text("import jax.numpy as jnp\ndef logp(v):\n    return -0.5 * jnp.sum(v ** 2)\n")
    out = tmp_path / "picks.csv"
    assert cli.main(["thin", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "25",
                     "--out", str(out)]) == 0
    assert "25 of 600 draws" in capsys.readouterr().out
    rows = np.genfromtxt(out, delimiter=",", names=True)
    want = stein_thinning(x, lambda v: -0.5 * jnp.sum(v ** 2), 25)
    np.testing.assert_array_equal(rows["index"].astype(int), np.asarray(want.indices))
    np.testing.assert_array_equal(rows["chain"].astype(int), np.asarray(want.indices) // 300)
    assert cli.main(["thin", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "0"]) == 2
    assert "`m` must be a positive integer" in capsys.readouterr().err
