"""Stein thinning: the ``m`` draws of a sample whose empirical measure has the smallest kernel Stein discrepancy.

Riabiz, Chen, Cockayne, Swietach, Niederer, Mackey & Oates, *Optimal thinning of MCMC output*,
JRSS B 84 (2022), Algorithm 1. Given draws ``x_1..x_n`` (any sampler, burn-in included) and their
scores, the greedy rule picks, at step ``t``,

.. math::

    \\pi_t = \\arg\\min_{i} \\; \\tfrac12 k_P(x_i, x_i) + \\sum_{j < t} k_P(x_{\\pi_j}, x_i),

with ``k_P`` the Langevin Stein kernel (:func:`steinax.stein.ksd.stein_kernel_matrix`) of the
inverse multiquadric base kernel in the metric ``Gamma``,
``k(x, y) = (1 + (x - y)^T Gamma^{-1} (x - y))^{-1/2}``. A draw may be picked more than once
(the paper's rule: repeats weight it). After ``t`` picks the squared V-statistic KSD of the picked
points is ``(1/t^2) sum_{a, b <= t} k_P(x_{pi_a}, x_{pi_b})``; the greedy objective at the picked
index is exactly that double sum's increment, so the whole path of KSDs comes at no extra cost.

**Conventions** (those of the authors' package ``stein-thinning`` 0.2.0, so the two select the same
indices; checked in the tests):

* ``standardize=True`` (default): each coordinate is divided by its mean absolute deviation from its
  mean, and the scores multiplied by it, before anything else (a change of variables: the thinning
  then works in standardised coordinates, and the reported KSD is that of the standardised target).
* ``preconditioner`` (``Gamma``, read off the standardised draws): ``"id"`` the identity;
  ``"med"`` ``l^2 I`` with ``l^2`` the median squared distance between distinct pairs of at most
  :data:`MEDIAN_POINTS` evenly spaced draws (:func:`~steinax.kernels.bandwidth.median_squared_distance`:
  with an even number of pairs the mean of the two middle *squared* distances, where the package
  squares the mean of the two middle distances; they differ by ``(a - b)^2 / 4``, far below any
  gap between the greedy objective's values); ``"sclmed"`` that ``l^2`` divided by
  ``log(min(n, MEDIAN_POINTS))``; ``"smpcov"`` the draws' covariance (``ddof = 1``); or a number
  ``c > 0`` (``c I``), a ``[d]`` vector (a diagonal ``Gamma``) or a ``[d, d]`` symmetric positive
  definite matrix.
* A full ``Gamma = Q diag(h) Q^T`` is applied by rotating draws and scores into its eigenbasis (the
  Langevin Stein kernel is invariant under rotations) and using the per-coordinate scale ``h``:
  the Stein kernel's one implementation serves every metric.

**Cost**: ``O(n m d)`` time (one Stein-kernel row per pick, its terms from one
``[3, 2d] x [2d, n]`` product (``[4, 2d]`` for a non-scalar metric) with per-draw constants computed once, under one ``lax.scan``) and ``O(n d)`` memory (the draws; ``O(n)`` beyond them). The reference package also
runs in ``O(n m d)``, one NumPy row at a time.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics.quality import draws_and_scores, posterior_of_tree
from steinax.kernels.bandwidth import median_squared_distance
from steinax.kernels.base import half_imq, imq_fast_path
from steinax.stein.ksd import SteinTerms, stein_kernel_from_terms

__all__ = ["PRECONDITIONERS", "MEDIAN_POINTS", "Preconditioner", "thinning_metric", "standardization", "Thinning", "stein_thinning",
           "greedy_stein_indices"]

PRECONDITIONERS = ("id", "med", "sclmed", "smpcov")
MEDIAN_POINTS = 1000
"""The median length-scale rules read at most this many evenly spaced draws (as the reference package)."""


class Preconditioner(eqx.Module):
    """The kernel's metric ``Gamma = Q diag(h) Q^T``: ``rotation`` ``Q`` (``None`` when ``Gamma`` is diagonal)
    and ``scale`` ``h`` (a scalar or ``[d]``)."""

    rotation: jax.Array | None
    scale: jax.Array
    name: str = eqx.field(static=True)

    def apply(self, x: jax.Array, scores: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Draws and scores in ``Gamma``'s eigenbasis (unchanged when ``Gamma`` is diagonal)."""
        if self.rotation is None:
            return x, scores
        return x @ self.rotation, scores @ self.rotation


