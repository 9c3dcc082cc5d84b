"""Fused, tiled pairwise sums for accelerators: the SVGD direction and the Stein kernel's row sums.

An SVGD step with an RBF kernel is, per pair of particles, a distance (a dot
product), one exponential and a multiply-add into ``d`` accumulators: the
structure of unnormalised attention. The XLA form (:mod:`steinax.particles.svgd`,
:mod:`steinax.stein.ksd`) writes each ``[rows, n]`` block of distances and kernel
values to memory and reads it back; here one Pallas kernel (Triton backend) keeps a
``[tile_rows, tile_cols]`` tile in registers, loops over the column tiles and
accumulates, so nothing of size ``n x n`` (or ``rows x n``) is ever written
(FlashAttention's layout without the softmax's running maximum, which a kernel sum
does not need).

**What is fused.** Kernels with a scalar scale whose profile is known here: the RBF
``exp(-s)`` and the IMQ with ``beta = -1/2`` (``(c^2 + s)^(-1/2)``, one ``rsqrt``).
Points are centred and divided by ``a = c sqrt(h)`` outside the kernel, so inside it
``s = ||x'_i - x'_j||^2`` with unit constants, and each accumulated sum is scaled
back afterwards (``kappa(c^2 s') = c^(2 beta) (1 + s')^beta`` and its derivatives
``c^(2 beta - 2)``, ``c^(2 beta - 4)`` times those of ``(1 + s')^beta``). The
formulas are those of :func:`steinax.particles.svgd.stein_direction_rows` and
:func:`steinax.stein.ksd.stein_kernel_row_sums`; this module only lays them out.

**Precision policy** (``precision``, the same for the XLA form and this one):

- The distance product is always IEEE float32 (``Precision.HIGHEST``), because
  ``||x||^2 + ||y||^2 - 2 x.y`` cancels: a TF32 error of ``5e-4 ||x||^2`` there would
  move every kernel value (:func:`~steinax.kernels.pairwise.squared_distances` too).
- The accumulating products (kernel times scores and points):
  ``"default"`` follows JAX's default matmul precision (``jax_default_matmul_precision``):
  IEEE float32 on CPUs, TF32 on NVIDIA tensor cores; ``"float32"`` forces IEEE float32;
  ``"tf32"`` asks for TF32 (10-bit mantissa, relative error about ``5e-4`` per term).

Measured on an H200 against a float64 reference (n = 4096, d = 100,
``benchmarks/bench_gpu.py``): the direction's largest relative error is ``5e-6``
in float32 and ``3.8e-4`` with TF32 products; the KSD's ``6e-8`` and ``3e-6``. The
tests check both forms against float64 references on the CPU (Pallas's
interpreter). Distances within the
expanded form's rounding bound are exactly 0, as in
:func:`~steinax.kernels.pairwise.squared_distances`.

**Where it runs.** Programs lowered for ``cuda`` run the Pallas kernel; on every
other platform the same function runs in Pallas's interpreter (tests). Dimensions
are padded to a power of two (at least 16, Triton's smallest dot) and particles to a
multiple of the tile; padded columns carry weight 0. Accumulators are
``tile_rows x d`` float32 registers, so the fused form serves ``d <= MAX_FUSED_DIM``.

**When it pays** (measured on an H200, ``benchmarks/bench_gpu.py``,
docs/benchmarks.md): at ``d = 10`` (n = 10^6) an SVGD step took 4.2 s fused against
7.8 s in XLA's row blocks, which there are bound by writing and reading 10^12
kernel values; at ``d = 100`` (n = 10^5) the row blocks' cuBLAS products won,
106-153 ms against 392-521 ms for the best tile. The KSD's two forms tied (10^6
draws, d = 10: 8.6 and 8.7 s). So ``engine="auto"`` fuses the SVGD direction on
CUDA for padded ``d <= AUTO_FUSED_DIM`` and uses row blocks everywhere else.
"""

from __future__ import annotations

import contextlib
import functools
import math

import jax
import jax.numpy as jnp

from steinax._platform import forced_branch, layout_platform, on_cuda_else
from steinax.kernels.pairwise import _rounding_floor

