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


@pytest.mark.slow  # ~25-30 s (4 CPU devices in a subprocess); CI's slow pass runs it
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


def test_data_parallel_scores_equal_the_unsplit_target(tmp_path):
    """Data split over 4 devices: full-data scores equal the unsplit ones (float32 sums of 64 terms in another
    order: 1e-5 relative); the stratified minibatch estimate is unbiased (the mean of 4000 draws lies within
    5 standard errors of the full score in every coordinate: failure rate below 1e-5 for the 24 coordinates,
    though they share draws); a run with the split target equals the unsplit run."""
    out = tmp_path / "d.npz"
    subprocess.run([sys.executable, str(WORKER), "data", str(out)], env=_env(4), check=True, timeout=600)
    r = _load(out)
    np.testing.assert_allclose(r["got"], r["want"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(r["got_logp"], r["want_logp"], rtol=1e-5)
    z = (r["draw_mean"] - r["want"]) / (r["draw_sd"] / np.sqrt(r["n_draws"]))
    assert np.all(np.abs(z) < 5.0), z
    np.testing.assert_allclose(r["run"], r["run_ref"], rtol=RTOL, atol=ATOL)
    errors = list(r["errors"])
    assert len(errors) == 2 and "batch_size` = 10" in errors[0] and "N = 62" in errors[1], errors


def test_data_parallel_refuses_what_it_cannot_split():
    from steinax.targets import LogDensityTarget, MinibatchTarget

    mesh = steinax.runtime.sharding.particle_mesh(jax.devices()[:1])
    with pytest.raises(TypeError, match="MinibatchTarget"):
        steinax.runtime.sharding.data_parallel(LogDensityTarget(lambda x: -jnp.sum(x * x)), mesh)
    with pytest.raises(TypeError, match="Mesh"):
        steinax.runtime.sharding.data_parallel(MinibatchTarget(lambda w: 0.0, lambda w, e: 0.0, jnp.zeros((4, 2))), "cpu")


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # ~32 s (two processes and a coordinator); CI's slow pass runs it
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
    mesh = steinax.runtime.sharding.particle_mesh(jax.devices()[:1])
    x = jnp.zeros((5, 2))
    steinax.runtime.sharding.shard_particles(x, mesh)  # one device divides everything
    fake = type("M", (), {})()
    with pytest.raises(TypeError, match="`mesh` must be a jax.sharding.Mesh"):
        steinax.svgd(mesh=fake)
    with pytest.raises(ValueError, match=r"do not divide the n = 7 particles; expected n to be a multiple of 2"):
        steinax.runtime.sharding.check_mesh(jax.sharding.Mesh(np.array(jax.devices() * 2), ("particles",)), 7)


def test_uninitialised_distributed_runtime_is_a_clear_error():
    assert not jax.distributed.is_initialized()
    with pytest.raises(RuntimeError, match=r"distributed runtime is not initialised.*jax.distributed.initialize"):
        steinax.runtime.sharding.distributed_mesh()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_block_size_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"`block_size` must be None \(automatic\) or a positive integer"):
        steinax.svgd(block_size=bad)
    x = jnp.zeros((4, 2))
    with pytest.raises(ValueError, match=r"`block_size` must be None \(automatic\) or a positive integer"):
        steinax.ksd(x, -x, block_size=bad)