def _evenly_spaced(x, count: int):
    n = x.shape[0]
    return x if n <= count else x[np.linspace(0, n - 1, count).astype(int)]


def thinning_metric(x: jax.Array, rule="med") -> Preconditioner:
    """The metric ``Gamma`` of the thinning kernel from draws ``x`` ``[n, d]`` and a rule (module docstring).

    Raises:
        ValueError: an unknown rule; a median of zero (fewer than two distinct draws); a singular
            sample covariance; a matrix that is not ``[d, d]`` symmetric positive definite.
    """
    n, d = x.shape
    if isinstance(rule, str):
        if rule not in PRECONDITIONERS:
            raise ValueError(f"`preconditioner` must be one of {PRECONDITIONERS}, a positive number, a [d] vector "
                             f"or a [d, d] matrix; received {rule!r}")
        if rule == "id":
            return Preconditioner(None, jnp.ones((), x.dtype), rule)
        if rule in ("med", "sclmed"):
            med2 = _median_scale(x, rule)
            _check_median(med2, rule)
            return Preconditioner(None, med2, rule)
        if n < 2:
            raise ValueError(f"`preconditioner='smpcov'` needs at least 2 draws; received {n}")
        return _from_matrix(jnp.cov(x, rowvar=False).reshape(d, d), "smpcov", "the draws' sample covariance")
    gamma = jnp.asarray(rule, x.dtype)
    if gamma.ndim == 0 or gamma.shape == (d,):
        if not bool(jnp.all(jnp.isfinite(gamma) & (gamma > 0))):
            raise ValueError(f"`preconditioner` as a number or [d] vector must be positive and finite; received "
                             f"{np.asarray(gamma)!r}")
        return Preconditioner(None, gamma, "user")
    if gamma.shape != (d, d):
        raise ValueError(f"`preconditioner` as an array must be a scalar, [d] = [{d}] or [d, d] = [{d}, {d}]; "
                         f"received shape {tuple(gamma.shape)}")
    if not bool(jnp.allclose(gamma, gamma.T, rtol=1e-6, atol=0.0)):
        raise ValueError("`preconditioner` as a [d, d] matrix must be symmetric")
    return _from_matrix(gamma, "user", "`preconditioner`")


def _median_scale(x, rule: str):
    """``l^2`` of the ``"med"`` rule, divided by ``log(min(n, MEDIAN_POINTS))`` for ``"sclmed"`` (module docstring)."""
    med2 = median_squared_distance(_evenly_spaced(x, MEDIAN_POINTS))
    if rule == "sclmed":
        med2 = med2 / jnp.log(jnp.asarray(min(x.shape[0], MEDIAN_POINTS), x.dtype))
    return med2


def _check_median(med2, rule):
    if not float(np.asarray(med2)) > 0:
        raise ValueError(f"`preconditioner={rule!r}`: the median distance between the draws is 0 (fewer "
                         "than two distinct draws among those read); pass a number instead")


def _from_matrix(gamma, name, what):
    eigenvalues, rotation = jnp.linalg.eigh(0.5 * (gamma + gamma.T))
    if not bool(jnp.all(jnp.isfinite(eigenvalues)) and eigenvalues[0] > 0):
        raise ValueError(f"{what} is not positive definite (smallest eigenvalue {float(eigenvalues[0]):.3g}); "
                         "use 'med' or a diagonal preconditioner")
    return Preconditioner(rotation, eigenvalues, name)


@jax.jit
def _mean_absolute_deviation(x):
    return jnp.mean(jnp.abs(x - jnp.mean(x, axis=0, keepdims=True)), axis=0)


def standardization(x: jax.Array) -> jax.Array:
    """Per-coordinate scale: the mean absolute deviation from the mean (the reference package's ``standardize``)."""
    scl = _mean_absolute_deviation(x)
    _check_standardization(scl)
    return scl


