"""steinax asks for a single-threaded OpenBLAS in JAX's CPU LAPACK (steinax._linalg.single_threaded_lapack)."""

import os
import subprocess
import sys

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

_PROBE = """
import steinax, jax.numpy as jnp, threadpoolctl
jnp.linalg.cholesky(jnp.eye(3) + 0.0).block_until_ready()  # JAX loads SciPy's OpenBLAS here
print(sorted(d["num_threads"] for d in threadpoolctl.threadpool_info() if "scipy.libs" in d["filepath"]))
"""


def _threads(env):
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_scipy_openblas_is_single_threaded_unless_the_user_chose():
    """Was: a multi-threaded OpenBLAS under XLA's threads turned a millisecond solve into a 10-minute one when
    another process shared the cores. The user's own OPENBLAS_NUM_THREADS is respected."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _threads(env) == "[1]"
    assert _threads(dict(env, OPENBLAS_NUM_THREADS="2")) == "[2]"
