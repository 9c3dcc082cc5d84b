"""Stein kernel thinning through goodpoints (Li, Dwivedi & Mackey 2024): the adapter against the package itself."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("goodpoints.jax.dtc", reason="the optional extra steinax[compress] (goodpoints, qpsolvers)")

from goodpoints.jax.dtc import skt  # noqa: E402
from goodpoints.jax.mmd import compute_mmd  # noqa: E402

from steinax.diagnostics import stein_thinning  # noqa: E402
from steinax.diagnostics.compression import goodpoints_kernel, stein_kernel_thinning  # noqa: E402


def _logp(z):
    return -0.5 * jnp.sum(z**2)


def _biased_chain(n=512, burn=64, seed=0):
    """N(0, I_2) draws after a burn-in that starts at (4, 4) and decays: the sample a chain hands over."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    x[:burn] += 4.0 * np.exp(-np.arange(burn) / 16.0)[:, None]
    return x


@pytest.mark.slow  # ~16 s (goodpoints compiles its own kernels): CI's slow pass runs it
def test_skt_is_goodpoints_skt_and_its_ksd_is_goodpoints_mmd():
    """float64, n = 512: the coreset is goodpoints.jax.dtc.skt's (same kernel, same seed) weight for weight, and
    steinax's squared KSD of it equals goodpoints' compute_mmd to 1e-10 relative (two sums of 32^2 Stein
    kernel values of size ~1: rounding is ~1e-15)."""
    x = _biased_chain()
    with jax.enable_x64(True):
        c = stein_kernel_thinning(x, _logp, 32, seed=3)
        with jax.numpy_rank_promotion("allow"):  # goodpoints broadcasts by rank promotion
            kernel, points = goodpoints_kernel(jnp.asarray(x), -jnp.asarray(x), c.length_scale2)
            w, _ = skt(kernel, points, 32, seed=3)
            mmd = float(compute_mmd(kernel, points, jnp.asarray(c.weights)))
    np.testing.assert_array_equal(np.asarray(c.weights), np.asarray(w))
    assert c.indices.shape == (32,) and float(c.weights.sum()) == pytest.approx(1.0)
    np.testing.assert_allclose(float(c.ksd[0]), mmd, rtol=1e-10)


@pytest.mark.slow  # about 40 s (goodpoints' mirror descent and Compress++ compile): CI's slow pass
def test_lskt_returns_sqrt_n_points_and_debiases_the_burn_in():
    """LSKT on the biased chain: 2^ceil(log4 512) = 32 points; its KSD is below standard thinning's
    (every 16th draw) and below that of all 512 draws (the burn-in's bias is removed)."""
    x = _biased_chain()
    c = stein_kernel_thinning(x, _logp, method="lskt", seed=0)
    assert c.indices.shape == (32,) and c.method == "lskt"
    from steinax.diagnostics.compression import weighted_ksd

    xs, ss = jnp.asarray(x, jnp.float32), -jnp.asarray(x, jnp.float32)
    standard = np.zeros(512)
    standard[::16] = 1.0 / 32
    assert float(c.ksd[0]) < float(weighted_ksd(xs, ss, standard, c.length_scale2))
    assert float(c.ksd[0]) < c.ksd_input


@pytest.mark.slow  # about 15 s: CI's slow pass
def test_skt_beats_stein_thinning_at_the_same_size():
    """SKT (Stein thinning to 512 points, then kernel thinning to 32) against greedy Stein thinning to 32 in the
    same kernel: the paper's claim that kernel thinning improves on greedy selection, on this chain."""
    x = _biased_chain(seed=1)
    c = stein_kernel_thinning(x, _logp, 32, seed=0)
    th = stein_thinning(x, _logp, 32, preconditioner=c.length_scale2, standardize=False)
    assert float(c.ksd[0]) < float(th.ksd[-1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(m=0), "`m` must be an integer in"),
    (dict(m=600), "`m` must be an integer in"),
    (dict(method="kt"), "`method` must be one of"),
    (dict(method="lskt", m=10), "returns 2\\^ceil"),
    (dict(method="lskt", rank=0), "`rank`"),
    (dict(length_scale=-1.0), "`length_scale`"),
    (dict(length_scale="wide"), "`length_scale`"),
])
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        stein_kernel_thinning(_biased_chain(), _logp, **kwargs)


def test_missing_goodpoints_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "goodpoints.jax", None)  # as if goodpoints were not installed
    # steinax is not on PyPI: the message names the packages to install, and the extra for a checkout
    with pytest.raises(ImportError, match=r"pip install goodpoints qpsolvers \(the steinax `compress` extra"):
        stein_kernel_thinning(_biased_chain(), _logp, 8)
