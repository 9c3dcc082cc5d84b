"""A collapse (under-dispersion) check that needs no ground truth: Stein identities with linear test functions.

For a target ``p`` with score ``s = grad log p`` and any constant ``c``, integration by parts
(the Stein identity ``E[s(x) g(x)^T + grad g(x)] = 0`` with ``g(x) = x - c``) gives

.. math::

    M = -E_p\\left[ s(x) (x - c)^T \\right] = I.

From particles (or any draws) ``x_i`` with scores ``s_i`` the estimate is
``M_hat = -(1 / (n - 1)) sum_i s_i (x_i - xbar)^T``. Two parts of it are read:

* **The spread ratio** ``T_k = M_hat_kk``. For a Gaussian target,
  ``T_k = var_particles(x_k) / var_p(x_k)`` exactly when the particles' mean is right
  (``s = -P (x - mu)``): it is the **squared sd ratio**, the quantity collapse shrinks,
  estimated with no ground truth. For other targets it is a scale-sensitive identity that
  still equals 1 in expectation, and is below 1 when the particles sit too close to a mode.
  The check reads ``median_k T_k``.
* **The cross terms** ``M_hat_kl``, ``k != l``, each divided by its own standard error
  (the sample sd of ``s_ik (x_il - xbar_l)`` over ``sqrt(n)``): their mean square
  ``cross`` is about 1 for draws from ``p``. Methods whose kernel acts on one coordinate
  at a time (CC-SVGD) satisfy the diagonal identities **by construction** at their
  fixed points (the linear function of each coordinate is in their kernel's span; Liu &
  Wang 2018 show the same for any kernel with linear features), so on a correlated
  target they collapse to the conditional variances while every ``T_k`` reads 1;
  the cross terms are not in their span and expose it.

**Decision rule** (documented thresholds; calibrated in
``experiments/posteriors/diagnostic_calibration.py`` on 200 disjoint 100-draw subsets of
every reference of :mod:`steinax.posteriors`): the particles are flagged **collapsed** when

* ``median_k T_k < SPREAD_THRESHOLD`` (0.7; an sd ratio of 0.84 on a Gaussian) **and** the
  bootstrap upper 99% bound of ``median_k T_k`` (over resampled particles) is below 1,
  so noisy identities on heavy-tailed targets do not flag exact draws; or
* ``cross > CROSS_THRESHOLD`` (see the constant).

What it does not see: a mean in the wrong place with the right spread (use the KSD),
missing modes (a particle set in one mode satisfies the identities of that mode), and
over-dispersion is reported (``T_k > 1``) but not flagged. A pass is no proof of
correctness; a flag is evidence of under-dispersion that the particles themselves give.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SpreadCheck", "spread_check", "SPREAD_THRESHOLD", "CROSS_THRESHOLD"]

SPREAD_THRESHOLD = 0.7
"""Flag when ``median_k T_k`` is below this (and significantly below 1): an sd ratio of ``sqrt(0.7) = 0.84``."""
CROSS_THRESHOLD = 4.0
"""Flag when the cross terms' mean squared z-score exceeds this (about 1 for draws from the target)."""
UPPER_QUANTILE = 0.99
"""The bootstrap bound's quantile (a 98% two-sided interval). At 0.975 the rule flagged 3.5% of exact 100-draw
subsets of the banana and 4.0% of the separated mixture; at 0.99, 1.0% and 2.5%, leaving room for the
relaxation check's 1% in the suite's ``flagged`` (either check; at most 5% in all)."""
CROSS_MIN_DIM = 3
"""Below this dimension the cross statistic (a mean of ``d (d - 1)`` squared z-scores) is too noisy to read:
on the 2-D banana and mixture it flagged 6.5% of exact 100-draw subsets (NaN there)."""


