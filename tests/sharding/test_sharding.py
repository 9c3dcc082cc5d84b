"""Sharded SVGD on 4 CPU devices, and a two-process jax.distributed run, against the single-device run.

Each case runs tests/sharding/worker.py in fresh processes: the number of CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count``) is fixed when JAX
starts. Tolerances: the sharded direction sums the same terms in other row
blocks (different matrix-product shapes), so float32 agrees to rounding,
~1e-6 relative per step; 6 steps of step size 0.1 keep it below 1e-5.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax

WORKER = Path(__file__).with_name("worker.py")
RTOL, ATOL = 1e-5, 1e-5


def _env(devices):
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_sharded_run_equals_single_device_step_for_step(tmp_path):
    out = tmp_path / "r"
    subprocess.run([sys.executable, str(WORKER), "single", str(out)], env=_env(4), check=True, timeout=600)
    ref = _load(f"{out}_ref.npz")
    for name in ("sharded", "sharded_blocked"):
        got = _load(f"{out}_{name}.npz")
        # step 1 reads the same particles: the exact median is the same bit for bit; later steps read
        # particles that differ by rounding
        np.testing.assert_array_equal(got["bandwidth"][1], ref["bandwidth"][1])
        np.testing.assert_allclose(got["bandwidth"][1:], ref["bandwidth"][1:], rtol=RTOL)
        np.testing.assert_allclose(got["ksd"], ref["ksd"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(got["particles"], ref["particles"], rtol=RTOL, atol=ATOL)
    med = _load(f"{out}_median.npz")
    np.testing.assert_array_equal(med["got"], med["want"])


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_process_run_matches(tmp_path):
    out = tmp_path / "m"
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(WORKER), "multi", str(out), port, str(rank)], env=_env(2),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for rank in (0, 1)]
    logs = [p.communicate(timeout=600)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)[-4000:]
    ref_out = tmp_path / "r"
    subprocess.run([sys.executable, str(WORKER), "single", str(ref_out)], env=_env(4), check=True, timeout=600)
    ref = _load(f"{ref_out}_ref.npz")
    for rank in (0, 1):
        got = _load(f"{out}_rank{rank}.npz")
        np.testing.assert_array_equal(got["bandwidth"][1], ref["bandwidth"][1])
        np.testing.assert_allclose(got["bandwidth"][1:], ref["bandwidth"][1:], rtol=RTOL)
        np.testing.assert_allclose(got["particles"], ref["particles"], rtol=RTOL, atol=ATOL)


def test_mesh_that_does_not_divide_the_particles_is_refused():
    mesh = steinax.sharding.particle_mesh(jax.devices()[:1])
    x = jnp.zeros((5, 2))
    steinax.sharding.shard_particles(x, mesh)  # one device divides everything
    fake = type("M", (), {})()
    with pytest.raises(TypeError, match="`mesh` must be a jax.sharding.Mesh"):
        steinax.svgd(mesh=fake)
    with pytest.raises(ValueError, match=r"do not divide the n = 7 particles; expected n to be a multiple of 2"):
        steinax.sharding.check_mesh(jax.sharding.Mesh(np.array(jax.devices() * 2), ("particles",)), 7)


def test_uninitialised_distributed_runtime_is_a_clear_error():
    assert not jax.distributed.is_initialized()
    with pytest.raises(RuntimeError, match=r"distributed runtime is not initialised.*jax.distributed.initialize"):
        steinax.sharding.distributed_mesh()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_block_size_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"`block_size` must be None \(automatic\) or a positive integer"):
        steinax.svgd(block_size=bad)
    x = jnp.zeros((4, 2))
    with pytest.raises(ValueError, match=r"`block_size` must be None \(automatic\) or a positive integer"):
        steinax.ksd(x, -x, block_size=bad)
