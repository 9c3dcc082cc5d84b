"""Complete-conditional SVGD (CC-SVGD; Singhal, Lahlou & Ranganath, arXiv 1904.04478, Lemma 3 / Algorithm 1).

Each coordinate ``i`` moves by a univariate kernel on that coordinate with the
**joint** score (ALGORITHMS.md section B):

.. math::

    \\phi_i(x) = \\frac{1}{n} \\sum_l \\left[ k(x_{l,i}, x_i)\\, \\partial_i \\log p(x_l)
                 + \\partial_{x_{l,i}} k(x_{l,i}, x_i) \\right],

which is SVGD with the diagonal matrix-valued kernel ``diag_i k(x_i, x'_i)``.
Coordinate ``i`` is therefore exactly the one-dimensional SVGD direction of
column ``i`` with score column ``i``; steinax computes it with the SVGD
engine (:func:`steinax.particles.svgd.stein_direction_rows`), one coordinate at
a time (:func:`steinax.kernels.base.map_coordinates`, shared with KCC-SD), so
memory is one ``[n, n]`` matrix, or ``d`` of them batched while ``n^2 d`` is small.

The kernel is resolved **per coordinate**: a median rule reads only that
coordinate's values. The default ``RBF("per_dimension")`` gives Pyro's
``h_i = median_{a<b} (x_{a,i} - x_{b,i})^2 / log(n + 1)`` (its ``mode="univariate"``).
A fixed bandwidth (a float, or a ``[d]`` vector) is used as given.

**Kernel sums** (``sums="auto"``, the default). For the RBF kernel with the
``"per_dimension"`` rule or a fixed bandwidth, a coordinate's two sums are
evaluated by Chebyshev interpolation of the univariate kernel
(:mod:`steinax.kernels.interpolation`): ``O(n D)`` work instead of ``n^2``
exponentials. The degree ``D`` is chosen at run time from a fixed ladder, the
smallest whose a-priori bound keeps every kernel value within the dtype's unit
roundoff on every coordinate; a coordinate that no degree covers (data spread over
very many bandwidths) is summed directly. The result therefore equals the direct
sums to float tolerance. The interpolation is used where it is cheaper (``D + 1 <= n / 4``);
``sums="direct"`` always sums directly. Other kernels and rules sum directly.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel, as_kernel, check_coordinate_scale, map_coordinates
from steinax.kernels.interpolation import interpolated_rbf_sums, omega_limit
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.svgd import _svgd, kernel_info

__all__ = ["cc_svgd_direction", "CCSVGD", "cc_svgd"]


SUMS = ("auto", "direct")
_LADDER = (31, 47, 63, 79, 95, 119, 151, 191, 255, 383, 511)  # about 1.25x apart: a ladder step costs ~0.3 s of compilation


def _check_sums(sums):
    if sums not in SUMS:
        raise ValueError(f"`sums` must be one of {SUMS}; received {sums!r}")


def _interpolates(kernel, n: int, sums: str) -> bool:
    return sums == "auto" and isinstance(kernel, RBF) and kernel.rule in (None, "per_dimension") and n >= 128


@eqx.filter_jit
def _cc_svgd(particles, scores, kernel, block_size=None, sums="auto"):
    """``(phi, per-coordinate bandwidths)``; the kernel sums as the module docstring says."""
    if _interpolates(kernel, particles.shape[0], sums):
        h = kernel.resolve(particles).scale
        check_coordinate_scale(h, particles.shape[1])
        h = jnp.broadcast_to(h, (particles.shape[1],))
        return _cc_svgd_interpolated(particles, scores, h, block_size), h

    def one(col, score_col, kernel_i):
        phi, k = _coordinate_direction(col, score_col, kernel_i, block_size)
        return phi, kernel_info(k).get("bandwidth", jnp.zeros((), particles.dtype))

    phi_t, bandwidths = map_coordinates(one, particles, scores, kernel)
    return phi_t.T, bandwidths


def _coordinate_direction(col, score_col, kernel_i, block_size):
    """``(phi [n], resolved kernel)``: one coordinate's direction summed directly, the 1-D SVGD direction of Lemma 3."""
    phi, k = _svgd(col, score_col, kernel_i, block_size)
    return phi[:, 0], k


_CHUNK = 10  # coordinates per degree choice (at most 16 chunks): measured 12% faster than one degree for all at d = 100