__all__ = ["ENGINES", "PRECISIONS", "MAX_FUSED_DIM", "AUTO_FUSED_DIM", "check_engine", "with_engine", "product_precision", "products_at", "fused_family", "fused_direction", "fused_stein_row_sums"]

PRECISIONS = ("default", "float32", "tf32")
MAX_FUSED_DIM = 256  # padded dimension: accumulators of tile_rows x 256 float32 still fit the registers
AUTO_FUSED_DIM = 16  # engine="auto" on CUDA: the SVGD direction fused up to this padded d (module docstring)


ENGINES = ("auto", "xla", "fused")


def check_engine(engine: str, precision: str) -> None:
    """Validate an ``engine`` and a ``precision``.

    ``"xla"``: the XLA form (row blocks of cuBLAS/Eigen products). ``"auto"``: the XLA
    form, except the SVGD direction in programs lowered for CUDA with ``d <= AUTO_FUSED_DIM``,
    where the fused kernel measured faster (module docstring). ``"fused"``: the fused
    kernel, compiled on CUDA and interpreted elsewhere (slow: tests), e.g. for runs whose
    memory cannot hold a ``[rows, n]`` block.
    """
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}; received {engine!r}")
    _check_precision(precision)


def with_engine(engine: str, precision: str, args: tuple, d: int, fused, xla, auto_dim: int | None = None):
    """``fused(interpret, *args)`` or ``xla(*args)`` as ``engine`` asks; ``args = (particles, scores, kernel)``
    with the kernel resolved, in ``d`` dimensions; the XLA form's products traced at ``precision``
    (:func:`products_at`).

    The fused form serves kernels of :func:`fused_family` with ``d <= MAX_FUSED_DIM`` (padded)
    when ``engine == "fused"``, and with ``engine == "auto"`` in programs lowered for CUDA
    when the padded ``d`` is at most ``auto_dim`` (where it measured faster); everything
    else uses the XLA form. The engine is a layout, so ``"auto"`` follows
    :func:`steinax._platform.layout_platform`: a program traced for the CPU holds the XLA form
    alone. Pallas kernels have no derivative rules, so the fused form is differentiated as
    the XLA form is (a ``custom_jvp`` whose rule is the XLA form's JVP: the same function, so
    the same derivatives): unrolled training (:mod:`steinax.unfold`) works with either engine.
    """
    def xla_at(*a):
        with products_at(precision):
            return xla(*a)

    if engine == "xla" or fused_family(args[2]) is None or _pow2(d) > MAX_FUSED_DIM:
        return xla_at(*args)
    if engine == "fused":
        return _differentiated_as(xla_at, lambda *a: fused(None, *a), args)
    if auto_dim is None or _pow2(d) > auto_dim or (forced_branch() is None and layout_platform() == "cpu"):
        return xla_at(*args)
    return _differentiated_as(xla_at, lambda *a: on_cuda_else(lambda: fused(None, *a), lambda: xla_at(*a)), args)


def _differentiated_as(reference, fn, args):
    """``fn(*args)``, differentiated (forward and reverse mode) as ``reference``, which computes the same function."""
    f = jax.custom_jvp(fn)
    f.defjvp(lambda primals, tangents: jax.jvp(reference, primals, tangents))
    return f(*args)


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}; received {precision!r}")


def products_at(precision: str):
    """A context in which the XLA form's products are traced at ``precision`` (``jax.default_matmul_precision``;
    ``"default"`` changes nothing)."""
    if precision == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision({"float32": "highest", "tf32": "tensorfloat32"}[precision])


def product_precision(precision: str):
    """The ``jax.lax.Precision`` of the accumulating products for a policy name (module docstring)."""
    return {"default": None, "float32": jax.lax.Precision.HIGHEST, "tf32": jax.lax.Precision.DEFAULT}[precision]


