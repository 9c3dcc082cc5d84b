"""Univariate RBF kernel sums by Chebyshev interpolation, with an a-priori error bound.

The complete-conditional methods sum a univariate Gaussian kernel over all pairs of
particles in every coordinate: ``n^2 d`` exponentials, ``d`` times the work of an
SVGD step. In one dimension the kernel is smooth on the whole data range, so it has
a low-rank form. On coordinate ``c`` map the values to ``t = (x - centre) / half`` in
``[-1, 1]`` and write ``omega = half^2 / h``; then

.. math::

    k(x_a, x_b) = \\exp(-\\omega (t_a - t_b)^2)
      \\approx \\sum_{p, q} \\ell_p(t_a)\\, k(z_p, z_q)\\, \\ell_q(t_b),

the tensor-product interpolant in the ``N = D + 1`` Chebyshev points of the first
kind ``z_q``, with ``\\ell_q`` the Lagrange basis in barycentric form
(Berrut & Trefethen 2004, eq. 4.2; first-kind weights ``(-1)^q \\sin((2q + 1)\\pi / 2N)``).
A kernel sum ``sum_b k(x_a, x_b) v_b`` then costs ``O(n N)``, not ``O(n^2)``:
moments ``sum_b \\ell_q(t_b) v_b``, an ``N x N`` product, and an evaluation
(:func:`interpolated_rbf_sums`, CC-SVGD); a double sum ``sum_ab v_a k(x_a, x_b) u_b`` is a
bilinear form of two moments (:func:`interpolated_rbf_forms`, KCC-SD).

**Error bound** (decided here, used by every caller). The kernel is entire; on the
Bernstein ellipse ``E_rho`` in one variable (the other real, in ``[-1, 1]``)
``|exp(-omega (z - y)^2)| <= exp(omega b^2)`` with ``b = (rho - 1/rho) / 2``. By
Trefethen, *Approximation Theory and Approximation Practice* (ATAP), Theorem 8.2
(whose aliasing argument holds for first-kind points too), one variable's
interpolant errs by at most ``eps_1 = 4 M rho^-D / (rho - 1)``; interpolating the
second variable multiplies the error by at most ``1 + Lambda_D``, the Lebesgue
constant, ``Lambda_D <= (2 / pi) log(D + 1) + 1`` (ATAP Theorem 15.2). So every
kernel value is within ``(2 + (2/pi) log(D + 1)) eps_1`` of the exact one, minimised
over ``rho``. :func:`omega_limit` inverts this bound: the largest ``omega`` for which
degree ``D`` keeps every kernel value within the dtype's unit roundoff (``2^-24`` in
float32), the rounding error of evaluating the exponential itself. Callers use the
interpolant only there and sum directly elsewhere, so the result equals the direct
sum to float tolerance.

The same holds for ``g(x_a, x_b) = ((x_a - x_b) / sqrt(h)) k(x_a, x_b)``, the kernel's
derivative up to the factor ``-2 / sqrt(h)``: with ``w = sqrt(omega) (z - y) = r + i s``,
``|g| = |w| exp(s^2 - r^2) <= (1 / sqrt(2e) + sqrt(omega) b) exp(omega b^2)`` on the
ellipse (``|r| exp(-r^2) <= 1 / sqrt(2e)``, ``|s| <= sqrt(omega) b``).
:func:`omega_limit` uses the larger of the two ``M``. KCC-SD's second-derivative term
needs ``g2(x_a, x_b) = ((x_a - x_b)^2 / h) k`` too: ``|g2| = |w|^2 exp(s^2 - r^2) <=
(1 / e + omega b^2) exp(omega b^2)`` (``r^2 exp(-r^2) <= 1 / e``), used with ``second=True``.

On CPU every pass below is one fused reduction over the last axis (about 0.2 ns per
term). No two passes share a broadcast operand (XLA would write it out, a
``[d, n, N]`` array), so each broadcasts ``t`` along a different order of axes.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from steinax.kernels.base import RBF, check_coordinate_scale

__all__ = ["chebyshev_nodes", "omega_limit", "interpolated_rbf_sums", "interpolated_rbf_forms", "scaled_coordinates", "by_degree", "LADDER", "SUMS", "check_sums", "interpolates", "coordinate_bandwidths", "fill_uncovered"]


def chebyshev_nodes(degree: int) -> tuple[np.ndarray, np.ndarray]:
    """First-kind Chebyshev points ``z_q = cos((2q + 1) pi / 2N)`` (``N = degree + 1``) and their barycentric weights.

    The points are built as ``sin`` of an odd-symmetric grid, so ``z[N - 1 - q] = -z[q]``
    exactly. No point is ``+-1``, so the extreme particles, which map to ``+-1``,
    never coincide with a node.
    """
    count = degree + 1
    q = np.arange(count)
    z = np.sin(np.pi * (count - 1 - 2 * q) / (2 * count))
    w = np.where(q % 2 == 0, 1.0, -1.0) * np.sin((2 * q + 1) * np.pi / (2 * count))
    return z, w


_G_PEAK = 1.0 / math.sqrt(2.0 * math.e)  # max of |r| exp(-r^2) over real r


_LOG_RHO = np.geomspace(1e-4, 8.0, 2000)  # the bound holds for every rho > 1; its minimum over this grid is used


def _log_bound(degree: int, omega: float, second: bool = False) -> float:
    """log of the tensor-interpolation error bound of the module docstring, minimised over ``rho``."""
    lebesgue = 1.0 + (2.0 / math.pi) * math.log(degree + 1)
    rho = np.exp(_LOG_RHO)
    b = 0.5 * (rho - 1.0 / rho)
    factor = np.maximum(1.0, _G_PEAK + math.sqrt(omega) * b)
    if second:
        factor = np.maximum(factor, 1.0 / math.e + omega * b * b)
    log_m = omega * b * b + np.log(factor)
    best = np.min(math.log(4.0) + log_m - degree * _LOG_RHO - np.log(rho - 1.0))
    return math.log(1.0 + lebesgue) + float(best)


@functools.lru_cache(maxsize=None)
def omega_limit(degree: int, dtype_name: str, second: bool = False) -> float:
    """Largest ``omega = half^2 / h`` for which degree ``degree`` interpolates ``k`` and ``g`` to unit roundoff.

    ``dtype_name``: ``"float32"`` or ``"float64"`` (unit roundoff ``2^-24`` or ``2^-53``).
    ``second``: also ``g2`` (see the module docstring). Bisection on the monotone bound.
    """
    log_tol = math.log(0.5 * float(np.finfo(np.dtype(dtype_name)).eps))
    lo, hi = 0.0, float(degree) ** 2
    if _log_bound(degree, 1e-12, second) > log_tol:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _log_bound(degree, mid, second) <= log_tol else (lo, mid)
    return lo


def _barycentric_denominators(t: jax.Array, z: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(t, sigma)`` with ``sigma_a = sum_q w_q / (t_a - z_q)``, over ``[d, n, N]``.

    A point on a node makes its ``sigma`` infinite (``|t - z_q| >= 2^-34`` otherwise,
    so no finite sum overflows). Such points, rare, are moved by one ulp, which
    changes a kernel sum by at most its rounding error, and their row is summed
    again. Checking after the pass keeps selects out of it (inside, XLA would write
    the ``[d, n, N]`` operands out).
    """
    sigma = jnp.sum(w[None, None, :] / (t[:, :, None] - z[None, None, :]), axis=-1)
    hit = ~jnp.isfinite(sigma)

    def moved(args):
        t, _ = args
        # a constant shift of one ulp: its derivative is 1 (``nextafter`` has no differentiation rule, and a
        # ``cond`` branch is differentiated whether taken or not, so it is kept out of the derivative)
        fixed = jax.lax.stop_gradient(t)
        ulp = jnp.nextafter(fixed, -jnp.sign(fixed)) - fixed
        t = jnp.where(hit, t + ulp, t)
        return t, jnp.sum(w[None, None, :] / (t[:, :, None] - z[None, None, :]), axis=-1)

    return jax.lax.cond(jnp.any(hit), moved, lambda args: args, (t, sigma))


