"""``steinax._host.host_call``: NumPy work from compiled code (in-place buffer callback and the pure_callback fallback)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax import _host


def _sum_and_sorted(scale, v):
    return np.asarray(scale * v.sum(), v.dtype), np.sort(v)


def _call(v):
    shapes = [jax.ShapeDtypeStruct((), v.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)]
    return _host.host_call(functools.partial(_sum_and_sorted, 2.0), shapes, v)


@pytest.mark.parametrize("fast", [True, False])
def test_eager_jit_vmap_scan_agree(fast, monkeypatch):
    if fast and not _host.FAST_PATH:
        pytest.skip("this jax has no buffer_callback")
    monkeypatch.setattr(_host, "FAST_PATH", fast)
    v = jax.random.normal(jax.random.key(0), (3, 7))
    want = [(2.0 * np.asarray(r).sum(), np.sort(np.asarray(r))) for r in v]
    for row, (s, srt) in zip(v, want):
        for f in (_call, jax.jit(_call)):
            got_s, got_sorted = f(row)
            np.testing.assert_allclose(got_s, s, rtol=1e-6)
            np.testing.assert_array_equal(got_sorted, srt)
    got_s, got_sorted = jax.jit(jax.vmap(_call))(v)
    np.testing.assert_allclose(got_s, [s for s, _ in want], rtol=1e-6)
    np.testing.assert_array_equal(got_sorted, np.stack([srt for _, srt in want]))
    scanned = jax.jit(lambda v: jax.lax.scan(lambda c, r: (c + _call(r)[0], None), jnp.zeros(()), v)[0])(v)
    np.testing.assert_allclose(scanned, sum(s for s, _ in want), rtol=1e-5)


def test_fast_path_is_used_on_this_jax():
    # the pinned jax has buffer_callback; a silent fallback would cost two copies of every operand
    assert _host.FAST_PATH
    text = jax.jit(_call).lower(jnp.ones(4)).as_text()
    assert "xla_buffer_python_cpu_callback" in text


def _first_and_base(v):
    seen.append((v.flags.owndata, v.flags.writeable))
    return (v[:1].copy(),)


seen = []


def test_operands_are_read_in_place_and_read_only():
    if not _host.FAST_PATH:
        pytest.skip("this jax has no buffer_callback")
    seen.clear()
    v = jnp.arange(6.0)
    f = jax.jit(lambda v: _host.host_call(_first_and_base, [jax.ShapeDtypeStruct((1,), v.dtype)], v + 1)[0])
    np.testing.assert_array_equal(f(v), [1.0])
    assert seen == [(False, False)]  # a view of XLA's buffer (no copy), not writeable


def test_eager_calls_reuse_one_compilation():
    if not _host.FAST_PATH:
        pytest.skip("this jax has no buffer_callback")
    v = jnp.arange(5.0)
    _call(v)
    with jax.log_compiles():
        import logging

        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logger = logging.getLogger("jax")
        logger.addHandler(handler)
        try:
            _call(v)
        finally:
            logger.removeHandler(handler)
    assert not [r for r in records if "Compiling" in r.getMessage()]
