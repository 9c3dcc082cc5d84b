"""Stragglers: particles whose log-density lies far below the bulk's, named so a result never hides them.

A particle stuck in a tail or a minor mode (a robust regression's particle 6-12 sds out, at log-density -146 beside
the bulk's -87) moves the mean and the sd without moving the checks that average over particles. Draws of a
``d``-dimensional target spread in ``-log p`` about as a Gaussian's do, ``chi^2_d / 2 = Gamma(d / 2)`` above its
minimum; a particle below the bulk's median log-density by more than that distribution's spread from its median to
its ``1 - level`` quantile (widened where the bulk itself is more spread than a Gaussian's) is a straggler.

**Decided here:** ``level = 1e-6``: with 100 particles a Gaussian target names one by chance once in 10^4 runs;
heavier tails than a Gaussian's name more (measured on the suite's reference draws:
``tests/pipeline/test_stragglers.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["straggler_threshold", "find_stragglers"]


def straggler_threshold(dim: int, level: float = 1e-6) -> float:
    """How far below the bulk's median log-density a particle may lie in ``dim`` dimensions (module docstring)."""
    from scipy.stats import gamma

    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"`dim` must be a positive integer; received {dim!r}")
    if not 0.0 < level < 0.5:
        raise ValueError(f"`level` must be in (0, 0.5); received {level!r}")
    return float(gamma.ppf(1.0 - level, 0.5 * dim) - gamma.ppf(0.5, 0.5 * dim))


def _gaussian_mad(dim: int) -> float:
    """The median absolute deviation of ``Gamma(dim / 2)`` (a Gaussian's ``-log p`` above its minimum)."""
    from scipy.optimize import brentq
    from scipy.stats import gamma

    g = gamma(0.5 * dim)
    med = g.median()
    return float(brentq(lambda m: g.cdf(med + m) - g.cdf(max(med - m, 0.0)) - 0.5, 1e-12, 10.0 * g.std() + 1.0))


def find_stragglers(logdensities, dim: int, level: float = 1e-6) -> np.ndarray:
    """Indices of the particles whose log-density is below the median by more than :func:`straggler_threshold`,
    widened by the bulk's own spread where it is wider than a Gaussian's (the ratio of the log-densities' median
    absolute deviation to ``Gamma(d / 2)``'s: a funnel's draws spread in log-density far more than a Gaussian's, and
    one straggler does not move a median). A non-finite log-density is a straggler too."""
    logd = np.asarray(logdensities, np.float64).reshape(-1)
    finite = np.isfinite(logd)
    if not finite.any():
        return np.arange(logd.size)
    med = np.median(logd[finite])
    widen = max(1.0, float(np.median(np.abs(logd[finite] - med))) / _gaussian_mad(dim))
    return np.flatnonzero(~finite | (logd < med - widen * straggler_threshold(dim, level)))
