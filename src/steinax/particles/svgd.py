"""Stein variational gradient descent (Liu & Wang 2016).

The direction (MK-SVGD paper eq. 12; Liu & Wang 2016 eq. 8):

.. math::

    \\phi(x_i) = \\frac{1}{n} \\sum_{j=1}^n \\left[ k(x_j, x_i) \\nabla \\log p(x_j)
                 + \\nabla_{x_j} k(x_j, x_i) \\right].

For ``k = kappa(s)``, ``s = sum_d (x_d - y_d)^2 / h_d`` (:mod:`steinax.kernels`),
``nabla_{x_j} k(x_j, x_i) = 2 kappa'_ij (x_j - x_i) / h``, so with
``K = kappa(S)``, ``K' = kappa'(S)``:

.. math::

    n \\phi = K \\nabla\\log p(X) + \\frac{2}{h} \\odot \\left( K' X - (K' \\mathbf 1) \\odot X \\right),

three matrix products; for the RBF kernel (``kappa' = -kappa``) the repulsion
is ``(2/h) (x_i sum_j k_ij - sum_j k_ij x_j)``. Scores are computed once per
particle before the pairwise work; no ``n x n x d`` tensor is formed; with
``block_size`` the rows are processed in blocks (memory O(block_size * n)).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from jax.sharding import Mesh, PartitionSpec

from steinax._validation import check_block_size, check_particles, check_scores
from steinax.kernels.base import RBF, AbstractKernel, as_kernel
from steinax.kernels.fused import AUTO_FUSED_DIM, check_engine, fused_direction, products_at, with_engine
from steinax.kernels.pairwise import pairwise_plan, scan_row_blocks, squared_distances
from steinax.particles.base import AbstractParticleMethod
from steinax.runtime.sharding import check_mesh, particle_spec

__all__ = ["svgd_direction", "stein_direction_rows", "SVGD", "svgd"]


def stein_direction_rows(kmat, rmat, x_rows, particles, scores, col_scale=1.0, ratio=None):
    """``n * phi(x_i)`` for the rows ``x_rows`` from kernel matrices (the formula of the module docstring).

    ``kmat[i, j] = k(x_j, x_i)`` and ``rmat[i, j] = kappa'_ij`` (times any per-kernel
    factor) give ``n phi = K S + col_scale * (R X - (R 1) x)``. With ``ratio``
    (``R = ratio * K``, as for the RBF kernel) the two products fuse into
    ``K (S + ratio col_scale X) - ratio col_scale (K 1) x``. Used by every
    SVGD-type direction (SVGD, MK-SVGD, CC-SVGD).
    """
    centre = jnp.mean(particles, axis=0, keepdims=True)  # the repulsion is translation invariant
    xc, xr = particles - centre, x_rows - centre
    if particles.shape[1] == 1:
        # one coordinate (CC-SVGD): one fused row reduction of the elementwise terms; a matrix-vector
        # product would first write the kernel block out
        r = ratio * kmat if rmat is None else rmat
        return jnp.sum(kmat * scores.T + col_scale * r * (xc.T - xr), axis=1, keepdims=True)
    if ratio is not None:
        c = ratio * col_scale
        return kmat @ (scores + c * xc) - c * jnp.sum(kmat, axis=1, keepdims=True) * xr
    return kmat @ scores + col_scale * (rmat @ xc - jnp.sum(rmat, axis=1, keepdims=True) * xr)


def _direction_rows(x_rows, particles, scores, kernel, sqdist_rows=None, row_index=None, col_weights=None):
    """``n * phi(x_i)`` for one (resolved) scalar kernel.

    ``col_weights`` ``[n]``: each particle ``j``'s terms scaled by ``w_j`` (the mixture kernel's
    ``w_l(x_j) k(x_i, x_j)``, matrix-SVGD eq. 18).
    """
    kap, d1, _ = kernel.profile(kernel.scaled_sqdist(x_rows, particles, sqdist_rows, row_index))
    if col_weights is not None:
        kap, d1 = kap * col_weights[None, :], d1 * col_weights[None, :]
    h = kernel.scale
    two_over_h = 2.0 if h is None else 2.0 / h
    if jnp.ndim(two_over_h) == 1:
        two_over_h = two_over_h[None, :]
    return stein_direction_rows(kap, d1, x_rows, particles, scores, two_over_h, kernel.derivative_ratio)


@eqx.filter_jit
def _svgd(particles, scores, kernel, block_size, engine="auto", precision="default"):
    """Resolve ``kernel`` on the particles and return ``(phi, resolved kernel)``.

    The layout is :func:`~steinax.kernels.pairwise.pairwise_plan`'s: for a median
    rule the ``[n, n]`` distances are stored when they fit (the median reads them in
    one pass) and the direction is one whole-matrix pass over them (at most three
    ``[n, n]`` arrays: the product, the distances if XLA writes them out, the
    kernel); otherwise the direction is computed in row blocks, recomputing the
    distances, so memory stays ``O(block * n)``, or, with ``engine="fused"`` and a
    kernel :mod:`steinax.kernels.fused` serves, by its fused kernel (``O(n d)``).
    """
    n = particles.shape[0]
    plan = pairwise_plan(n, particles.dtype, block_size, store_wanted=kernel.reads_distances)
    if plan.store:
        sqdist = squared_distances(particles, particles)
        kernel = kernel.resolve(particles, sqdist)

        # one whole-matrix pass: the stored distances' elementwise corrections fuse into the kernel's
        # exponential (row blocks would read a written-out matrix; 84 vs 98 ms at n = 5000, d = 100 on CPU)
        with products_at(precision):
            rows = _direction_rows(particles, particles, scores, kernel, sqdist)
    else:
        kernel = kernel.resolve(particles, None, plan.rows)

        def xla_rows(x, s, k):
            def block(acc, idx, xr):
                return acc, _direction_rows(xr, x, s, k, row_index=idx)

            return scan_row_blocks(block, (), n, plan.rows, x)[1]

        def fused_rows(interpret, x, s, k):
            return fused_direction(x, s, k, precision=precision, interpret=interpret)

        rows = with_engine(engine, precision, (particles, scores, kernel), particles.shape[1], fused_rows, xla_rows,
                              AUTO_FUSED_DIM)
    return rows / n, kernel


def _svgd_sharded(particles, scores, kernel, block_size, mesh):
    """:func:`_svgd` with the particles split over ``mesh`` (:mod:`steinax.runtime.sharding`).

    Each device gathers all particles and scores and computes its own rows'
    direction, in row blocks, recomputing distances; the median rule is
    resolved from every device's counts (exact, equal to the unsharded value).
    """
    axis = mesh.axis_names[0]
    spec = particle_spec(mesh)
    n = particles.shape[0]

    def local(x, s):
        x_all = jax.lax.all_gather(x, axis, tiled=True)
        s_all = jax.lax.all_gather(s, axis, tiled=True)
        n_local = x.shape[0]
        offset = jax.lax.axis_index(axis) * n_local
        rows = pairwise_plan(n_local, x.dtype, block_size, store_wanted=False, columns=n).rows
        k = kernel.resolve(x_all, None, rows, axis_name=axis)

        def block(acc, idx, xr):
            index = jnp.where(idx >= 0, idx + offset, -1)
            return acc, _direction_rows(xr, x_all, s_all, k, row_index=index)

        return scan_row_blocks(block, (), n_local, rows, x)[1] / n, k

    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec), out_specs=(spec, PartitionSpec()),
                         check_vma=False)(particles, scores)


def svgd_direction(
    particles: jax.Array, scores: jax.Array, kernel: AbstractKernel | None = None, *, block_size: int | None = None,
    engine: str = "auto", precision: str = "default",
) -> jax.Array:
    """SVGD direction ``phi(x_i)`` of eq. 12 of the MK-SVGD paper, for every particle.

    Args:
        particles: ``[n, d]``.
        scores: ``[n, d]``, ``nabla log p`` at the particles (computed once, by the caller).
        kernel: a scalar kernel; default ``RBF("liu")`` (resolved on ``particles``).
        block_size: rows per block, bounding memory to O(block_size * n) (no ``[n, n]``
            matrix is stored); default: automatic, from ``n``, the dtype and the free
            memory (:func:`~steinax.kernels.pairwise.pairwise_plan`).
        engine: ``"xla"``: row blocks of matrix products; ``"fused"``: the Pallas kernel
            of :mod:`steinax.kernels.fused` (memory O(n d); compiled on CUDA, interpreted
            elsewhere), for kernels it serves; ``"auto"`` (default): the fused kernel on
            CUDA for ``d <= 16``, row blocks otherwise (what measured faster on an H200).
        precision: the products of kernel values with scores and points: ``"default"``
            (JAX's default matmul precision: float32 on CPUs, TF32 on NVIDIA tensor
            cores), ``"float32"`` or ``"tf32"``; distances are always float32
            (:mod:`steinax.kernels.fused`'s policy).

    Returns:
        ``[n, d]`` ascent direction.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> x = jax.random.normal(jax.random.key(0), (100, 2))
        >>> svgd_direction(x, -x).shape
        (100, 2)
    """
    particles = check_particles(particles)
    scores = check_scores(scores, particles)
    check_block_size(block_size)
    check_engine(engine, precision)
    return _svgd(particles, scores, as_kernel(kernel, RBF("liu")), block_size, engine, precision)[0]


def kernel_info(kernel: AbstractKernel) -> dict:
    """Diagnostics of a resolved kernel: its bandwidth when it has one (mean over coordinates if a vector)."""
    if isinstance(kernel, RBF):
        return {"bandwidth": jnp.mean(kernel.bandwidth)}
    return {}


class SVGD(AbstractParticleMethod):
    """SVGD as a particle method (see :func:`svgd`)."""

    kernel: AbstractKernel
    block_size: int | None = None
    mesh: Mesh | None = eqx.field(default=None, static=True)
    engine: str = eqx.field(default="auto", static=True)
    precision: str = eqx.field(default="default", static=True)

    def __check_init__(self):
        as_kernel(self.kernel, None)
        check_block_size(self.block_size)
        check_engine(self.engine, self.precision)
        if self.mesh is not None:
            check_mesh(self.mesh)

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        del rng_key
        if self.mesh is not None:
            phi, kernel = _svgd_sharded(particles, scores, self.kernel, self.block_size, self.mesh)
        else:
            phi, kernel = _svgd(particles, scores, self.kernel, self.block_size, self.engine, self.precision)
        return phi, aux, kernel_info(kernel)


def svgd(kernel: AbstractKernel | None = None, *, block_size: int | None = None, mesh: Mesh | None = None,
         engine: str = "auto", precision: str = "default") -> SVGD:
    """Stein variational gradient descent with a scalar kernel.

    Args:
        kernel: default ``RBF(bandwidth="liu")``, Liu & Wang's median rule.
        block_size: rows per block (memory O(block_size * n)); default automatic
            (:func:`~steinax.kernels.pairwise.pairwise_plan`).
        mesh: shard the particles along ``n`` over this one-axis device mesh
            (:mod:`steinax.runtime.sharding`; ``n`` must be a multiple of its size). The
            result equals the single-device run to float rounding.
        engine, precision: the pairwise layout and the products' precision, as for
            :func:`svgd_direction`.

    Example:
        >>> import jax, optax, steinax
        >>> from steinax.targets import Gaussian
        >>> import jax.numpy as jnp
        >>> target = Gaussian(jnp.zeros(2), jnp.eye(2))
        >>> x0 = jax.random.normal(jax.random.key(0), (50, 2)) + 3.0
        >>> res = steinax.run(steinax.svgd(), target, x0, steps=200,
        ...                   optimizer=optax.sgd(0.5), rng_key=jax.random.key(1))
        >>> bool(jnp.all(jnp.abs(res.particles.mean(0)) < 0.2))
        True
    """
    return SVGD(kernel=as_kernel(kernel, RBF("liu")), block_size=block_size, mesh=mesh, engine=engine,
                precision=precision)