def fused_family(kernel) -> str | None:
    """``"rbf"`` or ``"imq"`` when ``kernel`` (resolved) has a form this module fuses, else ``None``.

    An RBF with a scalar bandwidth; an IMQ with scalar ``c`` and ``h`` (or none) known to
    have ``beta = -1/2``: the ``_HalfIMQ`` that :func:`steinax.kernels.base.imq_fast_path`
    passes to its function once it has checked ``beta`` at run time (a traced ``beta``
    cannot be read when the program is built).
    """
    from steinax.kernels.base import RBF, _HalfIMQ

    if type(kernel) is RBF:
        return "rbf" if kernel.bandwidth is not None and jnp.ndim(kernel.bandwidth) == 0 else None
    if type(kernel) is _HalfIMQ and (kernel.h is None or jnp.ndim(kernel.h) == 0) and jnp.ndim(kernel.c) == 0:
        return "imq"
    return None


def _constants(kernel, family, dtype):
    """``(a, c2, beta)``: the points' divisor ``c sqrt(h)``, ``c^2`` and the profile's exponent."""
    h = getattr(kernel, "bandwidth", None) if family == "rbf" else kernel.h
    h = jnp.ones((), dtype) if h is None else jnp.asarray(h, dtype)
    if family == "rbf":
        return jnp.sqrt(h), jnp.ones((), dtype), None
    c2 = jnp.asarray(kernel.c, dtype) ** 2
    return jnp.sqrt(h * c2), c2, -0.5


def _pow2(d: int) -> int:
    return max(16, 1 << (d - 1).bit_length())


def _tiles(dp: int, tile) -> tuple[int, int]:
    if tile is not None:
        return tile
    # measured on an H200: d = 10 (padded 16), n = 10^6: 64 x 64 gives 4.2 s a step; d = 100 (padded 128),
    # n = 10^5: 32 x 64 gives 0.51 s, 64 x 64 5.4 s (its accumulators spill out of the registers)
    if dp <= 32:
        return (64, 64)
    return (32, 64) if dp <= 128 else (32, 32)


def _pad(a, rows: int, cols: int):
    return jnp.pad(a, ((0, rows - a.shape[0]), (0, cols - a.shape[1])))


def _profiles(s, family):
    """``(kappa, kappa', kappa'')`` of the unit-constant profile at ``s`` (RBF: ``exp(-s)``; IMQ: ``(1 + s)^-1/2``)."""
    if family == "rbf":
        k = jnp.exp(-s)
        return k, -k, k
    inv = 1.0 / (1.0 + s)
    k = jax.lax.rsqrt(1.0 + s)
    d1 = -0.5 * k * inv
    return k, d1, -1.5 * d1 * inv


def _dot_t(a, b, precision):
    """``a @ b.T`` with float32 accumulation."""
    return jax.lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision=precision,
                               preferred_element_type=jnp.float32)


def _dot(a, b, precision):
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), precision=precision,
                               preferred_element_type=jnp.float32)


def _distances_tile(xi, ni, xj, nj, floor):
    """Squared distances of a tile in float32, zero within the rounding bound (clamp included)."""
    norms = ni[:, None] + nj[None, :]
    d2 = norms - 2.0 * _dot_t(xi, xj, jax.lax.Precision.HIGHEST)
    return jnp.where(d2 <= floor * norms, 0.0, d2)


# ---------------------------------------------------------------- the Pallas kernels


def _direction_kernel(xi_ref, ni_ref, x_ref, n_ref, v_ref, w_ref, acc_ref, sum_ref, *, bn, n_tiles, family,
                      floor, product):
    """Row tile ``i``: ``acc = sum_j kappa_ij v_j`` (or ``kappa'_ij``, see :func:`fused_direction`) and
    ``sum = sum_j kappa'_ij`` over all column tiles."""
    from jax.experimental import pallas as pl

    xi, ni = xi_ref[...], ni_ref[...]

    def body(t, carry):
        acc, rsum = carry
        j = pl.ds(pl.multiple_of(t * bn, bn), bn)
        s = _distances_tile(xi, ni, x_ref[j, :], n_ref[j], floor)
        kap, d1, _ = _profiles(s, family)
        w = w_ref[j][None, :]
        weight = (kap if family == "rbf" else d1) * w  # RBF: kappa' = -kappa, one product serves both terms
        acc = acc + _dot(weight, v_ref[j, :], product)
        rsum = rsum + jnp.sum(d1 * w, axis=1)
        return acc, rsum

    init = (jnp.zeros(acc_ref.shape, jnp.float32), jnp.zeros(sum_ref.shape, jnp.float32))
    acc, rsum = jax.lax.fori_loop(0, n_tiles, body, init)
    acc_ref[...] = acc
    sum_ref[...] = rsum


