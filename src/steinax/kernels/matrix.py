"""Matrix-valued kernels ``K(x, x') in R^{d x d}`` and positive-definite preconditioners.

Matrix SVGD (Wang, Tang, Bajaj & Liu 2019) replaces SVGD's scalar kernel by a
matrix-valued one. The direction of Theorem 1 / Algorithm 1 (eq. 9-10),

.. math::

    \\phi(x_i) = \\frac1n \\sum_j \\left[ K(x_i, x_j) \\nabla \\log p(x_j) + K(x_i, x_j) \\nabla_{x_j} \\right],
    \\qquad (K(x, x')\\nabla_{x'})_\\ell = \\sum_m \\partial_{x'_m} K_{\\ell m}(x, x'),

is computed by :func:`steinax.particles.matrix_svgd_direction`; this module
defines the kernels:

* :class:`AbstractMatrixKernel`, the general interface: ``K(x, x')`` and its
  divergence in ``x'``. Any subclass works with the direction through a
  reference path (pairs visited explicitly, O(n^2 d^3) time; for tests and
  small problems).
* The structured kernels, whose directions are matrix products (never an
  ``n x n x d`` or ``n x n x d x d`` tensor):

  - :class:`ScalarMatrixKernel`: ``k(x, x') I``, vanilla SVGD (the radial fast path),
  - :class:`DiagonalMatrixKernel`: ``diag_l k(x_l, x'_l)``, CC-SVGD,
  - :class:`PreconditionedKernel`: ``K_Q = Q^{-1} k(Q^{1/2} x, Q^{1/2} x')`` (eq. 12-13),
  - :class:`MixtureKernel`: ``sum_l w_l(x) w_l(x') K_{Q_l}(x, x')`` with anchors (eq. 16-18).

Bandwidth convention (decided once, :mod:`steinax.kernels.base`): the RBF is
``exp(-s / h)``. With ``s = ||x - x'||_Q^2 = (x - x')^T Q (x - x')`` the paper's
``exp(-||x - x'||_Q^2 / (2 h_paper))`` is ``h = 2 h_paper``; the authors' toy
code takes ``h_paper = d`` (the SVN "scaled Hessian" bandwidth), i.e.
``RBF(2 d)``. steinax's default is the median rule on the Q-distances
(``RBF("liu")`` resolved on the whitened particles ``Q^{1/2} x``).

Preconditioners (:class:`Preconditioner`) are stored by their
eigendecomposition ``Q = V diag(lam) V^T``, so ``Q^{-1}``, ``Q^{1/2}`` and
``log det Q`` cost one ``eigh`` (O(d^3)) and then matrix products;
:func:`positive_definite` turns a symmetric curvature (a Hessian, which may be
indefinite) into one with a documented eigenvalue floor.
"""

from __future__ import annotations

import abc
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax import _linalg
from steinax._linalg import serial_batch
from steinax._validation import is_concrete
from steinax.kernels.base import RBF, AbstractKernel, as_kernel

__all__ = [
    "AbstractPreconditioner",
    "Preconditioner",
    "positive_definite",
    "KFACFactors",
    "KroneckerPreconditioner",
    "AbstractMatrixKernel",
    "CallableMatrixKernel",
    "ScalarMatrixKernel",
    "DiagonalMatrixKernel",
    "PreconditionedKernel",
    "MixtureKernel",
]


# --------------------------------------------------------------------------- preconditioners