class SpreadCheck(eqx.Module):
    """What :func:`spread_check` returns.

    Attributes:
        ratio: ``[d]`` the per-coordinate identities ``T_k`` (the squared sd ratio for a Gaussian target).
        median_ratio: ``median_k T_k``.
        upper: the bootstrap upper 99% bound of ``median_k T_k``.
        sd_ratio: ``sqrt(max(median_ratio, 0))``, the implied median sd ratio (exact for Gaussian targets).
        cross: mean squared z-score of the off-diagonal identities (NaN when ``d < 3``).
        collapsed: the decision (module docstring).
    """

    ratio: jax.Array
    median_ratio: float
    upper: float
    sd_ratio: float
    cross: float
    collapsed: bool

    def summary(self) -> str:
        verdict = ("COLLAPSED: the particles are under-dispersed (the Stein identities with linear test functions "
                   "fail); more particles, another method, or NUTS" if self.collapsed else "no collapse detected")
        return (f"spread: median T_k = {self.median_ratio:.3f} (implied sd ratio {self.sd_ratio:.3f}, upper bound "
                f"{self.upper:.3f}); cross-coordinate mean z^2 = {self.cross:.2f} -> {verdict}")


@jax.jit
def _spread_ratios(particles, scores, weights):
    """``T`` ``[B, d]`` for bootstrap count vectors ``weights`` ``[B, n]`` (a row of ones: the sample itself)."""
    n = particles.shape[0]
    w = weights / n
    mean = w @ particles  # [B, d]
    # T_k = -(n / (n - 1)) sum_i w_i s_ik (x_ik - xbar_k)
    return -(w @ (scores * particles) - mean * (w @ scores)) * (n / (n - 1))


@jax.jit
def _cross(particles, scores):
    """Mean squared z-score of ``M_hat_kl``, ``k != l``, on the sample (matrix products: no ``[n, d, d]`` tensor)."""
    n, d = particles.shape
    if d < CROSS_MIN_DIM:
        return jnp.asarray(jnp.nan, particles.dtype)
    xc = particles - jnp.mean(particles, axis=0, keepdims=True)
    m1 = -(scores.T @ xc) / n                     # E[u_kl], u_ikl = -s_ik xc_il
    m2 = ((scores * scores).T @ (xc * xc)) / n    # E[u_kl^2]
    var = jnp.maximum(m2 - m1 * m1, jnp.finfo(particles.dtype).tiny)
    z2 = m1 * m1 / (var / (n - 1))
    off = ~jnp.eye(d, dtype=bool)
    return jnp.sum(jnp.where(off, z2, 0.0)) / (d * (d - 1))


def spread_check(particles, scores, *, n_bootstrap: int = 200, rng_key: jax.Array | None = None) -> SpreadCheck:
    """Check particles (or draws) for collapse using only their scores (module docstring).

    Args:
        particles: ``[n, d]``, ``n >= 3``.
        scores: ``[n, d]``, ``grad log p`` at the particles.
        n_bootstrap: resamples for the upper bound of ``median_k T_k``.
        rng_key: for the bootstrap (default ``jax.random.key(0)``: deterministic).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (100, 5))
        >>> spread_check(x, -x).collapsed, spread_check(0.3 * x, -0.3 * x).collapsed
        (False, True)
    """
    from steinax._validation import check_particles, check_scores

    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    n = particles.shape[0]
    if n < 3:
        raise ValueError(f"`particles` must have at least 3 rows for the spread check; received {n}")
    from steinax.diagnostics._checks import host_rng

    rng_key = jax.random.key(0) if rng_key is None else rng_key
    counts = host_rng(rng_key).multinomial(n, np.full(n, 1.0 / n), size=int(n_bootstrap))  # resamples of the rows
    weights = np.concatenate([np.ones((1, n)), counts]).astype(particles.dtype)
    t = _spread_ratios(particles, scores, jnp.asarray(weights))
    med = np.median(np.asarray(t, np.float64), axis=1)
    median_ratio, upper = float(med[0]), float(np.quantile(med[1:], UPPER_QUANTILE))
    cross = float(_cross(particles, scores))
    collapsed = (median_ratio < SPREAD_THRESHOLD and upper < 1.0) or (np.isfinite(cross) and cross > CROSS_THRESHOLD)
    return SpreadCheck(ratio=t[0], median_ratio=median_ratio, upper=upper, sd_ratio=float(np.sqrt(max(median_ratio, 0.0))),
                       cross=cross, collapsed=bool(collapsed))
