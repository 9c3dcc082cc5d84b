"""Effective sample size of a mean, from one or several chains, and the mean's Monte Carlo standard error.

The multi-chain estimator of Vehtari, Gelman, Simpson, Carpenter & Bürkner, *Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC*, Bayesian Analysis 16
(2021), sec. 3.2 (the ESS of eqs. 10-11 applied to the values themselves, not their ranks: it serves
the standard error of their mean), with Geyer's (1992) initial positive and initial monotone
sequences. For ``m`` chains of ``t`` draws (each split in halves first, so ``2m`` chains of
``t // 2``: a chain that drifts then has halves with different means):

* ``W`` the mean of the chains' variances (``ddof = 1``), ``B / t`` the variance of the chain means
  (``ddof = 1``; 0 for one chain), ``var+ = (t - 1) / t W + B / t``;
* ``rho_k = 1 - (W - mean over chains of the lag-k autocovariance) / var+`` (autocovariances by FFT,
  divided by ``t``): where the chains' means disagree (``B > 0``), ``rho_k`` does not decay to 0 but to
  ``1 - W / var+ > 0``, so such chains get a small ESS even when each one looks well mixed;
* ``P_j = rho_2j + rho_2j+1`` summed while positive (pairs ``j >= 1`` are read while the previous
  pair is positive and ``2j + 2 < t``), made non-increasing (``P_j <- min(P_j, P_j-1)``), plus the even
  term of the first pair not summed where that pair is non-negative or the term is positive;
* ``tau = -1 + 2 sum_j P_j + that term``, at least ``1 / log10(N)``; ``ESS = N / tau``, ``N = 2m (t // 2)``.

These are the details of Stan's implementation, which ArviZ follows; the tests check this one against
``arviz-stats`` to float64 rounding. It is written out here rather than imported because
``arviz-stats`` is an optional extra, and the control variates of the core need it for every chain.

:func:`steinax.stein.gof.integrated_autocorrelation_time` (Sokal's window, each chain about its own
mean) serves a different purpose: a block length for the dependent wild bootstrap. For the standard
error of a mean over chains it is too small when the chains' means differ: over 200 replications of
4 independence-sampler chains of 250 draws (``experiments/diagnostics/control_variates_coverage.py``'s
banana) the plain means' 95% intervals covered 144-173 times with it, 157-189 with this one.
"""

from __future__ import annotations

import numpy as np

from steinax.stein.gof import chain_autocovariance

__all__ = ["effective_sample_size", "mean_standard_error"]


def _as_chains(chains) -> tuple[np.ndarray, bool]:
    x = np.asarray(chains, np.float64)
    if x.ndim not in (2, 3) or x.shape[1] < 4:
        raise ValueError(f"`chains` must have shape [chains, draws >= 4] or [chains, draws >= 4, p]; received shape "
                         f"{x.shape}")
    return (x[..., None], True) if x.ndim == 2 else (x, False)


def _split(x: np.ndarray) -> np.ndarray:
    """Each chain as two: its first and last ``t // 2`` draws (the middle draw of an odd ``t`` left out)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _tau(rho: np.ndarray, t: int, total: int) -> float:
    """The integrated autocorrelation time of one function from its combined autocorrelations ``rho`` ``[t]``."""
    pairs = rho[: 2 * (t // 2)].reshape(-1, 2).sum(axis=1)  # P_j = rho_2j + rho_2j+1
    last = (t - 3) // 2  # pairs j >= 1 are read while 2j + 2 < t
    if not pairs[0] > 0 or last < 1:
        end = 0
    else:
        stops = np.flatnonzero(pairs[1: last + 1] <= 0)
        end = int(stops[0]) + 1 if stops.size else last
    summed = np.minimum.accumulate(pairs[:end]) if end else np.zeros(0)
    even = rho[2 * end]
    extra = even if (pairs[end] >= 0 or even > 0) else 0.0
    return max(-1.0 + 2.0 * float(summed.sum()) + float(extra), 1.0 / np.log10(total))


def effective_sample_size(chains) -> np.ndarray | float:
    """The effective sample size of the mean of ``chains`` ``[c, t]`` (a float) or ``[c, t, p]`` (``[p]``).

    Split chains, the between-chain variance and Geyer's initial monotone sequence (module docstring).
    A function constant over every draw has ``ESS = N``. ``NaN`` values give ``NaN``.

    Raises:
        ValueError: fewer than 4 draws per chain, or not 2 or 3 dimensions.
    """
    x, scalar = _as_chains(chains)
    x = _split(x)
    c, t, p = x.shape
    total = c * t
    acov = chain_autocovariance(x)
    chain_mean = x.mean(axis=1)  # [c, p]
    within = acov[:, 0].mean(axis=0) * t / (t - 1.0)  # W, [p]
    var_plus = within * (t - 1.0) / t + (np.var(chain_mean, axis=0, ddof=1) if c > 1 else 0.0)
    out = np.empty(p)
    for j in range(p):
        col = x[:, :, j]
        if not np.all(np.isfinite(col)):
            out[j] = np.nan
        elif np.max(col) - np.min(col) < np.finfo(np.float64).resolution:
            out[j] = total
        else:
            rho = 1.0 - (within[j] - acov[:, :, j].mean(axis=0)) / var_plus[j]
            rho[0] = 1.0
            out[j] = total / _tau(rho, t, total)
    return float(out[0]) if scalar else out


def mean_standard_error(chains) -> np.ndarray | float:
    """The Monte Carlo standard error of the mean over all draws of ``chains`` (``[c, t]`` or ``[c, t, p]``):
    their standard deviation (``ddof = 1``) over ``sqrt(ESS)`` (:func:`effective_sample_size`)."""
    x, scalar = _as_chains(chains)
    se = x.reshape(-1, x.shape[2]).std(axis=0, ddof=1) / np.sqrt(effective_sample_size(x))
    return float(se[0]) if scalar else se
