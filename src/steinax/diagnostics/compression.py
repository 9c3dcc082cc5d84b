"""Compression of biased draws: Stein kernel thinning and its low-rank variant, through ``goodpoints``.

Li, Dwivedi & Mackey, *Debiased Distribution Compression*, ICML 2024. Given draws ``x_1..x_n`` of a
chain that may be biased (burn-in, a sampler with the wrong invariant law, an approximate posterior)
and their scores, debias-then-compress returns a small equal-weighted coreset whose empirical measure
is close to the *target* in the kernel Stein discrepancy:

* ``"skt"`` (Stein kernel thinning, their Algorithm 1 with Stein thinning as the debiasing step):
  greedy Stein thinning (Riabiz et al. 2022) to ``m 2^k >= n`` points, then kernel thinning
  (KT-Split and KT-Swap) to ``m``. ``O(n^2 d)`` time.
* ``"lskt"`` (low-rank SKT): debiasing weights from low-rank kernel approximation and accelerated
  mirror descent (rank ``r``), then KT-Compress++ to ``2^ceil(log4 n)`` points (about ``sqrt(n)``).
  ``O(n r^2 + n r d)`` time.

**Implementation (decided here).** The algorithms are those of the authors' maintained package
``goodpoints`` (its JAX subpackage, ``goodpoints.jax``; optional extra ``steinax[compress]``); this
module only adds what it lacks: the readers of every steinax tool (arrays, chains, DataTrees, NumPyro
sites, scores from the target), argument checks, the coreset as indices, draws and a DataTree group,
and the coreset's KSD from steinax's own Stein kernel. ``goodpoints`` 0.6.3's ``dtc.lskt`` unpacks
KT-Compress++'s index sequence as a ``(weights, support)`` pair and fails; ``"lskt"`` here composes the
same steps (``lr_debias`` with ``num_iter = 7 * out_size``, then ``kt_compresspp`` with
``inflate_size = 4^ceil(log4 n)``) and converts the sequence itself.

**Kernel.** The Langevin Stein kernel of the IMQ base kernel ``(1 + ||x - y||^2 / l^2)^{-1/2}`` with
``l^2`` the median squared distance between at most :data:`~steinax.diagnostics.thinning.MEDIAN_POINTS`
evenly spaced draws (the paper's ``M = I`` and median rule; ``goodpoints``'s ``PrecondSteinKernel``
with ``M = I`` is this kernel), or a positive number ``l^2``. The reported KSDs are squared
V-statistics in that kernel.
"""

from __future__ import annotations

import contextlib
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics.quality import draws_and_scores
from steinax.diagnostics.thinning import Thinning, thinning_metric
from steinax.kernels.base import IMQ
from steinax.stein.ksd import ksd, stein_kernel_matrix

__all__ = ["METHODS", "Compression", "stein_kernel_thinning", "goodpoints_kernel", "weighted_ksd"]

METHODS = ("skt", "lskt")


def _goodpoints():
    """The modules of ``goodpoints.jax`` this tool calls, or an ImportError saying how to install them."""
    try:
        from goodpoints.jax import compress, dtc, lr_debias, rounding
        from goodpoints.jax.kernel import precond_stein
    except ImportError as exc:  # goodpoints itself, or its undeclared dependency qpsolvers
        raise ImportError("stein_kernel_thinning needs the authors' package goodpoints (>= 0.6.3, its JAX "
                          "subpackage) and qpsolvers: pip install goodpoints qpsolvers (the steinax `compress` extra; "
                          f"goodpoints builds Cython extensions: a C compiler is needed); import failed with: {exc}") from exc
    return dtc, compress, lr_debias, rounding, precond_stein


@contextlib.contextmanager
def _goodpoints_context(progress: bool):
    """The context of every goodpoints call: rank promotion allowed (goodpoints relies on it), and, as its
    mirror descent draws a tqdm bar with no switch, unless progress is asked for, its module's
    ``tqdm`` is replaced for the call by one with ``disable=True`` (tqdm reads ``TQDM_DISABLE`` at import only)."""
    from goodpoints.jax import amd

    original = amd.tqdm
    if not progress:
        amd.tqdm = functools.partial(original, disable=True)
    try:
        with jax.numpy_rank_promotion("allow"):  # goodpoints broadcasts by rank promotion
            yield
    finally:
        amd.tqdm = original


def goodpoints_kernel(x, scores, length_scale2: float):
    """``(kernel, points)``: goodpoints' IMQ Stein kernel (``M = I``, ``l^2 = length_scale2``) and its prepared input."""
    *_, precond_stein = _goodpoints()
    d = x.shape[1]
    kernel = precond_stein.PrecondSteinKernel(lambda t: (1.0 + t) ** -0.5, np.eye(d, dtype=np.asarray(x).dtype),
                                              float(length_scale2))
    return kernel, kernel.prepare_input(jnp.asarray(x), jnp.asarray(scores))


def weighted_ksd(x, scores, weights, length_scale2) -> jax.Array:
    """``w^T H w`` over ``w``'s support: the squared KSD of the weighted draws in the module's kernel."""
    w = jnp.asarray(weights, x.dtype)
    support = np.flatnonzero(np.asarray(w) > 0)
    xs, ss, ws = x[support], scores[support], w[support]
    h = stein_kernel_matrix(xs, ss, xs, ss, IMQ(h=length_scale2))
    return ws @ h @ ws


