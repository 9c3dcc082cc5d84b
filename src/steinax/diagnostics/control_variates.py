"""Stein control variates: posterior expectations with less variance, from draws and their scores alone.

For draws ``x_1..x_n`` of ``p`` (MCMC or i.i.d.), scores ``s = nabla log p`` and a function ``f``, any
function ``g = L phi`` in the range of the Langevin Stein operator ``L phi = Delta phi + s . grad phi``
has ``E_p g = 0``, so ``E_p f = E_p (f - g)``, and ``g`` fitted to ``f`` removes most of its variance.
Four bases for ``g`` (all linear in their coefficients):

* ``"polynomial"`` (zero-variance control variates; Mira, Solgi & Imparato 2013; Assaraf & Caffarel
  1999): ``phi`` the monomials of degree ``<= degree`` (:func:`polynomial_stein_features`; ``L x_k = s_k``,
  ``L (x_j x_k) = s_j x_k + s_k x_j + 2 [j = k]``); ordinary least squares with an intercept.
* ``"polynomial_field"`` (polynomial vector fields under the first-order Langevin Stein operator
  ``T g = div g + s . g``, the operator of Oates, Girolami & Chopin 2017, eq. 3, with ``g``'s components
  the monomials of degree ``<= degree``; :func:`polynomial_field_stein_features`): it contains the
  ``"polynomial"`` basis of one degree more (``g = grad phi``) and much else; on a banana-shaped target
  (``x_2 | x_1`` Gaussian about ``b x_1^2``) each coordinate's mean and square are exact at degree 3,
  where the gradient fields of degree 4 remove a factor 2-6 of the variance. Ordinary least squares
  with an intercept.
* ``"kernel"`` (control functionals; Oates, Girolami & Chopin 2017): ``g = sum_a a_a k_0(x_a, .)`` with
  ``k_0`` the Langevin Stein kernel (:func:`steinax.stein.ksd.stein_kernel_matrix`, IMQ base kernel
  ``(1 + ||x - y||^2 / h)^{-1/2}``), a constant, and ridge ``lambda`` on ``a^T K_0 a``.
* ``"semi_exact"`` (South, Karvonen, Nemeth, Girolami & Oates 2022): both, the polynomial part exact
  (the estimate is exact when ``f`` is a polynomial of degree ``<= degree`` under a Gaussian-like target):
  solve ``[[K_0 + n lambda I, P], [P^T, 0]] [a; b] = [f; 0]`` with ``P = [1, L phi_1, ...]``.

The polynomial features are formed in standardised coordinates ``z = (x - mean) / sd`` (scores
``s * sd``: the Stein operator of ``z``'s density, mean zero under ``p`` as well, and the same span for the
fields) and scaled to unit columns, so that a cubic basis is well conditioned in float32.

**Choice by the simulated intervals (decided here).** With ``basis="auto"`` (default) the candidates are the
plain mean and the polynomial and polynomial-field bases of degree 1 to 4 (while a basis has fewer than ``n / 4``
coefficients). Where the intervals are simulated from tail draws (below), every candidate is cross-fitted, its
estimate's errors are simulated, the same resampled tail draws serving every candidate, and per function the
candidate with the shortest simulated 95% interval is taken for every fold. Nothing in this looks at a fold's own
draws (its ``g`` comes from the other folds, the simulation from the tail draws), so given the choice, fold ``k``'s
error is still the mean of ``n_k`` draws of ``f - g_k`` under ``p``, which the simulation reproduces; and the
criterion is what the user gets, the interval's length under ``p``, far tail included. The errors reported are
then simulated afresh for the choice alone, from a second, independent resampling stream over the same tail draws:
the shortest of several simulated intervals is short partly by its own resampling noise (the winner's curse). The
tail draws themselves are shared by both streams. (Measured on the coverage experiment, replications 0-199: 28 of
29 statistical cells in the band, against 27 when one simulation chose and reported, the two that moved by one or
two replications, within the resampling noise; over 600 replications of the
Student-t(5)'s independence-sampler chains its ``x_2`` still covers 553-554, just below the band [555, 583], against
565 with the choice by held-out error.) The held-out squared error
cannot see the far tail: measured on ``experiments/diagnostics/control_variates_coverage.py`` (200 replications, the
same draws), it took degree-4 polynomials for the Beta-Binomial's ``log(a + b)``, whose Stein features grow like its
cube where no draw is; their simulated intervals were wider than the plain mean's (reported variance reduction
0.14-0.87) and conservative (199 of 200 on chains; the safeguard below removes in a fold's draws tail errors the
simulation counts). Chosen by interval the variance reductions rose on every function of the
Student-t(5) and the Beta-Binomial (``x_1``: 163 -> 567 i.i.d., 271 -> 3900 on chains), and the reported reductions
came within a factor 1.3 of the measured ones on ``log(a + b)`` (i.i.d. draws and independence-sampler chains;
docs/tools/control-variates.md, "Choosing by the interval").

Without tail draws (normal intervals) the choice is by nested cross-validation: the candidates are scored per
function by held-out squared error over ``folds`` contiguous blocks, the choice for the draws of fold ``k`` made on
the other folds alone (fits on ``D_{-j,-k}`` scored on fold ``j``): choosing once with every draw makes the chosen
basis's residuals optimistic (the winner's curse among near-equal candidates), and the intervals under-cover.
``ControlVariateEstimate.basis`` names each function's most frequent choice. A basis named by the user is used as
given (the plain mean only as the safeguard's fallback).

The kernel bases (``h`` the median squared distance, or times 1/4, 1 and 4 with ``bandwidth="auto"``;
``lambda = ridge``) run only on request: they can fit better (``E x_1^2`` on a two-mode mixture:
variance / 650 over 40 replications), but their intervals covered 83% of the time there (60
replications), and an interval that is too short is worse for a user than a longer honest one.

**Estimate and standard error (decided here).** Every estimate is cross-fitted over ``folds``
contiguous blocks: the draws of fold ``k`` are adjusted, ``u_i = f(x_i) - g(x_i)``, by a ``g`` fitted on
the other folds, so ``u_i`` has mean ``E_p f`` whatever the fit (``E_p g = 0``); the estimate is the
mean of the ``u_i`` and its standard error their ``sd / sqrt(n)``. **Safeguard:** a fold where ``g``
adds variance (on its own draws) keeps its plain values ``f``, and, with tail draws, the plain mean's simulated
errors. It looks at the fold's draws, so it conditions the error the simulation describes; with the choice by
interval it acts only where a draw far out in a tail meets a large ``g``, a rare event beyond the interval's
quantiles (measured: it kept the Beta-Binomial's ``log(a + b)^2`` from errors of 11-13 half-widths in 2 of 200
replications, and moved its variance reduction from 0.6 to 5.0). Two alternatives were measured and rejected (200
replications of 1000 draws of a skewed Student-t(5), ``f = x^2``, degree-4 gradient basis): the
in-sample intercept of one fit on all draws (Mira et al. 2013's estimator) is biased by 0.55-0.71 of
its own sd (the coefficients' O(p / n) error meets heavy-tailed features), and its intervals covered
175-182 times in 200 even with leverage-corrected (HC3) standard errors; leave-one-out cross-fitting
removes the bias but, with the basis chosen once on all draws, covered 167-176 times.

For chains the standard error is multiplied by ``sqrt(tau)``, ``tau = n / ESS`` with ``ESS`` the
multi-chain effective sample size of the function's own values ``f(x_i)``
(:func:`steinax.diagnostics.ess.effective_sample_size`: split chains, the between-chain variance, Geyer's
initial monotone sequence), at least 1; ``tau = 1`` for independent draws. The plain mean's standard
error has the same factor, so ``variance_reduction`` compares the two on one footing. **Decided here:**
the ``f(x_i)``, not the adjusted values ``u_i``. The estimate's error is the chains' mean of the residual
``f - g - E_p f`` over all of ``p``, and on a heavy tail much of its simulated spread comes from the tail, where
the chains have few draws: the ``u_i``'s sample autocorrelation shows only where the chains went, and understates
how slowly they move through the tail (on the skewed Student-t(5)'s independence-sampler chains, for ``f = x^2``:
the ``u_i``'s median ``tau`` 2.6-2.7, the ``f(x_i)``'s 3.1, and 3.1-3.2 from the estimates' spread over
replications against the unscaled simulated errors). Measured on 600 replications of
``experiments/diagnostics/control_variates_coverage.py`` (chains of 250 draws, four of them, from independence MH
and NUTS, on the Student-t(5) and the Beta-Binomial: 16 cells; each rule checked by a criterion written down
before the replications that judged it):

* the adjusted values' ``tau_u`` left 3 cells below the band [555, 583] (down to 541 of 600 on the t5's NUTS
  ``x^2``) and 6 above (with the choice by held-out error);
* the geometric mean ``sqrt(tau_f tau_u)`` (found on replications 0-199, where the Beta-Binomial's
  independence-sampler chains are conservative under ``tau_f``: ``x_1``'s median ``tau_f`` 4.9, while the
  estimates' spread gives 1.0-1.3) met its first criterion on 400-599, but the full rerun of 0-199 put the t5's
  NUTS ``x_2^2`` at 178 of 200, and over 600 it left 3 cells below (t5: 554 twice; 178 in one block) against 1
  for ``tau_f``; by a second criterion (fewer cells below the band: an interval too short is worse for a user
  than one too long) it was not kept;
* ``tau_f`` leaves the Beta-Binomial conservative (up to 591 of 600) and the t5's independence-sampler ``x_2`` at
  553, two below.

**Exact fits (decided here).** Where ``f`` lies in the span of the chosen basis, ``f - g`` is constant
up to rounding: ``exact`` is true where the adjusted values' variance is at most the dtype's epsilon
times that of ``f``'s values and, where there are tail draws (below), so is the variance of their
simulated means scaled to one draw: constant over ``p``, not only at the draws. (The draws alone
misjudge two cases measured on the coverage experiment's float32 replications: Beta-Binomial chains'
``x_1`` and ``x_1^2`` fitted to ``0.14-0.18 eps`` in sample yet off by a sampling error, which the tail
draws reveal, against exact banana fits up to ``0.34 eps`` whose folds' solves rounded badly.) Such an error is
rounding, which neither averages down nor follows a sampling law, so its interval is a rounding
bound, not a confidence interval: standard errors are at least the ``floor``, :data:`ROUNDING_ULPS`
ulps of the values' rms and, for an exact fit, also the sd of the folds' means. Each fold has its own
least-squares solve and its own rounding offset, which the per-draw sd cannot see (measured: 1000
draws of the banana in float32, ``f = x_2^2``, degree-3 field basis, one fold's mean off by 2.2e-3
against 3e-5 for the others, an error of 2 floors). The sd of the folds' means, not divided by
``sqrt(folds)``, is conservative against five heavy-tailed offsets, and at most about the adjusted
values' sd, ``sqrt(eps)`` of ``f``'s.

**Intervals from tail draws (decided here).** Where ``f - g`` has a long tail, the draws' own sd of the
``u_i`` cannot be trusted: a sample that has not reached far into the tail, where ``g`` extrapolates,
gives an estimate shifted by the missing tail and, from the same draws, a small sd (the error and
the reported standard error are correlated; on the Beta-Binomial of
``experiments/diagnostics/control_variates_coverage.py`` normal intervals covered 118-183 times in 200).
No rule computed from the draws alone fixed this (docs/tools/control-variates.md lists five), and the
Pareto ``k`` of the residuals (:mod:`steinax.diagnostics.pareto`) flags it but, used to restrict the
choice, took away nearly all of the variance reduction on a Student-t target without calibrating it.
What the draws cannot say, the log-density can. So when ``target`` has a log-density (not a minibatch
estimate) and ``f`` is a function, ``m = min(4 n, 20000)`` tail draws ``y_j`` come from a multivariate
Cauchy centred at the draws' mean with their covariance as scale, heavier-tailed than any target with a
mean, with self-normalised weights ``w_j ~ p(y_j) / q(y_j)``. Given the fits, fold ``k``'s estimate is
the mean of ``n_k`` independent draws of ``u = f - g_k`` under ``p``, so its error is simulated by sampling
importance resampling: ``n_k`` of the ``y_j`` drawn with probabilities ``w_j``, their mean of ``u`` minus
``sum_j w_j u(y_j)``; the estimate's error is the ``n_k / n``-weighted sum over folds (times ``sqrt(tau)``
for chains), :data:`ERROR_DRAWS` times. The interval is between the estimate minus the simulated
errors' upper and lower quantiles (it is not symmetric where the error is skewed), and
``standard_error`` is its normal equivalent, the 95% interval's width over ``2 x 1.96``. The weights'
Pareto ``k`` must be below :func:`~steinax.diagnostics.pareto.khat_threshold`; otherwise, or without a
log-density or a callable ``f``, the interval is the normal one above, and the summary warns where the
adjusted values' tail ``k`` is at least 1/2. (Two simpler uses of the tail draws were measured and
rejected: the weighted variance of ``u`` over the whole line is dominated by regions no sample of ``n``
reaches, and gave standard errors 60-90 times the draws' sd on the Beta-Binomial; the same variance
truncated at the ``1 - 1/n`` quantile covered 98-124 times in 200.)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._memory import require_memory
from steinax._validation import as_float_input
from steinax.diagnostics.ess import effective_sample_size
from steinax.diagnostics.pareto import FINITE_VARIANCE_K, khat_threshold, pareto_khat
from steinax.diagnostics.quality import _is_chains, draws_and_scores
from steinax.targets.base import MinibatchTarget, ScoreTarget, as_target, evaluate
from steinax.kernels.bandwidth import median_squared_distance
from steinax.kernels.base import IMQ
from steinax.stein.ksd import stein_kernel_matrix

__all__ = ["BASES", "MAX_DEGREE", "ControlVariateEstimate", "stein_control_variates", "polynomial_stein_features",
           "polynomial_field_stein_features", "multi_indices"]

BASES = ("polynomial", "polynomial_field", "kernel", "semi_exact")
LEAST_SQUARES = ("mean", "polynomial", "polynomial_field")  # fitted by ordinary least squares
ROUNDING_ULPS = 32
"""The standard error's floor, in units of the compute dtype's epsilon times the values' rms."""