def _direction_kernel_imq(xi_ref, ni_ref, x_ref, n_ref, s_ref, xs_ref, w_ref, acc_ref, accx_ref, sum_ref, *, bn,
                          n_tiles, floor, product):
    """IMQ row tile: ``sum_j kappa_ij s_j``, ``sum_j kappa'_ij x'_j`` and ``sum_j kappa'_ij`` (two products)."""
    from jax.experimental import pallas as pl

    xi, ni = xi_ref[...], ni_ref[...]

    def body(t, carry):
        acc, accx, rsum = carry
        j = pl.ds(pl.multiple_of(t * bn, bn), bn)
        s = _distances_tile(xi, ni, x_ref[j, :], n_ref[j], floor)
        kap, d1, _ = _profiles(s, "imq")
        w = w_ref[j][None, :]
        acc = acc + _dot(kap * w, s_ref[j, :], product)
        accx = accx + _dot(d1 * w, xs_ref[j, :], product)
        return acc, accx, rsum + jnp.sum(d1 * w, axis=1)

    init = (jnp.zeros(acc_ref.shape, jnp.float32), jnp.zeros(accx_ref.shape, jnp.float32),
            jnp.zeros(sum_ref.shape, jnp.float32))
    acc, accx, rsum = jax.lax.fori_loop(0, n_tiles, body, init)
    acc_ref[...] = acc
    accx_ref[...] = accx
    sum_ref[...] = rsum


def _stein_kernel(xi_ref, si_ref, ni_ref, qi_ref, x_ref, s_ref, n_ref, q_ref, w_ref, o0_ref, o1_ref, o1s_ref,
                  o2_ref, *, bn, n_tiles, family, floor, product):
    """Row tile of the Stein kernel's sums: ``sum_j kappa G``, ``sum_j kappa' X1``, ``sum_j kappa'`` and
    ``sum_j kappa'' s`` with ``G = s_i.s_j``, ``X1 = (x'_i - x'_j).(s_j - s_i)`` (``q = x'.s`` per point)."""
    from jax.experimental import pallas as pl

    xi, si, ni, qi = xi_ref[...], si_ref[...], ni_ref[...], qi_ref[...]

    def body(t, carry):
        a0, a1, a1s, a2 = carry
        j = pl.ds(pl.multiple_of(t * bn, bn), bn)
        xj, sj = x_ref[j, :], s_ref[j, :]
        s = _distances_tile(xi, ni, xj, n_ref[j], floor)
        kap, d1, d2 = _profiles(s, family)
        w = w_ref[j][None, :]
        gram = _dot_t(si, sj, product)
        cross = _dot_t(xi, sj, product) + _dot_t(si, xj, product) - qi[:, None] - q_ref[j][None, :]
        a0 = a0 + jnp.sum(kap * gram * w, axis=1)
        a1 = a1 + jnp.sum(d1 * cross * w, axis=1)
        a1s = a1s + jnp.sum(d1 * w, axis=1)
        a2 = a2 + jnp.sum(d2 * s * w, axis=1)
        return a0, a1, a1s, a2

    zero = jnp.zeros(o0_ref.shape, jnp.float32)
    a0, a1, a1s, a2 = jax.lax.fori_loop(0, n_tiles, body, (zero, zero, zero, zero))
    o0_ref[...], o1_ref[...], o1s_ref[...], o2_ref[...] = a0, a1, a1s, a2