class AbstractPreconditioner(eqx.Module):
    """A symmetric positive-definite ``Q`` acting on rows (``v -> v Q^{-1}`` etc.).

    Every method acts on ``[..., d]`` row vectors (``Q`` is symmetric, so row and
    column forms agree). :class:`Preconditioner` implements all of them; a
    structured one (KFAC) may implement only :meth:`solve_rows`.
    """

    @abc.abstractmethod
    def solve_rows(self, v: jax.Array) -> jax.Array:
        """``v Q^{-1}``."""

    def _unsupported(self, what):
        raise NotImplementedError(
            f"{type(self).__name__} supports only `solve_rows`; {what} needs a dense Preconditioner "
            "(use metric=False and isotropic mixture weights with this preconditioner)"
        )

    def matmul_rows(self, v):
        """``v Q``."""
        self._unsupported("matmul_rows")

    def whiten_rows(self, x):
        """``x L`` with ``L L^T = Q``: ``||x L - y L||^2 = (x - y)^T Q (x - y)``."""
        self._unsupported("the Q-metric kernel")

    def whiten_scores(self, s):
        """``s L^{-T}``: the score in the whitened coordinates ``y = L^T x``."""
        self._unsupported("the Q-metric kernel")

    def unwhiten_rows(self, v):
        """``v L^{-1}``: a velocity of the whitened coordinates mapped back."""
        self._unsupported("the Q-metric kernel")

    @property
    def logdet(self):
        """``log det Q``."""
        self._unsupported("log det Q (preconditioner-shaped mixture weights)")


class Preconditioner(AbstractPreconditioner):
    """``Q = V diag(vals) V^T`` (``vals > 0``), possibly batched over leading axes.

    Build one with :meth:`from_matrix` (a fixed, user-given ``Q``: checked to be
    symmetric positive definite) or :func:`positive_definite` (a curvature made
    positive definite). ``L = V diag(sqrt(vals))`` is the whitening factor.
    """

    vecs: jax.Array
    vals: jax.Array

    @classmethod
    def from_matrix(cls, matrix, name: str = "preconditioner") -> "Preconditioner":
        """A fixed ``[d, d]`` symmetric positive-definite ``Q``.

        Raises:
            ValueError: wrong shape, not symmetric (relative tolerance 1e-6 in
                float64, 1e-4 in float32), or not positive definite (it is not
                made so silently: a fixed preconditioner is the user's choice).
        """
        q = jnp.asarray(matrix)
        if not jnp.issubdtype(q.dtype, jnp.floating):
            q = q.astype(jnp.result_type(float))
        if q.ndim != 2 or q.shape[0] != q.shape[1] or q.shape[0] == 0:
            raise ValueError(f"`{name}` must be a square [d, d] matrix; received shape {tuple(q.shape)}")
        if is_concrete(q):
            qn = np.asarray(q, dtype=np.float64)
            if not np.all(np.isfinite(qn)):
                raise ValueError(f"`{name}` must be finite; it holds NaN or inf")
            tol = 1e-6 if q.dtype == jnp.float64 else 1e-4
            asym = np.max(np.abs(qn - qn.T)) / max(np.max(np.abs(qn)), np.finfo(float).tiny)
            if asym > tol:
                raise ValueError(
                    f"`{name}` must be symmetric; max |Q - Q^T| / max |Q| = {asym:.3g} (tolerance {tol:g})"
                )
            eig = np.linalg.eigvalsh(0.5 * (qn + qn.T))
            if eig[0] <= 0:
                raise ValueError(
                    f"`{name}` must be positive definite; its smallest eigenvalue is {eig[0]:.4g}. "
                    "A fixed Q is used as given: pass a positive-definite matrix (e.g. add a multiple of I)"
                )
        vals, vecs = jnp.linalg.eigh(0.5 * (q + q.T))
        return cls(vecs=vecs, vals=vals)

    @property
    def dim(self) -> int:
        return self.vals.shape[-1]

    def _rows(self, vals, v):
        """``vals`` (``[d]``, one preconditioner) broadcast against rows ``v`` ``[..., d]``."""
        if self.vals.ndim != 1:
            raise ValueError("apply a batched Preconditioner one matrix at a time (index it first)")
        return vals.reshape((1,) * (v.ndim - 1) + vals.shape)

    def _apply(self, v, scale):
        return (v @ self.vecs) * self._rows(scale, v) @ self.vecs.T

    def solve_rows(self, v):
        return self._apply(v, 1.0 / self.vals)

    def matmul_rows(self, v):
        return self._apply(v, self.vals)

    def whiten_rows(self, x):
        return (x @ self.vecs) * self._rows(jnp.sqrt(self.vals), x)

    def whiten_scores(self, s):
        return (s @ self.vecs) / self._rows(jnp.sqrt(self.vals), s)

    def unwhiten_rows(self, v):
        return (v / self._rows(jnp.sqrt(self.vals), v)) @ self.vecs.T

    @property
    def logdet(self):
        return jnp.sum(jnp.log(self.vals), axis=-1)

    @property
    def matrix(self) -> jax.Array:
        """``Q`` as a dense matrix."""
        return jnp.einsum("...ik,...k,...jk->...ij", self.vecs, self.vals, self.vecs)

    @property
    def inverse(self) -> jax.Array:
        """``Q^{-1}`` as a dense matrix."""
        return jnp.einsum("...ik,...k,...jk->...ij", self.vecs, 1.0 / self.vals, self.vecs)