def multi_indices(d: int, degree: int) -> np.ndarray:
    """``[m, d]`` the exponents ``alpha`` of the monomials ``x^alpha`` with ``1 <= |alpha| <= degree``, by degree."""
    from itertools import combinations_with_replacement

    rows = []
    for q in range(1, degree + 1):
        for combo in combinations_with_replacement(range(d), q):
            rows.append(np.bincount(np.asarray(combo), minlength=d))
    return np.asarray(rows, dtype=np.int32).reshape(-1, d)


def polynomial_stein_features(x: jax.Array, scores: jax.Array, degree: int) -> jax.Array:
    """``[n, m]`` the Langevin Stein operator on the monomials of degree 1..``degree`` (:func:`multi_indices`).

    For ``phi = x^alpha``: ``L phi = sum_k alpha_k (alpha_k - 1) x^(alpha - 2 e_k) + sum_k s_k alpha_k
    x^(alpha - e_k)``. Degree 1 gives ``L x_k = s_k``; degree 2 ``L (x_j x_k) = s_j x_k + s_k x_j + 2 [j = k]``.
    """
    _check_degree(degree)
    alpha = jnp.asarray(multi_indices(x.shape[1], int(degree)), x.dtype)  # [m, d]
    eye = jnp.eye(x.shape[1], dtype=x.dtype)
    drift = sum(alpha[:, k][None] * scores[:, k:k + 1] * _monomials(x, alpha - eye[k][None])
                for k in range(x.shape[1]))
    second = sum(alpha[:, k][None] * (alpha[:, k][None] - 1.0) * _monomials(x, alpha - 2.0 * eye[k][None])
                 for k in range(x.shape[1]))
    return drift + second