def _moments(t: jax.Array, v: jax.Array, degree: int):
    """``(t, sigma, z, moment_v, moment_1)``: ``moment_u[c, q] = sum_b ell_q(t_cb) u_cb`` for ``u = v`` and ``u = 1``.

    Over ``[d, N, n]`` and ``[N, d, n]``: the passes (and an evaluation over ``[n, d, N]``)
    broadcast ``t`` along different axes, so no two share a broadcast operand.
    """
    dtype = t.dtype
    z_np, w_np = chebyshev_nodes(degree)
    z, w = jnp.asarray(z_np, dtype), jnp.asarray(w_np, dtype)
    t, sigma = _barycentric_denominators(t, z, w)
    moment_v = w[None, :] * jnp.sum((v / sigma)[:, None, :] / (t[:, None, :] - z[None, :, None]), axis=-1)
    moment_1 = w[None, :] * jnp.sum((1 / sigma)[None, :, :] / (t[None, :, :] - z[:, None, None]), axis=-1).T
    return t, sigma, z, moment_v, moment_1


def _node_gaps(degree: int) -> np.ndarray:
    z_np, _ = chebyshev_nodes(degree)
    return z_np[:, None] - z_np[None, :]


def interpolated_rbf_sums(t: jax.Array, omega: jax.Array, v: jax.Array, c: jax.Array, degree: int) -> jax.Array:
    """``sum_b [k(t_a, t_b) v_b + c g(t_a, t_b)]`` on every row, by Chebyshev interpolation.

    Args:
        t: ``[d, n]`` points scaled to ``[-1, 1]`` (one row per coordinate).
        omega: ``[d]``, so that ``k(t_a, t_b) = exp(-omega (t_a - t_b)^2)``.
        v: ``[d, n]`` weights of the kernel sum.
        c: ``[d]`` weight of the derivative sum, ``g = sqrt(omega) (t_a - t_b) k``.
        degree: interpolation degree ``D`` (``D + 1`` nodes). Accurate to unit
            roundoff where ``omega <= omega_limit(D, dtype)``; the caller checks.

    Returns:
        ``[d, n]``.
    """
    dtype = t.dtype
    t, sigma, z, moment_v, moment_1 = _moments(t, v, degree)
    # values at the nodes times the weights, w_p sum_q [k(z_p, z_q) moment_v_q + c g(z_p, z_q) moment_1_q]: one
    # product with [k | c g] ([d, N, 2N]), so that the evaluation reads a plain array (a sum of two products,
    # or a reduction here, would be fused into the evaluation and recomputed for every point)
    _, w_np = chebyshev_nodes(degree)
    gap_np = _node_gaps(degree)
    gap = jnp.asarray(np.concatenate([gap_np, gap_np], axis=1), dtype)  # constants, so [k | c g] is one fusion
    first = jnp.asarray(np.concatenate([w_np[:, None] * np.ones_like(gap_np), np.zeros_like(gap_np)], axis=1), dtype)
    second = jnp.asarray(np.concatenate([np.zeros_like(gap_np), w_np[:, None] * gap_np], axis=1), dtype)
    mixed = (first[None] + (c * jnp.sqrt(omega))[:, None, None] * second[None]) * jnp.exp(-omega[:, None, None] * (gap * gap)[None])
    values = jnp.einsum("dpq,dq->dp", mixed, jnp.concatenate([moment_v, moment_1], axis=1))
    # evaluation sum_q ell_q(t_a) values_q, over [n, d, N]
    return jnp.sum(values[None, :, :] / (t.T[:, :, None] - z[None, None, :]), axis=-1).T / sigma


