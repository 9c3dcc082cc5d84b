"""The device path (issue 27): no host round-trip in programs lowered for an accelerator, and the accelerator's
branches computing what the CPU's compute.

Backend choices are :func:`jax.lax.platform_dependent` branches (:mod:`steinax._platform`), so a program
traced here and exported for CUDA holds only the accelerator's branch. ``jax.export`` refuses host
callbacks in a program for another platform, so an export that succeeds proves the compiled step holds
none. The accelerator's branches themselves (device selection, batched targets and factorisations, the
fused Pallas kernels, interpreted) are run on the CPU under ``branches("accelerator")`` and compared with
the CPU's.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import export

import steinax
from steinax._platform import branches, tracing_for
from steinax.gp import GPRegression
from steinax.kernels import IMQ, RBF, median_bandwidth
from steinax.particles.svgd import svgd_direction
from steinax.stein.ksd import ksd

# the fused kernels are Triton custom calls, which carry no serialisation guarantee; host callbacks stay refused
_TRITON = [export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]


def _custom_calls(text: str) -> set[str]:
    """Targets of the custom calls in a lowered module (host callbacks are custom calls named ...callback...)."""
    return set(re.findall(r"custom_call @([\w$.]+)", text))


def _callbacks(text: str) -> set[str]:
    return {c for c in _custom_calls(text) if "callback" in c.lower()}


def _step(method, target, x0):
    opt = optax.sgd(1e-3)
    state = method.init(x0, opt, target)
    return (lambda s: method.step(jax.random.key(0), s, target, opt)[0]), state


def _gp_target():
    X = jnp.linspace(-2.0, 2.0, 12)[:, None]
    return GPRegression(X, jnp.sin(3.0 * X[:, 0]))


def _cases():
    gauss = steinax.targets.Gaussian(jnp.zeros(3), jnp.eye(3))
    gp = _gp_target()
    return {
        # n = 64: the median reads stored distances (host selection on the CPU); n = 40,000 (more than 2^30
        # distances): blocked median and, on CUDA with d <= 16, the fused direction
        "svgd-median-stored": (steinax.svgd(), gauss, jnp.ones((64, 3))),
        "svgd-median-blocked": (steinax.svgd(), gauss, jnp.ones((40_000, 3))),
        "svgd-per-dimension": (steinax.svgd(RBF("per_dimension")), gauss, jnp.ones((64, 3))),
        "svgd-gp-target": (steinax.svgd(), gp, jnp.zeros((8, gp.dim))),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_compiled_step_exports_for_cuda_without_host_callbacks(name):
    method, target, x0 = _cases()[name]
    with tracing_for("cuda"):
        step, state = _step(method, target, x0)
        exported = export.export(jax.jit(step), platforms=("cuda",), disabled_checks=_TRITON)(state)
    assert exported.platforms == ("cuda",)
    assert not _callbacks(exported.mlir_module())
    fused = "__gpu$xla.gpu.triton" in _custom_calls(exported.mlir_module())
    assert fused == (name == "svgd-median-blocked")  # engine="auto": the Pallas kernel where it measured faster


@pytest.mark.parametrize("method, n", [("svgd", 1_000_000), ("cc_svgd", 100_000), ("matrix_svgd", 1_000_000)])
def test_steps_at_scale_trace_for_cuda(method, n):
    """Regression (H200 grid, run 4): past 2^31 pairs the device's selections compared int32 counts with
    Python ranks (CC-SVGD's per-coordinate median at n = 10^5) and sized the bracket's buffer at 2.9e9 values
    (Liu's median at n = 10^6); both failed before anything ran. Traced only: nothing of size n^2 is built."""
    m = {"svgd": steinax.svgd(), "cc_svgd": steinax.cc_svgd(),
         "matrix_svgd": steinax.matrix_svgd("hessian", "average")}[method]
    target = steinax.targets.Gaussian(jnp.zeros(10), jnp.eye(10))
    opt = optax.sgd(1e-3)
    state = jax.eval_shape(lambda: m.init(jnp.zeros((n, 10)), opt, target))
    with tracing_for("cuda"):
        exported = export.export(jax.jit(lambda s: m.step(jax.random.key(0), s, target, opt)[0]),
                                 platforms=("cuda",), disabled_checks=_TRITON)(state)
    assert not _callbacks(exported.mlir_module())


def test_export_for_cuda_refuses_a_host_callback():
    """The check above can fail: the same export of a program with a host callback is refused."""
    def f(x):
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    with pytest.raises(Exception, match="lowering platform cuda|callback"):
        export.export(jax.jit(f), platforms=("cuda",))(jax.ShapeDtypeStruct((3,), jnp.float32))


def test_the_cpu_program_still_selects_on_the_host():
    """On the CPU the median's exact selection is still the host's (the branch is chosen, not removed)."""
    x = jax.random.normal(jax.random.key(0), (64, 3))
    text = jax.jit(lambda x: median_bandwidth(x, "liu")).lower(x).as_text()
    assert _callbacks(text)


@pytest.mark.parametrize("engine", ["auto", "fused"])
def test_ksd_exports_for_cuda(engine):
    spec = jax.ShapeDtypeStruct((50_000, 10), jnp.float32)
    with tracing_for("cuda"):
        exported = export.export(jax.jit(lambda x, s: ksd(x, s, engine=engine)), platforms=("cuda",),
                                 disabled_checks=_TRITON)(spec, spec)
    text = exported.mlir_module()
    assert not _callbacks(text)
    # the Pallas kernel is compiled on CUDA when asked for (Triton), and not otherwise
    assert ("__gpu$xla.gpu.triton" in _custom_calls(text)) == (engine == "fused")


# ---------------------------------------------------------------- the accelerator's branches, run on the CPU

def _both(fn, *args):
    with branches("cpu"):
        a = jax.tree_util.tree_map(np.asarray, fn(*args))
    with branches("accelerator"):
        b = jax.tree_util.tree_map(np.asarray, fn(*args))
    return a, b


# float32: the device selection is exact (the same order statistic); the fused kernels and batched LAPACK
# sum in another order, within a few units of the last place of the largest term summed (n terms: sqrt(n) eps
# relative to sum |terms|, bounded here by 1e-5 relative to the largest entry)
_RTOL32 = 1e-5


@pytest.mark.parametrize("rule", ["liu", "pairs", "per_dimension"])
def test_device_selection_equals_host_selection(rule):
    x = jax.random.normal(jax.random.key(1), (301, 4)) * jnp.array([[1.0, 2.0, 0.5, 3.0]])
    f = jax.jit(lambda x: median_bandwidth(x, rule))
    a, b = _both(f, x)
    np.testing.assert_array_equal(a, b)
    # not vacuous: the two traces are different programs (the host's selection is a callback)
    with branches("cpu"):
        assert _callbacks(f.lower(x).as_text())
    with branches("accelerator"):
        assert not _callbacks(f.lower(x).as_text())


@pytest.mark.parametrize("kernel", [RBF(1.7), RBF("liu")], ids=["fixed", "median"])
def test_svgd_direction_branches_agree(kernel):
    x = jax.random.normal(jax.random.key(2), (150, 6)) * 2.0 + 1.0
    s = -x + 0.3 * jnp.sin(x)
    # block_size forces the blocked layout, where the accelerator's branch is the fused kernel
    a, b = _both(lambda x, s: svgd_direction(x, s, kernel, block_size=64), x, s)
    np.testing.assert_allclose(b, a, rtol=0, atol=_RTOL32 * np.abs(a).max())


@pytest.mark.parametrize("kernel", [IMQ(), RBF(2.0), IMQ(1.5, -0.5, 2.0)], ids=["imq", "rbf", "imq-scaled"])
def test_ksd_branches_agree(kernel):
    x = jax.random.normal(jax.random.key(3), (150, 5)) + 0.5
    s = -x
    a, b = _both(lambda x, s: ksd(x, s, kernel, block_size=64), x, s)
    np.testing.assert_allclose(b, a, rtol=_RTOL32)


def test_batched_target_and_factorisations_agree():
    """A GP target (a Cholesky per particle): evaluated one particle at a time on the CPU, batched elsewhere."""
    target = _gp_target()
    x = 0.3 * jax.random.normal(jax.random.key(4), (6, target.dim))
    a, b = _both(lambda x: steinax.targets.base.evaluate(target, jax.random.key(0), x), x)
    for u, v in zip(a, b):
        np.testing.assert_allclose(v, u, rtol=1e-4, atol=1e-4 * np.abs(u).max())


def test_curvature_step_branches_agree():
    method = steinax.svn("hessian")
    target = steinax.targets.DoubleBanana()
    x0 = jax.random.normal(jax.random.key(5), (5, 2))

    def one(x0):
        step, state = _step(method, target, x0)
        return jax.jit(step)(state).particles

    a, b = _both(one, x0)
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_branches_must_be_named():
    with pytest.raises(ValueError, match="which"):
        with branches("gpu"):
            pass
    with pytest.raises(ValueError, match="platform"):
        with tracing_for("metal"):
            pass