def _call(kernel_fn, row_args, col_args, outs, bm, *, interpret: bool, name: str):
    """``pallas_call`` over row tiles: ``row_args`` are tiled by rows, ``col_args`` passed whole."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    n_pad = row_args[0].shape[0]

    def spec(a, tiled):
        if a.ndim == 1:
            return pl.BlockSpec((bm,), lambda i: (i,)) if tiled else pl.BlockSpec(a.shape, lambda i: (0,))
        return (pl.BlockSpec((bm, a.shape[1]), lambda i: (i, 0)) if tiled
                else pl.BlockSpec(a.shape, lambda i: (0, 0)))

    out_specs = [spec(jax.ShapeDtypeStruct((n_pad,) + o.shape[1:], o.dtype), True) for o in outs]
    return pl.pallas_call(
        kernel_fn,
        out_shape=outs,
        grid=(n_pad // bm,),
        in_specs=[spec(a, True) for a in row_args] + [spec(a, False) for a in col_args],
        out_specs=out_specs,
        interpret=interpret,
        compiler_params=None if interpret else plt.CompilerParams(num_warps=4, num_stages=2),
        name=name,
    )(*row_args, *col_args)


def _dispatch(fn, interpret):
    """``fn(interpret)``; ``interpret=None``: the compiled Pallas kernel in programs lowered for CUDA, its
    interpreter elsewhere; ``False``: compiled (the caller knows the program is lowered for CUDA)."""
    if interpret is None:
        if forced_branch() is not None:  # tests tracing the accelerator's branches on a CPU: interpreted
            return fn(True)
        return on_cuda_else(lambda: fn(False), lambda: fn(True))
    return fn(bool(interpret))


def _prepare(particles, scores, a, tile):
    """Centred, scaled, padded float32 points and scores; squared norms; column weights; tile sizes."""
    n, d = particles.shape
    dp = _pow2(d)
    bm, bn = _tiles(dp, tile)
    n_pad = math.lcm(bm, bn) * -(-n // math.lcm(bm, bn))
    x = ((particles - jnp.mean(particles, axis=0, keepdims=True)) / a).astype(jnp.float32)
    x = _pad(x, n_pad, dp)
    s = _pad(scores.astype(jnp.float32), n_pad, dp)
    norms = jnp.sum(x * x, axis=1)
    w = (jnp.arange(n_pad) < n).astype(jnp.float32)
    return x, s, norms, w, (n, d, dp, bm, bn, n_pad)


def _setup(particles, scores, kernel, precision, tile):
    """Checks and the prepared inputs shared by both kernels: the family, its constants, the padded arrays, the
    sizes and the products' precision."""
    _check_precision(precision)
    family = fused_family(kernel)
    if family is None:
        raise ValueError(f"`kernel` must be an RBF with a scalar bandwidth or an IMQ with beta = -1/2; received {kernel}")
    constants = _constants(kernel, family, particles.dtype)
    x, s, norms, w, sizes = _prepare(particles, scores, constants[0], tile)
    if sizes[2] > MAX_FUSED_DIM:
        raise ValueError(f"`particles` has d = {sizes[1]}; the fused form serves d <= {MAX_FUSED_DIM}")
    return family, constants, (x, s, norms, w), sizes, product_precision(precision) or jax.lax.Precision.DEFAULT