def positive_definite(curvature: jax.Array, floor: float = 1e-2, damping: float = 0.0):
    """Make symmetric ``[..., d, d]`` curvature matrices positive definite.

    The rule (one ``eigh`` per matrix): symmetrise, then replace every
    eigenvalue ``lam_k`` by ``max(lam_k, floor * max_k |lam_k|) + damping``. The
    floor is relative, so the rule does not depend on the target's scale; it
    bounds the condition number of ``Q`` by ``1 / floor`` and caps how far
    ``Q^{-1}`` can stretch a step along a direction of negative or zero
    curvature (a Hessian is indefinite off the modes of a banana or a mixture).
    A matrix with no scale at all (all eigenvalues 0, or not finite) becomes the
    identity: vanilla SVGD for that step.

    Returns:
        ``(Preconditioner, floored)``: ``floored`` is the fraction of eigenvalues
        the floor raised (0 when the curvatures were already well conditioned);
        the particle methods report it in the trace.
    """
    h = 0.5 * (curvature + jnp.swapaxes(curvature, -1, -2))
    vals, vecs = _linalg.eigh(h)
    scale = jnp.max(jnp.abs(vals), axis=-1, keepdims=True)
    ok = (scale > 0) & jnp.all(jnp.isfinite(vals), axis=-1, keepdims=True)
    tau = floor * scale
    floored = ok & (vals < tau)
    vals = jnp.where(ok, jnp.maximum(vals, tau), 1.0) + damping
    eye = jnp.broadcast_to(jnp.eye(h.shape[-1], dtype=h.dtype), h.shape)
    vecs = jnp.where(ok[..., None], vecs, eye)
    return Preconditioner(vecs=vecs, vals=vals), jnp.mean(floored.astype(h.dtype))


def _layer_index(layer) -> np.ndarray:
    """Flat indices ``[n_in (+1), n_out]`` of a dense layer's weights (row-major) and bias (last row)."""
    w0, n_in, n_out, b0 = layer
    idx = w0 + np.arange(n_in * n_out).reshape(n_in, n_out)
    if b0 >= 0:
        idx = np.concatenate([idx, b0 + np.arange(n_out)[None, :]], axis=0)
    return idx


class KroneckerPreconditioner(AbstractPreconditioner):
    """Block-diagonal ``Q`` with a Kronecker block ``A_l (x) G_l`` per dense layer, identity elsewhere.

    ``layout`` holds, per layer, ``(weight offset, n_in, n_out, bias offset or -1)``
    in the flat particle; a layer's weights are ``W [n_in, n_out]`` row-major
    and its bias (if any) is treated as an extra input row (activation 1).
    Stores the inverses, so ``solve_rows`` maps each layer's block ``V`` to
    ``A_l^{-1} V G_l^{-1}`` (Martens & Grosse 2015).
    """

    a_inv: tuple
    g_inv: tuple
    layout: tuple = eqx.field(static=True)

    def solve_rows(self, v):
        # gathers only: the blocks and the untouched coordinates are concatenated and put back in
        # place by one static permutation
        dim = v.shape[-1]
        idx = [_layer_index(layer) for layer in self.layout]
        covered = np.concatenate([i.reshape(-1) for i in idx])
        rest = np.setdiff1d(np.arange(dim), covered)
        pieces = [
            jnp.einsum("ij,...jk,kl->...il", a_inv, v[..., i], g_inv).reshape(v.shape[:-1] + (-1,))
            for a_inv, g_inv, i in zip(self.a_inv, self.g_inv, idx)
        ]
        pieces.append(v[..., rest])
        inverse = np.argsort(np.concatenate([covered, rest]))
        return jnp.concatenate(pieces, axis=-1)[..., inverse]


