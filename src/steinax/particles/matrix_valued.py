"""Matrix SVGD (Wang, Tang, Bajaj & Liu 2019) and Stein variational Newton (Detommaso et al. 2018).

The direction of a matrix-valued kernel (Theorem 1, eq. 9-10) is
:func:`matrix_svgd_direction`. Each structured kernel of
:mod:`steinax.kernels.matrix` has a matrix-product form:

* ``k I``: SVGD (:func:`steinax.svgd_direction`); ``diag_l k_l``: CC-SVGD.
* ``K_Q`` (eq. 12-14), ``metric=True``: with ``Q = L L^T`` and ``y = L^T x``,
  ``phi(x) = L^{-T} phi_y(y)`` where ``phi_y`` is vanilla SVGD on the whitened
  particles with scores ``L^{-1} nabla log p`` (Theorem 3). Written out,
  ``n phi(x_i) = Q^{-1} sum_j k_ij nabla log p(x_j) + (2/h) sum_j kappa'_ij (x_j - x_i)``:
  the repulsion is Euclidean because ``Q^{-1}`` cancels the ``Q`` of
  ``nabla k``. ``metric=False``: ``Q^{-1}`` times SVGD's direction.
  Cost O(n^2 d + n d^2 + d^3).
* Mixture (eq. 16-18): ``phi(x_i) = sum_l w_l(x_i) phi_l(x_i)`` with

  .. math::

      n \\phi_l(x_i) = \\sum_j w_l(x_j) \\left[ Q_l^{-1} k^l_{ij} (\\nabla\\log p(x_j) + \\nabla \\log w_l(x_j))
                       + \\nabla_{x_j} k^l_{ij} \\right]_{\\text{(as above)}},

  ``nabla log w_l(x) = nabla log N_l(x) - sum_m w_m(x) nabla log N_m(x)``:
  per anchor the SVGD engine with the kernel matrix scaled by ``w_l(x_j)``
  column-wise. Anchors are visited one at a time (``lax.scan``): memory
  O(n^2 + n d + d^2), time O(m (n^2 d + n d^2 + d^3)). With a Euclidean base
  kernel (``metric=False``) the kernel matrix is shared and all anchors are
  computed at once (``vmap`` over anchors, memory O(m n (n + d))).

Any other :class:`~steinax.kernels.matrix.AbstractMatrixKernel` uses the
reference path: eq. 9-10 evaluated pair by pair (O(n^2 d^3), for checks and small problems).

The methods :func:`matrix_svgd` and :func:`svn` obtain curvature through the
method hook (:meth:`AbstractParticleMethod.curvature_request`), once per
particle per step, and make it positive definite with
:func:`steinax.kernels.matrix.positive_definite` (the fraction of eigenvalues
raised is reported as ``floored`` in the trace).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._linalg import serial_batch
from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel, as_kernel
from steinax.kernels.matrix import (
    AbstractMatrixKernel,
    AbstractPreconditioner,
    DiagonalMatrixKernel,
    KFACFactors,
    MixtureKernel,
    PreconditionedKernel,
    Preconditioner,
    ScalarMatrixKernel,
    _check_base_kernel,
    positive_definite,
)
from steinax.kernels.pairwise import map_row_blocks, squared_distances
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.complete_conditional import _cc_svgd
from steinax.particles.svgd import _direction_rows, _svgd, kernel_info, stein_direction_rows
from steinax.targets.base import CURVATURES

__all__ = ["matrix_svgd_direction", "MatrixSVGD", "matrix_svgd", "SVN", "svn", "PRECONDITIONERS", "MODES"]

PRECONDITIONERS = CURVATURES
MODES = ("average", "mixture")


def _bandwidth(kernel):
    return kernel_info(kernel).get("bandwidth")


def _preconditioned(particles, scores, kernel: PreconditionedKernel, block_size):
    q = kernel.preconditioner
    if kernel.metric:
        phi_y, k = _svgd(q.whiten_rows(particles), q.whiten_scores(scores), kernel.kernel, block_size)
        return q.unwhiten_rows(phi_y), _bandwidth(k)
    phi, k = _svgd(particles, scores, kernel.kernel, block_size)
    return q.solve_rows(phi), _bandwidth(k)


def _weighted_rows(inputs, scores, kernel: AbstractKernel, weights):
    """``sum_j w_j [k_ij s_j + nabla_{x_j} k_ij]`` for all rows ``i``: SVGD's engine with weighted columns."""
    sqdist = squared_distances(inputs, inputs)
    kernel = kernel.resolve(inputs, sqdist)
    return _direction_rows(inputs, inputs, scores, kernel, sqdist, col_weights=weights), kernel