def _cc_svgd_interpolated(particles, scores, h, block_size, chunk=None):
    """Lemma 3 with every coordinate's sums interpolated (:func:`~steinax.kernels.interpolation.interpolated_rbf_sums`).

    Coordinate ``i``: ``sum_l k(x_li, x_mi) s_li + sum_l d/dx_li k(x_li, x_mi)``, where
    ``d/dx_l k(x_l, x_m) = (2 / sqrt(h)) g(x_m, x_l)``. The coordinates are sorted by
    ``omega`` and taken ``chunk`` at a time (``lax.map``; default ``_CHUNK``, or ``d / 16``
    for large ``d``); each chunk's degree is the
    smallest of the ladder (``D + 1 <= n / 4``) whose bound covers its largest
    ``omega``, so a few wide coordinates do not set every coordinate's degree.
    Coordinates beyond the largest degree are summed directly.
    """
    n, d = particles.shape
    dtype = particles.dtype
    ladder = [deg for deg in _LADDER if 4 * (deg + 1) <= n]
    limits = jnp.asarray([omega_limit(deg, jnp.dtype(dtype).name) for deg in ladder], dtype)
    xt = particles.T
    lo, hi = jnp.min(xt, axis=1), jnp.max(xt, axis=1)
    half = 0.5 * (hi - lo)
    spread = half > 0
    t = jnp.where(spread[:, None], jnp.clip((xt - (lo + half)[:, None]) / jnp.where(spread, half, 1)[:, None], -1, 1), 0)
    # omega rounds by a few ulps; the margin keeps the check on the safe side of the bound
    omega = jax.lax.stop_gradient(half * half / h) * (1 + 16 * jnp.finfo(dtype).eps)
    # chunks of coordinates in increasing omega; the padding repeats the widest coordinate (the last chunk's own)
    chunk = min(d, max(_CHUNK, -(-d // 16)) if chunk is None else chunk)
    n_chunks = -(-d // chunk)
    order = jnp.concatenate([jnp.argsort(omega), jnp.full((n_chunks * chunk - d,), jnp.argmax(omega))])
    branches = [functools.partial(interpolated_rbf_sums, degree=deg) for deg in ladder]

    def one_chunk(args):
        t_c, omega_c, v_c, c_c = args
        pick = jnp.minimum(jnp.sum(jnp.max(omega_c) > limits), len(ladder) - 1)
        return jax.lax.switch(pick, branches, t_c, omega_c, v_c, c_c), omega_c <= limits[pick]

    def chunked(a):
        return a[order].reshape((n_chunks, chunk) + a.shape[1:])

    sums_c, covered_c = jax.lax.map(one_chunk, (chunked(t), chunked(omega), chunked(scores.T), chunked(2 / jnp.sqrt(h))))
    # back to the coordinates' order: the inverse of the sort (the padding, after place d, is dropped)
    back = jnp.zeros((d,), jnp.int32).at[order[:d]].set(jnp.arange(d, dtype=jnp.int32))
    sums, covered = sums_c.reshape(-1, n)[back], covered_c.reshape(-1)[back]

    def direct(sums):
        def one(args):
            ok, col, score_col, h_i, row = args
            return jax.lax.cond(ok, lambda: row,
                                lambda: _coordinate_direction(col[:, None], score_col[:, None], RBF(h_i), block_size)[0] * n)

        return jax.lax.map(one, (covered, xt, scores.T, h, sums))

    sums = jax.lax.cond(jnp.all(covered), lambda s: s, direct, sums)
    return sums.T / n


def cc_svgd_direction(
    particles: jax.Array,
    scores: jax.Array,
    kernel: AbstractKernel | None = None,
    *,
    block_size: int | None = None,
    sums: str = "auto",
) -> jax.Array:
    """CC-SVGD direction (KCC-SD paper, Lemma 3), ``[n, d]``; default kernel ``RBF("per_dimension")``.

    ``block_size`` bounds each coordinate's direct pairwise work to O(block_size * n)
    memory. ``sums``: ``"auto"`` (interpolated kernel sums where they are accurate to
    unit roundoff, see the module docstring) or ``"direct"``.
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_block_size(block_size)
    _check_sums(sums)
    return _cc_svgd(particles, scores, as_kernel(kernel, RBF("per_dimension")), block_size, sums)[0]


class CCSVGD(AbstractParticleMethod):
    """CC-SVGD as a particle method (see :func:`cc_svgd`)."""

    kernel: AbstractKernel
    block_size: int | None = None
    sums: str = eqx.field(default="auto", static=True)

    def __check_init__(self):
        as_kernel(self.kernel, None)
        check_block_size(self.block_size)
        _check_sums(self.sums)

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        phi, bandwidths = _cc_svgd(particles, scores, self.kernel, self.block_size, self.sums)
        return phi, aux, {"bandwidth": jnp.mean(bandwidths)}


def cc_svgd(kernel: AbstractKernel | None = None, *, block_size: int | None = None, sums: str = "auto") -> CCSVGD:
    """Complete-conditional SVGD with a univariate kernel per coordinate.

    Args:
        kernel: the univariate base kernel: ``RBF("per_dimension")`` (default,
            per-coordinate median), ``RBF(h)`` with a float or a ``[d]`` vector of
            fixed bandwidths, any median rule (applied per coordinate), or ``IMQ``.
        block_size: rows per block in each coordinate's direct pairwise work (large ``n``).
        sums: ``"auto"`` (default): RBF kernel sums by Chebyshev interpolation where
            its a-priori error bound is within unit roundoff (module docstring);
            ``"direct"``: every pair summed.
    """
    return CCSVGD(kernel=as_kernel(kernel, RBF("per_dimension")), block_size=block_size, sums=sums)
