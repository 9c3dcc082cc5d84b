"""Checkpoint and resume of ``steinax.run`` (and the checkpoint file format)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.checkpoint import FORMAT, CheckpointMismatchError, read_meta


def _logp(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2) - 0.1 * jnp.sum(x**4)


def _run(path=None, steps=40, method=None, optimizer=None, key=0, x0=None, **kw):
    x0 = jax.random.normal(jax.random.key(1), (12, 2)) if x0 is None else x0
    return steinax.run(method or steinax.svgd(), _logp, x0, steps=steps, optimizer=optimizer or optax.adam(0.05),
                       rng_key=jax.random.key(key), trace_every=5, progress=False, checkpoint=path, **kw)


def test_checkpointed_run_equals_plain_run_and_resumes_exactly(tmp_path):
    path = tmp_path / "run.npz"
    plain = _run(None, steps=40)
    first = _run(path, steps=40, checkpoint_every=10)
    np.testing.assert_array_equal(first.particles, plain.particles)  # segments change nothing: bit for bit
    np.testing.assert_array_equal(first.trace.ksd, plain.trace.ksd)
    meta = read_meta(path)
    assert meta["step"] == 40 and meta["kind"] == "steinax.run"
    with np.load(path, allow_pickle=False) as data:  # the documented schema, no pickle
        assert str(data["format"]) == FORMAT
        np.testing.assert_array_equal(data["state/0"], plain.particles)
    # a finished run: the same call returns the stored result without computing
    again = _run(path, steps=40, checkpoint_every=10)
    np.testing.assert_array_equal(again.particles, plain.particles)
    assert again.trace.step.tolist() == plain.trace.step.tolist()
    # interrupted after 20 steps (a checkpoint of a 20-step prefix), then resumed with a longer run
    part = tmp_path / "part.npz"
    _run(part, steps=20, checkpoint_every=10)
    resumed = _run(part, steps=40, checkpoint_every=10)
    np.testing.assert_array_equal(resumed.particles, plain.particles)
    np.testing.assert_array_equal(resumed.trace.ksd, plain.trace.ksd)
    np.testing.assert_array_equal(resumed.trace.method["bandwidth"], plain.trace.method["bandwidth"])
    assert os.stat(path).st_mode & 0o777 == steinax._io.default_file_mode()


def test_checkpoint_of_another_computation_is_refused(tmp_path):
    path = tmp_path / "run.npz"
    _run(path, steps=10, checkpoint_every=5)
    cases = {
        "method": dict(method=steinax.svgd(steinax.RBF(0.5))),
        "optimizer_state": dict(optimizer=optax.sgd(0.05)),
        "particles": dict(x0=jnp.zeros((7, 2))),
        "rng_key": dict(key=3),
    }
    for what, kwargs in cases.items():
        with pytest.raises(CheckpointMismatchError, match=what):
            _run(path, steps=20, checkpoint_every=5, **kwargs)
    with pytest.raises(CheckpointMismatchError, match="holds step 10, beyond the 5 steps asked for"):
        _run(path, steps=5, checkpoint_every=5)
    with pytest.raises(CheckpointMismatchError, match="method: 'SVGD' in the checkpoint, 'MKSVGD' now"):
        _run(path, steps=20, checkpoint_every=5, method=steinax.mk_svgd())
    with pytest.raises(CheckpointMismatchError, match="target"):
        steinax.run(steinax.svgd(), lambda x: -jnp.sum(x * x), jax.random.normal(jax.random.key(1), (12, 2)), steps=20,
                    optimizer=optax.adam(0.05), rng_key=jax.random.key(0), trace_every=5, checkpoint=path, progress=False)
    (tmp_path / "junk.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="could not read checkpoint"):
        _run(tmp_path / "junk.npz", steps=10)
    with pytest.raises(ValueError, match="multiple of `trace_every`"):
        _run(tmp_path / "new.npz", steps=10, checkpoint_every=3)
    assert not (tmp_path / "new.npz").exists()


_CHILD = textwrap.dedent("""
    import sys, time
    import jax, jax.numpy as jnp, optax, steinax
    from steinax.targets import AbstractTarget

    class SlowGaussian(AbstractTarget):
        '''N(1, I) whose evaluation sleeps 5 ms on the host: the run lasts long enough to be killed mid-way.'''
        def logdensity(self, x):
            return -0.5 * jnp.sum((x - 1.0) ** 2)
        def evaluate(self, rng_key, particles):
            jax.debug.callback(lambda: time.sleep(0.005))
            return jax.vmap(jax.value_and_grad(self.logdensity))(particles)

    def run(checkpoint):
        x0 = jax.random.normal(jax.random.key(1), (16, 2))
        return steinax.run(steinax.svgd(), SlowGaussian(), x0, steps=400, optimizer=steinax.adagrad_momentum(0.05),
                           rng_key=jax.random.key(7), trace_every=10, checkpoint=checkpoint,
                           checkpoint_every=None if checkpoint is None else 20, progress=False)

    if __name__ == "__main__":
        run(sys.argv[1])
""")


def test_sigkill_mid_run_then_resume_equals_uninterrupted(tmp_path):
    """A subprocess is killed with SIGKILL part-way; the same call then resumes to the uninterrupted particles."""
    (tmp_path / "slow_child.py").write_text(_CHILD)
    path = tmp_path / "ckpt.npz"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "slow_child.py"), str(path)], cwd=tmp_path)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:  # wait for a checkpoint part-way (>= 60 of 400 steps)
            if path.exists() and read_meta(path)["step"] >= 60:
                break
            assert proc.poll() is None, "the child finished or failed before it could be killed"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    killed_at = read_meta(path)["step"]
    assert 60 <= killed_at < 400  # genuinely interrupted
    sys.path.insert(0, str(tmp_path))
    try:
        import slow_child
    finally:
        sys.path.remove(str(tmp_path))
    resumed = slow_child.run(str(path))
    uninterrupted = slow_child.run(None)
    np.testing.assert_array_equal(np.asarray(resumed.particles), np.asarray(uninterrupted.particles))
    np.testing.assert_array_equal(np.asarray(resumed.trace.ksd), np.asarray(uninterrupted.trace.ksd))
    assert resumed.trace.step.tolist() == list(range(0, 401, 10))
    assert read_meta(path)["step"] == 400