def _check_standardization(scl):
    scl = np.asarray(scl)  # on the host: a check compiles nothing
    if not bool(np.all(scl > 0)):
        raise ValueError(f"`standardize=True`: coordinates {np.flatnonzero(scl <= 0)[:5].tolist()} "
                         "(first five) do not vary over the draws; pass standardize=False")


def _first_argmin(v: jax.Array, width: int = 1024) -> jax.Array:
    """``jnp.argmin(v)`` (the first minimum) in two levels: the minimum of each ``width``-row, then the first
    row holding the overall minimum, then its first position there. A NaN ranks as ``-inf`` (the first of
    them is returned; XLA:CPU's row minimum would skip it); the greedy objective is finite, its scores checked.

    XLA:CPU lowers ``argmin`` to a variadic reduction that is not vectorised: 0.46 ms for 10^5 values
    against 0.02 ms for this (2 cores), and a greedy pick is one argmin of ``n`` values."""
    n = v.shape[0]
    if n <= width:
        return jnp.argmin(v)
    v = jnp.where(jnp.isnan(v), -jnp.inf, v)
    r = jnp.concatenate([v, jnp.full((-n % width,), jnp.inf, v.dtype)]).reshape(-1, width)
    b = jnp.argmin(jnp.min(r, axis=1))
    return b * width + jnp.argmin(r[b])


@eqx.filter_jit
def greedy_stein_indices(x: jax.Array, scores: jax.Array, m: int, scale, kernel=None):
    """The greedy rule of Riabiz et al. (2022), Algorithm 1 (module docstring), on prepared draws.

    Args:
        x, scores: ``[n, d]`` draws and scores, already standardised and rotated (the kernel's metric
            then diagonal: ``scale``).
        m: picks.
        scale: ``h``, a scalar or ``[d]``: the Stein kernel's ``sum_d (x_d - y_d)^2 / h_d``.
        kernel: the base kernel's profile, default ``IMQ(1, -1/2)``.

    Returns:
        ``(indices [m], ksd [m])``: the picks in order and the squared V-statistic KSD of the first
        ``t`` picks, ``t = 1..m``.
    """
    default = kernel is None
    m, d = int(m), x.shape[1]
    x = x - jnp.mean(x, axis=0, keepdims=True)  # the Stein kernel is translation invariant; centred rows cancel less
    scalar = jnp.ndim(scale) == 0
    # with a scalar h the terms are those of h = 1 rescaled (SteinTerms.rescale): three products, not four
    inv_h = jnp.ones((d,), x.dtype) if scalar else jnp.broadcast_to(1.0 / jnp.asarray(scale, x.dtype), (d,))
    inv_h_sum = jnp.sum(inv_h)
    # per-draw constants, once: sum_d x^2/h, sum_d x^2/h^2, (x/h)^T s; then each pick's SteinTerms against all
    # draws (stein_terms' definitions, expanded) come from one [n, 2d] x [2d, 4] product ([2d, 3] for a scalar h)
    a = jnp.sum(x * x * inv_h[None], axis=1)
    b = None if scalar else jnp.sum(x * x * (inv_h * inv_h)[None], axis=1)  # a scalar h: sq2 is sqdist
    c = jnp.sum(x * scores * inv_h[None], axis=1)
    xs_t = jnp.concatenate([x, scores], axis=1).T  # [2d, n]: each pick's products as one [3 or 4, 2d] x [2d, n]
    zeros = jnp.zeros(x.shape[0], x.dtype)
    rescale = (lambda t: t.rescale(jnp.asarray(scale, x.dtype))) if scalar else (lambda t: t)

    def greedy(kernel):
        # k_P(x_i, x_i): the one formula (SteinTerms.coefficients) at zero distance
        diag = stein_kernel_from_terms(kernel, rescale(SteinTerms(zeros, jnp.sum(scores * scores, axis=1), zeros,
                                                                  zeros, inv_h_sum)))

        def row_terms(j):
            xj, sj, zd = x[j], scores[j], jnp.zeros((d,), x.dtype)
            rows = [jnp.concatenate([xj * inv_h, zd]), jnp.concatenate([zd, sj]),
                    jnp.concatenate([sj * inv_h, xj * inv_h])]
            p = jnp.stack(rows if scalar else rows + [jnp.concatenate([xj * inv_h * inv_h, zd])]) @ xs_t
            sqdist = jnp.maximum(a[j] + a - 2.0 * p[0], 0.0)
            sq2 = sqdist if scalar else jnp.maximum(b[j] + b - 2.0 * p[3], 0.0)
            # ((x_j - x_i)/h)^T (s_i - s_j), as stein_terms' cross with x_j the row
            return rescale(SteinTerms(sqdist, p[1], p[2] - c[j] - c, sq2, inv_h_sum))

        def pick(carry, _):
            objective, total = carry
            j = _first_argmin(objective)
            total = total + objective[j]  # = k(x_j, x_j) + 2 sum over earlier picks: the double sum's increment
            return (objective + 2.0 * stein_kernel_from_terms(kernel, row_terms(j)), total), (j, total)

        return jax.lax.scan(pick, (diag, jnp.zeros((), x.dtype)), None, length=m)[1]

    # the default IMQ(1, -1/2) is known here: one branch (an rsqrt), not imq_fast_path's two, to compile
    indices, totals = greedy(half_imq(x.dtype)) if default else imq_fast_path(kernel, greedy)
    t = jnp.arange(1, m + 1, dtype=x.dtype)
    return indices, totals / (t * t)


