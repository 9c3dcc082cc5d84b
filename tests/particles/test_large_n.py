import math

import jax
import optax
import pytest

import steinax


@pytest.mark.slow
def test_dense_step_at_n_20000_d_64_completes():
    """One float32 SVGD step with the exact default bandwidth at n = 20,000, d = 64 (about 6 GiB peak)."""
    n, d = 20_000, 64
    method, opt = steinax.svgd(), optax.sgd(1e-2)
    target = steinax.targets.LogDensityTarget(lambda x: -0.5 * (x * x).sum())
    state = method.init(jax.random.normal(jax.random.key(0), (n, d)), opt)
    state, info = jax.jit(lambda s: method.step(jax.random.key(1), s, target, opt))(state)
    assert state.particles.shape == (n, d)
    assert state.particles.dtype == jax.numpy.float32
    assert bool(info.finite)
    # Liu's rule: h = median squared distance / log(n + 1); for N(0, I_64) the median of
    # ||x - y||^2 is close to 2 d = 128 (chi-square median 2 * 63.3 = 126.7)
    h_expected = 126.7 / math.log(n + 1)
    assert 0.95 * h_expected < float(info.method["bandwidth"]) < 1.05 * h_expected