def polynomial_field_stein_features(x: jax.Array, scores: jax.Array, degree: int) -> jax.Array:
    """``[n, d (m + 1)]`` the first-order Langevin Stein operator on the polynomial vector fields ``x^alpha e_k``.

    ``T g = div g + s . g`` (Oates, Girolami & Chopin 2017, eq. 3, with ``phi = g``); for ``g = x^alpha e_k``,
    ``0 <= |alpha| <= degree``: ``T g = alpha_k x^(alpha - e_k) + s_k x^alpha``. Columns ordered by
    ``alpha`` (the constant first, then :func:`multi_indices`), then ``k``. ``alpha = 0`` gives ``s_k``,
    the ``"polynomial"`` basis of degree 1.
    """
    _check_degree(degree)
    n, d = x.shape
    alpha = jnp.asarray(np.vstack([np.zeros((1, d), np.int32), multi_indices(d, int(degree))]), x.dtype)  # [m+1, d]
    eye = jnp.eye(d, dtype=x.dtype)
    mono = _monomials(x, alpha)  # [n, m+1]
    cols = [alpha[:, k][None] * _monomials(x, alpha - eye[k][None]) + scores[:, k:k + 1] * mono for k in range(d)]
    return jnp.stack(cols, axis=-1).reshape(n, -1)


def _monomials(x, e):
    """``[n, m]`` ``x^e`` for exponent rows ``e`` ``[m, d]``; a negative exponent (only where the caller multiplies
    by 0) reads as 0."""
    return jnp.prod(jnp.where(e[None] > 0, x[:, None, :] ** jnp.maximum(e, 0.0)[None], 1.0), axis=-1)


def _check_degree(degree):
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= MAX_DEGREE:
        raise ValueError(f"`degree` must be an integer in [1, {MAX_DEGREE}]; received {degree!r}")


def _n_features(basis, d, degree):
    """The number of polynomial coefficients of a basis (without the intercept)."""
    m = len(multi_indices(d, degree))
    return d * (m + 1) if basis == "polynomial_field" else m


MAX_DEGREE = 4
"""Polynomial bases up to degree 4: a heavy-tailed target's ``x^2`` needs ``L x^4`` (degree 2 grows too slowly)."""


def _polynomial_features(x_tr, s_tr, tests, basis, degree):
    """``(P_tr, [P_te, ...])`` the polynomial Stein features of a basis at the training rows and at each test set
    ``(x_te, s_te)`` of ``tests``, in the training rows' standardised coordinates ``z = (x - mean) / sd`` (scores
    ``s * sd``: the Stein operator of ``z``'s density, mean zero under ``p`` as well; the same span for the fields),
    scaled to unit training columns: a cubic basis in raw ``x`` is ill conditioned in float32."""
    feats = polynomial_field_stein_features if basis == "polynomial_field" else polynomial_stein_features
    mu, sd = jnp.mean(x_tr, axis=0, keepdims=True), jnp.std(x_tr, axis=0, keepdims=True)
    sd = jnp.where(sd > 0, sd, 1.0)
    p_tr = feats((x_tr - mu) / sd, s_tr * sd, degree)
    scale = jnp.sqrt(jnp.mean(p_tr * p_tr, axis=0, keepdims=True))
    scale = jnp.where(scale > 0, scale, 1.0)
    return p_tr / scale, [feats((xx - mu) / sd, ss * sd, degree) / scale for xx, ss in tests]


def _design(x_tr, s_tr, tests, basis, degree):
    """``(X_tr, [X_te, ...])``: an intercept column, then the polynomial features (none for ``"mean"`` and
    ``"kernel"``), at the training rows and at each test set ``(x_te, s_te)`` of ``tests``."""
    ones = lambda z: jnp.ones((z.shape[0], 1), z.dtype)  # noqa: E731
    if basis not in ("polynomial", "polynomial_field", "semi_exact"):
        return ones(x_tr), [ones(xx) for xx, _ in tests]
    p_tr, p_tes = _polynomial_features(x_tr, s_tr, tests, basis, degree)
    return (jnp.concatenate([ones(x_tr), p_tr], axis=1),
            [jnp.concatenate([ones(xx), pp], axis=1) for (xx, _), pp in zip(tests, p_tes)])