@eqx.filter_jit
def _thin_diagonal(x, s, m: int, rule: str, standardize: bool):
    """:func:`stein_thinning`'s steps for the rules ``"id"``, ``"med"``, ``"sclmed"`` as one program:
    ``(indices, picked draws, ksd path, standardisation scale, metric scale)``; the scales are checked by the
    caller (a zero makes the picks meaningless, not the program fail)."""
    scl = _mean_absolute_deviation(x) if standardize else jnp.ones((x.shape[1],), x.dtype)
    z, t = x / scl[None], s * scl[None]
    scale = jnp.ones((), x.dtype) if rule == "id" else _median_scale(z, rule)
    indices, path = greedy_stein_indices(z, t, m, scale)
    return indices, x[indices], path, scl, scale


@jax.jit
def _rows(x, indices):
    return x[indices]


class Thinning(eqx.Module):
    """What :func:`stein_thinning` returns.

    Attributes:
        indices: ``[m]`` the picked rows of the draws (chains laid one after another, chain-major), in
            the order picked; a row may repeat.
        points: ``[m, d]`` the picked draws (for a NumPyro target with named draws: unconstrained).
        ksd: ``[m]`` the squared V-statistic KSD of the first ``t`` picks, ``t = 1..m``, in the
            thinning's kernel (standardised coordinates, metric ``Gamma``).
        n: draws read.
        chains: chains among them (draws per chain ``n // chains``).
        preconditioner: the metric's rule.
        standardize: whether coordinates were standardised.
    """

    indices: jax.Array
    points: jax.Array
    ksd: jax.Array
    n: int = eqx.field(static=True)
    chains: int = eqx.field(static=True)
    preconditioner: str = eqx.field(static=True)
    standardize: bool = eqx.field(static=True)

    def summary(self) -> str:
        m = int(self.indices.shape[0])
        distinct = int(np.unique(np.asarray(self.indices)).size)
        space = "coordinates divided by their mean absolute deviation" if self.standardize else "raw coordinates"
        return (f"Stein thinning: {m} of {self.n} draws ({distinct} distinct; {self.chains} chain(s)); squared KSD of "
                f"the thinned set {float(self.ksd[-1]):.4g} (after 1 pick {float(self.ksd[0]):.4g}) in the thinning's "
                f"own kernel: IMQ(1, -1/2) in the metric {self.preconditioner!r} on {space}. Not comparable with "
                "`steinax ksd` / sample_quality, whose IMQ kernels act on the raw coordinates")

    def __str__(self) -> str:
        return self.summary()

    def chain_draw(self) -> tuple[np.ndarray, np.ndarray]:
        """``(chain, draw)`` of every pick."""
        per_chain = self.n // self.chains
        idx = np.asarray(self.indices)
        return idx // per_chain, idx % per_chain

    def to_datatree(self, tree, group: str = "thinned"):
        """``tree`` (an ArviZ DataTree with a ``posterior`` group) with the picks as a new group ``group``.

        The new group holds every posterior variable at the picked ``(chain, draw)`` pairs as one chain
        of ``m`` draws, with the source chain and draw as coordinates ``source_chain`` and
        ``source_draw``. The input is not modified.
        """
        import xarray as xr

        post, _, _ = posterior_of_tree(tree, self.n, "the thinning read")
        c, d = self.chain_draw()
        pick = post.isel(chain=xr.DataArray(c, dims="pick"), draw=xr.DataArray(d, dims="pick"))
        pick = pick.drop_vars(["chain", "draw"], errors="ignore").rename({"pick": "draw"})
        pick = pick.assign_coords(draw=np.arange(c.size), source_chain=("draw", post["chain"].values[c]),
                                  source_draw=("draw", post["draw"].values[d])).expand_dims(chain=[0])
        pick.attrs = {"steinax_thinning": f"preconditioner={self.preconditioner}, standardize={self.standardize}"}
        out = tree.copy()
        out[group] = xr.DataTree(pick)
        return out