def _mixture(particles, scores, kernel: MixtureKernel):
    n = particles.shape[0]
    logn, _ = kernel.log_anchor_density(particles)
    w = jax.nn.softmax(logn, axis=0)  # [m, n]
    _, grads = kernel.log_anchor_density(particles)
    mean_grad = jnp.einsum("mn,mnd->nd", w, grads)
    if not kernel.metric:
        return _mixture_euclidean(particles, scores, kernel, w, grads - mean_grad[None])

    def anchor(carry, xs):
        w_l, grad_l, q = xs
        s = scores + grad_l - mean_grad
        rows, k = _weighted_rows(q.whiten_rows(particles), q.whiten_scores(s), kernel.kernel, w_l)
        phi_l = q.unwhiten_rows(rows)
        acc, hsum = carry
        return (acc + w_l[:, None] * phi_l, hsum + jnp.mean(_bandwidth(k))), None

    zero = jnp.zeros((), particles.dtype)
    (acc, hsum), _ = jax.lax.scan(anchor, (jnp.zeros_like(particles), zero), (w, grads, kernel.preconditioners))
    return acc / n, hsum / w.shape[0]


def _mixture_euclidean(particles, scores, kernel: MixtureKernel, w, grad_log_w):
    """The mixture with one Euclidean base kernel (``metric=False``), all anchors at once.

    ``n phi_l(x_i) = Q_l^{-1} sum_j w_l(x_j) [k_ij (s_j + nabla log w_l(x_j)) + nabla_{x_j} k_ij]``:
    the kernel is resolved once, SVGD's engine is ``vmap``-ed over the anchors (memory O(m n (n + d))),
    then one solve per anchor.
    """
    n = particles.shape[0]
    sqdist = squared_distances(particles, particles)
    base = kernel.kernel.resolve(particles, sqdist)
    rows = jax.vmap(lambda w_l, g_l: _direction_rows(particles, particles, scores + g_l, base, sqdist, col_weights=w_l))(
        w, grad_log_w)
    phi = jax.vmap(lambda q, r: q.solve_rows(r))(kernel.preconditioners, rows)
    return jnp.einsum("ln,lnd->nd", w, phi) / n, jnp.mean(_bandwidth(base))


def _reference(particles, scores, kernel: AbstractMatrixKernel, block_size):
    """Eq. 9-10 pair by pair (the general path)."""
    kernel = kernel.resolve(particles)

    def row(x):
        def pair(y, s):
            return kernel(x, y) @ s + kernel.divergence_y(x, y)

        return jnp.mean(jax.vmap(pair)(particles, scores), axis=0)

    return jax.lax.map(row, particles, batch_size=block_size), None


@eqx.filter_jit
def _matrix_svgd(particles, scores, kernel, block_size):
    """``(phi, bandwidth or None)`` for a matrix-valued kernel."""
    if isinstance(kernel, ScalarMatrixKernel):
        phi, k = _svgd(particles, scores, kernel.kernel, block_size)
        return phi, _bandwidth(k)
    if isinstance(kernel, DiagonalMatrixKernel):
        phi, h = _cc_svgd(particles, scores, kernel.kernel, block_size)
        return phi, jnp.mean(h)
    if isinstance(kernel, PreconditionedKernel):
        return _preconditioned(particles, scores, kernel, block_size)
    if isinstance(kernel, MixtureKernel):
        return _mixture(particles, scores, kernel)
    return _reference(particles, scores, kernel, block_size)