class Compression(Thinning):
    """What :func:`stein_kernel_thinning` returns: a :class:`~steinax.diagnostics.Thinning` (``indices`` with
    repeats, ``points``, ``chain_draw()``, ``to_datatree(tree)``) plus

    Attributes:
        weights: ``[n]`` the coreset as weights on the draws (multiples of ``1 / m``).
        ksd_input: the squared KSD of all the draws, equally weighted (the same kernel), for comparison.
        method: ``"skt"`` or ``"lskt"``.
        length_scale2: the IMQ kernel's ``l^2``.

    ``ksd`` holds one value, the coreset's squared KSD.
    """

    weights: jax.Array = None
    ksd_input: float = 0.0
    method: str = eqx.field(static=True, default="skt")
    length_scale2: float = eqx.field(static=True, default=1.0)

    def summary(self) -> str:
        m = int(self.indices.shape[0])
        distinct = int(np.unique(np.asarray(self.indices)).size)
        return (f"{self.method.upper()} compression: {m} of {self.n} draws ({distinct} distinct; {self.chains} chain(s)); "
                f"IMQ Stein kernel, l^2 = {self.length_scale2:.4g}; squared KSD of the coreset {float(self.ksd[-1]):.4g} "
                f"against {self.ksd_input:.4g} for all the draws")


def stein_kernel_thinning(samples, target, m: int | None = None, *, method: str = "skt", rank: int | None = None,
                          scores=None, length_scale="med", seed: int = 0, var_names=None, dtype=None,
                          progress: bool = False) -> Compression:
    """Compress (possibly biased) draws to a coreset close to the target in KSD (Li et al. 2024; module docstring).

    Args:
        samples: ``[n, d]``, ``[chains, draws, d]``, an ArviZ DataTree or a dict of sites (the readers of
            :func:`steinax.diagnostics.sample_quality`).
        target: a log-density of one ``[d]`` point or a steinax target; ``None`` with ``scores``.
        m: the coreset's size for ``"skt"`` (``1 <= m <= n``; default ``2^ceil(log4 n)``, about ``sqrt(n)``);
            ``"lskt"`` fixes it at ``2^ceil(log4 n)`` and refuses another value.
        method: ``"skt"`` or ``"lskt"``.
        rank: the low-rank debiasing's rank (``"lskt"``; default ``m``, as the paper's LSR/LSC).
        scores: the draws' scores if already computed.
        length_scale: ``"med"`` (default) or a positive number ``l^2``.
        seed: the NumPy seed of goodpoints' randomised steps.
        var_names, dtype: as :func:`~steinax.diagnostics.sample_quality`.
        progress: show goodpoints' progress bar (``"lskt"``'s mirror descent).

    Returns:
        A :class:`Compression`.

    Raises:
        ImportError: goodpoints (or qpsolvers) is not installed.
        ValueError: ``m`` not in ``[1, n]``, an unknown ``method``, a bad ``rank`` or ``length_scale``.
    """
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; received {method!r}")
    dtc, compress, lr_debias, rounding, _ = _goodpoints()  # before any work: a missing package fails first
    x, s, chains = draws_and_scores(samples, target, scores=scores, var_names=var_names, dtype=dtype)
    n = int(x.shape[0])
    if n < 4:
        raise ValueError(f"`samples`: compression needs at least 4 draws; received {n}")
    auto = 2 ** int(np.ceil(np.log(n) / np.log(4) - 1e-12))
    if m is None:
        m = auto
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= n:
        raise ValueError(f"`m` must be an integer in [1, n = {n}]; received {m!r}")
    if method == "lskt" and m != auto:
        raise ValueError(f"`m`: method='lskt' returns 2^ceil(log4 n) = {auto} points for n = {n}; received m = {m} "
                         "(leave m out, or use method='skt')")
    rank = int(m) if rank is None else rank
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= n:
        raise ValueError(f"`rank` must be an integer in [1, n = {n}]; received {rank!r}")
    if isinstance(length_scale, str):
        if length_scale != "med":
            raise ValueError(f"`length_scale` must be 'med' or a positive number; received {length_scale!r}")
        ell2 = float(thinning_metric(x, "med").scale)
    else:
        ell2 = float(length_scale)
        if not (np.isfinite(ell2) and ell2 > 0):
            raise ValueError(f"`length_scale` must be 'med' or a positive number; received {length_scale!r}")
    with _goodpoints_context(True):
        kernel, points = goodpoints_kernel(x, s, ell2)
    rng = np.random.default_rng(seed)
    with _goodpoints_context(progress):
        if method == "skt":
            w, _ = dtc.skt(kernel, points, int(m), seed=seed)
        else:
            w_debias, _, _ = lr_debias.lr_debias(kernel, points, rng, rank=rank, num_iter=7 * int(m))
            seq = compress.kt_compresspp(kernel, points, w_debias, rng, inflate_size=4 ** rounding.log4_ceil(n))
            w, _ = rounding.seq_to_w_supp(np.asarray(seq), n)
    w = np.asarray(w, np.float64)
    counts = np.rint(w * m).astype(int)
    indices = jnp.asarray(np.repeat(np.arange(n), counts))
    weights = jnp.asarray(counts / counts.sum(), x.dtype)
    kernel_ksd = weighted_ksd(x, s, weights, ell2)
    uniform = float(ksd(x, s, IMQ(h=ell2), "v"))
    return Compression(indices=indices, points=x[indices], ksd=jnp.reshape(kernel_ksd, (1,)), n=n, chains=int(chains),
                       preconditioner="med" if isinstance(length_scale, str) else "user", standardize=False,
                       weights=weights, ksd_input=uniform, method=method, length_scale2=ell2)
