"""Separated modes among a correction's draws, and their weights.

Chains of an adjusted kernel are exact in the limit, but a chain rarely or never leaves a mode separated from the
others by a region of low density. Started from particles that split the mass between modes wrongly, the chains keep
that split, or undo it only slowly: the pooled draws are right within each mode and wrong between them, and the split
R-hat across chains stays high. This module names that case and corrects it:

1. **Which draws belong to which mode** (:func:`separated_modes`): a thinned sample of the pooled draws, scaled by
   their sds, is cut into cells by k-means (SciPy's ``kmeans2``, k-means++ starts); cells whose Gaussian fits
   overlap are merged, overlap measured by the Bhattacharyya coefficient ``BC = exp(-D_B)`` (Bhattacharyya 1943),
   ``D_B = (mu_a - mu_b)^T S^-1 (mu_a - mu_b) / 8 + log(det S / sqrt(det S_a det S_b)) / 2``, ``S = (S_a + S_b) / 2``,
   until every pair is separated; every draw then goes to the group whose Gaussian fit gives it the highest
   density. **Decided here:** groups are separated modes when every pair's ``BC < 0.01`` (two unit Gaussians at
   least 6.1 sds apart; the Bayes error of telling them apart is at most ``BC / 2``). One Gaussian, a banana or a
   funnel is cut into cells whose fits overlap, which merge back into one group, and nothing is reweighted.
2. **Whether the chains have converged within the modes** (:func:`within_modes`): each mode's resident chains (at
   least 99% of their draws in it) pass the split R-hat and ESS rules there (the caller's bounds, the ESS bound
   scaled by the mode's share of the chains). Chains that cross between modes add draws to both.
3. **How much mass each mode holds** (:func:`mode_weights`): the normalising constant of the target restricted to
   each mode's region ``A_k`` (the points its Gaussian fit, refitted to the mode's draws, gives the highest density
   among the fits; the draws are relabelled by the same rule), ``Z_k = int_{A_k} p``, by bridge sampling (Meng & Wong 1996, eq. 4.1, the iterative optimal bridge; as in
   Gronau et al. 2017, "A tutorial on bridge sampling", eqs. 9-10) between the mode's draws and as many draws from
   its Gaussian fit, the draws' sample size taken as their count times the pooled draws' effective fraction (bulk
   ESS of the log-density over all draws). The weights are ``Z_k / sum_j Z_j``; the estimate's relative error is the
   approximate one of Fruhwirth-Schnatter (2004, eq. 16; Gronau et al. eq. 17) with the same effective size.

A proposal outside ``A_k`` counts as zero density, so the masses are of a partition of the space and the weighted
answer, ``sum_k (Z_k / Z) E_p[f | A_k]``, is right for any partition, separated or not, as long as each region's
draws are distributed as ``p`` restricted to it (the chains mix within it): a false split (a funnel's neck and mouth
fitted by Gaussians of very different scales) costs precision, not correctness. Only log-density values are used: the score cannot see mixing
proportions of separated modes (Wenliang & Kanagawa 2021), so no Stein discrepancy or Stein weight can correct them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["separated_modes", "within_modes", "mode_weights", "bhattacharyya", "bridge_log_mass", "MAX_OVERLAP"]

MAX_OVERLAP = 0.01
"""The largest Bhattacharyya coefficient between two groups' Gaussian fits for them to count as separate modes."""

_MAX_GROUPS = 16
"""k-means cuts the draws into at most this many cells (with at least ``10 d + 10`` draws each) before merging."""


_FIT_DRAWS = 4000
"""The grouping reads about this many of the pooled draws (each chain thinned evenly)."""