def matrix_svgd_direction(
    particles: jax.Array, scores: jax.Array, kernel: AbstractMatrixKernel, *, block_size: int | None = None
) -> jax.Array:
    """The SVGD direction of a matrix-valued kernel (Theorem 1, eq. 9-10), ``[n, d]``.

    Args:
        particles: ``[n, d]``.
        scores: ``[n, d]``, ``nabla log p`` at the particles.
        kernel: a :class:`~steinax.kernels.matrix.AbstractMatrixKernel`; the
            structured kernels use their matrix-product forms (module docstring).
        block_size: row blocks for the scalar, diagonal and preconditioned
            kernels (memory O(block_size * n)); rows per batch on the reference path.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from steinax.kernels.matrix import PreconditionedKernel
        >>> x = jax.random.normal(jax.random.key(0), (50, 2))
        >>> k = PreconditionedKernel(jnp.array([[2.0, 0.5], [0.5, 1.0]]))
        >>> matrix_svgd_direction(x, -x, k).shape
        (50, 2)
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_block_size(block_size)
    if not isinstance(kernel, AbstractMatrixKernel):
        raise TypeError(
            "`kernel` must be a matrix-valued kernel (steinax.kernels.matrix.PreconditionedKernel, MixtureKernel, "
            f"ScalarMatrixKernel, ...); received {type(kernel).__name__}"
        )
    q = getattr(kernel, "preconditioner", None) or getattr(kernel, "preconditioners", None)
    _check_dim(q, particles.shape[1], "kernel.preconditioner")
    return _matrix_svgd(particles, scores, kernel, block_size)[0]


def _check_dim(preconditioner, d: int, name: str = "preconditioner") -> None:
    """A dense preconditioner must be ``[d, d]`` (one check for kernels and methods)."""
    if isinstance(preconditioner, Preconditioner) and preconditioner.vals.shape[-1] != d:
        k = preconditioner.vals.shape[-1]
        raise ValueError(f"`{name}` has shape ({k}, {k}) but the particles have d = {d}; expected ({d}, {d})")


# --------------------------------------------------------------------------- methods


class CurvatureState(eqx.Module):
    """Running average of the curvature (``[d, d]`` in average mode, ``[n, d, d]`` per particle) and its count."""

    average: object
    count: jax.Array


def _running_average(aux: CurvatureState, new, decay):
    """``rho A + (1 - rho) new`` with ``rho = min(1 - 1/t, decay)`` (the authors' code): step 1 uses ``new`` alone."""
    t = aux.count + 1
    rho = jnp.minimum(1.0 - 1.0 / t.astype(jnp.result_type(float)), decay)
    avg = jax.tree_util.tree_map(lambda a, b: (rho * a + (1.0 - rho) * b).astype(b.dtype), aux.average, new)
    return avg, CurvatureState(avg, t)


def _check_common(preconditioner, floor, damping, decay):
    if isinstance(preconditioner, str):
        if preconditioner not in PRECONDITIONERS:
            raise ValueError(
                f"`preconditioner` must be one of {PRECONDITIONERS} or a symmetric positive-definite [d, d] array; "
                f"received {preconditioner!r}"
            )
    elif not isinstance(preconditioner, Preconditioner):
        raise TypeError(
            f"`preconditioner` must be one of {PRECONDITIONERS} or a [d, d] array; received {type(preconditioner).__name__}"
        )
    if not (isinstance(floor, (int, float)) and 0.0 < floor <= 1.0):
        raise ValueError(f"`floor` must be a float in (0, 1]; received {floor!r}")
    if not (isinstance(damping, (int, float)) and damping >= 0.0):
        raise ValueError(f"`damping` must be a non-negative float; received {damping!r}")
    if not (isinstance(decay, (int, float)) and 0.0 <= decay < 1.0):
        raise ValueError(f"`decay` must be a float in [0, 1); received {decay!r}")


def _anchor_index(n: int, num_anchors: int | None):
    """The anchors' rows: all particles, or ``num_anchors`` evenly strided ones (deterministic)."""
    if num_anchors is None or num_anchors >= n:
        return slice(None)
    return jnp.asarray(np.round(np.linspace(0, n - 1, num_anchors)).astype(np.int32))


def _is_kfac(preconditioner) -> bool:
    return isinstance(preconditioner, str) and preconditioner == "kfac"


def _as_preconditioner(preconditioner):
    if isinstance(preconditioner, (str, Preconditioner)):
        return preconditioner
    if isinstance(preconditioner, AbstractPreconditioner):
        raise TypeError("a structured preconditioner is requested by name (preconditioner='kfac'), not passed")
    return Preconditioner.from_matrix(preconditioner)


class MatrixSVGD(AbstractParticleMethod):
    """Matrix-valued-kernel SVGD as a particle method (see :func:`matrix_svgd`)."""

    preconditioner: object
    mode: str = eqx.field(static=True, default="average")
    kernel: AbstractKernel = RBF("liu")
    metric: bool = eqx.field(static=True, default=True)
    floor: float = eqx.field(static=True, default=1e-2)
    damping: float = eqx.field(static=True, default=0.0)
    decay: float = eqx.field(static=True, default=0.0)
    mix: float = eqx.field(static=True, default=0.5)
    weight_variance: float | None = eqx.field(static=True, default=None)
    block_size: int | None = eqx.field(static=True, default=None)
    num_anchors: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        _check_common(self.preconditioner, self.floor, self.damping, self.decay)
        if self.mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}; received {self.mode!r}")
        if not 0.0 <= self.mix <= 1.0:
            raise ValueError(f"`mix` must be in [0, 1]; received {self.mix!r}")
        check_block_size(self.block_size)
        if self.num_anchors is not None and (isinstance(self.num_anchors, bool) or not isinstance(self.num_anchors, int)
                                             or self.num_anchors < 1):
            raise ValueError(f"`num_anchors` must be None (every particle) or a positive integer; received {self.num_anchors!r}")
        if _is_kfac(self.preconditioner) and (self.metric or (self.mode == "mixture" and self.weight_variance is None)):
            raise ValueError(
                "preconditioner='kfac' offers only a solve: use metric=False (and, in mixture mode, "
                "isotropic weights, e.g. weight_variance=1.0, as the authors' BNN code)"
            )

    def curvature_request(self):
        return self.preconditioner if isinstance(self.preconditioner, str) else None

    def init_aux(self, particles, target=None):
        _check_dim(self.preconditioner, particles.shape[1])
        if self.decay == 0.0 or not isinstance(self.preconditioner, str):
            return None
        if target is None:
            raise ValueError(
                f"matrix_svgd(decay={self.decay}) keeps a running average of the target's curvature: "
                "initialise it with `init(particles, optimizer, target)` (steinax.run does)"
            )
        # the running average has the structure of one curvature evaluation (shapes only, no computation)
        shapes = jax.eval_shape(lambda: target.curvature(self.preconditioner, jax.random.key(0), particles))
        drop = self.mode == "average"
        avg = jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape[1:] if drop else a.shape, a.dtype), shapes)
        return CurvatureState(avg, jnp.zeros((), jnp.int32))

    def _curvature(self, curvature, aux):
        if self.mode == "average":
            curvature = jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), curvature)
        if self.decay > 0.0:
            curvature, aux = _running_average(aux, curvature, self.decay)
        return curvature, aux

    def _positive_definite(self, curvature):
        if isinstance(curvature, KFACFactors):
            return curvature.preconditioner(self.damping)
        return positive_definite(curvature, self.floor, self.damping)

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        if not isinstance(self.preconditioner, str):
            kernel = PreconditionedKernel(self.preconditioner, self.kernel, self.metric)
            phi, h = _matrix_svgd(particles, scores, kernel, self.block_size)
            return phi, aux, {"bandwidth": h, "floored": jnp.zeros((), particles.dtype)}
        curvature, aux = self._curvature(curvature, aux)
        if self.mode == "average":
            q, floored = self._positive_definite(curvature)
            kernel = PreconditionedKernel(q, self.kernel, self.metric)
        else:
            idx = _anchor_index(particles.shape[0], self.num_anchors)
            mixed = jax.tree_util.tree_map(
                lambda a: (1.0 - self.mix) * a[idx] + self.mix * jnp.mean(a, axis=0, keepdims=True), curvature
            )
            q, floored = self._positive_definite(mixed)
            kernel = MixtureKernel(particles[idx], q, self.kernel, self.metric, self.weight_variance)
        phi, h = _matrix_svgd(particles, scores, kernel, self.block_size)
        return phi, aux, {"bandwidth": h, "floored": floored}


