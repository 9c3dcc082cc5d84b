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


def _two_processes(mode: str, out, ref_mode: str, ref_out) -> None:
    """``worker.py mode`` in two processes of a jax.distributed run (2 CPU devices each), then ``ref_mode`` in one
    process on 4 devices."""
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(WORKER), mode, str(out), port, str(rank)], env=_env(2),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for rank in (0, 1)]
    logs = [p.communicate(timeout=900)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)[-4000:]
    subprocess.run([sys.executable, str(WORKER), ref_mode, str(ref_out)], env=_env(4), check=True, timeout=900)


@pytest.mark.slow  # ~32 s (two processes and a coordinator); CI's slow pass runs it
def test_two_process_run_matches(tmp_path):
    out, ref_out = tmp_path / "m", tmp_path / "r"
    _two_processes("multi", out, "single", ref_out)
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


# steinax.sample over a mesh (issue 58). The particle stage is sharded SVGD (the tolerances above). The correction's
# chains are split over the devices; ChEES's adaptation updates its log step size and log trajectory length by Adam on
# means over the ensemble, which are sums across devices in another order, and Adam divides by the root of a running
# second moment, so a mean near 0 that differs by rounding moves an update by up to the learning rate. Measured in
# float64 after 60 warm-up steps: step sizes 1e-8 (particles ran) and 1.7e-5 (skipped) relative apart, chains 4e-7
# and 4.4e-4 target sds apart at most. Tested: step size within 1e-3 relative, every chain draw within 1e-2 of its
# coordinate's sd (a fifth of the Monte Carlo error of a mean at the ESS the rule asks for, 1/sqrt(400) = 0.05 sd), the
# same number of chains split evenly, gradient evaluations within 1%.
SAMPLE_STEP_RTOL, SAMPLE_CHAIN_SDS = 1e-3, 1e-2
SAMPLE_SD = np.sqrt([4.0, 1.0, 0.01])  # worker.sample_gaussian's target


def _same_sample(got, ref, devices):
    assert got["chains"].shape == ref["chains"].shape and int(got["chain_count"]) % devices == 0
    np.testing.assert_allclose(got["particles"], ref["particles"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got["step_size"], ref["step_size"], rtol=SAMPLE_STEP_RTOL)
    assert np.max(np.abs(got["chains"] - ref["chains"]) / SAMPLE_SD) <= SAMPLE_CHAIN_SDS
    assert int(got["steps"]) == int(ref["steps"])
    assert abs(int(got["grads"]) - int(ref["grads"])) <= 0.01 * int(ref["grads"])


@pytest.mark.slow  # ~60 s (four samples on 4 CPU devices in a subprocess); CI's slow pass runs it
def test_sharded_sample_equals_the_single_device_one(tmp_path):
    out = tmp_path / "s"
    subprocess.run([sys.executable, str(WORKER), "sample", str(out)], env=_env(4), check=True, timeout=900)
    for tag in ("particles", "skipped"):
        got, ref = _load(f"{out}_{tag}_mesh.npz"), _load(f"{out}_{tag}_ref.npz")
        _same_sample(got, ref, 4)
        assert int(got["devices"]) == 4 and int(ref["devices"]) == 1  # the chains were split over the mesh


@pytest.mark.slow  # ~60 s (two processes and a coordinator, then the single-device reference); CI's slow pass
def test_two_process_sample_matches(tmp_path):
    out, ref_out = tmp_path / "m", tmp_path / "r"
    _two_processes("sample_multi", out, "sample", ref_out)
    ref = _load(f"{ref_out}_particles_ref.npz")
    for rank in (0, 1):
        got = _load(f"{out}_rank{rank}.npz")
        _same_sample(got, ref, 4)
        assert int(got["devices"]) == 4
