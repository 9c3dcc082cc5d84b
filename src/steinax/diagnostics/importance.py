"""KSD importance weights: simplex weights on any sample that minimise the weighted kernel Stein discrepancy.

Liu & Lee, *Black-box importance sampling*, AISTATS 2017 (eq. 5): for draws ``x_1..x_n`` of any
sampler (MCMC, SVGD, VI; a biased or unknown proposal) and the Stein kernel matrix
``H_ab = k_p(x_a, x_b)`` (:func:`steinax.stein.ksd.stein_kernel_matrix`, IMQ(1, -1/2) by default),

.. math::

    w^* = \\arg\\min_{w \\ge 0,\\ \\sum_a w_a = 1} w^T H w ,

the squared KSD of the weighted empirical measure ``sum_a w_a delta_{x_a}``. ``sum_a w_a f(x_a)``
then estimates ``E_p f`` without knowing the proposal's density. ``H`` is positive semi-definite,
so the problem is a convex quadratic programme.

**Solver (decided here).** Accelerated projected gradient (FISTA, Beck & Teboulle 2009) with
optax's Euclidean projection onto the simplex and step ``1 / L``, ``L`` twice the largest eigenvalue
of ``H`` (the gradient's Lipschitz constant; 100 power iterations, times 1.1, at most the trace), from uniform weights, with adaptive restart
(O'Donoghue & Candes 2015) when the objective rises; stopped when the objective's decrease over
the last 50 iterations is below ``tol`` relative, or after ``max_iter``. The result reports
whether it converged. (Liu & Lee used a generic QP solver; any solver reaches the same minimiser
when it is unique.)

**Reported**: the weights, the weighted squared KSD ``w^T H w`` and, for comparison, the uniform
weights' (the V-statistic), and Kish's effective sample size ``1 / sum_a w_a^2``.

**Cost**: ``H`` is held dense: ``O(n^2)`` memory and ``O(n^2)`` per iteration; ``n`` is capped at
:data:`MAX_DRAWS` (thin first, :func:`steinax.diagnostics.stein_thinning`, for more draws).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from optax.projections import projection_simplex

from steinax.diagnostics.quality import draws_and_scores, posterior_of_tree
from steinax.kernels.base import IMQ, as_kernel
from steinax.stein.ksd import stein_kernel_matrix

__all__ = ["MAX_DRAWS", "ImportanceWeights", "stein_importance_weights", "simplex_qp"]

MAX_DRAWS = 20_000
"""At most this many draws: ``H`` is ``n x n`` (1.6 GB in float32 at the cap)."""

_WINDOW = 50
_POWER_STEPS = 100


@eqx.filter_jit
def simplex_qp(h: jax.Array, max_iter: int = 5000, tol: float = 1e-7):
    """``argmin_{w in simplex} w^T H w`` by restarted FISTA (module docstring); ``(w, objective, iterations, converged)``."""
    n = h.shape[0]
    # the gradient 2 H w is 2 lambda_max-Lipschitz: lambda_max by power iteration (O(n^2) a step, not eigh's
    # O(n^3)), bounded above by the trace (H is positive semi-definite) and inflated 10% against its
    # underestimate; an overshooting step is caught by the restart
    def power(_, u):
        hu = h @ u
        return hu / jnp.maximum(jnp.linalg.norm(hu), jnp.finfo(h.dtype).tiny)

    v = jax.lax.fori_loop(0, _POWER_STEPS, power, jnp.full((n,), 1.0 / np.sqrt(n), h.dtype))
    lam_max = jnp.minimum(1.1 * (v @ h @ v), jnp.trace(h))
    step = 1.0 / jnp.maximum(2.0 * lam_max, jnp.finfo(h.dtype).tiny)
    w0 = jnp.full((n,), 1.0 / n, h.dtype)
    f0 = w0 @ h @ w0
    history0 = jnp.full((_WINDOW,), f0, h.dtype)

    def cond(state):
        _, _, _, _, it, history = state
        old, new = history[it % _WINDOW], history[(it - 1) % _WINDOW]
        settled = (it >= _WINDOW) & (old - new <= tol * jnp.abs(old))
        return (it < max_iter) & ~settled

    def body(state):
        w, y, t, f_prev, it, history = state
        w_new = projection_simplex(y - step * 2.0 * (h @ y))
        f = w_new @ h @ w_new
        restart = f > f_prev
        t_new = jnp.where(restart, 1.0, 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t)))
        y_new = jnp.where(restart, w_new, w_new + ((t - 1.0) / t_new) * (w_new - w))
        return w_new, y_new, t_new, f, it + 1, history.at[it % _WINDOW].set(f)

    state = (w0, w0, jnp.ones((), h.dtype), f0, jnp.zeros((), jnp.int32), history0)
    w, _, _, f, it, history = jax.lax.while_loop(cond, body, state)
    return w, f, it, it < max_iter


class ImportanceWeights(eqx.Module):
    """What :func:`stein_importance_weights` returns.

    Attributes:
        weights: ``[n]`` on the simplex, in the draws' order (chains laid one after another).
        ksd: the weighted squared KSD ``w^T H w``.
        ksd_uniform: the unweighted one (the V-statistic), for comparison.
        ess: Kish's effective sample size ``1 / sum w^2``.
        iterations: solver iterations.
        converged: whether the solver met its tolerance before ``max_iter``.
        n: draws; chains: chains among them.
    """

    weights: jax.Array
    ksd: float
    ksd_uniform: float
    ess: float
    iterations: int
    converged: bool
    n: int = eqx.field(static=True)
    chains: int = eqx.field(static=True)

    def summary(self) -> str:
        note = "" if self.converged else " (NOT converged: raise max_iter)"
        return (f"KSD importance weights on {self.n} draws: squared KSD {self.ksd:.4g} weighted against "
                f"{self.ksd_uniform:.4g} uniform; effective sample size {self.ess:.1f}; {self.iterations} iterations"
                f"{note}")

    def __str__(self) -> str:
        return self.summary()

    def expectation(self, values) -> jax.Array:
        """``sum_a w_a f(x_a)`` for ``values`` ``[n, ...]`` (``f`` at the draws, in their order)."""
        values = jnp.asarray(values)
        if values.shape[:1] != (self.n,):
            raise ValueError(f"`values` must have {self.n} rows (one per draw); received shape {tuple(values.shape)}")
        return jnp.tensordot(self.weights.astype(values.dtype), values, axes=1)

    def to_datatree(self, tree, name: str = "stein_weight"):
        """``tree`` with the weights as variable ``name`` of its ``sample_stats`` group (created if missing)."""
        import xarray as xr

        post, chains, draws = posterior_of_tree(tree, self.n, "the weights are for")
        da = xr.DataArray(np.asarray(self.weights).reshape(chains, draws), dims=("chain", "draw"),
                          coords={"chain": post["chain"].values, "draw": post["draw"].values})
        out = tree.copy()
        if "sample_stats" in out.children:
            stats = out["sample_stats"].to_dataset().assign({name: da})
        else:
            stats = xr.Dataset({name: da})
        out["sample_stats"] = xr.DataTree(stats)
        return out


def stein_importance_weights(samples, target, *, scores=None, kernel=None, max_iter: int = 5000, tol: float = 1e-7,
                             var_names=None, dtype=None) -> ImportanceWeights:
    """Black-box importance weights (Liu & Lee 2017; module docstring) for ``samples`` of any sampler.

    Args:
        samples: ``[n, d]``, ``[chains, draws, d]``, an ArviZ DataTree or a dict of sites (read as
            :func:`steinax.diagnostics.sample_quality` reads them).
        target: a log-density of one ``[d]`` point or a steinax target; ``None`` with ``scores``.
        scores: the draws' scores if already computed.
        kernel: the Stein kernel's base kernel, default ``IMQ(1, -1/2)``.
        max_iter, tol: the solver's budget and relative tolerance.
        var_names, dtype: as :func:`~steinax.diagnostics.sample_quality`.

    Returns:
        An :class:`ImportanceWeights`.

    Raises:
        ValueError: more than :data:`MAX_DRAWS` draws, fewer than 2, or a Stein kernel matrix that
            is not finite (the weights cannot be computed).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = 0.8 * jax.random.normal(jax.random.key(0), (300, 1)) + 0.5   # a biased proposal for N(0, 1)
        >>> iw = stein_importance_weights(x, lambda z: -0.5 * jnp.sum(z ** 2))
        >>> bool(abs(float(iw.expectation(x[:, 0]))) < abs(float(x.mean())))   # the weighted mean is nearer 0
        True
    """
    x, s, chains = draws_and_scores(samples, target, scores=scores, var_names=var_names, dtype=dtype)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"`samples`: importance weights need at least 2 draws; received {n}")
    if n > MAX_DRAWS:
        raise ValueError(f"`samples`: {n} draws is more than MAX_DRAWS = {MAX_DRAWS} (the Stein kernel matrix is "
                         "n x n); thin them first (steinax.diagnostics.stein_thinning)")
    for name, v in (("max_iter", max_iter),):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer; received {v!r}")
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"`tol` must be a finite number >= 0; received {tol!r}")
    kernel = as_kernel(kernel, IMQ()).resolve(x)
    h = stein_kernel_matrix(x, s, x, s, kernel)
    h = 0.5 * (h + h.T)
    if not bool(jnp.all(jnp.isfinite(h))):
        raise ValueError("the Stein kernel matrix of `samples` is not finite (scores overflow the dtype?): the weights "
                         "cannot be computed; try float64 or rescale the target")
    w, f, it, converged = simplex_qp(h, int(max_iter), float(tol))
    return ImportanceWeights(weights=w, ksd=float(f), ksd_uniform=float(jnp.mean(h)), ess=float(1.0 / jnp.sum(w * w)),
                             iterations=int(it), converged=bool(converged), n=int(n), chains=int(chains))