def fused_direction(particles, scores, kernel, *, precision: str = "default", tile=None, interpret=None):
    """``n * phi(x_i)`` (the SVGD direction times ``n``, MK-SVGD paper eq. 12) for a fusable kernel.

    The formula is :func:`steinax.particles.svgd.stein_direction_rows`'s,
    ``n phi = K S + (2/h) (K' X - (K' 1) x)``, with ``K' = -K`` for the RBF kernel
    (one product, ``K (S - (2/h) X)``) and two products for the IMQ.

    Args:
        particles, scores: ``[n, d]``; ``d`` at most :data:`MAX_FUSED_DIM` (padded).
        kernel: a resolved kernel of :func:`fused_family`.
        precision: ``"default"``, ``"float32"`` or ``"tf32"`` (module docstring).
        tile: ``(rows, cols)`` per tile, powers of two (default by the padded dimension).
        interpret: ``None`` (default): compiled in programs lowered for CUDA, interpreted
            elsewhere; ``True`` forces the interpreter; ``False`` the compiled kernel (CUDA only).

    Returns:
        ``[n, d]`` in the particles' dtype.
    """
    family, (a, c2, beta), (x, s, norms, w), (n, d, dp, bm, bn, n_pad), product = _setup(
        particles, scores, kernel, precision, tile)
    opts = dict(bn=bn, n_tiles=n_pad // bn, floor=_rounding_floor(d, jnp.float32), product=product)
    f32 = jnp.float32
    # the constants of kappa(c^2 s') = c^(2 beta) (1 + s')^beta and of the repulsion 2/h (x = a x'): see the
    # module docstring; for the RBF c = 1 and beta drops out
    two_a_over_h = 2.0 * a / (a * a / c2)  # 2 a / h, with h = a^2 / c^2

    def run(interp):
        if family == "rbf":
            v = s - two_a_over_h.astype(f32) * x  # K (S + (2/h) kappa'/kappa X), kappa'/kappa = -1
            acc, rsum = _call(functools.partial(_direction_kernel, family=family, **opts), (x, norms), (x, norms, v, w),
                              (jax.ShapeDtypeStruct((n_pad, dp), f32), jax.ShapeDtypeStruct((n_pad,), f32)), bm,
                              interpret=interp, name="steinax_svgd_rbf")
            return acc - two_a_over_h.astype(f32) * rsum[:, None] * x
        acc, accx, rsum = _call(functools.partial(_direction_kernel_imq, **opts), (x, norms), (x, norms, s, x, w),
                                (jax.ShapeDtypeStruct((n_pad, dp), f32),) * 2 + (jax.ShapeDtypeStruct((n_pad,), f32),),
                                bm, interpret=interp, name="steinax_svgd_imq")
        scale = (c2 ** beta).astype(f32)
        return scale * acc + (scale / c2.astype(f32)) * two_a_over_h.astype(f32) * (accx - rsum[:, None] * x)

    out = _dispatch(run, interpret)
    return out[:n, :d].astype(particles.dtype)


def fused_stein_row_sums(particles, scores, kernel, *, precision: str = "default", tile=None, interpret=None):
    """``[n]`` row sums of the Langevin Stein kernel over all particles, for a fusable kernel.

    ``u = kappa G + kappa' C1 + kappa'' C2`` (:meth:`steinax.stein.ksd.SteinTerms.coefficients`)
    with ``C1 = (2/h) (x_i - x_j).(s_j - s_i) - 2 d / h`` and ``C2 = -4 ||x_i - x_j||^2 / h^2``.
    Their total over rows is ``n^2`` times the V-statistic of :func:`steinax.stein.ksd.ksd`.
    Arguments as :func:`fused_direction`.
    """
    family, (a, c2, beta), (x, s, norms, w), (n, d, dp, bm, bn, n_pad), product = _setup(
        particles, scores, kernel, precision, tile)
    q = jnp.sum(x * s, axis=1)
    f32 = jnp.float32
    kern = functools.partial(_stein_kernel, bn=bn, n_tiles=n_pad // bn, family=family, floor=_rounding_floor(d, jnp.float32),
                             product=product)

    def run(interp):
        vec = jax.ShapeDtypeStruct((n_pad,), f32)
        return _call(kern, (x, s, norms, q), (x, s, norms, q, w), (vec,) * 4, bm, interpret=interp,
                     name=f"steinax_stein_{family}")

    a0, a1, a1s, a2 = _dispatch(run, interpret)
    h = a * a / c2
    # kappa(c^2 s') = c^(2 beta) k(s'), kappa' = c^(2 beta - 2) k'(s'), kappa'' = c^(2 beta - 4) k''(s'): the RBF has
    # c = 1; with x = a x', (x_i - x_j).(s_j - s_i) = a X1 and ||x_i - x_j||^2 = a^2 s'
    c0 = 1.0 if beta is None else c2 ** beta
    c1 = c0 / c2
    rows = c0 * a0 + c1 * ((2.0 * a / h) * a1 - (2.0 * d / h) * a1s) + (c1 / c2) * (-4.0 * a * a / (h * h)) * a2
    return rows[:n].astype(particles.dtype)