def matrix_svgd(
    preconditioner="hessian",
    mode: str = "average",
    kernel: AbstractKernel | None = None,
    *,
    metric: bool | None = None,
    floor: float = 1e-2,
    damping: float | None = None,
    decay: float | None = None,
    mix: float = 0.5,
    weight_variance: float | None = None,
    block_size: int | None = None,
    num_anchors: int | None = None,
) -> MatrixSVGD:
    """SVGD with a matrix-valued kernel (Wang et al. 2019): preconditioned by curvature.

    Args:
        preconditioner: ``"hessian"`` (``-nabla^2 log p`` by autodiff),
            ``"gauss_newton"``, ``"fisher"`` (a minibatch empirical Fisher),
            ``"kfac"`` (Kronecker-factored Fisher of a network's dense layers,
            ``steinax.models.BNNRegression``), or a fixed symmetric
            positive-definite ``[d, d]`` array ``Q``.
        mode: ``"average"``: one ``Q``, the particle average of the curvature
            (eq. 15), kernel ``K_Q`` (eq. 13). ``"mixture"``: anchors at the
            particles, each with its own ``Q_l`` (eq. 16-18).
        kernel: the scalar base kernel, default ``RBF("liu")``: the median rule
            on Q-distances (``metric=True``). The authors' toy code uses
            ``exp(-||.||_Q^2 / (2d))`` in average mode, ``RBF(2.0 * d)`` here.
        metric: evaluate the base kernel on Q-distances (the paper; default
            for dense preconditioners) or on Euclidean ones with ``Q^{-1}``
            applied to the output only (the authors' LR/BNN code; the default
            and only choice for ``"kfac"``).
        floor: relative eigenvalue floor of :func:`~steinax.kernels.matrix.positive_definite`
            (eigenvalues below ``floor * max |lambda|`` are raised to it). A
            fixed ``Q`` is never modified: it must be positive definite.
        damping: added to every eigenvalue after the floor (``Q + damping I``);
            default 0. For ``"kfac"`` it is relative to each Kronecker factor's
            mean eigenvalue (default 1e-2; :meth:`~steinax.kernels.matrix.KFACFactors.preconditioner`).
        decay: exponential moving average of the curvature across steps,
            ``rho_t = min(1 - 1/t, decay)`` as in the authors' code. Default
            0.95 for ``"fisher"`` and ``"kfac"`` (noisy minibatch estimates), 0 otherwise.
        mix: mixture mode: each anchor's curvature is ``(1 - mix) H(z_l) + mix mean_i H(x_i)``
            before the floor (the authors' code: 0.5), so no anchor's ``Q_l`` is
            far from the average.
        weight_variance: mixture weights ``N(x; z_l, Q_l^{-1})`` (``None``, the
            paper) or isotropic ``N(x; z_l, sigma^2 I)`` (``"kfac"``'s default:
            1.0, the authors' code).
        block_size: row blocks of the average mode's pairwise work.
        num_anchors: mixture mode: use ``m`` evenly strided particles as anchors
            instead of all ``n`` (the paper's choice); cost O(m (n^2 d + n d^2 + d^3)).

    Cost per step (average mode): ``n`` curvature evaluations (a Hessian is
    ``d`` Hessian-vector products, batched over particles), one ``eigh`` of a
    ``d x d`` matrix, and SVGD's O(n^2 d) pairwise work. Mixture mode: ``n``
    ``eigh``s and O(n (n^2 d + n d^2)).

    Example:
        >>> import jax, jax.numpy as jnp, optax, steinax
        >>> from steinax.targets import Gaussian
        >>> target = Gaussian(jnp.zeros(2), jnp.array([[1.0, 0.9], [0.9, 1.0]]))
        >>> x0 = jax.random.normal(jax.random.key(0), (50, 2)) + 3.0
        >>> res = steinax.run(steinax.matrix_svgd("hessian"), target, x0, steps=100,
        ...                   optimizer=optax.sgd(0.5), rng_key=jax.random.key(1))
        >>> bool(jnp.all(jnp.abs(res.particles.mean(0)) < 0.2))
        True
    """
    if decay is None:
        decay = 0.95 if isinstance(preconditioner, str) and preconditioner in ("fisher", "kfac") else 0.0
    if damping is None:
        damping = 1e-2 if _is_kfac(preconditioner) else 0.0
    if metric is None:
        metric = not _is_kfac(preconditioner)
    if weight_variance is None and _is_kfac(preconditioner) and mode == "mixture":
        weight_variance = 1.0
    return MatrixSVGD(
        preconditioner=_as_preconditioner(preconditioner),
        mode=mode,
        kernel=as_kernel(kernel, RBF("liu")),
        metric=metric,
        floor=floor,
        damping=damping,
        decay=decay,
        mix=mix,
        weight_variance=weight_variance,
        block_size=block_size,
        num_anchors=num_anchors,
    )


