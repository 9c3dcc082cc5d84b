"""How far a set of draws is from a posterior's reference (:class:`steinax.posteriors.Reference`).

All errors are in units of the reference's per-coordinate sd, in the target's (unconstrained) space:

* ``mean_error_max`` / ``mean_error_median``: ``|mean(x_k) - mu_k| / sd_k`` over coordinates.
  (For ``n`` exact draws each is about ``|N(0, 1/n)|``: 0.08 median, and about 0.25 as a max over 100
  coordinates, at ``n = 100``.)
* ``sd_ratio_median`` / ``sd_ratio_min``: ``sd(x_k) / sd_k`` (ddof 1); below 1 is under-dispersion.
* ``sinkhorn``: the entropic optimal-transport divergence (ott-jax, squared Euclidean cost,
  ``epsilon`` = the mean cost) between the draws and the reference draws, both standardised by
  the reference's mean and sd; debiased (Sinkhorn divergence), so about 0 for draws from the reference.
  ``NaN`` when ott-jax is not installed. At ``n = 100`` and ``d >= 25`` it is dominated by sampling noise and
  under-rewards spread (German credit, d = 25: 100 exact draws 0.50, the same shrunk to 0.8 sd 0.43):
  read the sd ratio first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BIAS_THRESHOLD", "bias_of_estimates", "cost_to_threshold", "posterior_errors", "reference_moments", "sinkhorn_divergence",
           "squared_bias", "whitened_covariance"]

BIAS_THRESHOLD = 0.01
"""The samplers' yardstick (Robnik, Cohn-Gordon & Seljak, MAMS, arXiv 2503.01707, and the MCLMC papers before it):
a run has converged to a fixed accuracy once the squared bias of its estimate of ``E[x^2]`` stays below 0.01, about
what an effective sample size of 100 gives (the squared bias of a mean of ``n`` independent draws is ``1 / n`` in these
units)."""


def sinkhorn_divergence(x, y, relative_epsilon: float = 1.0) -> float:
    """Debiased Sinkhorn divergence between point clouds ``x`` ``[n, d]`` and ``y`` ``[m, d]`` (uniform weights)."""
    try:
        from ott.geometry import pointcloud
        from ott.tools import sinkhorn_divergence as sd
    except ImportError:
        return float("nan")
    import jax
    import jax.numpy as jnp

    x, y = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    with jax.numpy_rank_promotion("allow"):  # ott broadcasts implicitly
        out = sd.sinkhorn_divergence(pointcloud.PointCloud, x, y, epsilon=relative_epsilon, relative_epsilon="mean")
    value = out[0] if isinstance(out, tuple) else out.divergence
    return float(value)


def whitened_covariance(draws, cov) -> np.ndarray:
    """``L^{-1} C L^{-T}``: the draws' sample covariance ``C`` (ddof 1) whitened by ``cov = L L^T`` ``[d, d]``.

    The identity for a perfect cloud; its eigenvalues' square roots are the draws' sds along the
    target's principal axes in target sds, so they expose a wrong dependence between coordinates that
    per-coordinate sd ratios miss. ``n`` exact draws spread about 1 too (Marchenko-Pastur: roughly
    ``1 +- sqrt(d / n)``), so compare with exact draws of the same size.
    """
    x = np.asarray(draws, np.float64)
    w = np.linalg.inv(np.linalg.cholesky(np.asarray(cov, np.float64)))
    return w @ np.cov(x.T).reshape(x.shape[1], x.shape[1]) @ w.T


def posterior_errors(draws, reference) -> dict:
    """The metrics of the module docstring for ``draws`` ``[n, d]`` against ``reference``."""
    x = np.asarray(draws, np.float64)
    mean, sd = np.asarray(reference.mean, np.float64), np.asarray(reference.sd, np.float64)
    err = np.abs(x.mean(0) - mean) / sd
    ratio = x.std(0, ddof=1) / sd
    z, zr = (x - mean) / sd, (np.asarray(reference.draws, np.float64) - mean) / sd
    return {
        "mean_error_max": float(err.max()), "mean_error_median": float(np.median(err)),
        "sd_ratio_median": float(np.median(ratio)), "sd_ratio_min": float(ratio.min()),
        "sinkhorn": sinkhorn_divergence(z, zr),
    }


def reference_moments(reference) -> dict:
    """The moments the yardstick needs, from ``reference`` (:class:`steinax.posteriors.Reference`), per coordinate:
    ``E[x]`` and ``Var[x]`` (the reference's mean and sd), ``E[x^2] = E[x]^2 + Var[x]``, and ``Var[x^2]``.

    **Decided here:** the mean and sd come from the reference's full run (or quadrature, or a closed form); its
    stored draws are thinned (1000 of 20,000) and, where the moments are exact, can be off them (Brownian motion's NUTS
    draws: sd ratio 0.84 in one coordinate). So ``E[x^2]`` is not taken from the draws, and ``Var[x^2]`` (only a unit)
    is computed from the draws moved and rescaled to the reference's mean and sd per coordinate (their shape kept).
    The reference's own Monte Carlo error in ``E[x^2]`` is a squared bias of about ``1 / ESS`` of its run (its
    ``meta["min_ess_bulk"]``; about 1e-3 for the suite's NUTS references): a tenth of :data:`BIAS_THRESHOLD`."""
    x = np.asarray(reference.draws, np.float64)
    mean, sd = np.asarray(reference.mean, np.float64), np.asarray(reference.sd, np.float64)
    spread = x.std(axis=0, ddof=1)
    moved = mean + (x - x.mean(axis=0)) * np.where(spread > 0, sd / np.where(spread > 0, spread, 1.0), 0.0)
    return {"mean": mean, "var": sd**2, "mean2": mean**2 + sd**2, "var2": np.var(moved**2, axis=0, ddof=1)}


def squared_bias(draws, moments: dict, weights=None) -> dict:
    """Per-coordinate squared biases of the estimates from ``draws`` ``[n, d]`` (weighted by ``weights`` ``[n]``
    where given), in the yardstick's units (:data:`BIAS_THRESHOLD`):

    ``b2_x[i] = (E_hat[x_i] - E[x_i])^2 / Var[x_i]`` and ``b2_x2[i] = (E_hat[x_i^2] - E[x_i^2])^2 / Var[x_i^2]``,

    ``moments`` as :func:`reference_moments` returns them. Returns ``{"x": [d], "x2": [d]}``; the papers report the
    mean over coordinates and the worst (max) coordinate.

    Example:
        >>> import numpy as np
        >>> m = {"mean": np.zeros(2), "var": np.ones(2), "mean2": np.ones(2), "var2": 2 * np.ones(2)}
        >>> b = squared_bias(np.array([[1.0, 1.0], [-1.0, 3.0]]), m)
        >>> b["x"].tolist(), b["x2"].tolist()  # means (0, 2); second moments (1, 5)
        ([0.0, 4.0], [0.0, 8.0])
    """
    x = np.asarray(draws, np.float64)
    if x.ndim != 2 or x.shape[1] != np.shape(moments["mean"])[0]:
        raise ValueError(f"`draws` must be [n, {np.shape(moments['mean'])[0]}]; received shape {x.shape}")
    w = np.full(x.shape[0], 1.0 / x.shape[0]) if weights is None else np.asarray(weights, np.float64)
    if w.shape != (x.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"`weights` must be [{x.shape[0]}] finite, non-negative, not all zero; received "
                         f"{np.shape(weights)}")
    w = w / w.sum()
    return bias_of_estimates(w @ x, w @ x**2, moments)


def bias_of_estimates(mean, mean2, moments: dict) -> dict:
    """The yardstick's formula, in one place: ``{"x": (mean - E[x])^2 / Var[x], "x2": (mean2 - E[x^2])^2 /
    Var[x^2]}`` per coordinate, for estimates ``mean`` and ``mean2`` of ``E[x]`` and ``E[x^2]`` (``[..., d]``: NumPy
    or JAX arrays, so the samplers' traces compute it inside their compiled loops)."""
    return {"x": (mean - moments["mean"]) ** 2 / moments["var"],
            "x2": (mean2 - moments["mean2"]) ** 2 / moments["var2"]}


def cost_to_threshold(costs, values, threshold: float = BIAS_THRESHOLD) -> float:
    """The cost at which ``values`` (a trace, one per entry of the increasing ``costs``) falls below ``threshold``
    and stays below it to the end of the trace: the yardstick's "gradient evaluations to a fixed accuracy". ``inf``
    where the last value is not below it (not reached within the trace).

    Example:
        >>> cost_to_threshold([10, 20, 30, 40], [0.5, 0.005, 0.02, 0.004])   # dips at 20, stays from 40
        40.0
    """
    c, v = np.asarray(costs, np.float64), np.asarray(values, np.float64)
    if c.ndim != 1 or c.shape != v.shape or c.size == 0:
        raise ValueError(f"`costs` and `values` must be 1-D of one length; received shapes {c.shape} and {v.shape}")
    if np.any(np.diff(c) < 0):
        raise ValueError("`costs` must be non-decreasing (the cost spent up to each entry of the trace)")
    above = ~(v < threshold)  # NaN counts as above
    if above[-1]:
        return float("inf")
    last_above = np.flatnonzero(above)
    return float(c[0] if last_above.size == 0 else c[last_above[-1] + 1])
