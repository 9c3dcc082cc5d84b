"""Exact order statistics (steinax.kernels.select) against np.partition, on every path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.kernels import select as sel
from steinax.kernels.pairwise import fold_row_blocks, squared_distances


def _blocked_source(values, block):
    """A source over the rows of a stored [r, c] matrix, ``block`` rows at a time."""

    def fold(fn, init):
        def body(acc, idx, rows):
            return fn(acc, rows, jnp.broadcast_to((idx >= 0)[:, None], rows.shape))

        return fold_row_blocks(body, init, values.shape[0], block, values)

    return fold


def _sampler(values):
    flat = values.reshape(-1)
    return lambda key, m: flat[jax.random.randint(key, (m,), 0, flat.shape[0])]


@pytest.mark.parametrize("host", [True, False])
@pytest.mark.parametrize("block", [None, 37])
def test_select_ranks_equals_partition(host, block, key):
    # 300 x 300 = 90,000 values (> 2^16: the bracket is used), with ties and zeros
    x = jax.random.normal(key, (300, 3))
    d2 = squared_distances(x, x)
    d2 = d2.at[:10, :10].set(1.0)  # ties
    ref = np.sort(np.asarray(d2).reshape(-1))
    for ranks in ([45_000 - 1, 45_000], [0], [89_999], [12_345, 12_346]):
        got = jax.jit(lambda v: sel.select_ranks(_blocked_source(v, block), ranks, v.size, v.dtype, _sampler(v),
                                                 block_entries=v.size if block is None else block * 300,
                                                 host=host))(d2)
        np.testing.assert_array_equal(got, ref[ranks])


@pytest.mark.parametrize("host", [True, False])
def test_bracket_miss_falls_back_to_the_exact_bisection(host, key):
    v = jax.random.uniform(key, (400, 400))
    ref = np.sort(np.asarray(v).reshape(-1))
    # a sampler that lies (all its values are 0): the bracket misses every middle rank
    liar = lambda key, m: jnp.zeros((m,), v.dtype)  # noqa: E731
    got = jax.jit(lambda v: sel.select_ranks(sel.dense_source(v), [79_999, 80_000], v.size, v.dtype, liar,
                                             block_entries=v.size, host=host))(v)
    np.testing.assert_array_equal(got, ref[[79_999, 80_000]])


@pytest.mark.parametrize("host", [True, False])
def test_past_the_buffer_limit_the_bisection_runs_alone(host, key, monkeypatch):
    # at 10^6 particles the bracket's buffer would hold 2.9e9 values; with the limit at 0, every count is
    # past it: the answer is the same exact order statistic, and no host callback is traced
    monkeypatch.setattr(sel, "_MAX_BUFFER", 0)
    v = jax.random.uniform(key, (300, 300))
    ref = np.sort(np.asarray(v).reshape(-1))
    f = jax.jit(lambda v: sel.select_ranks(sel.dense_source(v), [44_999, 45_000], v.size, v.dtype, _sampler(v),
                                           block_entries=v.size, host=host))
    np.testing.assert_array_equal(f(v), ref[[44_999, 45_000]])
    assert "callback" not in f.lower(v).as_text()


def test_host_select_with_mask_and_small_inputs(key):
    v = np.asarray(jax.random.uniform(key, (500, 300)))
    mask = np.asarray(jax.random.bernoulli(jax.random.fold_in(key, 1), 0.7, v.shape))
    kept = np.sort(v[mask])
    ranks = [kept.size // 2 - 1, kept.size // 2]
    np.testing.assert_array_equal(sel.host_select(v, ranks, mask), kept[ranks])
    np.testing.assert_array_equal(sel.host_select(v[:3, :3], [4]), np.sort(v[:3, :3].ravel())[[4]])


@pytest.mark.parametrize("widths", [(3.5, 6.0), (0.0, 6.0), (0.0, 0.0)])
def test_host_select_is_exact_whichever_bracket_holds_the_ranks(widths, key, monkeypatch):
    """The narrow first bracket, the wide second one and the full partition all return numpy's order statistics.

    Zero-width brackets (``z = 0``: the sample quantile -+ 2 sample ranks) miss often with ties and 80k
    values, so the later stages run; the result is exact in every case.
    """
    monkeypatch.setattr(sel, "_Z_HOST", widths[0])
    monkeypatch.setattr(sel, "_Z", widths[1])
    passes = []
    compact = sel._np_compact
    monkeypatch.setattr(sel, "_np_compact", lambda *a: passes.append(1) or compact(*a))
    v = np.round(np.asarray(jax.random.normal(key, (80_000,))), 2)  # many ties
    ranks = [39_999, 40_000]
    np.testing.assert_array_equal(sel.host_select(v, ranks), np.sort(v)[ranks])
    assert len(passes) == (1 if widths[0] else 2)  # the narrow bracket holds; or it misses and the next runs


def test_two_limb_counts_exceed_int32():
    """Counts beyond 2^31 (n > 46,340 particles) are exact without x64."""
    c = sel._limbs(jnp.zeros((), jnp.int32))
    for _ in range(5):
        c = sel._limbs_add(c, jnp.asarray(2**30 - 1, jnp.int32))
    total = 5 * (2**30 - 1)
    assert int(c[0]) * 2**30 + int(c[1]) == total
    assert bool(sel.limbs_le(c, total)) and not bool(sel.limbs_le(c, total - 1))
    assert int(sel._limbs_minus(total + 7, c)) == 7
    assert int(sel._limbs_minus(total - 1, c)) < 0
    assert int(sel._limbs_minus(total + 2**31, c)) >= 2**30