@eqx.filter_jit
def _fit_predict(x_tr, s_tr, f_tr, x_te, s_te, basis, degree, h, lam, x_more=None, s_more=None):
    """Fit ``c + g`` on the training rows; return ``(c + g, g)`` at the test rows (``[m, p]`` each) and, given a second
    test set ``(x_more, s_more)`` (the tail draws), ``g`` there as a third element: one fit, each set's own products
    (the first set's values are those of a call without the second)."""
    n = x_tr.shape[0]
    tests = [(x_te, s_te)] + ([] if x_more is None else [(x_more, s_more)])
    p_tr, p_tes = _design(x_tr, s_tr, tests, basis, degree)
    if basis in LEAST_SQUARES:
        coef, *_ = jnp.linalg.lstsq(p_tr, f_tr)
        gs = [pp[:, 1:] @ coef[1:] for pp in p_tes]
        return (gs[0] + coef[0][None], *gs)
    kern = IMQ(h=h)
    k_tr = stein_kernel_matrix(x_tr, s_tr, x_tr, s_tr, kern)
    m = p_tr.shape[1]
    system = jnp.block([[k_tr + n * lam * jnp.eye(n, dtype=x_tr.dtype), p_tr],
                        [p_tr.T, jnp.zeros((m, m), x_tr.dtype)]])
    rhs = jnp.concatenate([f_tr, jnp.zeros((m, f_tr.shape[1]), f_tr.dtype)])
    sol = jnp.linalg.solve(system, rhs)
    a, b = sol[:n], sol[n:]
    gs = [stein_kernel_matrix(xx, ss, x_tr, s_tr, kern) @ a + pp[:, 1:] @ b[1:] for (xx, ss), pp in zip(tests, p_tes)]
    return (gs[0] + b[0][None], *gs)


class ControlVariateEstimate(eqx.Module):
    """What :func:`stein_control_variates` returns (one entry per function, ``[p]``).

    Attributes:
        estimate: the cross-fitted control-variate estimates of ``E_p f``.
        standard_error: their standard errors (autocorrelation accounted for): with ``error_draws``, the normal
            equivalent of the simulated 95% interval (its width over ``2 x 1.96``).
        mean: the plain sample means, and ``mean_standard_error`` theirs (same autocorrelation rule).
        variance_reduction: ``mean_standard_error^2 / standard_error^2``.
        basis: the basis chosen per function (``"polynomial:2"``, ``"kernel:h=..."``, ...).
        pareto_k: ``[p]`` the Pareto ``k`` of the adjusted values' tails
            (:func:`~steinax.diagnostics.pareto.pareto_khat`): at least 1/2, the interval is not to be trusted
            (the summary says so); ``nan`` where a chain's repeats leave too few distinct tail values.
        adjusted: ``[n, p]`` the cross-fitted adjusted values ``u_i = f(x_i) - g(x_i)`` (module
            docstring), in the draws' order: ``estimate`` is their mean; for a user's own interval
            (batch means, a bootstrap) or a look at their tails.
        error_draws: ``[ERROR_DRAWS, p]`` simulated errors of the estimates from the tail draws (module docstring),
            behind :meth:`interval`; ``None`` where the intervals are normal.
        floor: ``[p]`` the standard errors' rounding floor (for an exact fit, also the sd of the folds' means).
        ess: ``[p]`` the effective sample size behind the chain factor, ``n / tau``, of the function's own values
            (module docstring; at most ``n``, and ``n`` for independent draws). On a heavy tail it is measured where
            the chains have been, and can be too large for short chains (docs/tools/control-variates.md).
        exact: ``[p]`` whether ``f`` is in the span of the chosen basis (``f - g`` constant up to rounding at the
            draws and, where there are ``error_draws``, over the tail draws): the interval is then a rounding bound,
            not a confidence interval (module docstring).
        intervals: how the intervals were made, and for normal ones why not simulated (``summary`` prints it).
        n, chains: draws, and chains among them.
    """

    estimate: jax.Array
    standard_error: jax.Array
    mean: jax.Array
    mean_standard_error: jax.Array
    variance_reduction: jax.Array
    basis: tuple
    pareto_k: jax.Array
    adjusted: jax.Array
    error_draws: jax.Array | None
    floor: jax.Array
    ess: jax.Array
    exact: jax.Array
    intervals: str = eqx.field(static=True)
    n: int = eqx.field(static=True)
    chains: int = eqx.field(static=True)

    def interval(self, level: float = 0.95) -> tuple[jax.Array, jax.Array]:
        """Confidence intervals ``(lower, upper)`` at ``level``: the quantiles of the simulated estimates where there
        are ``error_draws`` (module docstring; each side at least ``z`` times the rounding floor), else normal ones."""
        if not 0.0 < level < 1.0:
            raise ValueError(f"`level` must be in (0, 1); received {level!r}")
        z = float(jax.scipy.stats.norm.ppf(0.5 + level / 2))
        if self.error_draws is None:
            return self.estimate - z * self.standard_error, self.estimate + z * self.standard_error
        q_lo, q_hi = jnp.quantile(self.error_draws, jnp.asarray([(1 - level) / 2, (1 + level) / 2]), axis=0)
        return (self.estimate - jnp.maximum(q_hi, z * self.floor), self.estimate - jnp.minimum(q_lo, -z * self.floor))

    def summary(self) -> str:
        lines = [f"Stein control variates on {self.n} draws ({self.chains} chain(s)); cross-fitted estimates; "
                 f"intervals {self.intervals}:"]
        lo, hi = self.interval()
        for i in range(self.estimate.shape[0]):
            lines.append(f"  f[{i}]: {float(self.estimate[i]):.6g} +- {float(self.standard_error[i]):.3g} [95%: "
                         f"{float(lo[i]):.6g}, {float(hi[i]):.6g}] (mean {float(self.mean[i]):.6g} +- "
                         f"{float(self.mean_standard_error[i]):.3g}; variance / "
                         f"{float(self.variance_reduction[i]):.1f}; {self.basis[i]}; tail k {float(self.pareto_k[i]):.2f}"
                         + (f"; ESS {float(self.ess[i]):.0f}" if float(self.ess[i]) < self.n else "") + ")")
            if bool(self.exact[i]):
                lines.append("    exact: f is in the span of the basis; the interval bounds rounding error")
            elif self.error_draws is None and float(self.pareto_k[i]) >= FINITE_VARIANCE_K:
                lines.append(f"    warning: the adjusted values' tail has k >= {FINITE_VARIANCE_K}, and the interval "
                             "is normal: its coverage is not controlled")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _function_values(f, x):
    """``[n, p]`` a callable ``f`` (one draw to a scalar or ``[p]``) at each row of ``x``."""
    return jax.vmap(lambda z: jnp.atleast_1d(f(z)))(x)


def _at_rounding(values, plain, eps):
    """``[p]`` whether each column of ``values`` ``[., p]`` (adjusted values, or simulated means scaled to one draw) is
    at rounding level: its variance at most ``eps`` times that of ``plain`` ``[n, p]``, the function's plain values
    (an exact fit, module docstring)."""
    return np.var(values, axis=0) <= eps * np.var(plain, axis=0)


def _rounding_floor(adjusted, plain, rows, eps, exact):
    """``[p]`` the standard errors' rounding floor: :data:`ROUNDING_ULPS` ulps of the plain values' rms (rounding does
    not average down) and, where the fit is ``exact`` ``[p]``, at least the sd of the means of the folds ``rows``
    (each fold's own solve rounds differently; module docstring)."""
    floor = ROUNDING_ULPS * eps * np.sqrt(np.mean(plain * plain, axis=0))
    fold_means = np.stack([adjusted[r].mean(axis=0) for r in rows])
    return np.where(exact, np.maximum(floor, fold_means.std(axis=0, ddof=1)), floor)