def stein_thinning(samples, target, m: int, *, scores=None, preconditioner="med", standardize: bool = True,
                   var_names=None, dtype=None) -> Thinning:
    """Pick ``m`` of the draws by Stein thinning (Riabiz et al. 2022, Algorithm 1; module docstring).

    Args:
        samples: ``[n, d]``, ``[chains, draws, d]``, an ArviZ DataTree or a dict of sites (the readers
            of :func:`steinax.diagnostics.sample_quality`; a NumPyro target maps named draws to its
            unconstrained space).
        target: a log-density of one ``[d]`` point or a steinax target; ``None`` with ``scores``.
        m: how many picks (``1 <= m``; more than ``n`` is allowed, as picks may repeat, but is refused
            as almost surely a mistake).
        scores: the draws' scores if already computed (laid out as ``samples``).
        preconditioner: ``"med"`` (default), ``"sclmed"``, ``"smpcov"``, ``"id"``, a number, a ``[d]``
            vector or a ``[d, d]`` matrix (``Gamma``, module docstring).
        standardize: divide coordinates by their mean absolute deviation first (default, as the
            reference package).
        var_names: posterior variables to use (DataTrees and dicts).
        dtype: default float64 with ``jax_enable_x64``, else float32.

    Returns:
        A :class:`Thinning` (``.indices``, ``.points``, ``.ksd``; ``.to_datatree(tree)``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (2000, 2)) + 3.0   # a biased sample of N(0, I)
        >>> x = jnp.concatenate([x[:200], jax.random.normal(jax.random.key(1), (1800, 2))])
        >>> th = stein_thinning(x, lambda z: -0.5 * jnp.sum(z ** 2), 50)
        >>> bool((th.indices >= 200).mean() > 0.9)   # the burn-in is left out
        True
    """
    x, s, chains = draws_and_scores(samples, target, scores=scores, var_names=var_names, dtype=dtype)
    n = x.shape[0]
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"`m` must be a positive integer; received {m!r}")
    if m > n:
        raise ValueError(f"`m` = {m} is larger than the number of draws n = {n}; picks may repeat, but asking "
                         "for more points than draws is almost surely a mistake")
    if isinstance(preconditioner, str) and preconditioner in ("id", "med", "sclmed"):
        # diagonal metrics read off the draws: preparation and picks in one compiled call (one compilation,
        # a third of the first call's time at n = 10^5), the checks on what it returns
        indices, points, path, scl, scale = _thin_diagonal(x, s, m, preconditioner, bool(standardize))
        if standardize:
            _check_standardization(scl)
        if preconditioner != "id":
            _check_median(scale, preconditioner)
        name = preconditioner
    else:
        z, t = x, s
        if standardize:
            scl = standardization(x)
            z, t = x / scl[None], s * scl[None]
        pre = thinning_metric(z, preconditioner)
        z, t = pre.apply(z, t)
        indices, path = greedy_stein_indices(z, t, m, pre.scale)
        points = _rows(x, indices)  # compiled: an eager x[indices] compiles five programs to normalise the indices
        name = pre.name if isinstance(preconditioner, str) else "user"
    return Thinning(indices=indices, points=points, ksd=path, n=int(n), chains=int(chains), preconditioner=name,
                    standardize=bool(standardize))