class KFACFactors(eqx.Module):
    """Kronecker factors of the Fisher of a network's dense layers (one set per particle, or averaged).

    Layer ``l``'s Fisher block is approximated by ``A_l (x) G_l`` with
    ``A_l = mean_b a_b a_b^T`` (the layer's inputs, with a 1 appended for a
    bias) and ``G_l = N mean_b g_b g_b^T`` (``g_b`` the per-example gradient of
    the log-likelihood with respect to the layer's pre-activations), from the
    step's minibatch. Produced by a model's target (``BNNRegression.target(...).kfac``).
    """

    a: tuple
    g: tuple
    layout: tuple = eqx.field(static=True)

    def preconditioner(self, damping: float):
        """``(KroneckerPreconditioner, floored=0)`` with inverses of ``A_l + eps_A I`` and ``G_l + eps_G I``.

        The damping is relative: ``eps = damping * tr(F) / dim(F)`` for each factor
        ``F``, so it does not depend on the scale of the data or of ``N`` (the
        authors' BNN code adds an absolute 5e-3, or 5e-2 on Boston and Wine, to
        factors computed without ``N``).
        """

        def inv(f):
            # by Cholesky (an LU inverse is slow on XLA:CPU), one matrix at a time (steinax._linalg)
            m = f.shape[-1]
            trace = jnp.trace(f, axis1=-2, axis2=-1)
            eps = jnp.where(trace > 0, damping * trace / m, 1.0)  # an all-zero factor (no signal) becomes I
            eye = jnp.broadcast_to(jnp.eye(m, dtype=f.dtype), f.shape)
            reg = 0.5 * (f + jnp.swapaxes(f, -1, -2)) + eps[..., None, None] * eye
            return serial_batch(lambda r, e: jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(r), True), e), reg, eye)

        pre = KroneckerPreconditioner(tuple(inv(a) for a in self.a), tuple(inv(g) for g in self.g), self.layout)
        return pre, jnp.zeros((), self.a[0].dtype)


# --------------------------------------------------------------------------- matrix-valued kernels


class AbstractMatrixKernel(eqx.Module):
    """A matrix-valued positive-definite kernel ``K(x, x') in R^{d x d}``.

    Subclasses define :meth:`__call__`; :meth:`divergence_y` defaults to
    forward-mode autodiff of ``K`` (``d`` forward passes per pair). Kernels with
    data-dependent parameters (median bandwidths) override :meth:`resolve`.
    """

    @abc.abstractmethod
    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``K(x, y)``, ``[d, d]``, for two points of shape ``[d]`` (resolved kernel)."""

    def divergence_y(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``(K(x, y) nabla_y)_l = sum_m d K_lm(x, y) / d y_m`` (eq. 10), ``[d]``."""
        jac = jax.jacfwd(lambda yy: self(x, yy))(y)  # [d, d, d]: (l, m, p) = d K_lm / d y_p
        return jnp.einsum("lmm->l", jac)

    def resolve(self, particles: jax.Array) -> "AbstractMatrixKernel":
        """This kernel with every data-dependent parameter fixed from ``particles``."""
        del particles
        return self


class CallableMatrixKernel(AbstractMatrixKernel):
    """Any differentiable ``fn(x, y) -> [d, d]`` as a matrix-valued kernel (the general path).

    For kernels that are neither radial nor one of the structured forms
    (e.g. ``(x . y + 1) k(x, y) I``, or a kernel built from a GP library);
    the direction is computed pair by pair (O(n^2 d^3)). ``fn`` must be
    positive definite for the SVGD theory to hold; that is the caller's promise.
    """

    fn: Callable = eqx.field(static=True)

    def __call__(self, x, y):
        return self.fn(x, y)