# --------------------------------------------------------------------------- SVN


def svn_direction(particles, scores, curvatures: Preconditioner, kernel: AbstractKernel, outer: str = "mean"):
    """Stein variational Newton's direction ``H~_i^{-1} g_i`` (matrix-SVGD paper eq. 19; Detommaso et al. 2018).

    ``A`` is the particle average of ``curvatures`` (each positive definite);
    the scalar kernel is evaluated on A-distances, ``k_ij = kappa(||x_i - x_j||_A^2 / h)``,
    so ``nabla_{x_j} k_ij = (2/h) kappa'_ij A (x_j - x_i)``, and

    * ``g_i = (1/n) sum_j [k_ij nabla log p(x_j) + nabla_{x_j} k_ij]`` (SVGD's direction),
    * ``H~_i = (1/n) sum_j H_j k_ij^2 + c sum_j nabla_{x_j} k_ij nabla_{x_j} k_ij^T``
      with ``c = 1/n`` (``outer="mean"``, the paper's expectation) or ``c = 1``
      (``outer="sum"``, the authors' code; ALGORITHMS.md section C).

    Cost O(n^2 d^2 + n d^3) time, O(n d^2) memory.

    Returns:
        ``(phi, bandwidth)``.
    """
    n, d = particles.shape
    hmats = curvatures.matrix  # [n, d, d]
    a_mat = jnp.mean(hmats, axis=0)
    a = Preconditioner(*reversed(jnp.linalg.eigh(0.5 * (a_mat + a_mat.T))))
    y = a.whiten_rows(particles)
    sqdist = squared_distances(y, y)
    kernel = kernel.resolve(y, sqdist)
    kap, d1, _ = kernel.profile(kernel.scaled_sqdist(y, y, sqdist))
    c = 2.0 / kernel.scale
    # n g = K S + (sum_j (2/h) kappa'_ij (x_j - x_i)) A = (K S A^{-1} + repulsion) A: SVGD's engine, then A
    g = a.matmul_rows(stein_direction_rows(kap, d1, particles, particles, a.solve_rows(scores), c,
                                           kernel.derivative_ratio)) / n
    cov = _weighted_difference_outer(d1 * d1, particles)
    outer_scale = 1.0 / n if outer == "mean" else 1.0
    grad_term = outer_scale * c * c * jnp.einsum("ab,ibc,cd->iad", a_mat, cov, a_mat)
    h_tilde = ((kap * kap) @ hmats.reshape(n, d * d)).reshape(n, d, d) / n + grad_term
    phi = serial_batch(lambda h, v: jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(h), True), v),
                       0.5 * (h_tilde + jnp.swapaxes(h_tilde, 1, 2)), g)
    return phi, jnp.mean(kernel.scale)


