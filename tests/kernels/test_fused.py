"""The fused Pallas kernels (steinax.kernels.fused), interpreted on the CPU, against float64 references written
from the formulas pair by pair, and against the XLA forms they replace on CUDA."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import IMQ, RBF
from steinax.kernels.base import _HalfIMQ
from steinax.kernels.fused import MAX_FUSED_DIM, fused_direction, fused_family, fused_stein_row_sums
from steinax.particles.svgd import svgd_direction
from steinax.stein.ksd import ksd


def _profile(kind, c, s):
    """``(kappa, kappa', kappa'')`` at ``s = ||x - y||^2 / h``, float64."""
    if kind == "rbf":
        k = np.exp(-s)
        return k, -k, k
    base = c * c + s
    return base**-0.5, -0.5 * base**-1.5, 0.75 * base**-2.5


def _reference(x, sc, kind, h, c=1.0):
    """``n phi`` and the Stein kernel's row sums in float64, one pair at a time (MK-SVGD eq. 12 and 14)."""
    x, sc = np.asarray(x, np.float64), np.asarray(sc, np.float64)
    n, d = x.shape
    phi, rows = np.zeros((n, d)), np.zeros(n)
    for i in range(n):
        for j in range(n):
            r = x[i] - x[j]
            k0, k1, k2 = _profile(kind, c, r @ r / h)
            # phi(x_i) gets k(x_j, x_i) s_j + grad_{x_j} k(x_j, x_i) = k s_j + 2 kappa' (x_j - x_i) / h
            phi[i] += k0 * sc[j] + 2.0 * k1 * (x[j] - x[i]) / h
            c1 = 2.0 * (r / h) @ (sc[j] - sc[i]) - 2.0 * d / h
            rows[i] += k0 * (sc[i] @ sc[j]) + k1 * c1 - 4.0 * k2 * (r @ r) / h**2
    return phi, rows


def _kernel(kind, h, c=1.0):
    if kind == "rbf":
        return RBF(h)
    return _HalfIMQ(jnp.asarray(c, jnp.float32), jnp.asarray(-0.5, jnp.float32), jnp.asarray(h, jnp.float32))


def _points(n, d, seed=0):
    x = jax.random.normal(jax.random.key(seed), (n, d)) * 1.5 + 2.0
    return x, -(x - 2.0) + 0.3 * jnp.sin(x)


# n = 100 (not a multiple of the 64-row tile) and d = 7, 20 (padded to 16, 32): padding is exercised.
# Tolerance: float32 sums of n = 100 terms, each formed from float32 distances; relative to the largest
# entry, a few hundred float32 ulps (1e-5) bound the rounding (the terms are O(1) and do not cancel
# beyond the largest entry's scale). "tf32" is float32 on the CPU (no tensor cores): same bound.
@pytest.mark.parametrize("kind,h,c", [("rbf", 3.0, 1.0), ("imq", 2.0, 1.0), ("imq", 0.7, 1.8)])
@pytest.mark.parametrize("d", [7, 20])
@pytest.mark.parametrize("precision", ["float32", "tf32"])
def test_fused_equals_float64_reference(kind, h, c, d, precision):
    x, s = _points(100, d)
    phi64, rows64 = _reference(x, s, kind, h, c)
    kernel = _kernel(kind, h, c)
    phi = np.asarray(fused_direction(x, s, kernel, precision=precision, interpret=True))
    rows = np.asarray(fused_stein_row_sums(x, s, kernel, precision=precision, interpret=True))
    np.testing.assert_allclose(phi, phi64, rtol=0, atol=1e-5 * np.abs(phi64).max())
    np.testing.assert_allclose(rows, rows64, rtol=0, atol=1e-5 * np.abs(rows64).max())


def test_coincident_points_have_kernel_one():
    """Coincident particles (a stuck chain): distances within the rounding bound are exactly 0, as in the XLA form."""
    x = jnp.repeat(jax.random.normal(jax.random.key(1), (5, 30)) * 100.0, 20, axis=0)
    s = -x
    kernel = RBF(10.0)
    a = fused_direction(x, s, kernel, interpret=True)
    b = svgd_direction(x, s, kernel, engine="xla") * x.shape[0]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(jnp.abs(b).max()))


def test_fused_engine_equals_xla_engine_in_float64():
    """float64 inputs: the fused kernel computes in float32 (its documented policy), so it is within float32
    rounding of the float64 XLA form, not equal to it."""
    with jax.enable_x64(True):
        x, s = _points(130, 12, seed=2)
        x, s = x.astype(jnp.float64), s.astype(jnp.float64)
        a = svgd_direction(x, s, RBF(4.0), engine="fused")
        b = svgd_direction(x, s, RBF(4.0), engine="xla")
        assert a.dtype == jnp.float64
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(jnp.abs(b).max()))
        v_fused = ksd(x, s, IMQ(), engine="fused")
        v_xla = ksd(x, s, IMQ(), engine="xla")
        np.testing.assert_allclose(v_fused, v_xla, rtol=1e-5)


def test_kernels_the_fused_form_serves():
    assert fused_family(RBF(2.0)) == "rbf"
    assert fused_family(RBF(jnp.ones(3))) is None  # per-coordinate bandwidths: the XLA form
    assert fused_family(IMQ()) is None  # beta known only at run time: imq_fast_path's branch passes _HalfIMQ
    assert fused_family(_kernel("imq", 1.0)) == "imq"


def test_bad_arguments_are_named():
    x, s = _points(10, 3)
    with pytest.raises(ValueError, match="precision"):
        fused_direction(x, s, RBF(1.0), precision="bf16", interpret=True)
    with pytest.raises(ValueError, match="kernel"):
        fused_stein_row_sums(x, s, IMQ(1.0, -0.3), interpret=True)
    big = jnp.zeros((4, MAX_FUSED_DIM + 1))
    with pytest.raises(ValueError, match="d = "):
        fused_direction(big, big, RBF(1.0), interpret=True)
    with pytest.raises(ValueError, match="engine"):
        svgd_direction(x, s, engine="cuda")


def test_fused_engine_is_differentiated_as_the_xla_form():
    """Pallas kernels have no derivative rules: the fused engine's derivatives are the XLA form's (the same
    function), in reverse and forward mode, so unrolled training works on either engine."""
    x, s = _points(70, 5, seed=4)

    def loss(engine):
        return lambda x, s: jnp.sum(jnp.sin(svgd_direction(x, s, RBF(2.5), engine=engine)))

    g_fused = jax.grad(loss("fused"), argnums=(0, 1))(x, s)
    g_xla = jax.grad(loss("xla"), argnums=(0, 1))(x, s)
    for a, b in zip(g_fused, g_xla):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(jnp.abs(b).max()))
    t = jax.random.normal(jax.random.key(9), x.shape)
    _, jf = jax.jvp(lambda x: ksd(x, -x, IMQ(), engine="fused"), (x,), (t,))
    _, jx = jax.jvp(lambda x: ksd(x, -x, IMQ(), engine="xla"), (x,), (t,))
    np.testing.assert_allclose(jf, jx, rtol=1e-4)