class ScalarMatrixKernel(AbstractMatrixKernel):
    """``K(x, x') = k(x, x') I`` for a scalar kernel ``k``: vanilla SVGD."""

    kernel: AbstractKernel

    def __init__(self, kernel: AbstractKernel | None = None):
        self.kernel = as_kernel(kernel, RBF("liu"))

    def __call__(self, x, y):
        return self.kernel(x, y) * jnp.eye(x.shape[-1], dtype=x.dtype)

    def resolve(self, particles):
        return ScalarMatrixKernel(self.kernel.resolve(particles))


class DiagonalMatrixKernel(AbstractMatrixKernel):
    """``K(x, x') = diag_l k_l(x_l, x'_l)``: one univariate kernel per coordinate (CC-SVGD).

    ``k_l = kernel.coordinate(l)``; a median rule is resolved on coordinate
    ``l`` alone (default ``RBF("per_dimension")``, as :func:`steinax.cc_svgd`).
    """

    kernel: AbstractKernel

    def __init__(self, kernel: AbstractKernel | None = None):
        self.kernel = as_kernel(kernel, RBF("per_dimension"))

    def __call__(self, x, y):
        vals = jnp.stack([self.kernel.coordinate(i)(x[i : i + 1], y[i : i + 1]) for i in range(x.shape[-1])])
        return jnp.diag(vals)

    def resolve(self, particles):
        if isinstance(self.kernel, RBF) and self.kernel.rule is not None:
            if self.kernel.rule != "per_dimension":
                raise ValueError(
                    "DiagonalMatrixKernel.resolve supports RBF('per_dimension') or a fixed bandwidth; "
                    f"received RBF({self.kernel.rule!r})"
                )
            return DiagonalMatrixKernel(self.kernel.resolve(particles))
        return self


def _check_base_kernel(kernel: AbstractKernel, name: str) -> AbstractKernel:
    kernel = as_kernel(kernel, RBF("liu"), name)
    if isinstance(kernel, RBF):
        if kernel.rule == "per_dimension":
            raise ValueError(
                f"`{name}` of a preconditioned kernel must be isotropic in the Q-metric; "
                "received RBF('per_dimension'): use RBF('liu'), RBF('pairs') or a scalar bandwidth"
            )
        if kernel.bandwidth is not None and kernel.bandwidth.ndim == 1:
            raise ValueError(
                f"`{name}` of a preconditioned kernel needs a scalar bandwidth; received shape "
                f"{tuple(kernel.bandwidth.shape)}"
            )
    return kernel


class PreconditionedKernel(AbstractMatrixKernel):
    """The constant-preconditioner kernel (eq. 12-13).

    ``metric=True`` (the paper): ``K_Q(x, x') = Q^{-1} k(Q^{1/2} x, Q^{1/2} x')``,
    the scalar kernel evaluated on Q-distances. By Theorem 3 its direction is
    SVGD run in the whitened coordinates and mapped back (eq. 14), which is how
    :func:`~steinax.particles.matrix_svgd_direction` computes it.

    ``metric=False``: ``K(x, x') = Q^{-1} k(x, x')``, the Euclidean kernel with a
    preconditioned output (the authors' logistic-regression and BNN code); its
    direction is ``Q^{-1}`` times vanilla SVGD's. Needed by preconditioners that
    only offer a solve (KFAC).
    """

    preconditioner: AbstractPreconditioner
    kernel: AbstractKernel
    metric: bool = eqx.field(static=True, default=True)

    def __init__(self, preconditioner, kernel: AbstractKernel | None = None, metric: bool = True):
        if not isinstance(preconditioner, AbstractPreconditioner):
            preconditioner = Preconditioner.from_matrix(preconditioner)
        self.preconditioner = preconditioner
        self.kernel = _check_base_kernel(kernel, "kernel")
        self.metric = bool(metric)

    def _inputs(self, x):
        return self.preconditioner.whiten_rows(x) if self.metric else x

    def __call__(self, x, y):
        k = self.kernel(self._inputs(x), self._inputs(y))
        return k * self.preconditioner.solve_rows(jnp.eye(x.shape[-1], dtype=x.dtype))

    def resolve(self, particles):
        return PreconditionedKernel(self.preconditioner, self.kernel.resolve(self._inputs(particles)), self.metric)