def _tail_k(values, rounding):
    """``[p]`` the Pareto ``k`` of each column of ``values`` ``[n, p]`` (residuals or adjusted values), of its distinct
    values (a chain's rejections repeat a draw, and ties with the tail's cutoff break the fit); ``-inf`` for a column
    at rounding level (``rounding`` ``[p]``, :func:`_at_rounding`: an exact fit in the draws, whose residuals are the
    features' rounding errors, not a tail of ``p``); ``nan`` with fewer than 10 distinct values."""
    out = np.full(values.shape[1], np.nan)
    for j, col in enumerate(values.T):
        if rounding[j]:
            out[j] = -np.inf
        elif (u := np.unique(col)).size >= 10:
            out[j] = pareto_khat(u)
    return out


def _tau(values, chains):
    """``[p]`` ``n / ESS`` of each column of ``values`` ``[n, p]`` (laid chain by chain; module docstring)."""
    v = np.asarray(values, np.float64)
    return v.shape[0] / effective_sample_size(v.reshape(chains, -1, v.shape[1]))


TAIL_NU = 1.0
"""The proposal of the tail draws: a multivariate Student-t with this many degrees of freedom (Cauchy)."""
TAIL_DRAWS_MAX = 20_000
"""The default number of tail draws is ``min(4 n, TAIL_DRAWS_MAX)``."""
ERROR_DRAWS = 2000
"""Simulated estimates behind each interval (the 2.5% quantile's own sd: 0.35 percentage points)."""
_Z95 = 1.959963984540054


def _tail_draws(tgt, x, m, key):
    """``(y [m, d], scores [m, d], w [m])``: ``m`` draws of a multivariate Student-t(:data:`TAIL_NU`) centred at the
    draws' mean with their covariance as its scale, their scores under the target, and self-normalised importance
    weights ``p / q`` (float64; zero where the target is not finite). ``None`` when the target has no log-density or
    is finite at no tail draw."""
    dt = x.dtype
    mu = jnp.mean(x, axis=0, keepdims=True)
    cov = jnp.cov(x.T).reshape(x.shape[1], x.shape[1]) + 1e-6 * jnp.eye(x.shape[1], dtype=dt) * jnp.mean(jnp.var(x, 0))
    chol = jnp.linalg.cholesky(cov)
    k1, k2 = jax.random.split(key)  # a multivariate t: a normal over the root of a chi-square / nu
    g = jax.random.normal(k1, (m, x.shape[1]), dt)
    chi = jax.random.gamma(k2, TAIL_NU / 2, (m, 1), dt) * 2.0 / TAIL_NU
    z = g / jnp.sqrt(chi)
    y = mu + z @ chol.T
    logq = -0.5 * (TAIL_NU + x.shape[1]) * jnp.log1p(jnp.sum(z * z, axis=1) / TAIL_NU)
    logp, sy = evaluate(tgt, jax.random.key(0), y)
    if logp is None:
        return None
    ok = jnp.isfinite(logp) & jnp.all(jnp.isfinite(sy), axis=1)
    lw = np.where(np.asarray(ok), np.asarray(logp, np.float64) - np.asarray(logq, np.float64), -np.inf)
    if not np.any(np.isfinite(lw)):
        return None
    w = np.exp(lw - np.max(lw))
    return y, jnp.where(ok[:, None], sy, 0.0), w / np.sum(w)


def _require_tail_memory(m, tail_draws, d, p, candidates, folds, n) -> None:
    """Refuse, before drawing, ``m`` tail draws whose arrays exceed the memory budget
    (:func:`steinax._memory.require_memory`). Per draw, in float64 with a copy: the draw, its score and the
    importance weight, ``f`` at it, the widest candidate's features (a kernel basis: one column per training
    draw) and every fold's and candidate's prediction of ``g``."""
    widest = max((n if kind in ("kernel", "semi_exact") else 0) + (_n_features(kind, d, q) if q else 0)
                 for kind, q, _ in candidates)
    per_draw = 8 * 2 * (3 * d + 1 + p + 2 * widest + folds * (len(candidates) + 1) * p)
    require_memory(int(m) * per_draw, argument="tail_draws", received=tail_draws,
                   what=f"{int(m):,} tail draws (their scores, features and every fold's fits there)",
                   hint=f"The default, min(4 n, {TAIL_DRAWS_MAX}), simulates the intervals to 0.35 percentage points.")


def _live_tail(tail, f):
    """``((y, scores, w, f(y)) or None, how)``: the tail draws ``tail = (y, scores, w)`` with ``f`` at them, each draw of
    zero weight replaced by the first draw of positive weight (a zero weight's ``f - g`` may overflow, and 0 x inf
    would spoil the weighted sums; the count stays ``m``, so every call with as many draws compiles the same fits, and
    a resampled index, drawn by weight, never lands on a stand-in); or ``None`` and why when the weights are
    unreliable (Pareto ``k`` at or over :func:`~steinax.diagnostics.pareto.khat_threshold`)."""
    y, sy, w = tail
    live = w > 0
    n_live = int(live.sum())
    k_w = float(pareto_khat(w[live], tail="right")) if n_live >= 10 else np.inf
    if not k_w < khat_threshold(max(n_live, 11)):
        return None, f"the tail draws' weights have Pareto k {k_w:.2f} >= {khat_threshold(max(n_live, 11)):.2f}"
    rows = np.where(live, np.arange(w.size), np.argmax(live))
    y, sy = y[rows], sy[rows]
    return (y, sy, np.where(live, w, 0.0), np.asarray(_function_values(f, y), np.float64)), (
        f"simulated from {ERROR_DRAWS} estimates over {n_live} weighted tail draws (their Pareto k {k_w:.2f})")


