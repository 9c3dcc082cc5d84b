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
moments ``sum_b \\ell_q(t_b) v_b``, an ``N x N`` product, and an evaluation.

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
:func:`omega_limit` uses the larger of the two ``M``.

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

__all__ = ["chebyshev_nodes", "omega_limit", "interpolated_rbf_sums"]


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


def _log_bound(degree: int, omega: float) -> float:
    """log of the tensor-interpolation error bound of the module docstring, minimised over ``rho``."""
    lebesgue = 1.0 + (2.0 / math.pi) * math.log(degree + 1)
    rho = np.exp(_LOG_RHO)
    b = 0.5 * (rho - 1.0 / rho)
    log_m = omega * b * b + np.log(np.maximum(1.0, _G_PEAK + math.sqrt(omega) * b))
    best = np.min(math.log(4.0) + log_m - degree * _LOG_RHO - np.log(rho - 1.0))
    return math.log(1.0 + lebesgue) + float(best)


@functools.lru_cache(maxsize=None)
def omega_limit(degree: int, dtype_name: str) -> float:
    """Largest ``omega = half^2 / h`` for which degree ``degree`` interpolates ``k`` and ``g`` to unit roundoff.

    ``dtype_name``: ``"float32"`` or ``"float64"`` (unit roundoff ``2^-24`` or ``2^-53``).
    Bisection on the monotone bound of the module docstring.
    """
    log_tol = math.log(0.5 * float(np.finfo(np.dtype(dtype_name)).eps))
    lo, hi = 0.0, float(degree) ** 2
    if _log_bound(degree, 1e-12) > log_tol:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _log_bound(degree, mid) <= log_tol else (lo, mid)
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
        t = jnp.where(hit, jnp.nextafter(t, -jnp.sign(t)), t)
        return t, jnp.sum(w[None, None, :] / (t[:, :, None] - z[None, None, :]), axis=-1)

    return jax.lax.cond(jnp.any(hit), moved, lambda args: args, (t, sigma))


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
    z_np, w_np = chebyshev_nodes(degree)
    z, w = jnp.asarray(z_np, dtype), jnp.asarray(w_np, dtype)
    t, sigma = _barycentric_denominators(t, z, w)
    # moments sum_b ell_q(t_b) u_b for u = v and u = 1, over [d, N, n] and [N, d, n]: the passes (and the
    # evaluation below, over [n, d, N]) broadcast t along different axes, so no two share a broadcast operand
    moment_v = w[None, :] * jnp.sum((v / sigma)[:, None, :] / (t[:, None, :] - z[None, :, None]), axis=-1)
    moment_1 = w[None, :] * jnp.sum((1 / sigma)[None, :, :] / (t[None, :, :] - z[:, None, None]), axis=-1).T
    # values at the nodes times the weights, w_p sum_q [k(z_p, z_q) moment_v_q + c g(z_p, z_q) moment_1_q]: one
    # product with [k | c g] ([d, N, 2N]), so that the evaluation reads a plain array (a sum of two products,
    # or a reduction here, would be fused into the evaluation and recomputed for every point)
    gap_np = z_np[:, None] - z_np[None, :]
    gap = jnp.asarray(np.concatenate([gap_np, gap_np], axis=1), dtype)  # constants, so [k | c g] is one fusion
    first = jnp.asarray(np.concatenate([w_np[:, None] * np.ones_like(gap_np), np.zeros_like(gap_np)], axis=1), dtype)
    second = jnp.asarray(np.concatenate([np.zeros_like(gap_np), w_np[:, None] * gap_np], axis=1), dtype)
    mixed = (first[None] + (c * jnp.sqrt(omega))[:, None, None] * second[None]) * jnp.exp(-omega[:, None, None] * (gap * gap)[None])
    values = jnp.einsum("dpq,dq->dp", mixed, jnp.concatenate([moment_v, moment_1], axis=1))
    # evaluation sum_q ell_q(t_a) values_q, over [n, d, N]
    return jnp.sum(values[None, :, :] / (t.T[:, :, None] - z[None, None, :]), axis=-1).T / sigma