def interpolated_rbf_forms(t: jax.Array, omega: jax.Array, v: jax.Array, coef: jax.Array, degree: int) -> jax.Array:
    """``sum_{a, b} [c0 v_a v_b k + c1 v_a g + c2 k + c3 g2]`` over all pairs ``(a, b)`` of every row.

    ``g = sqrt(omega) (t_a - t_b) k`` and ``g2 = omega (t_a - t_b)^2 k``; ``coef`` is
    ``[d, 4]``. With the interpolant ``k ~ sum_pq ell_p(t_a) k(z_p, z_q) ell_q(t_b)`` the
    double sum is a bilinear form in the moments (:func:`_moments`),
    ``sum_pq [c0 m_v,p m_v,q K + c1 m_v,p m_1,q G + m_1,p m_1,q (c2 K + c3 G2)]_pq``,
    with no evaluation pass. The four parts are combined node pair by node pair, as a
    direct sum combines them pair by pair, so their cancellation costs no more. Every
    kernel value is within unit roundoff where ``omega <= omega_limit(D, dtype, second=True)``
    (the caller checks).

    Returns:
        ``[d]``.
    """
    dtype = t.dtype
    _, _, _, moment_v, moment_1 = _moments(t, v, degree)
    gap = jnp.asarray(_node_gaps(degree), dtype)[None]
    scaled = omega[:, None, None] * (gap * gap)  # omega (z_p - z_q)^2: k = exp(-scaled), g2 = scaled k
    c = [coef[:, i, None, None] for i in range(4)]
    vv = moment_v[:, :, None] * moment_v[:, None, :]
    v1 = moment_v[:, :, None] * moment_1[:, None, :]
    ones = moment_1[:, :, None] * moment_1[:, None, :]
    terms = (c[0] * vv + c[1] * jnp.sqrt(omega)[:, None, None] * gap * v1 + (c[2] + c[3] * scaled) * ones) * jnp.exp(-scaled)
    return jnp.sum(terms, axis=(1, 2))