def _thinned(chains: np.ndarray, total: int) -> np.ndarray:
    """``[C, n, d]`` thinned evenly within each chain to about ``total`` draws (at least one per chain), pooled."""
    c, n, d = chains.shape
    idx = np.unique(np.linspace(0, n - 1, max(1, min(n, total // c))).astype(int))
    return chains[:, idx].reshape(-1, d)


def _gaussian_fit(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of ``[n, d]`` draws, the covariance lifted by ``1e-10`` of its trace (a mode whose draws
    span fewer than ``d`` directions still has a density)."""
    mu = draws.mean(axis=0)
    cov = np.atleast_2d(np.cov(draws, rowvar=False))
    d = cov.shape[0]
    return mu, cov + 1e-10 * np.trace(cov) / d * np.eye(d)


def bhattacharyya(mu_a, cov_a, mu_b, cov_b) -> float:
    """The Bhattacharyya coefficient ``exp(-D_B)`` between ``N(mu_a, cov_a)`` and ``N(mu_b, cov_b)`` (module
    docstring): 1 for equal Gaussians, ``exp(-s^2 / 8)`` for unit Gaussians ``s`` apart."""
    s = 0.5 * (np.asarray(cov_a) + np.asarray(cov_b))
    diff = np.asarray(mu_a) - np.asarray(mu_b)
    _, logdet = np.linalg.slogdet(s)
    _, logdet_a = np.linalg.slogdet(cov_a)
    _, logdet_b = np.linalg.slogdet(cov_b)
    # lstsq, not solve: a group of stuck chains (every draw equal) has a singular fit; its logdets are then -inf, the
    # coefficient NaN, and the groups merge (a degenerate fit is no evidence of a separate mode)
    d_b = diff @ np.linalg.lstsq(s, diff, rcond=None)[0] / 8.0 + 0.5 * (logdet - 0.5 * (logdet_a + logdet_b))
    return float(np.exp(-d_b))


def _fits(x: np.ndarray, labels: np.ndarray) -> list:
    return [_gaussian_fit(x[labels == g]) for g in range(int(labels.max()) + 1)]


def _merge_overlapping(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Groups of ``x`` merged (connected components of the pairs whose fits have ``BC >= MAX_OVERLAP``) until every
    pair is separated."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    while labels.max() > 0:
        fits = _fits(x, labels)
        k = len(fits)
        pairs = [(a, b) for a in range(k) for b in range(a + 1, k)
                 if not bhattacharyya(*fits[a], *fits[b]) < MAX_OVERLAP]  # NaN (a degenerate fit) merges too
        if not pairs:
            break
        rows, cols = np.array(pairs).T
        _, comp = connected_components(coo_matrix((np.ones(len(pairs)), (rows, cols)), shape=(k, k)), directed=False)
        labels = comp[labels]
    return labels


def _log_fit_density(x: np.ndarray, fit) -> np.ndarray:
    """``log N(x; mu, cov)`` at the rows of ``x`` (SciPy's); a singular fit (a group of chains that barely moved:
    seen on a centred hierarchy's neck, varying intercept) by its pseudo-inverse, SciPy's ``allow_singular``."""
    from scipy.stats import multivariate_normal

    try:
        return np.atleast_1d(multivariate_normal(*fit).logpdf(x))
    except np.linalg.LinAlgError:
        return np.atleast_1d(multivariate_normal(*fit, allow_singular=True).logpdf(x))


def separated_modes(chains, per_chain: int | None = None, seed: int = 0):
    """Each draw's separated mode (module docstring, item 1): ``[C, m]`` labels ``0..k-1`` for ``chains``
    ``[C, n, d]`` (``m = n``, or each chain thinned evenly to ``per_chain`` draws), or ``None`` where the draws do not
    form two or more separated groups."""
    from scipy.cluster.vq import kmeans2

    x = np.asarray(chains, np.float64)
    if x.ndim != 3:
        raise ValueError(f"`chains` must be [chains, draws, d]; received shape {x.shape}")
    c, n, d = x.shape
    sample = _thinned(x, _FIT_DRAWS)
    if sample.shape[0] < 20 * d + 20:
        return None
    scale = sample.std(axis=0) + 1e-12
    cells = min(_MAX_GROUPS, sample.shape[0] // (10 * d + 10))
    centroids, labels = kmeans2(sample / scale, cells, minit="++", seed=np.random.default_rng(seed))
    sizes = np.bincount(labels, minlength=cells)
    small = sizes < 2 * d + 2  # too few points for a covariance: their points go to the nearest sizeable cell
    if small.all():
        return None
    if small.any():
        far = ((sample / scale)[:, None, :] - centroids[None, ~small, :]) ** 2
        labels = np.where(small[labels], np.flatnonzero(~small)[np.argmin(far.sum(axis=2), axis=1)], labels)
    labels = np.unique(labels, return_inverse=True)[1]
    labels = _merge_overlapping(sample, labels)
    labels = np.unique(labels, return_inverse=True)[1]
    if labels.max() == 0:
        return None
    fits = _fits(sample, labels)
    idx = np.arange(n) if per_chain is None else np.unique(np.linspace(0, n - 1, min(n, per_chain)).astype(int))
    draws = x[:, idx].reshape(-1, d)
    dens = np.stack([_log_fit_density(draws, f) for f in fits])
    found = np.argmax(dens, axis=0)
    if np.count_nonzero(np.bincount(found, minlength=len(fits))) < 2:
        return None
    return np.unique(found, return_inverse=True)[1].reshape(c, idx.size)


def within_modes(chains, labels, rhat_bound: float, min_ess: float) -> dict:
    """Whether the chains have converged within their modes (module docstring, item 2): ``{"resident": [k] chains
    per mode, "rhat": [k], "ess_bulk": [k] (worst coordinates, over resident chains; NaN with fewer than two),
    "converged": bool}``; ``labels`` ``[C, m]`` for ``chains`` ``[C, n, d]`` (``m`` evenly spread draws per chain)."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    x = np.asarray(chains)
    k = int(labels.max()) + 1
    share = np.stack([(labels == g).mean(axis=1) for g in range(k)])  # [k, C]
    resident, rhats, esses = [], [], []
    for g in range(k):
        mine = np.flatnonzero(share[g] >= 0.99)
        resident.append(int(mine.size))
        if mine.size < 2:
            rhats.append(float("nan"))
            esses.append(float("nan"))
            continue
        rhats.append(float(np.max(split_gelman_rubin(x[mine]))))
        esses.append(float(np.min(effective_sample_size(x[mine]))))
    chains_share = share.mean(axis=1)
    converged = all(r <= rhat_bound and e >= min_ess * s for r, e, s in zip(rhats, esses, chains_share))
    return {"resident": resident, "rhat": rhats, "ess_bulk": esses, "converged": bool(converged)}


def bridge_log_mass(logp_draws, logq_draws, logp_proposals, logq_proposals, n_eff: float | None = None,
                    tol: float = 1e-10, max_iter: int = 1000) -> tuple[float, float]:
    """``log Z`` of an unnormalised density ``p`` by the iterative optimal bridge (module docstring, item 2) between
    draws from ``p`` (their ``log p`` and ``log q``) and draws from a normalised ``q`` (theirs); ``n_eff`` is the
    ``p`` side's effective sample size (default: its count). Returns ``(log Z, relative error)``."""
    from scipy.special import logsumexp

    l1 = np.asarray(logp_draws, np.float64) - np.asarray(logq_draws, np.float64)
    l2 = np.asarray(logp_proposals, np.float64) - np.asarray(logq_proposals, np.float64)
    n1 = float(l1.size if n_eff is None else min(n_eff, l1.size))
    n2 = float(l2.size)
    if not (np.all(np.isfinite(l1)) and n1 >= 2 and n2 >= 2):
        raise ValueError("bridge sampling needs finite log-densities at two or more draws of each side")
    l2 = np.where(np.isfinite(l2), l2, -np.inf)  # a proposal outside p's support carries no mass
    log_s1, log_s2 = np.log(n1 / (n1 + n2)), np.log(n2 / (n1 + n2))
    if not np.any(np.isfinite(l2)):
        raise ValueError("bridge sampling needs at least one proposal inside the support of p")
    log_r = float(np.median(l1))
    for _ in range(max_iter):
        num = logsumexp(l2 - np.logaddexp(log_s1 + l2, log_s2 + log_r)) - np.log(l2.size)
        den = logsumexp(-np.logaddexp(log_s1 + l1, log_s2 + log_r)) - np.log(l1.size)
        new = float(num - den)
        if abs(new - log_r) < tol:
            log_r = new
            break
        log_r = new
    # Fruhwirth-Schnatter (2004): f1 = q / (s1 p / Z + s2 q) at the proposals, f2 = p/Z / (s1 p / Z + s2 q) at the
    # draws; RE^2 = Var_q(f1) / (n2 E_q[f1]^2) + Var_p(f2) / (n1 E_p[f2]^2)
    f1 = np.exp(-np.logaddexp(log_s1 + l2 - log_r, log_s2))
    f2 = np.exp(l1 - log_r - np.logaddexp(log_s1 + l1 - log_r, log_s2))
    re2 = np.var(f1) / (n2 * np.mean(f1) ** 2) + np.var(f2) / (n1 * np.mean(f2) ** 2)
    return log_r, float(np.sqrt(re2))


def mode_weights(logdensity_fn, chains, labels, rng_key, max_draws: int = 4000) -> dict:
    """Each mode's share of the target's mass (module docstring, item 3).

    Args:
        logdensity_fn: ``[n, d] -> [n]`` log-densities of the (unnormalised) target, in the chains' coordinates.
        chains: ``[C, n, d]``.
        labels: ``[C, n]`` each draw's mode, as :func:`separated_modes` returns them.
        rng_key: a JAX key, for the proposals.
        max_draws: each mode's draws are thinned evenly to at most this many, and as many proposals are drawn.

    Returns:
        ``{"weights": [k], "log_mass": [k], "relative_error": [k], "draws": [k] draws per mode, "labels": [C, n]
        the partition the masses are of, "evaluations": log-density evaluations spent}``. A draw's weight is its
        mode's weight over the mode's draws under ``labels``.
    """
    import jax
    from numpyro.diagnostics import effective_sample_size

    x = np.asarray(chains, np.float64)
    labels = np.asarray(labels)
    c, n, d = x.shape
    if labels.shape != (c, n):
        raise ValueError(f"`labels` must be [{c}, {n}] (one per draw); received shape {labels.shape}")
    pooled = x.reshape(-1, d)
    k = int(labels.max()) + 1
    fits = [_gaussian_fit(pooled[labels.reshape(-1) == g][::max(1, int(np.sum(labels == g)) // (4 * max_draws))])
            for g in range(k)]

    def region(y):  # the partition: each point to the fit with the highest density (the draws' rule, refitted)
        return np.argmax(np.stack([_log_fit_density(y, f) for f in fits]), axis=0)

    flat = region(pooled)
    every = np.unique(np.linspace(0, n - 1, min(n, 100)).astype(int))  # the pooled draws' effective fraction
    fraction, spent = 1.0, 0  # draws that are not chains (fewer than 4 a chain) count as independent
    if every.size >= 4:
        fraction = min(1.0, float(effective_sample_size(
            np.asarray(logdensity_fn(x[:, every].reshape(-1, d))).reshape(c, every.size, 1))[0]) / (c * every.size))
        spent = c * every.size
    log_mass, rel, counts = np.full(k, -np.inf), np.full(k, np.nan), np.zeros(k, int)
    for g, key in zip(range(k), jax.random.split(rng_key, k)):
        mine = pooled[flat == g]
        counts[g] = mine.shape[0]
        if counts[g] < 2:
            continue
        keep = mine[np.unique(np.linspace(0, mine.shape[0] - 1, min(max_draws, mine.shape[0])).astype(int))]
        props = fits[g][0] + np.asarray(jax.random.normal(key, (keep.shape[0], d)), np.float64) @ np.linalg.cholesky(
            fits[g][1]).T
        logp_keep = np.asarray(logdensity_fn(keep), np.float64)
        logp_props = np.where(region(props) == g, np.asarray(logdensity_fn(props), np.float64), -np.inf)  # p on A_g
        spent += keep.shape[0] + props.shape[0]
        n_eff = max(2.0, min(keep.shape[0], fraction * mine.shape[0]))  # thinning keeps what was effective
        log_mass[g], rel[g] = bridge_log_mass(logp_keep, _log_fit_density(keep, fits[g]), logp_props,
                                              _log_fit_density(props, fits[g]), n_eff=n_eff)
    w = np.exp(log_mass - log_mass.max())
    return {"weights": w / w.sum(), "log_mass": log_mass, "relative_error": rel, "draws": counts,
            "labels": flat.reshape(c, n), "evaluations": spent}
