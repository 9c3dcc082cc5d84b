"""The run loop's results stay the same across its refactors: a fixed set of runs (each method, fixed length and
until settled, checkpointed and extended, resumed, the init/step pair, sharded over 4 CPU devices) against the
arrays stored by the commit before the loop was split into parts (``tests/particles/loop_regression.py``).

Bit for bit on the machine and versions that stored them (the file names them); XLA may choose other instructions
on another CPU (AVX-512 against AVX2: a fused multiply-add or not), so elsewhere the comparison is to float32
rounding grown over the runs' 150-1000 steps (rtol 1e-4, atol 1e-5 scaled by 100: a contracting particle system keeps
last-bit differences near that size; a changed computation moves the particles by far more).

One foreign-machine tolerance is absolute: the KSD trace of the narrow target (sd ``NARROW_SD`` = 5e-4). Its V-statistic
sums Stein-kernel terms of size ``|s|^2 ~ d / sd^2 = 8e6`` that cancel to values near 1 once the particles have
settled, so its float32 rounding is about ``eps * d / sd^2 ~ 1`` whatever the machine (measured: 0.07 between an
Intel and an AMD CPU, where the particles, steps and halved step agree to the common tolerance). That trace is
compared to ``eps32 * d / sd^2`` absolutely; the particles and every other array of that run keep the common one."""

import importlib.util
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from conftest import tolerance

HERE = os.path.dirname(__file__)
STORED = os.path.join(HERE, "..", "data", "loop_regression.npz")
_spec = importlib.util.spec_from_file_location("loop_regression", os.path.join(HERE, "loop_regression.py"))
CASES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CASES)


def _ksd_leaf() -> int:
    """The index of ``Trace.ksd`` among the trace's leaves, as ``loop_regression._arrays`` numbers them."""
    from steinax.particles.loop.result import Trace

    marked = Trace(step=np.zeros(1), ksd=np.ones(1), direction_norm=np.zeros(1), method={}, max_abs=np.zeros(1))
    return [float(leaf[0]) for leaf in jax.tree_util.tree_leaves(marked)].index(1.0)


KSD_LEAF = _ksd_leaf()


@pytest.mark.slow  # about 30 s: a fresh process with 4 host devices and XLA's default optimisation level
def test_runs_equal_the_stored_runs(tmp_path):
    out = tmp_path / "now.npz"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    subprocess.run([sys.executable, os.path.join(HERE, "loop_regression.py"), str(out)], check=True, env=env,
                   timeout=900)
    stored, now = np.load(STORED), np.load(out)
    assert sorted(stored.files) == sorted(now.files), "the set of cases changed: regenerate the file deliberately"
    same_machine = str(stored["machine"]) == str(now["machine"])
    tol = {k: 100 * v for k, v in tolerance("float32").items()}
    narrow_ksd = {"rtol": tol["rtol"], "atol": float(np.finfo(np.float32).eps) * 2 / CASES.NARROW_SD**2}
    for name in stored.files:
        if name == "machine":
            continue
        if same_machine:
            np.testing.assert_array_equal(now[name], stored[name], err_msg=name)
        else:
            this = narrow_ksd if name == f"settle/svgd_halving/trace/{KSD_LEAF}" else tol
            np.testing.assert_allclose(now[name], stored[name], err_msg=name, equal_nan=True, **this)