def _resampled_means(u, w, size, rng):
    """``[ERROR_DRAWS, p]`` means of ``size`` draws with replacement from the rows of ``u`` ``[m, p]`` with
    probabilities ``w``: drawn indices where ``size`` is small beside ``m``, multinomial counts of the ``m`` rows (one
    product for every function) where it is not (about 130 ns per drawn index against 50 per row and count vector,
    measured); in chunks of at most ~4 x 10^6 indices or counts."""
    out = np.empty((ERROR_DRAWS, u.shape[1]))
    counts = size > 0.4 * u.shape[0]
    step = max(1, 4_000_000 // (u.shape[0] if counts else size))
    for lo in range(0, ERROR_DRAWS, step):
        b = min(step, ERROR_DRAWS - lo)
        if counts:
            out[lo: lo + b] = rng.multinomial(size, w, size=b) @ u / size
        else:
            idx = rng.choice(u.shape[0], size=(b, size), p=w)
            for j in range(u.shape[1]):
                out[lo: lo + b, j] = u[idx, j].mean(axis=1)
    return out


def _choose_by_cross_validation(fit, candidates, rows, v, folds):
    """``[folds, p]`` each fold's candidate per function by nested cross-validation (module docstring): fold ``k``'s
    from ``D_{-k}`` alone; one fit on ``D_{-j,-k}`` serves fold ``j``'s inner score for outer fold ``k`` and fold
    ``k``'s for outer fold ``j``."""
    if len(candidates) == 1:
        return np.zeros((folds, v.shape[1]), int)
    everything = np.arange(v.shape[0])
    sq = np.zeros((len(candidates), folds, v.shape[1]))  # [c, outer k, p]: inner squared error sums
    for j in range(folds):
        for k in range(j + 1, folds):
            held = np.r_[rows[j], rows[k]]
            for c, cand in enumerate(candidates):
                err = (v[held] - fit(cand, np.setdiff1d(everything, held), held)[0]) ** 2
                sq[c, k] += err[: rows[j].size].sum(axis=0)  # fold j held out, inside D_{-k}
                sq[c, j] += err[rows[j].size:].sum(axis=0)
    hopeless = ~np.any(np.isfinite(sq.sum(axis=1)), axis=0)
    if hopeless.any():
        raise FloatingPointError(f"every control-variate fit of functions {np.flatnonzero(hopeless)[:5].tolist()} "
                                 "(first five) is non-finite (the kernel system is singular or the scores "
                                 "overflow): try basis='polynomial', a larger `ridge`, or float64")
    return np.argmin(np.where(np.isfinite(sq), sq, np.inf), axis=0)


def _adds_variance(adjusted, plain):
    """``[p]`` the safeguard's test (module docstring): whether ``f - g`` (``adjusted`` ``[n_k, p]``, one fold's draws)
    varies more than ``f`` (``plain``), so that the fold keeps its plain values."""
    return np.var(adjusted, axis=0) > np.var(plain, axis=0)


def _cross_fit_with_safeguard(fit, candidates, choice, rows, v):
    """``[n, p]`` the adjusted values: fold ``k``'s ``u = f - g`` with ``g`` its choice fitted on the other folds, kept
    only where it does not add variance on the fold (the safeguard, module docstring)."""
    everything = np.arange(v.shape[0])
    adjusted = np.empty(v.shape)
    for c in np.unique(choice):
        cols = np.flatnonzero(np.any(choice == c, axis=0))
        for k, held in enumerate(rows):
            mine = cols[choice[k, cols] == c]
            if mine.size == 0:
                continue
            g = fit(candidates[c], np.setdiff1d(everything, held), held)[1][:, mine]
            g[:, _adds_variance(v[held][:, mine] - g, v[held][:, mine])] = 0.0
            adjusted[held[:, None], mine[None]] = v[held][:, mine] - g
    return adjusted


def _fold_errors(u, w, size, n, rng):
    """``[ERROR_DRAWS, q]`` one fold's simulated errors (module docstring), weighted by its share ``size / n``: means of
    ``size`` tail draws resampled by ``w`` minus the weighted mean, per column of ``u`` ``[m, q]`` (``f - g`` at the
    tail draws); NaN in a column that is not finite at every tail draw."""
    bad = ~np.all(np.isfinite(u), axis=0)
    u = np.where(bad[None], 0.0, u)
    return np.where(bad[None], np.nan, _resampled_means(u, w, size, rng) - w @ u) * (size / n)


def _simulate_candidates(fit, candidates, rows, v, tail, fy, w, rng):
    """``(u_draws [c, n, p], u_tails, sim [ERROR_DRAWS, c, p])``: every candidate cross-fitted (fold ``k``'s ``g``
    on the other folds), its adjusted values at the draws, each fold's ``f - g`` at the tail draws (``u_tails[k]``
    ``[m, c, p]``) and the estimate's simulated errors (module docstring), the same resampled
    tail draws (from ``rng``) serving every candidate; a candidate's errors are NaN where ``f - g`` is not finite at
    every tail draw and draw."""
    n, p = v.shape
    everything = np.arange(n)
    u_draws = np.empty((len(candidates), n, p))
    u_tails = []
    sim = np.zeros((ERROR_DRAWS, len(candidates), p))
    for k, held in enumerate(rows):
        outs = [fit(cand, np.setdiff1d(everything, held), held, tail) for cand in candidates]
        u_tail = np.stack([fy - o[2] for o in outs], axis=1)  # [m, c, p]
        for c, o in enumerate(outs):
            u_draws[c, held] = v[held] - o[1]
        u_tails.append(u_tail)
        sim += _fold_errors(u_tail.reshape(u_tail.shape[0], -1), w, held.size, n, rng).reshape(sim.shape)
    return u_draws, u_tails, np.where(np.all(np.isfinite(u_draws), axis=1)[None], sim, np.nan)


def _choose_by_simulation(fit, candidates, competes, rows, v, tail, fy, w, rngs):
    """``(adjusted [n, p], errors [ERROR_DRAWS, p], choice [folds, p])``, or ``None`` where, for some function, no
    candidate's ``f - g`` is finite at every tail draw and draw. Per function the candidate (among those where
    ``competes`` ``[c]``) whose simulated 95% interval (:func:`_simulate_candidates`, from ``rngs[0]``) is the shortest
    is taken. Then the safeguard: a fold where the chosen ``g`` adds variance keeps its plain values (candidate 0, the
    mean). The errors reported are simulated afresh, from ``rngs[1]``, for the choice alone: the shortest of several
    noisy intervals is short partly by its own resampling noise (module docstring)."""
    n, p = v.shape
    u_draws, u_tails, sim = _simulate_candidates(fit, candidates, rows, v, tail, fy, w, rngs[0])
    ok = np.all(np.isfinite(sim), axis=0)  # [c, p]
    q_lo, q_hi = np.quantile(np.where(ok[None], sim, 0.0), [0.025, 0.975], axis=0)
    width = np.where(ok & np.asarray(competes)[:, None], q_hi - q_lo, np.inf)
    if not np.all(np.any(np.isfinite(width), axis=0)):
        return None
    best = np.argmin(width, axis=0)  # [p]
    choice = np.broadcast_to(best, (len(rows), p)).copy()
    cols = np.arange(p)
    errors = np.zeros((ERROR_DRAWS, p))
    for k, held in enumerate(rows):
        choice[k, _adds_variance(u_draws[best, held[:, None], cols], v[held])] = 0  # the safeguard
        errors += _fold_errors(u_tails[k][:, choice[k], cols], w, held.size, n, rngs[1])
    adjusted = np.concatenate([u_draws[choice[k], held[:, None], cols] for k, held in enumerate(rows)])
    return adjusted, errors, choice


def stein_control_variates(samples, target, f, *, scores=None, basis: str = "auto", degree: int = 2, bandwidth=None,
                     ridge: float = 1e-3, folds: int = 5, iid: bool | None = None, var_names=None,
                     dtype=None, tail_draws: int | None = None, key=None) -> ControlVariateEstimate:
    """Estimate ``E_p f`` with Stein control variates (module docstring).

    Args:
        samples: ``[n, d]``, ``[chains, draws, d]``, a DataTree or a dict of sites (as
            :func:`steinax.diagnostics.sample_quality` reads them).
        target: a log-density of one ``[d]`` point or a steinax target; ``None`` with ``scores``.
        f: ``[n]`` or ``[n, p]`` values of the functions at the draws (in the draws' order), or a
            callable ``f(x) -> [p]`` (or a scalar) of one draw in the space the draws are read in.
        scores: the draws' scores if already computed.
        basis: ``"auto"`` (cross-validated, per function), ``"polynomial"``, ``"polynomial_field"``, ``"kernel"``,
            ``"semi_exact"``.
        degree: the polynomial degree (1 to :data:`MAX_DEGREE`) of ``"polynomial"``, ``"polynomial_field"`` and
            ``"semi_exact"``.
        bandwidth: the IMQ's ``h`` for the kernel bases (default: median squared distance; ``"auto"``
            tries it times 1/4, 1 and 4).
        ridge: ``lambda``.
        folds: cross-fitting (and cross-validation) folds, contiguous blocks: at least 2, and 3 when the basis
            is chosen.
        iid: whether the draws are independent (``tau = 1``); default: independent unless chain-shaped.
        var_names, dtype: as :func:`~steinax.diagnostics.sample_quality`.
        tail_draws: how many tail draws simulate the intervals (module docstring; default ``min(4 n, 20000)``);
            0 for normal intervals from the adjusted values' sd.
        key: the tail draws' key (default ``jax.random.key(0)``: the same call gives the same interval).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (500, 2))
        >>> cv = stein_control_variates(x, lambda z: -0.5 * jnp.sum(z ** 2), x[:, 0] + x[:, 1] ** 2)
        >>> bool(abs(float(cv.estimate[0]) - 1.0) < 0.01), bool(cv.variance_reduction[0] > 100)   # E f = 1
        (True, True)
    """
    x, s, chains = draws_and_scores(samples, target, scores=scores, var_names=var_names, dtype=dtype)
    values = _checked_values(f, x)
    fitting = FitOptions(basis=basis, degree=degree, bandwidth=bandwidth, ridge=ridge, folds=folds).checked(x.shape[0])
    intervals = IntervalOptions(tail_draws=tail_draws, key=key, iid=iid).checked()
    candidates = _candidates(x, fitting)
    edges = np.linspace(0, x.shape[0], folds + 1).astype(int)
    rows = [np.arange(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    v = np.asarray(values, np.float64)

    def fit(cand, train, test, tail=None):
        """Candidate ``cand`` ``(basis, degree, h)`` fitted on rows ``train``: ``c + g`` and ``g`` at rows ``test``
        (and ``g`` at the draws and scores ``tail``)."""
        kind, q, h = cand
        out = _fit_predict(x[train], s[train], values[train], x[test], s[test], kind, q,
                           None if h is None else jnp.asarray(h, x.dtype), ridge,
                           *(() if tail is None else tail))
        return tuple(np.asarray(o, np.float64) for o in out)

    # the tail draws behind simulated intervals (module docstring), resolved before the fits: each fold's one fit
    # predicts at its held-out draws and at the tail draws
    live, how, key = _tail_for_intervals(target, f, x, intervals, candidates, values.shape[1], fitting)
    adjusted, errors, choice, candidates, how = _fit_and_choose(fit, candidates, rows, v, live, key, how, fitting)
    return _estimate(samples, x, v, adjusted, errors, choice, candidates, rows, chains, intervals.iid, how)


class FitOptions(eqx.Module):
    """How :func:`stein_control_variates` fits ``g`` (its arguments of the same names): the basis, the polynomial
    degree, the kernel bases' bandwidth, the ridge ``lambda`` and the cross-fitting folds."""

    basis: str = eqx.field(static=True, default="auto")
    degree: int = eqx.field(static=True, default=2)
    bandwidth: object = eqx.field(static=True, default=None)
    ridge: float = eqx.field(static=True, default=1e-3)
    folds: int = eqx.field(static=True, default=5)

    def checked(self, n: int) -> "FitOptions":
        """``self``, or a ``ValueError`` naming the first argument out of its range for ``n`` draws."""
        if self.basis not in BASES + ("auto",):
            raise ValueError(f"`basis` must be 'auto' or one of {BASES}; received {self.basis!r}")
        ridge = self.ridge
        if isinstance(ridge, bool) or not isinstance(ridge, (int, float, np.integer, np.floating)) or not (
                np.isfinite(ridge) and ridge >= 0):
            raise ValueError(f"`ridge` must be a finite number >= 0 (the fits' lambda); received {ridge!r}")
        folds = self.folds
        if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
            raise ValueError(f"`folds` must be an integer >= 2; received {folds!r}")
        if folds > n // 2:
            raise ValueError(f"`samples`: {n} draws are too few for {folds}-fold cross-fitting (`folds`, default 5): "
                             f"each fold needs at least 2 draws, so at least {2 * folds} draws, or fewer `folds`")
        return self


class IntervalOptions(eqx.Module):
    """How :func:`stein_control_variates` reports its error (its arguments of the same names): the tail draws behind
    simulated intervals and their key, and whether the draws are independent."""

    tail_draws: int | None = eqx.field(static=True, default=None)
    key: object = None
    iid: bool | None = eqx.field(static=True, default=None)

    def checked(self) -> "IntervalOptions":
        """``self``, or a ``ValueError`` naming ``tail_draws`` when it is not ``None`` or an integer >= 0."""
        t = self.tail_draws
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0):
            raise ValueError(f"`tail_draws` must be None or a non-negative integer; received {t!r}")
        return self


def _checked_values(f, x):
    """``[n, p]`` ``f`` at the draws (``f`` a function or its values), finite, in the draws' dtype."""
    n = x.shape[0]
    values = jnp.asarray(as_float_input(_function_values(f, x) if callable(f) else f, "f"), x.dtype)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != n:
        raise ValueError(f"`f` must give one value (or one [p] row) per draw: [n] or [n, p] with n = {n}; received "
                         f"shape {tuple(values.shape)}")
    if not bool(jnp.all(jnp.isfinite(values))):
        raise ValueError("`f`'s values are not finite at some draws")
    return values.astype(x.dtype)


def _candidates(x, fitting: FitOptions) -> list:
    """The ``(basis, degree, h)`` candidates: for ``"auto"`` the plain mean and the polynomial and polynomial-field
    bases of degrees 1 to :data:`MAX_DEGREE` with at most ``n / 4`` coefficients; else the requested basis (the kernel
    bases at ``h`` the median squared distance, or times 1/4, 1 and 4 with ``bandwidth="auto"``)."""
    n, d = x.shape
    basis, degree, bandwidth = fitting.basis, fitting.degree, fitting.bandwidth
    med = float(median_squared_distance(x[np.linspace(0, n - 1, min(n, 1000)).astype(int)]))
    h0 = med if bandwidth in (None, "auto") else float(bandwidth)
    if not h0 > 0:
        raise ValueError(f"`bandwidth` must be positive (the median squared distance of the draws is {med:.3g}); "
                         f"received {bandwidth!r}")
    hs = [h0 / 4, h0, 4 * h0] if bandwidth == "auto" else [h0]
    _check_degree(degree)
    degrees = range(1, MAX_DEGREE + 1) if basis == "auto" else [degree]
    fits = {(b, q): _n_features(b, d, q) < n // 4 for b in ("polynomial", "polynomial_field") for q in degrees}
    candidates = [("mean", None, None)] if basis == "auto" else []  # the plain mean competes
    for b in ("polynomial", "polynomial_field"):  # at most n / 4 coefficients
        if basis in ("auto", b):
            candidates += [(b, q, None) for q in degrees if fits[(b, q)]]
    if basis == "kernel":  # the kernel bases only on request: their cross-fitted intervals under-cover (docstring)
        candidates += [("kernel", None, h) for h in hs]
    if basis == "semi_exact":
        candidates += [("semi_exact", degree, h) for h in hs if fits[("polynomial", degree)]]
    if not candidates:
        raise ValueError(f"`degree` = {degree} gives {_n_features(basis, d, degree)} polynomial features for {n} draws "
                         "(at most n / 4): use a lower degree or the kernel basis")
    if len(candidates) > 1 and fitting.folds < 3:
        raise ValueError(f"`folds` must be at least 3 when the basis is chosen (nested cross-validation); received "
                         f"{fitting.folds}")
    return candidates


def _tail_for_intervals(target, f, x, intervals: IntervalOptions, candidates, p, fitting: FitOptions):
    """``(live tail draws or None, how the intervals are made, key)``: the tail draws (module docstring) where the
    target has an exact log-density, ``f`` is a function and ``tail_draws`` is not 0; else normal intervals, and why."""
    n, d = x.shape
    key = intervals.key
    if intervals.tail_draws == 0:
        return None, "normal: tail_draws=0", key
    if not callable(f):
        return None, "normal: f was given as values (pass a function for simulated intervals)", key
    tgt = None if target is None else as_target(target)
    if tgt is None or isinstance(tgt, (MinibatchTarget, ScoreTarget)):
        return None, "normal: the target has no exact log-density (scores alone or a minibatch estimate)", key
    key = jax.random.key(0) if key is None else key
    m_tail = min(4 * n, TAIL_DRAWS_MAX) if intervals.tail_draws is None else int(intervals.tail_draws)
    _require_tail_memory(m_tail, intervals.tail_draws, d, p, candidates, fitting.folds, n)
    tail = _tail_draws(tgt, x, m_tail, key)
    if tail is None:
        return None, "normal: the target has no log-density, or is finite at no tail draw", key
    live, how = _live_tail(tail, f)
    return live, (how if live is not None else "normal: " + how), key


def _fit_and_choose(fit, candidates, rows, v, live, key, how, fitting: FitOptions):
    """``(adjusted [n, p], simulated errors or None, choice [folds, p], candidates, how)``: the choice by simulated
    intervals where there are live tail draws (:func:`_choose_by_simulation`), else by nested cross-validation with
    the safeguard (:func:`_choose_by_cross_validation`, :func:`_cross_fit_with_safeguard`)."""
    if live is not None:
        y_tail, s_tail, w_tail, f_tail = live
        # the plain mean first: the safeguard's fallback, and a competitor only in "auto"
        pool = [("mean", None, None)] + [c for c in candidates if c[0] != "mean"]
        competes = [fitting.basis == "auto"] + [True] * (len(pool) - 1)
        # two independent resampling streams: one to choose, one for the reported errors
        seeds = np.random.SeedSequence(np.asarray(jax.random.key_data(key)).ravel().tolist()).spawn(2)
        chosen = _choose_by_simulation(fit, pool, competes, rows, v, (y_tail, s_tail), f_tail, w_tail,
                                       [np.random.default_rng(q) for q in seeds])
        if chosen is not None:
            adjusted, errors, choice = chosen
            return adjusted, errors, choice, pool, how
        how = "normal: f - g is not finite at a weighted tail draw"
    choice = _choose_by_cross_validation(fit, candidates, rows, v, fitting.folds)
    return _cross_fit_with_safeguard(fit, candidates, choice, rows, v), None, choice, candidates, how


def _estimate(samples, x, v, adjusted, errors, choice, candidates, rows, chains, iid, how) -> ControlVariateEstimate:
    """The result: the estimate, its standard error (simulated or normal, times the chain factor, at least the
    rounding floor; module docstring), the plain mean's, the chosen bases and the checks."""
    n = v.shape[0]
    estimate = adjusted.mean(axis=0)
    if not np.all(np.isfinite(adjusted)):
        raise FloatingPointError("the chosen control-variate fit is non-finite (the kernel system is singular or the "
                                 "scores overflow): try basis='polynomial', a larger `ridge`, or float64")
    is_iid = not _is_chains(samples, chains) if iid is None else bool(iid)
    # the chain factor: one tau per function, from its own values, for the estimate and the plain mean (docstring)
    tau = np.ones(v.shape[1]) if is_iid else np.maximum(_tau(v, chains), 1.0)
    eps = float(np.finfo(np.dtype(x.dtype)).eps)
    in_draws = _at_rounding(adjusted, v, eps)  # f - g constant at the draws; exact: over p as well, below
    exact = in_draws.copy()
    if errors is not None:
        exact &= _at_rounding(errors * np.sqrt(n), v, eps)  # constant over p too: the simulated means barely vary
        errors *= np.sqrt(tau)
    floor = _rounding_floor(adjusted, v, rows, eps, exact)
    if errors is not None:
        q_lo, q_hi = np.quantile(errors, [0.025, 0.975], axis=0)
        se = np.hypot((q_hi - q_lo) / (2 * _Z95), floor)
    else:
        se = np.hypot(adjusted.std(axis=0, ddof=1) * np.sqrt(tau / n), floor)
    se_mean = v.std(axis=0, ddof=1) * np.sqrt(tau / n)
    best = [np.bincount(choice[:, j], minlength=len(candidates)).argmax() for j in range(v.shape[1])]
    names = tuple(f"{candidates[b][0]}" + (f":{candidates[b][1]}" if candidates[b][1] else "")
                  + (f":h={candidates[b][2]:.3g}" if candidates[b][2] else "") for b in best)
    dt = x.dtype
    return ControlVariateEstimate(estimate=jnp.asarray(estimate, dt), standard_error=jnp.asarray(se, dt),
                                  mean=jnp.asarray(v.mean(axis=0), dt), mean_standard_error=jnp.asarray(se_mean, dt),
                                  variance_reduction=jnp.asarray(se_mean**2 / np.maximum(se**2, 1e-300), dt),
                                  basis=names, pareto_k=jnp.asarray(_tail_k(adjusted, in_draws), dt),
                                  adjusted=jnp.asarray(adjusted, dt),
                                  error_draws=None if errors is None else jnp.asarray(errors, dt),
                                  floor=jnp.asarray(floor, dt), ess=jnp.asarray(n / tau, dt),
                                  exact=jnp.asarray(exact), intervals=how,
                                  n=int(n), chains=int(chains))
