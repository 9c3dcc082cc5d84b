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
from steinax.runtime.checkpoint import FORMAT, CheckpointMismatchError, read_meta


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
    with pytest.raises(ValueError, match="junk.npz.* is damaged and cannot be read"):
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


@pytest.mark.slow  # ~18 s (a child process killed mid-run): CI's slow pass runs it
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


# ---------------------------------------------------------------- issue 24: runs that are not the same run


def test_an_edited_log_density_or_optimizer_is_refused_by_behaviour(tmp_path):
    """A plain function is fingerprinted by what it computes at probe points, not its name: an edited body,
    another closure value or another optimizer hyperparameter (optax keeps them in closures) is refused."""
    path = tmp_path / "run.npz"
    x0 = jax.random.normal(jax.random.key(1), (12, 2))

    def go(logp, optimizer, steps=10):
        return steinax.run(steinax.svgd(), logp, x0, steps=steps, optimizer=optimizer, rng_key=jax.random.key(0),
                           trace_every=5, checkpoint=path, checkpoint_every=5, progress=False)

    def make(mean):
        def logdensity(x):  # the same qualified name every time
            return -0.5 * jnp.sum((x - mean) ** 2)
        return logdensity

    go(make(1.0), optax.sgd(0.1))
    with pytest.raises(CheckpointMismatchError, match="the target's log-density differs"):
        go(make(1.5), optax.sgd(0.1), steps=20)
    with pytest.raises(CheckpointMismatchError, match=r"the optimizer's update at steps 0 to 10\^6 \(its learning rate"):
        go(make(1.0), optax.sgd(0.5), steps=20)
    path.unlink()
    go(make(1.0), steinax.adagrad_momentum(0.1))
    with pytest.raises(CheckpointMismatchError, match="the optimizer's update"):
        go(make(1.0), steinax.adagrad_momentum(0.5), steps=20)
    assert go(make(1.0), steinax.adagrad_momentum(0.1), steps=20).state.step == 20  # the same run resumes


def test_x64_mode_is_named_when_it_changed(tmp_path):
    path = tmp_path / "run.npz"
    _run(path, steps=10, checkpoint_every=5)
    with jax.enable_x64(True):
        with pytest.raises(CheckpointMismatchError, match="x64_mode: False in the checkpoint, True now"):
            _run(path, steps=20, checkpoint_every=5)


def test_orphan_temporaries_are_removed_and_live_ones_kept(tmp_path):
    from steinax._io import _host

    path = tmp_path / "run.npz"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f".run.npz.{_host()}.{int(dead.stdout)}.abc123.tmp"
    live = tmp_path / f".run.npz.{_host()}.{os.getpid()}.def456.tmp"
    elsewhere = tmp_path / f".run.npz.otherhost.{int(dead.stdout)}.ghi789.tmp"
    for f in (orphan, live, elsewhere):
        f.write_bytes(b"x" * 100)
    _run(path, steps=10, checkpoint_every=5)
    assert not orphan.exists() and live.exists() and elsewhere.exists()


def test_damaged_and_unwritable_checkpoints_get_one_clear_error_before_work(tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    _run(path, steps=10, checkpoint_every=5)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # a flipped bit inside a member: its CRC fails
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="damaged.npz.* is damaged and cannot be read"):
        _run(damaged, steps=20, checkpoint_every=5)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    calls = []
    counting = lambda x: (jax.debug.callback(lambda: calls.append(1)), _logp(x))[1]  # noqa: E731
    with pytest.raises(OSError, match="cannot write .*a_file/run.npz"):
        steinax.run(steinax.svgd(), counting, jnp.ones((4, 2)), steps=10, optimizer=optax.sgd(0.1),
                    rng_key=jax.random.key(0), checkpoint=blocker / "run.npz", progress=False)
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(100, 90, 10))
    with pytest.raises(OSError, match=r"cannot write .*full.npz.*: 10 bytes free"):
        steinax.run(steinax.svgd(), counting, jnp.ones((4, 2)), steps=10, optimizer=optax.sgd(0.1),
                    rng_key=jax.random.key(0), checkpoint=tmp_path / "full.npz", progress=False)
    jax.effects_barrier()
    assert calls == []  # refused before the target was evaluated once


def test_the_users_file_mode_is_kept(tmp_path):
    path = tmp_path / "run.npz"
    _run(path, steps=10, checkpoint_every=5)
    os.chmod(path, 0o640)
    _run(path, steps=20, checkpoint_every=5)
    assert read_meta(path)["step"] == 20 and os.stat(path).st_mode & 0o777 == 0o640


def test_initial_state_of_another_optimizer_is_refused_clearly():
    first = _run(None, steps=5, optimizer=optax.adam(0.05))
    with pytest.raises(ValueError, match="`initial_state` holds the state of another optimizer"):
        steinax.run(steinax.svgd(), _logp, steps=5, optimizer=optax.sgd(0.1), rng_key=jax.random.key(0),
                    initial_state=first.state, progress=False)