def _weighted_difference_outer(weights, particles):
    """``C_i = sum_j W_ij (x_j - x_i)(x_j - x_i)^T`` (``[n, d, d]``), from the differences themselves.

    The expanded form ``sum_j W_ij x_j x_j^T - x_i w_i^T - w_i x_i^T + (sum_j W_ij) x_i x_i^T``
    cancels: with a kernel narrower than the spread, ``C_i`` is far smaller than its four
    terms, and in float32 SVN's direction was off by up to 5e-2 (n = 100, ``RBF(0.5)``)
    where a naive loop is within 1.5e-6. Here each row block forms its ``[rows, n, d]``
    differences (blocks of about 2^21 entries, so never the ``n x n x d`` tensor) and
    contracts them in one batched product; the cost is the same O(n^2 d^2).
    """
    n, d = particles.shape
    rows = max(1, min(n, 2**21 // max(1, n * d)))

    def block(w_rows, x_rows):
        diff = particles[None, :, :] - x_rows[:, None, :]  # [rows, n, d]
        return jnp.einsum("rja,rj,rjb->rab", diff, w_rows, diff)

    return map_row_blocks(block, n, rows, weights, particles)


class SVN(AbstractParticleMethod):
    """Stein variational Newton as the matrix-SVGD paper compares it (see :func:`svn`)."""

    preconditioner: str = eqx.field(static=True, default="hessian")
    kernel: AbstractKernel = RBF("liu")
    outer: str = eqx.field(static=True, default="mean")
    floor: float = eqx.field(static=True, default=1e-2)
    damping: float = eqx.field(static=True, default=0.0)

    def __check_init__(self):
        _check_common(self.preconditioner, self.floor, self.damping, 0.0)
        if _is_kfac(self.preconditioner):
            raise ValueError("SVN needs dense curvature matrices; `preconditioner` 'kfac' is not supported")
        if self.outer not in ("mean", "sum"):
            raise ValueError(f"`outer` must be 'mean' (the paper) or 'sum' (the authors' code); received {self.outer!r}")

    def curvature_request(self):
        return self.preconditioner

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        q, floored = positive_definite(curvature, self.floor, self.damping)
        phi, h = _svn(particles, scores, q, self.kernel, self.outer)
        return phi, aux, {"bandwidth": h, "floored": floored}


_svn = eqx.filter_jit(svn_direction)


def svn(
    preconditioner: str = "hessian",
    kernel: AbstractKernel | None = None,
    *,
    outer: str = "mean",
    floor: float = 1e-2,
    damping: float = 0.0,
) -> SVN:
    """Stein variational Newton (Detommaso et al. 2018) in the matrix-SVGD paper's form (eq. 19).

    ``x_i <- x_i + eps H~_i^{-1} phi(x_i)``; see :func:`svn_direction`.

    Args:
        preconditioner: the curvature ``H``: ``"hessian"``, ``"gauss_newton"`` or ``"fisher"``,
            made positive definite per particle as in :func:`matrix_svgd`.
        kernel: default ``RBF("liu")`` on A-distances (``A`` the average ``H``).
            Detommaso et al. and the authors' toy code use ``exp(-||.||_A^2 / 2)``:
            ``RBF(2.0)``.
        outer: ``"mean"`` (the paper's expectation, default) or ``"sum"`` (the
            authors' code) for the kernel-gradient outer products of ``H~``.
    """
    return SVN(preconditioner=preconditioner, kernel=_check_base_kernel(kernel, "kernel"), outer=outer, floor=floor,
               damping=damping)
