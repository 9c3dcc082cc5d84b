"""Scalar kernels as immutable pytrees with analytic derivatives.

Every scalar kernel in steinax is a function of the scaled squared distance

.. math::

    k(x, y) = \\kappa(s), \\qquad s = \\sum_d (x_d - y_d)^2 / h_d,

with a profile :math:`\\kappa` and a scale :math:`h` (a scalar or one value per
coordinate). The derivatives follow from :math:`\\kappa'` and :math:`\\kappa''`
alone, and this module is the one place they are written:

.. math::

    \\nabla_x k = 2\\kappa'(s)\\,(x - y)/h, \\qquad
    \\nabla_y k = -2\\kappa'(s)\\,(x - y)/h,

    \\operatorname{tr} \\nabla_x \\nabla_y k
      = -2\\kappa'(s) \\sum_d 1/h_d - 4\\kappa''(s) \\sum_d (x_d - y_d)^2 / h_d^2.

The matrix-product engines (:mod:`steinax.stein`, :mod:`steinax.particles`)
use :meth:`AbstractKernel.profile` and these identities on whole matrices.

Kernels follow equinox's abstract/final pattern: ``AbstractKernel`` is
abstract, ``RBF`` and ``IMQ`` are final.
"""

from __future__ import annotations

import functools

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._validation import check_positive, is_concrete
from steinax.kernels.bandwidth import BANDWIDTH_RULES, median_bandwidth
from steinax.kernels.pairwise import squared_distances

__all__ = ["AbstractKernel", "RBF", "IMQ", "as_kernel"]