SUMS = ("auto", "direct")  # how the complete-conditional methods sum their univariate kernels


def check_sums(sums) -> None:
    """A ``sums`` argument must be one of :data:`SUMS`; otherwise a ``ValueError`` naming it."""
    if sums not in SUMS:
        raise ValueError(f"`sums` must be one of {SUMS}; received {sums!r}")


def interpolates(kernel, n: int, sums: str) -> bool:
    """Whether a complete-conditional method interpolates: ``sums="auto"``, an RBF kernel with a fixed
    bandwidth or the ``"per_dimension"`` rule, and ``n >= 128`` (``D + 1 <= n / 4`` for the smallest degree)."""
    return sums == "auto" and isinstance(kernel, RBF) and kernel.rule in (None, "per_dimension") and n >= 128


def coordinate_bandwidths(kernel, particles: jax.Array) -> jax.Array:
    """The ``[d]`` bandwidths of an RBF kernel resolved on ``particles``, one per coordinate."""
    h = kernel.resolve(particles).scale
    check_coordinate_scale(h, particles.shape[1])
    return jnp.broadcast_to(h, (particles.shape[1],))


LADDER = (31, 47, 63, 79, 95, 119, 151, 191, 255, 383, 511)  # about 1.25x apart: a ladder step costs ~0.3 s of compilation
CHUNK = 10  # coordinates per degree choice (at most 16 chunks): measured 12% faster than one degree for all at d = 100


