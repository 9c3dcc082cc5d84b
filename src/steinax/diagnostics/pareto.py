"""The Pareto ``k``-hat of a function's draws: how heavy their tails are, and so whether their mean has a CLT.

Vehtari, Simpson, Gelman, Yao & Gabry, *Pareto smoothed importance sampling*, JMLR 25 (2024), sec. 3
and 5: fit a generalized Pareto distribution to the ``M`` largest values' exceedances over the next
value; its shape ``k`` is the tail index (``k < 1/2``: the values have a finite variance, so the
plain mean has a CLT and its normal interval is justified; ``k >= 1/2``: the variance is infinite or
the sample cannot tell it from infinite, and the interval's coverage is not controlled). Decided here:

* ``M = floor(3 sqrt(S / r_eff))`` when ``S r_eff > 225``, else ``floor(S / 5)``; with both tails, at
  most ``S // 2`` and at least 5 (the paper's rule and ArviZ's);
* the fit is Zhang & Stephens' (2009) empirical Bayes estimate (``m = 30 + floor(sqrt(M))`` grid points
  ``theta_j = 1 / x_(M) + (1 - sqrt(m / (j - 1/2))) / (3 x_(q))``, ``x_(q)`` the exceedances' lower
  quartile, weighted by their profile likelihoods), with the paper's weak prior on ``k`` (the
  estimate shrunk towards 1/2 by ``10`` pseudo-draws: ``k <- (M k + 10 / 2) / (M + 10)``);
* ``tail="both"`` (default) is the larger of the two tails' ``k``.

The tests check this against ``arviz-stats``' ``pareto_khat`` to float64 rounding. It is written out here
rather than imported because ``arviz-stats`` is an optional extra and the control variates of the core
use it (:mod:`steinax.diagnostics.control_variates`: a basis whose held-out residuals have ``k >= 1/2``
is not chosen).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FINITE_VARIANCE_K", "pareto_khat", "khat_threshold", "importance_khat"]

FINITE_VARIANCE_K = 0.5
"""The tail index below which a function's draws have a finite variance (a mean with a CLT)."""


def khat_threshold(s: int) -> float:
    """``min(1 - 1 / log10(S), 0.7)``: the largest ``k`` at which a mean of ``S`` draws is still reliable (Vehtari et
    al. 2024, sec. 3.2.4: the pre-asymptotic convergence rate of the estimate's error is acceptable below it)."""
    return float(min(1.0 - 1.0 / np.log10(s), 0.7))


def _gpd_shape(exceedances: np.ndarray) -> float:
    """Zhang & Stephens' (2009) estimate of a generalized Pareto shape ``k`` from sorted positive exceedances, with
    the weak prior of Vehtari et al. (2024) (module docstring). ``nan`` when they cannot be fitted."""
    x = exceedances
    n = x.size
    quartile, top = x[int(n / 4 + 0.5) - 1], x[-1]
    if not (quartile > 0 and np.isfinite(top)):
        return np.nan  # a quarter of the tail ties with the cutoff (a chain's repeats), or a non-finite value
    m = 30 + int(np.sqrt(n))
    theta = 1.0 / top + (1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))) / (3.0 * quartile)
    k = np.mean(np.log1p(-theta[:, None] * x[None]), axis=1)  # each theta's profile k
    loglik = n * (np.log(-theta / k) - k - 1.0)
    w = np.exp(loglik - np.max(loglik))
    w = np.where(w >= 10 * np.finfo(float).eps * w.sum(), w, 0.0)
    theta_hat = np.sum(theta * w) / np.sum(w)
    k_hat = np.mean(np.log1p(-theta_hat * x))
    return float((n * k_hat + 10 * 0.5) / (n + 10))


def _tail_size(s: int, r_eff: float, both: bool) -> int:
    m = int(np.floor(3 * np.sqrt(s / r_eff))) if s * r_eff > 225 else int(np.floor(s / 5))
    return max(min(m, s // 2) if both else m, 5)


def pareto_khat(values, *, tail: str = "both", r_eff: float = 1.0) -> np.ndarray:
    """The Pareto ``k``-hat of ``values``' tails (module docstring): ``< 1/2`` (:data:`FINITE_VARIANCE_K`) where their
    mean has a CLT.

    Args:
        values: ``[S]`` or ``[S, p]`` draws of one or ``p`` functions (chains concatenated).
        tail: ``"both"`` (the larger ``k``), ``"right"`` or ``"left"``.
        r_eff: the draws' relative efficiency ``ESS / S`` (sets the tail's length; 1 for independent draws).

    Returns:
        ``[]`` or ``[p]`` float64: each function's ``k``; ``nan`` where the tail cannot be fitted (fewer
        than 5 distinct exceedances, or a quarter of the tail tied with its cutoff); ``-inf`` for a
        constant function (no tail at all).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> bool(pareto_khat(rng.standard_normal(4000)) < 0.3), bool(pareto_khat(rng.standard_t(1.0, 4000)) > 0.7)
        (True, True)
    """
    v = np.asarray(values, np.float64)
    if v.ndim not in (1, 2) or v.shape[0] < 10:
        raise ValueError(f"`values` must have shape [S >= 10] or [S >= 10, p]; received shape {v.shape}")
    if tail not in ("both", "right", "left"):
        raise ValueError(f"`tail` must be 'both', 'right' or 'left'; received {tail!r}")
    if not r_eff > 0:
        raise ValueError(f"`r_eff` must be positive; received {r_eff!r}")
    cols = v[:, None] if v.ndim == 1 else v
    s = cols.shape[0]
    m = _tail_size(s, r_eff, tail == "both")
    signs = {"both": (1.0, -1.0), "right": (1.0,), "left": (-1.0,)}[tail]
    out = np.empty(cols.shape[1])
    for j in range(cols.shape[1]):
        ks = []
        for sign in signs:
            o = np.sort(sign * cols[:, j])
            if o[-1] - o[0] <= 0:
                ks.append(-np.inf)
                continue
            exceed = o[s - m:] - o[s - m - 1]
            ks.append(_gpd_shape(exceed) if np.count_nonzero(exceed) >= 5 else np.nan)
        out[j] = np.nan if np.any(np.isnan(ks)) else max(ks)
    return out[0] if v.ndim == 1 else out


def importance_khat(log_ratios) -> float:
    """The Pareto ``k``-hat of importance weights ``w = exp(log_ratios)`` (``log p - log q`` at draws of a proposal
    ``q``, any additive constant): the right tail of the weights themselves, not of their logarithms (a log-weight
    has an exponential tail whenever the weight has a Pareto one, so ``k`` fitted to log-weights is near 0 for any
    proposal). Vehtari et al. (2024), sec. 3: below :func:`khat_threshold` of the draws the proposal serves as an
    importance sampler. ``inf`` where a ratio is not finite (a draw where the target has no mass, or a NaN), ``nan``
    where fewer than 20 draws are given.

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).standard_normal(4000)   # q = N(0, 1)
        >>> good = -0.5 * (x / 1.1) ** 2 + 0.5 * x**2            # p = N(0, 1.1^2): q is wider-tailed enough
        >>> bad = -0.5 * (x / 2.0) ** 2 + 0.5 * x**2             # p = N(0, 2^2): w's tail has k = 3/4
        >>> bool(importance_khat(good) < 0.3), bool(importance_khat(bad) > 0.6)
        (True, True)
    """
    r = np.asarray(log_ratios, np.float64).reshape(-1)
    if r.size < 20:
        return float("nan")
    if not np.all(np.isfinite(r)):
        return float("inf")
    return float(pareto_khat(np.exp(r - np.max(r)), tail="right"))