class AbstractKernel(eqx.Module):
    """A kernel ``k(x, y) = kappa(sum_d (x_d - y_d)^2 / h_d)``.

    Subclasses define :meth:`profile` and :attr:`scale`; kernels whose
    parameters depend on the particles (a median bandwidth) override
    :meth:`resolve`.
    """

    @abc.abstractmethod
    def profile(self, s: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Return ``(kappa(s), kappa'(s), kappa''(s))`` elementwise."""

    @property
    def derivative_ratio(self) -> float | None:
        """A constant ``r`` with ``kappa'(s) = r kappa(s)`` for all ``s``, if one exists.

        Engines use it to fuse matrix products (SVGD needs one ``n x n`` by
        ``n x d`` product instead of two). ``None`` (the default) means no such constant.
        """
        return None

    @property
    def second_derivative_ratio(self) -> float | None:
        """A constant ``r2`` with ``kappa''(s) = r2 kappa(s)`` for all ``s``, if one exists (RBF: 1)."""
        return None

    @property
    @abc.abstractmethod
    def scale(self) -> jax.Array | None:
        """The scale ``h``: ``None`` (meaning 1), a scalar, or a ``[d]`` vector."""

    def resolve(
        self, particles: jax.Array, sqdist: jax.Array | None = None, block_size: int | None = None, axis_name=None
    ) -> "AbstractKernel":
        """Return this kernel with every data-dependent parameter fixed, in the particles' dtype.

        ``sqdist`` are the unscaled ``[n, n]`` squared distances of ``particles``
        when the caller has them (reused by median rules); without them,
        ``block_size`` bounds the memory of any rule that needs distances.
        ``axis_name``: inside ``shard_map`` (:mod:`steinax.runtime.sharding`), ``particles``
        are all (gathered) particles and the rule's work is split over this axis.
        """
        del sqdist, block_size, axis_name
        dtype = particles.dtype
        return jax.tree_util.tree_map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, self)

    @property
    def is_resolved(self) -> bool:
        return True

    @property
    def reads_distances(self) -> bool:
        """Whether :meth:`resolve` reads the ``[n, n]`` squared distances (a ``"liu"``/``"pairs"`` median rule).

        Engines store the distances for it when they fit (:func:`~steinax.kernels.pairwise.pairwise_plan`).
        """
        return False

    def coordinate(self, i) -> "AbstractKernel":
        """The univariate kernel acting on coordinate ``i`` (coordinate-wise kernels, CC-SVGD).

        Kernels whose parameters are shared by all coordinates return themselves;
        a per-coordinate scale is sliced.
        """
        del i
        return self

    # ----- single-pair evaluation (the formulas of the module docstring) -----

    def _pair(self, x, y):
        h = self.scale
        diff = x - y
        if h is None:
            h = jnp.ones((), x.dtype)
        s = jnp.sum(diff * diff / h)
        return diff, h, s

    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``k(x, y)`` for two points of shape ``[d]``."""
        _, _, s = self._pair(x, y)
        return self.profile(s)[0]

    def grad_x(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``nabla_x k(x, y) = 2 kappa'(s) (x - y) / h``."""
        diff, h, s = self._pair(x, y)
        return 2.0 * self.profile(s)[1] * diff / h

    def grad_y(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``nabla_y k(x, y) = -2 kappa'(s) (x - y) / h``."""
        return -self.grad_x(x, y)

    def trace_grad_xy(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``tr nabla_x nabla_y k = -2 kappa' sum_d 1/h_d - 4 kappa'' sum_d (x_d - y_d)^2 / h_d^2``."""
        diff, h, s = self._pair(x, y)
        _, d1, d2 = self.profile(s)
        inv_h_sum = jnp.sum(jnp.broadcast_to(1.0 / h, diff.shape))
        return -2.0 * d1 * inv_h_sum - 4.0 * d2 * jnp.sum(diff * diff / (h * h))

    # ----- matrices -----

    def scaled_sqdist(
        self, x: jax.Array, y: jax.Array, sqdist: jax.Array | None = None, row_index: jax.Array | None = None
    ) -> jax.Array:
        """``[n, m]`` matrix of ``s_ij``; reuses unscaled ``sqdist`` when the scale is scalar.

        ``row_index``: when ``x`` is a row block of ``y`` (see :func:`~steinax.kernels.squared_distances`).
        """
        h = self.scale
        if h is None or jnp.ndim(h) == 0:
            d2 = squared_distances(x, y, row_index=row_index) if sqdist is None else sqdist
            return d2 if h is None else d2 / h
        return squared_distances(x, y, h, row_index=row_index)

    def gram(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``[n, m]`` Gram matrix ``k(x_i, y_j)`` (kernel must be resolved)."""
        return self.profile(self.scaled_sqdist(x, y))[0]


def _as_positive_array(value, name):
    arr = jnp.asarray(value)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    if arr.ndim > 1:
        raise ValueError(f"`{name}` must be a scalar or a [d] vector; received shape {arr.shape}")
    check_positive(arr, name)
    return arr


class RBF(AbstractKernel):
    """Gaussian RBF kernel ``k(x, y) = exp(-sum_d (x_d - y_d)^2 / h_d)``, the papers' form.

    With a scalar ``h`` this is ``exp(-||x - y||^2 / h)`` (MK-SVGD paper, sec. 3;
    Liu & Wang 2016). Note ``h`` divides the squared distance directly: Liu's
    code writes ``exp(-D / (2 h_code^2))``, i.e. ``h = 2 h_code^2``.

    Args:
        bandwidth: a positive float, a ``[d]`` vector of positive floats, or the
            name of a median rule of :func:`steinax.kernels.median_bandwidth`
            (``"liu"``, the default and the papers' rule; ``"pairs"``;
            ``"per_dimension"``). A rule is resolved from the particles at every
            step (:meth:`resolve`) with gradients stopped.
        median_gradient: ``True`` lets the gradient pass through the median rule as
            PyTorch's ``torch.median`` does (``"liu"``/``"pairs"``; dense distances, small
            ``n``): for unrolled training (:mod:`steinax.unfold`), where the papers' PyTorch
            code differentiated through it. Default ``False``.

    Example:
        >>> import jax.numpy as jnp
        >>> k = RBF(bandwidth=2.0)
        >>> float(k(jnp.zeros(2), jnp.ones(2)))  # exp(-2 / 2)
        0.36787...
    """

    bandwidth: jax.Array | None
    rule: str | None = eqx.field(static=True)
    median_gradient: bool = eqx.field(static=True)

    def __init__(self, bandwidth: float | jax.Array | str = "liu", *, median_gradient: bool = False):
        if isinstance(bandwidth, str):
            if bandwidth not in BANDWIDTH_RULES:
                raise ValueError(
                    f"`bandwidth` must be a positive float, a [d] vector or one of {BANDWIDTH_RULES}; "
                    f"received {bandwidth!r}"
                )
            self.rule = bandwidth
            self.bandwidth = None
        else:
            self.rule = None
            self.bandwidth = _as_positive_array(bandwidth, "bandwidth")
        if median_gradient and self.rule not in ("liu", "pairs"):
            raise ValueError(f"`median_gradient=True` needs the rule 'liu' or 'pairs'; received bandwidth={bandwidth!r}")
        self.median_gradient = bool(median_gradient)

    @property
    def scale(self):
        if self.bandwidth is None:
            raise ValueError(
                f"RBF(bandwidth={self.rule!r}) must be resolved on particles first: call `kernel.resolve(particles)`"
            )
        return self.bandwidth

    @property
    def is_resolved(self) -> bool:
        return self.bandwidth is not None

    @property
    def reads_distances(self) -> bool:
        return self.rule in ("liu", "pairs")

    def resolve(self, particles, sqdist=None, block_size=None, axis_name=None):
        if self.rule is None:
            return super().resolve(particles)
        if self.median_gradient:
            return RBF(bandwidth=median_bandwidth(particles, self.rule, sqdist=sqdist, stop_gradient=False))
        return RBF(bandwidth=median_bandwidth(particles, self.rule, sqdist=sqdist, block_size=block_size,
                                              axis_name=axis_name))

    @property
    def derivative_ratio(self):
        return -1.0

    @property
    def second_derivative_ratio(self):
        return 1.0

    def coordinate(self, i):
        if self.bandwidth is not None and self.bandwidth.ndim == 1:
            return RBF(self.bandwidth[i])
        return self

    def profile(self, s):
        k = jnp.exp(-s)
        return k, -k, k


class IMQ(AbstractKernel):
    """Inverse multiquadric kernel ``k(x, y) = (c^2 + ||x - y||^2 / h)^beta``.

    The Gorham & Mackey (2017) kernel; the defaults ``c = 1``, ``beta = -1/2``
    make KSD control weak convergence. ``c`` must be positive and ``beta`` in
    ``(-1, 0)`` for that theory; any ``beta < 0`` is accepted. ``h`` (default
    ``None``, meaning 1) is a positive length-scale squared, a scalar or a ``[d]``
    vector, as the RBF kernel's: KSDAgg's bandwidth ``lambda`` is ``h = lambda^2``.

    Profile in ``s = ||x - y||^2 / h``: ``kappa = (c^2 + s)^beta``,
    ``kappa' = beta (c^2 + s)^(beta - 1)``,
    ``kappa'' = beta (beta - 1) (c^2 + s)^(beta - 2)``.
    """

    c: jax.Array
    beta: jax.Array
    h: jax.Array | None

    def __init__(self, c: float | jax.Array = 1.0, beta: float | jax.Array = -0.5, h: float | jax.Array | None = None):
        self.c = _as_positive_array(c, "c")
        beta = jnp.asarray(beta, dtype=jnp.result_type(float))
        if is_concrete(beta) and not bool(beta < 0):
            raise ValueError(f"`beta` must be negative (the kernel must decay); received {float(beta)!r}")
        self.beta = beta
        self.h = None if h is None else _as_positive_array(h, "h")

    @property
    def scale(self):
        return self.h

    def profile(self, s):
        base = self.c * self.c + s
        k = _power(base, jnp.asarray(self.beta, base.dtype), False)
        return _imq_derivatives(self.beta, base, k)


def _imq_derivatives(beta, base, k):
    inv = 1.0 / base
    d1 = beta * k * inv
    return k, d1, (beta - 1.0) * d1 * inv


class _HalfIMQ(IMQ):
    """An :class:`IMQ` known to have ``beta = -1/2``: its power is one ``rsqrt`` (see :func:`imq_fast_path`)."""

    def __init__(self, c, beta, h=None):
        self.c, self.beta, self.h = c, beta, h

    def profile(self, s):
        base = self.c * self.c + s
        return _imq_derivatives(self.beta, base, _power(base, jnp.asarray(self.beta, base.dtype), True))


def half_imq(dtype) -> IMQ:
    """``IMQ(1, -1/2)`` (Gorham & Mackey's kernel, the KSD default) with its power as one ``rsqrt``, for callers
    that know the kernel statically and so need no :func:`imq_fast_path` branch."""
    return _HalfIMQ(jnp.ones((), dtype), jnp.asarray(-0.5, dtype))


def imq_fast_path(kernel, fn):
    """``fn(kernel)``; for an :class:`IMQ` with scalar ``beta``, compiled twice and chosen at run time.

    A general power costs a ``log`` and an ``exp`` per pair (about 8x an
    ``rsqrt`` on CPU), the largest cost of an IMQ Stein-kernel pass. When
    ``beta == -1/2`` (the default, Gorham & Mackey's kernel) ``lax.cond`` runs a
    copy of ``fn`` in which the power is an ``rsqrt``. The cond sits around
    ``fn`` (a whole block computation), not around each power, so each branch
    fuses as before. Values and derivatives (in ``beta`` too) are those of the
    general power.
    """
    if type(kernel) is IMQ and jnp.ndim(kernel.beta) == 0:
        return jax.lax.cond(kernel.beta == -0.5, lambda k: fn(_HalfIMQ(k.c, k.beta, k.h)), fn, kernel)
    return fn(kernel)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _power(base, beta, half: bool):
    """``base ** beta`` for ``base > 0``; with ``half`` (the caller knows ``beta = -1/2``) one ``rsqrt``."""
    return jax.lax.rsqrt(base) if half else base**beta


@_power.defjvp
def _power_jvp(half, primals, tangents):
    base, beta = primals
    d_base, d_beta = tangents
    k = _power(base, beta, half)
    return k, beta * k / base * d_base + k * jnp.log(base) * d_beta


_VMAP_ELEMENTS = 2**24  # 64 MiB of float32 per [d, n, n] intermediate


def check_coordinate_scale(scale, d: int) -> None:
    """A ``[d]`` scale (one bandwidth per coordinate) must have ``d`` entries; a scalar or ``None`` always fits."""
    if scale is not None and jnp.ndim(scale) == 1 and scale.shape[0] != d:
        raise ValueError(f"a per-coordinate bandwidth must have length d = {d}; received shape {scale.shape}")


def map_coordinates(fn, particles: jax.Array, scores: jax.Array, kernel: AbstractKernel, *extra: jax.Array):
    """Apply ``fn(column [n, 1], score_column [n, 1], kernel_i, *extra_columns)`` to every coordinate ``i``.

    The one per-coordinate driver of the complete-conditional methods (CC-SVGD,
    KCC-SD). ``kernel_i = kernel.coordinate(i)``: a ``[d]`` bandwidth is sliced,
    ``RBF("per_dimension")`` is first resolved on all coordinates at once, and
    any other median rule is left for ``fn`` to resolve on the column alone.
    Coordinates are batched with ``vmap`` while ``n^2 d`` stays below 2^24
    elements, otherwise visited one at a time with ``lax.map`` (memory of one
    coordinate's ``[n, n]`` work).

    ``extra`` are further ``[n, d]`` arrays whose column ``i`` is passed along.

    Returns:
        ``fn``'s outputs stacked over coordinates (leading axis ``d``).
    """
    n, d = particles.shape
    if isinstance(kernel, RBF) and kernel.rule == "per_dimension":
        kernel = kernel.resolve(particles)
    check_coordinate_scale(kernel.scale if kernel.is_resolved else None, d)

    def one(args):
        i, *cols = args
        return fn(cols[0][:, None], cols[1][:, None], kernel.coordinate(i), *(c[:, None] for c in cols[2:]))

    args = (jnp.arange(d), particles.T, scores.T) + tuple(a.T for a in extra)
    if n * n * d <= _VMAP_ELEMENTS and not (isinstance(kernel, RBF) and kernel.rule is not None):
        return jax.vmap(one)(args)
    return jax.lax.map(one, args)


def as_kernel(kernel, default: AbstractKernel, name: str = "kernel") -> AbstractKernel:
    """``kernel``, or ``default`` when it is ``None``; anything that is not a steinax kernel is a ``TypeError``.

    The one check every public function taking a kernel uses.
    """
    if kernel is None:
        return default
    if not isinstance(kernel, AbstractKernel):
        raise TypeError(
            f"`{name}` must be a steinax kernel (steinax.RBF(...), steinax.IMQ(...)); received {type(kernel).__name__}"
            + (f" {kernel!r}" if isinstance(kernel, str) else "")
        )
    return kernel
