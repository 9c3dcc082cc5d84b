"""KSD importance weights (Liu & Lee 2017): the simplex QP against SciPy, debiasing, DataTree output, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.diagnostics import importance
from steinax.diagnostics.importance import simplex_qp, stein_importance_weights
from steinax.kernels import IMQ
from steinax.stein.ksd import stein_kernel_matrix


def test_simplex_qp_reaches_scipys_minimum():
    """The QP ``min w^T H w`` on the simplex for a 40-draw Stein kernel matrix, against SciPy's SLSQP from the
    same start (float64): our objective is no larger than SLSQP's + 1e-9 relative (SLSQP's own tolerance 1e-12),
    and the KKT conditions hold (the gradient is minimal and equal on the support)."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2)) * 0.7 + 0.4
    with jax.enable_x64(True):
        h = np.asarray(stein_kernel_matrix(jnp.asarray(x), jnp.asarray(-x), jnp.asarray(x), jnp.asarray(-x), IMQ()))
        w, f, it, ok = simplex_qp(jnp.asarray(h), 20000, 1e-12)
    ref = minimize(lambda v: v @ h @ v, np.full(40, 1 / 40), jac=lambda v: 2 * h @ v, method="SLSQP",
                   bounds=[(0, 1)] * 40, constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}],
                   options={"ftol": 1e-14, "maxiter": 1000})
    assert bool(ok) and ref.success
    assert float(f) <= ref.fun * (1 + 1e-9)
    g = 2 * h @ np.asarray(w)
    support = np.asarray(w) > 1e-6
    assert np.ptp(g[support]) < 1e-5 * np.abs(g).max() and g[~support].min() >= g[support].max() - 1e-5 * np.abs(g).max()


def test_weights_debias_a_shifted_proposal():
    """Draws of N(0.5, 0.8^2) weighted for N(0, 1): the weighted mean and second moment are closer to 0 and 1
    than the unweighted ones (deterministic: fixed draws), and the weighted KSD is below the uniform one."""
    x = (0.8 * np.random.default_rng(1).normal(size=(400, 1)) + 0.5).astype(np.float32)
    iw = stein_importance_weights(x, lambda z: -0.5 * jnp.sum(z**2))
    assert iw.converged and iw.ksd < 0.2 * iw.ksd_uniform
    m1, m2 = float(iw.expectation(x[:, 0])), float(iw.expectation(x[:, 0] ** 2))
    assert abs(m1) < 0.3 * abs(x.mean()) and abs(m2 - 1.0) < 0.5 * abs((x**2).mean() - 1.0)
    assert 1.0 <= iw.ess <= 400 and "effective sample size" in iw.summary()


def test_weights_go_back_into_a_datatree():
    from arviz_base import from_dict

    x = np.random.default_rng(2).normal(size=(2, 50, 2)).astype(np.float32)
    tree = from_dict({"posterior": {"theta": x}})
    iw = stein_importance_weights(x, None, scores=-x)
    out = iw.to_datatree(tree)
    np.testing.assert_allclose(out["sample_stats"]["stein_weight"].values.ravel(), np.asarray(iw.weights))
    assert out["sample_stats"]["stein_weight"].dims == ("chain", "draw") and "sample_stats" not in tree.children


def test_bad_input_names_the_argument(monkeypatch):
    x = np.random.default_rng(3).normal(size=(30, 2)).astype(np.float32)
    iw = stein_importance_weights(x, None, scores=-x)
    with pytest.raises(ValueError, match="`values` must have 30 rows"):
        iw.expectation(np.ones(29))
    with pytest.raises(ValueError, match="`max_iter` must be a positive integer"):
        stein_importance_weights(x, None, scores=-x, max_iter=0)
    with pytest.raises(ValueError, match="`tol`"):
        stein_importance_weights(x, None, scores=-x, tol=float("nan"))
    monkeypatch.setattr(importance, "MAX_DRAWS", 20)
    with pytest.raises(ValueError, match="more than MAX_DRAWS = 20"):
        stein_importance_weights(x, None, scores=-x)
    with pytest.raises(ValueError, match="at least 2 draws"):
        stein_importance_weights(x[:1], None, scores=-x[:1])


def test_overflowing_stein_matrix_is_a_clear_error():
    x = np.random.default_rng(4).normal(size=(20, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="cannot be computed"):
        stein_importance_weights(x, None, scores=np.full_like(x, 3e38))