def scaled_coordinates(particles: jax.Array, h: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(t, omega)``: every coordinate mapped to ``[-1, 1]`` (``[d, n]``) and its ``omega = half^2 / h`` (``[d]``).

    A constant coordinate maps to 0 with ``omega = 0``. ``omega`` carries a margin of
    16 ulps (it rounds by a few), which keeps the callers' coverage checks on the
    safe side of the bound.
    """
    dtype = particles.dtype
    xt = particles.T
    lo, hi = jnp.min(xt, axis=1), jnp.max(xt, axis=1)
    half = 0.5 * (hi - lo)
    spread = half > 0
    t = jnp.where(spread[:, None], jnp.clip((xt - (lo + half)[:, None]) / jnp.where(spread, half, 1)[:, None], -1, 1), 0)
    return t, jax.lax.stop_gradient(half * half / h) * (1 + 16 * jnp.finfo(dtype).eps)


def by_degree(fn, t: jax.Array, omega: jax.Array, *args: jax.Array, second: bool = False, chunk: int | None = None):
    """``fn(t_c, omega_c, *args_c, degree=D)`` on chunks of coordinates, each at the degree its ``omega`` needs.

    The coordinates are sorted by ``omega`` and taken ``chunk`` at a time (``lax.map``;
    default ``CHUNK``, or ``d / 16`` for large ``d``). A chunk's degree is the smallest of
    the ladder (``D + 1 <= n / 4``, so needs ``n >= 128``) whose limit
    (:func:`omega_limit`, with ``second``) covers its largest ``omega`` (``lax.switch``),
    so a few wide coordinates do not set every coordinate's degree.

    Args:
        fn: returns a ``[chunk, ...]`` array from ``[chunk, n]`` rows.
        t, omega: :func:`scaled_coordinates`.
        *args: ``[d, ...]`` per-coordinate arguments.

    Returns:
        ``(results, covered)``: ``fn``'s rows in the coordinates' order (``[d, ...]``) and
        ``[d]`` booleans, false where no degree covers the coordinate (its row is then
        not accurate: sum it directly).
    """
    d, n = t.shape
    ladder = [deg for deg in LADDER if 4 * (deg + 1) <= n]
    limits = jnp.asarray([omega_limit(deg, jnp.dtype(t.dtype).name, second) for deg in ladder], t.dtype)
    chunk = min(d, max(CHUNK, -(-d // 16)) if chunk is None else chunk)
    n_chunks = -(-d // chunk)
    # chunks in increasing omega; the padding repeats the widest coordinate (the last chunk's own)
    order = jnp.concatenate([jnp.argsort(omega), jnp.full((n_chunks * chunk - d,), jnp.argmax(omega))])
    branches = [functools.partial(fn, degree=deg) for deg in ladder]

    def one_chunk(chunk_args):
        omega_c = chunk_args[1]
        pick = jnp.minimum(jnp.sum(jnp.max(omega_c) > limits), len(ladder) - 1)
        return jax.lax.switch(pick, branches, *chunk_args), omega_c <= limits[pick]

    def chunked(a):
        return a[order].reshape((n_chunks, chunk) + a.shape[1:])

    out, covered = jax.lax.map(one_chunk, tuple(chunked(a) for a in (t, omega) + args))
    # back to the coordinates' order: the inverse of the sort (the padding, after place d, is dropped)
    back = jnp.zeros((d,), jnp.int32).at[order[:d]].set(jnp.arange(d, dtype=jnp.int32))
    return out.reshape((-1,) + out.shape[2:])[back], covered.reshape(-1)[back]


def fill_uncovered(covered: jax.Array, values: jax.Array, direct, particles: jax.Array, scores: jax.Array, h: jax.Array):
    """``values[i]`` where ``covered[i]``, else ``direct(column [n, 1], score column [n, 1], RBF(h_i))``.

    The callers' exact fallback for coordinates no ladder degree covers
    (:func:`by_degree`): one ``lax.cond`` per coordinate inside a ``lax.map``, skipped
    altogether (an outer ``lax.cond``) when every coordinate is covered.
    """

    def fill(values):
        def one(args):
            ok, col, score_col, h_i, row = args
            return jax.lax.cond(ok, lambda: row, lambda: direct(col[:, None], score_col[:, None], RBF(h_i)))

        return jax.lax.map(one, (covered, particles.T, scores.T, h, values))

    return jax.lax.cond(jnp.all(covered), lambda v: v, fill, values)