def test_a_score_only_target_resumes_and_a_changed_score_is_refused(tmp_path):
    """A ScoreTarget has no log-density: its probe stores NaN there (compared NaN-equal) and checks the score."""
    from steinax.targets import ScoreTarget

    path = tmp_path / "run.npz"
    x0 = jax.random.normal(jax.random.key(1), (12, 2))

    def go(score, steps):
        return steinax.run(steinax.svgd(), ScoreTarget(score), x0, steps=steps, optimizer=optax.sgd(0.1),
                           rng_key=jax.random.key(0), trace_every=5, checkpoint=path, checkpoint_every=5, progress=False)

    first = go(lambda x: -x, 10)
    assert int(go(lambda x: -x, 20).state.step) == 20 and int(first.state.step) == 10
    with pytest.raises(CheckpointMismatchError, match="the target's score differs"):
        go(lambda x: -(x - 1.0), 30)


def test_fingerprint_of_a_function_leaf_holds_no_memory_address():
    """A plain function as a leaf (the unfolding trainers fingerprint their ``target`` as given) gives the same
    fingerprint wherever it lives in memory, as it does in a resumed process; another name gives another."""
    from steinax.runtime.checkpoint import fingerprint_tree

    def make():
        def logp(x):
            return -0.5 * jnp.sum(x**2)

        return logp

    a, b = make(), make()
    assert a is not b and repr(a) != repr(b)  # two objects at two addresses
    assert fingerprint_tree(a) == fingerprint_tree(b)
    assert fingerprint_tree(_logp) != fingerprint_tree(a)


def test_resume_refuses_a_new_x0_and_a_later_schedule_and_extends_with_the_stored_spacing(tmp_path):
    """Was: a new ``x0`` of the same shape was ignored on resume without a word; an optax schedule that differs only
    after step 0 resumed silently (the probe was one update at step 0); extending a 1000-step run to 5000 steps was
    refused for a trace spacing (a default of ``steps``) the user never chose."""
    import optax

    from steinax.runtime.checkpoint import CheckpointMismatchError

    logp = lambda x: -0.5 * jnp.sum(x * x)  # noqa: E731
    x0 = jax.random.normal(jax.random.key(0), (20, 2))
    path = tmp_path / "run.npz"
    common = dict(rng_key=jax.random.key(1), progress=False, checkpoint=path)
    constant = optax.sgd(optax.constant_schedule(0.05))
    first = steinax.run(steinax.svgd(), logp, x0, steps=1000, optimizer=constant, **common)
    with pytest.raises(CheckpointMismatchError, match="initial_particles"):
        steinax.run(steinax.svgd(), logp, x0 + 1.0, steps=1000, optimizer=constant, **common)
    later = optax.piecewise_constant_schedule(0.05, {3000: 0.1})  # equal to 0.05 until step 3000
    with pytest.raises(CheckpointMismatchError, match="the optimizer's update at steps 0 to 10"):
        steinax.run(steinax.svgd(), logp, x0, steps=5000, optimizer=optax.sgd(later), **common)
    longer = steinax.run(steinax.svgd(), logp, x0, steps=5000, optimizer=constant, **common)
    plain = steinax.run(steinax.svgd(), logp, x0, steps=5000, optimizer=constant, rng_key=jax.random.key(1),
                        progress=False, trace_every=20)
    np.testing.assert_array_equal(np.asarray(longer.particles), np.asarray(plain.particles))
    np.testing.assert_array_equal(np.asarray(longer.trace.step), np.asarray(plain.trace.step))
    assert int(first.trace.step[1]) == 20 == int(longer.trace.step[-1] - longer.trace.step[-2])


def test_initial_state_takes_a_run_result_and_the_init_step_pair_refuses_another_optimizer():
    """Was: ``initial_state=result`` (a RunResult) raised AttributeError; ``sampling_algorithm(...).step`` with a state
    of another optimizer raised a raw AttributeError 8 frames inside optax."""
    import optax

    logp = lambda x: -0.5 * jnp.sum(x * x)  # noqa: E731
    x0 = jax.random.normal(jax.random.key(0), (20, 2))
    res = steinax.run(steinax.svgd(), logp, x0, steps=10, optimizer=optax.sgd(0.1), rng_key=jax.random.key(1))
    more = steinax.run(steinax.svgd(), logp, initial_state=res, steps=10, optimizer=optax.sgd(0.1), rng_key=jax.random.key(1))
    assert int(more.state.step) == 20
    with pytest.raises(ValueError, match="both given and differ"):
        steinax.run(steinax.svgd(), logp, x0 + 1, initial_state=res, steps=10, optimizer=optax.sgd(0.1),
                    rng_key=jax.random.key(1))
    with pytest.raises(TypeError, match="`initial_state` must be a ParticleState"):
        steinax.run(steinax.svgd(), logp, initial_state=x0, steps=10, rng_key=jax.random.key(1))
    slow = steinax.sampling_algorithm(steinax.svgd(), logp, optax.adam(0.05))
    state = slow.init(x0)
    jax.jit(slow.step)(jax.random.key(0), state)  # its own state: accepted
    with pytest.raises(ValueError, match="`state` holds the state of another optimizer"):
        steinax.sampling_algorithm(steinax.svgd(), logp, optax.sgd(0.05)).step(jax.random.key(0), state)
    with pytest.raises(Exception, match="made with another optimizer"):  # a runtime error inside the compiled step
        jax.jit(steinax.sampling_algorithm(steinax.svgd(), logp, optax.adam(0.5)).step)(jax.random.key(0), state)
    with pytest.raises(ValueError, match="made with another optimizer"):  # and on the host, in run
        steinax.run(steinax.svgd(), logp, initial_state=state, steps=10, optimizer=optax.adam(0.5), rng_key=jax.random.key(1))
