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

**Rank-normalised** (:func:`rank_nested_rhat`, what ``steinax.sample``'s correction reports): as ArviZ computes it
(``arviz_stats.rhat_nested(method="rank")``, Vehtari et al. 2021's rank normalisation applied to nested R-hat): each
chain split in half (the halves stay in their chain's superchain), the draws of every half pooled and replaced by the
normal quantiles of their ranks (``z = Phi^-1((r - 3/8) / (S + 1/4))``, ties averaged), nested R-hat of those
("bulk") and of the same for ``|x - median|`` ("tail"), the larger. ArviZ loops over coordinates in Python (14 s for
256 chains x 1000 draws x 50 coordinates); this is the same arithmetic vectorised over coordinates, checked against
it to rounding.

:func:`neighbour_superchains` groups chains that start at distinct points into superchains of neighbouring starts.

Checked against a naive loop over the paper's sums and against ArviZ (``tests/diagnostics/test_nested_rhat.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["nested_rhat", "neighbour_superchains", "rank_nested_rhat", "rank_split_rhat"]


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


def rank_nested_rhat(chains, superchain_ids) -> np.ndarray:
    """Rank-normalised split nested R-hat of every coordinate (module docstring), as ``arviz_stats.rhat_nested``.

    Args:
        chains: ``[C, N]`` or ``[C, N, d]`` draws, ``N >= 4``.
        superchain_ids: ``[C]`` integers: chain ``c`` belongs to superchain ``superchain_ids[c]``; every superchain
            holds the same number of chains (at least 2 superchains). A negative id leaves the chain out.

    Returns:
        ``[]`` or ``[d]`` float64: the larger of the bulk and tail nested R-hat per coordinate.
    """
    from scipy.special import ndtri
    from scipy.stats import rankdata

    x = np.asarray(chains, np.float64)
    ids = np.asarray(superchain_ids)
    if x.ndim not in (2, 3) or x.shape[1] < 4:
        raise ValueError(f"`chains` must have shape [C, N >= 4] or [C, N >= 4, d]; received shape {x.shape}")
    if ids.shape != (x.shape[0],) or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"`superchain_ids` must be {x.shape[0]} integers, one per chain; received "
                         f"{ids.dtype} of shape {ids.shape}")
    labels, counts = np.unique(ids[ids >= 0], return_counts=True)
    if labels.size < 2 or counts.min() != counts.max():
        raise ValueError(f"`superchain_ids` must name at least 2 superchains of equal size; received sizes "
                         f"{dict(zip(labels.tolist(), counts.tolist()))}")
    squeeze = x.ndim == 2
    if squeeze:
        x = x[..., None]
    order = np.argsort(np.where(ids >= 0, ids, labels.max() + 1), kind="stable")[: labels.size * counts[0]]
    x = x[order]  # superchain k's chains next to each other
    k, m = labels.size, int(counts[0])
    half = x.shape[1] // 2
    x = np.stack([x[:, :half], x[:, -half:]], axis=1).reshape(k * m * 2, half, x.shape[-1])  # halves stay together

    def z_scale(a):
        flat = a.reshape(-1, a.shape[-1])
        r = rankdata(flat, axis=0, method="average")
        return ndtri((r - 0.375) / (flat.shape[0] + 0.25)).reshape(a.shape)

    bulk = nested_rhat(z_scale(x), superchains=k)
    tail = nested_rhat(z_scale(np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0))), superchains=k)
    out = np.fmax(bulk, tail)
    return out[0] if squeeze else out


def _z_scale(a):
    """Each coordinate's draws (pooled over every chain) replaced by the normal quantiles of their ranks (Vehtari et
    al. 2021, eq. 14: ``Phi^-1((r - 3/8) / (S + 1/4))``, ties averaged)."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    flat = a.reshape(-1, a.shape[-1])
    r = rankdata(flat, axis=0, method="average")
    return ndtri((r - 0.375) / (flat.shape[0] + 0.25)).reshape(a.shape)


def rank_split_rhat(chains) -> np.ndarray:
    """Rank-normalised split R-hat of every coordinate, as ArviZ computes it (``arviz_stats.rhat``, method "rank";
    Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, sec. 4.3), vectorised over coordinates: each chain split
    into its first and last halves (the middle draw dropped where ``N`` is odd), the draws rank-normalised
    (:func:`_z_scale`), classic R-hat ``sqrt(((N - 1) / N W + B / N) / W)`` of those ("bulk") and of the same for
    ``|x - median|`` ("tail"), the larger. It is made for a few long chains: on many short converged chains its
    ``B / N`` term makes it exceed 1.01 often (issue 57), which is why ``steinax.sample`` decides ``ok`` on
    :func:`rank_nested_rhat` and reports this one beside it.

    Args:
        chains: ``[C >= 1, N >= 4]`` or ``[C, N, d]`` draws.

    Returns:
        ``[]`` or ``[d]`` float64.
    """
    x = np.asarray(chains, np.float64)
    if x.ndim not in (2, 3) or x.shape[1] < 4:
        raise ValueError(f"`chains` must have shape [C, N >= 4] or [C, N >= 4, d]; received shape {x.shape}")
    squeeze = x.ndim == 2
    if squeeze:
        x = x[..., None]
    half = x.shape[1] // 2
    x = np.concatenate([x[:, :half], x[:, -half:]], axis=0)  # [2C, N / 2, d]

    def rhat(z):
        n = z.shape[1]
        between = n * z.mean(axis=1).var(axis=0, ddof=1)
        within = z.var(axis=1, ddof=1).mean(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt((between / within + n - 1) / n)

    bulk = rhat(_z_scale(x))
    tail = rhat(_z_scale(np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0))))
    out = np.fmax(bulk, tail)
    return out[0] if squeeze else out


def neighbour_superchains(starts, size: int) -> np.ndarray:
    """Group chains into superchains of about ``size`` chains whose starts are neighbours.

    Nested R-hat wants the chains of a superchain to share their start; chains started at distinct points spread like
    the target (``steinax.sample``'s particles) are grouped instead by recursive balanced bisection: the starts are
    cut at the median of their principal axis, each half again, ``log2 K`` times, ``K`` the largest power of 2 with
    ``C / K >= size`` (``K >= 2``). A superchain is then a compact region of the starts, and chains that have not
    forgotten it keep the superchains' means apart. Groups are trimmed to the smallest one's size (at most ``log2 K``
    chains are left out, id ``-1``).

    Args:
        starts: ``[C, d]`` the chains' starting points (``C >= 4``).
        size: the wanted chains per superchain (``>= 1``).

    Returns:
        ``[C]`` int64 superchain ids (``-1``: left out).
    """
    z = np.asarray(starts, np.float64)
    if z.ndim != 2 or z.shape[0] < 4:
        raise ValueError(f"`starts` must have shape [C >= 4, d]; received shape {z.shape}")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"`size` must be a positive integer; received {size!r}")
    levels = max(1, int(np.floor(np.log2(max(z.shape[0] // size, 2)))))
    groups = [np.arange(z.shape[0])]
    for _ in range(levels):
        split = []
        for g in groups:
            c = z[g] - z[g].mean(axis=0)
            axis = np.linalg.svd(c, full_matrices=False)[2][0] if c.shape[0] > 1 else np.ones(z.shape[1])
            order = g[np.argsort(c @ axis, kind="stable")]
            split += [order[: order.size // 2], order[order.size // 2:]]
        groups = split
    smallest = min(g.size for g in groups)
    ids = np.full(z.shape[0], -1, np.int64)
    for k, g in enumerate(groups):
        ids[g[:smallest]] = k
    return ids
