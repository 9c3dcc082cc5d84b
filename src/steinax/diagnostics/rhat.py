"""Nested R-hat: convergence of many short chains, grouped in superchains (issue 57, a first piece).

Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari & Gelman, *Nested R-hat: assessing the convergence of Markov
chain Monte Carlo when running many short chains*, Bayesian Analysis (2024), sec. 3. Classic R-hat asks each chain to
have a large effective sample size, which many short chains never have even when they are converged; nested R-hat
compares superchains, groups of ``M`` chains that started from the same point, so the spread between chains of one
superchain counts as within-superchain variance. For ``K`` superchains of ``M`` chains of ``N`` draws, ``f_nmk``
(the paper's equations 15-19):

* ``f_.mk`` each chain's mean, ``f_..k`` each superchain's, ``f_...`` their mean;
* ``B = 1 / (K - 1) sum_k (f_..k - f_...)^2`` the between-superchain variance;
* ``W = 1 / K sum_k (B_k + W_k)``, with ``B_k = 1 / (M - 1) sum_m (f_.mk - f_..k)^2`` (0 for ``M = 1``) and
  ``W_k = 1 / M sum_m 1 / (N - 1) sum_n (f_nmk - f_.mk)^2`` (0 for ``N = 1``);
* ``nR = sqrt(1 + B / W)``.

With ``M = 1`` every chain is its own superchain: ``nR = sqrt(1 + B / W)`` is classic (unsplit) R-hat without its
``(N - 1) / N`` factor. The chains need not be long, but the superchains must have started from points spread like
(or over-dispersed relative to) the target: a superchain's chains share their start, so what they have forgotten of
it is measured between superchains. **Not decided here**: the threshold and how ``steinax.sample`` groups its chains
(issue 57 asks for a calibration on exact draws first; the paper's recommendation depends on ``K``, ``M`` and how far
the starts are from the target).

Checked against a naive loop over the paper's sums (``tests/diagnostics/test_nested_rhat.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nested_rhat"]


def nested_rhat(chains, superchains: int) -> np.ndarray:
    """Nested R-hat of every coordinate (module docstring).

    Args:
        chains: ``[C, N]`` or ``[C, N, d]`` draws of ``C`` chains; chains ``k M .. (k + 1) M - 1`` form superchain
            ``k`` (``M = C / superchains``: chains started from the same point next to each other).
        superchains: ``K``, at least 2, dividing ``C``.

    Returns:
        ``[]`` or ``[d]`` float64: ``nR`` per coordinate; NaN where ``W`` is 0 (every draw equal within each
        superchain).

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).standard_normal((64, 10, 2))  # 64 short chains of exact draws
        >>> bool(np.all(nested_rhat(x, superchains=8) < 1.05))
        True
    """
    x = np.asarray(chains, np.float64)
    if x.ndim not in (2, 3) or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"`chains` must have shape [C >= 2, N >= 1] or [C >= 2, N >= 1, d]; received shape {x.shape}")
    if isinstance(superchains, bool) or not isinstance(superchains, (int, np.integer)) or superchains < 2 or \
            x.shape[0] % superchains:
        raise ValueError(f"`superchains` must be an integer >= 2 dividing the {x.shape[0]} chains; received "
                         f"{superchains!r}")
    squeeze = x.ndim == 2
    if squeeze:
        x = x[..., None]
    k = int(superchains)
    c, n, d = x.shape
    m = c // k
    x = x.reshape(k, m, n, d)
    chain_mean = x.mean(axis=2)  # [K, M, d]
    super_mean = chain_mean.mean(axis=1)  # [K, d] (equal chain lengths: the mean of the superchain's draws)
    between = super_mean.var(axis=0, ddof=1)  # [d], eq. 17
    between_chains = chain_mean.var(axis=1, ddof=1) if m > 1 else np.zeros((k, d))  # B_k, eq. 18
    within_chains = x.var(axis=2, ddof=1).mean(axis=1) if n > 1 else np.zeros((k, d))  # W_k, eq. 18
    within = (between_chains + within_chains).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(within > 0, np.sqrt(1.0 + between / np.where(within > 0, within, 1.0)), np.nan)
    return out[0] if squeeze else out