class MixtureKernel(AbstractMatrixKernel):
    """The mixture-preconditioner kernel (eq. 16-18).

    ``K(x, x') = sum_l w_l(x) w_l(x') K_l(x, x')`` over anchors ``z_l`` with
    preconditioners ``Q_l`` (a batched :class:`AbstractPreconditioner`, leading
    axis ``m``), ``K_l`` the :class:`PreconditionedKernel` of ``Q_l``.

    Weights (eq. 17): ``w_l(x) = N(x; z_l, Q_l^{-1}) / sum_l' N(x; z_l', Q_l'^{-1})``
    (``weight_variance=None``, the paper), or the isotropic
    ``N(x; z_l, sigma^2 I)`` with ``sigma^2 = weight_variance`` (the authors'
    logistic-regression and BNN code use ``sigma^2 = 1``). They sum to one over
    ``l`` at every ``x``.

    The base kernel is resolved per anchor in that anchor's metric
    (``metric=True``), or once on the particles (``metric=False``).
    """

    anchors: jax.Array
    preconditioners: AbstractPreconditioner
    kernel: AbstractKernel
    metric: bool = eqx.field(static=True, default=True)
    weight_variance: float | None = eqx.field(static=True, default=None)

    def __init__(self, anchors, preconditioners, kernel=None, metric: bool = True, weight_variance=None):
        self.anchors = jnp.asarray(anchors)
        if self.anchors.ndim != 2:
            raise ValueError(f"`anchors` must have shape [m, d]; received shape {tuple(self.anchors.shape)}")
        self.preconditioners = preconditioners
        self.kernel = _check_base_kernel(kernel, "kernel")
        self.metric = bool(metric)
        if weight_variance is not None and not float(weight_variance) > 0:
            raise ValueError(f"`weight_variance` must be None or a positive float; received {weight_variance!r}")
        self.weight_variance = None if weight_variance is None else float(weight_variance)

    def component(self, l) -> PreconditionedKernel:
        """Anchor ``l``'s kernel ``K_{Q_l}`` (base kernel as stored: resolve before evaluating)."""
        q = jax.tree_util.tree_map(lambda a: a[l], self.preconditioners)
        return PreconditionedKernel(q, self.kernel, self.metric)

    def log_anchor_density(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(log N(x_j; z_l, .), nabla_x log N(x_j; z_l, .))`` for all ``l``: ``[m, n]`` and ``[m, n, d]``."""

        def one(z, q):
            diff = x - z[None, :]
            if self.weight_variance is None:
                wz = q.whiten_rows(diff)
                return -0.5 * jnp.sum(wz * wz, axis=-1) + 0.5 * q.logdet, -q.matmul_rows(diff)
            return -0.5 * jnp.sum(diff * diff, axis=-1) / self.weight_variance, -diff / self.weight_variance

        return jax.vmap(one)(self.anchors, self.preconditioners)

    def weights(self, x: jax.Array) -> jax.Array:
        """``w_l(x_j)`` as ``[m, n]``; each column sums to one."""
        logn, _ = self.log_anchor_density(x)
        return jax.nn.softmax(logn, axis=0)

    def __call__(self, x, y):
        wx, wy = self.weights(x[None])[:, 0], self.weights(y[None])[:, 0]

        def one(l):
            comp = self.component(l)
            if isinstance(comp.kernel, RBF) and comp.kernel.rule is not None:
                raise ValueError("evaluate a MixtureKernel with a fixed bandwidth (median rules are resolved per step)")
            return wx[l] * wy[l] * comp(x, y)

        return jnp.sum(jax.vmap(one)(jnp.arange(self.anchors.shape[0])), axis=0)
