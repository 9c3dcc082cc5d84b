"""Property and fuzz tests (hypothesis, derandomized: the same examples every run).

Properties: kernel symmetry and positive semi-definite Gram matrices; Stein-kernel symmetry;
directions equivariant to permuting particles; discrepancies invariant to permuting samples;
float64 runs of every engine. Fuzz: malformed input to the public functions and the CLI raises
steinax's own errors (ValueError / TypeError / FloatingPointError naming the argument), never a
raw error from inside JAX, and never writes partial output.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tolerance
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import steinax
from steinax.interfaces import cli
from steinax.diagnostics import sample_quality
from steinax.particles.svgd import SVGD
from steinax.stein import gof_test, kcc_sd, mksd, stein_kernel_matrix

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

finite = st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def point_sets(draw, n_min=2, n_max=9, d_max=3):
    n = draw(st.integers(n_min, n_max))
    d = draw(st.integers(1, d_max))
    x = draw(arrays(np.float32, (n, d), elements=finite))
    # well-separated rows: in float32 a median bandwidth of nearly coincident points (h ~ 1e-6) is
    # ill-conditioned (the distances themselves carry ~10% rounding), which is not what these test
    d2 = ((x[:, None, :].astype(np.float64) - x[None, :, :]) ** 2).sum(-1) + np.eye(n)
    assume(d2.min() > 0.05)
    return jnp.asarray(x)


kernels = st.one_of(
    st.floats(0.1, 10.0).map(lambda h: steinax.RBF(h)),
    st.just(steinax.RBF("liu")),
    st.tuples(st.floats(0.2, 3.0), st.floats(-0.9, -0.1)).map(lambda cb: steinax.IMQ(*cb)),
)


def _scores(x):
    """Scores of an anisotropic Gaussian with a quartic term: nothing symmetric about them."""
    return -x * jnp.arange(1, x.shape[1] + 1, dtype=x.dtype)[None, :] - 0.1 * x**3


@SETTINGS
@given(point_sets(), kernels)
def test_gram_is_symmetric_and_positive_semidefinite(x, kernel):
    k = kernel.resolve(x)
    gram = np.asarray(k.gram(x, x), np.float64)
    np.testing.assert_allclose(gram, gram.T, **tolerance(jnp.float32))
    # eigenvalues of an n x n float32 matrix: rounding up to ~n * eps * ||K|| (scale n)
    assert np.linalg.eigvalsh(gram).min() >= -tolerance(jnp.float32, x.shape[0])["atol"] * np.abs(gram).max()


@SETTINGS
@given(point_sets(), kernels)
def test_stein_kernel_is_symmetric(x, kernel):
    s = _scores(x)
    k = kernel.resolve(x)
    u = np.asarray(stein_kernel_matrix(x, s, x, s, k), np.float64)
    np.testing.assert_allclose(u, u.T, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(u).max()))


@pytest.mark.slow  # ~23 s; CI's slow pass runs it (the default suite must stay under 10 minutes)
@settings(SETTINGS, max_examples=12)  # each example compiles six engines for its shape
@given(point_sets(n_min=3, n_max=6), st.randoms(use_true_random=False))
def test_directions_are_permutation_equivariant_and_discrepancies_invariant(x, rnd):
    perm = np.array(rnd.sample(range(x.shape[0]), x.shape[0]))
    s = _scores(x)
    tol = tolerance(jnp.float32, 10.0)  # sums of n terms in another order, then a median bandwidth
    for fn in (lambda a, b: steinax.svgd_direction(a, b), lambda a, b: steinax.cc_svgd_direction(a, b),
               lambda a, b: steinax.mk_svgd().direction(None, a, b, steinax.mk_svgd().init_aux(a))[0]):
        np.testing.assert_allclose(fn(x[perm], s[perm]), fn(x, s)[perm], **tol)

    for fn in (lambda a, b: steinax.ksd(a, b, steinax.IMQ(), "u"), lambda a, b: steinax.ksd(a, b, steinax.RBF()),
               lambda a, b: kcc_sd(a, b, steinax.IMQ()), lambda a, b: mksd(a, b, [steinax.RBF(0.5), steinax.RBF(2.0)])):
        np.testing.assert_allclose(fn(x[perm], s[perm]), fn(x, s), **tol)


def test_matrix_methods_are_permutation_equivariant():
    """Matrix SVGD (mixture: anchors at the particles; average) and SVN with a per-particle curvature permuted alongside."""
    x = jax.random.normal(jax.random.key(5), (9, 3))
    s = _scores(x)
    perm = np.random.default_rng(0).permutation(9)
    curv = jnp.einsum("ni,nj->nij", x, x) + jnp.broadcast_to(jnp.eye(3), (9, 3, 3))
    for m in (steinax.matrix_svgd(mode="mixture"), steinax.matrix_svgd(), steinax.svn()):
        np.testing.assert_allclose(m.direction(None, x[perm], s[perm], None, curv[perm])[0],
                                   m.direction(None, x, s, None, curv)[0][perm], **tolerance(jnp.float32, 10.0))


@pytest.mark.slow  # ~40-50 s; runs in CI's slow pass
def test_float64_runs_of_every_engine():
    """MK-SVGD, CC-SVGD, matrix SVGD, SVN, KCC-SD, MKSD and gof_test in float64: float64 outputs, equal to float32 to float32 rounding."""
    x32 = jax.random.normal(jax.random.key(0), (40, 3))
    s32 = _scores(x32)
    results = {}
    for name, ctx in (("float32", jax.enable_x64(False)), ("float64", jax.enable_x64(True))):
        with ctx:
            dtype = jnp.float64 if name == "float64" else jnp.float32
            x, s = x32.astype(dtype), s32.astype(dtype)
            mk = steinax.mk_svgd()
            out = {
                "mk_direction": mk.direction(None, x, s, mk.init_aux(x))[0],
                "cc_direction": steinax.cc_svgd_direction(x, s),
                "kcc_sd": kcc_sd(x, s, steinax.IMQ(), "u"),
                "mksd": mksd(x, s, [steinax.RBF(0.5), steinax.RBF(2.0)]),
                "gof": gof_test(x, s, rng_key=jax.random.key(1), n_bootstrap=50).statistic,
                "gof_dependent": gof_test(x, s, rng_key=jax.random.key(1), n_bootstrap=50, bootstrap="dependent",
                                          chains=2).statistic,
            }
            for method in (steinax.mk_svgd(), steinax.cc_svgd(), steinax.matrix_svgd(), steinax.svn(),
                           steinax.matrix_svgd(mode="mixture")):
                res = steinax.run(method, lambda z: -0.5 * jnp.sum(z * z), x, steps=3, optimizer=steinax.adagrad_momentum(0.05),
                                  rng_key=jax.random.key(2), progress=False)
                out[f"run_{type(method).__name__}_{getattr(method, 'mode', '')}"] = res.particles
            for k, v in out.items():
                assert v.dtype == dtype, (name, k, v.dtype)
            results[name] = {k: np.asarray(v, np.float64) for k, v in out.items()}
    for k in results["float32"]:
        np.testing.assert_allclose(results["float32"][k], results["float64"][k], rtol=1e-3, atol=1e-4, err_msg=k)


# ---------------------------------------------------------------- fuzz

CLEAR = (ValueError, TypeError, FloatingPointError)

bad_arrays = st.one_of(
    st.just(np.zeros((0, 2), np.float32)),                      # empty
    st.just(np.zeros((3,), np.float32)[None, None]),            # wrong rank (3-D [1, 1, 3] for [n, d])
    st.just(np.zeros((4, 2, 2), np.float32)),                   # wrong rank
    st.just(np.array([[1.0, np.nan], [0.0, 1.0]], np.float32)),  # NaN
    st.just(np.array([[1.0, np.inf], [0.0, 1.0]], np.float32)),  # inf
    st.just(np.ones((3, 2), np.int32)),                         # integer dtype
    st.just("not an array"),
    st.just(None),
    st.just([[1.0, 2.0], [3.0]]),                               # ragged
    st.just(np.array([["a", "b"]])),                            # strings
)


def _assert_clear(exc):
    assert isinstance(exc, CLEAR), f"raw {type(exc).__name__}: {exc}"
    assert "`" in str(exc) or "not finite" in str(exc), f"the message names no argument: {exc}"


@SETTINGS
@given(bad_arrays)
def test_public_functions_reject_malformed_samples_clearly(bad):
    good = jnp.ones((4, 2))
    calls = [
        lambda: steinax.ksd(bad, good, steinax.IMQ()),
        lambda: steinax.ksd(good, bad, steinax.IMQ()),
        lambda: kcc_sd(bad, good, steinax.IMQ()),
        lambda: mksd(bad, good, [steinax.RBF(1.0)]),
        lambda: gof_test(bad, good, rng_key=jax.random.key(0)),
        lambda: steinax.svgd_direction(bad, good),
        lambda: steinax.metrics.mmd2(bad, good),
        lambda: sample_quality(bad, lambda z: -jnp.sum(z * z)),
        lambda: steinax.run(steinax.svgd(), lambda z: -jnp.sum(z * z), bad, steps=2,
                            optimizer=steinax.adagrad_momentum(0.1), rng_key=jax.random.key(0)),
    ]
    for call in calls:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the type is the assertion
            _assert_clear(exc)
        else:
            # only sample_quality accepts two of these: a 3-D array is [chains, draws, d], and integer
            # samples are cast to its compute dtype (its `dtype` argument)
            assert isinstance(bad, np.ndarray) and (bad.ndim == 3 or bad.dtype.kind == "i")


@SETTINGS
@given(st.sampled_from([
    dict(estimator="w"), dict(estimator="u", squared=False), dict(block_size=0), dict(block_size=-3),
    dict(kernel="rbf"), dict(kernel=lambda x, y: 1.0),
]))
def test_ksd_bad_arguments(kwargs):
    x = jnp.ones((4, 2)) * jnp.arange(4.0)[:, None]
    args = {"kernel": steinax.IMQ(), **kwargs}
    kernel = args.pop("kernel")
    with pytest.raises(CLEAR) as info:
        steinax.ksd(x, -x, kernel, **args)
    _assert_clear(info.value)


@SETTINGS
@given(st.sampled_from([
    dict(bandwidth=-1.0), dict(bandwidth=float("nan")), dict(bandwidth="median"), dict(bandwidth=[[1.0]]),
]))
def test_kernel_constructors_reject_bad_parameters(kwargs):
    with pytest.raises(CLEAR) as info:
        steinax.RBF(**kwargs)
    _assert_clear(info.value)
    for c, beta in [(0.0, -0.5), (-1.0, -0.5), (1.0, 0.5), (1.0, 0.0)]:
        with pytest.raises(CLEAR):
            steinax.IMQ(c, beta)


BAD_FILES = {
    "empty.csv": b"",
    "header_only.csv": b"x0,x1\n",
    "ragged.csv": b"1,2\n3\n",
    "text.csv": b"1,2\n3,four\n",
    "nan.csv": b"1,2\nnan,4\n",
    "huge.csv": b"1e300,2\n3,4\n",
    "binary.npy": b"\x93NUMPY garbage",
    "pickle.npy": None,  # an object array: needs pickle, refused
    "bad.nc": b"not netcdf",
    "strings.npy": None,
    "wrong_dim.npy": None,
    "scalar.npy": None,
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_cli_bad_files_fail_cleanly_and_write_nothing(name, tmp_path, capsys):
    path = tmp_path / name
    content = BAD_FILES[name]
    if name == "pickle.npy":
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif name == "strings.npy":
        np.save(path, np.array([["a", "b"]]))
    elif name == "wrong_dim.npy":
        np.save(path, np.ones((5, 3)))
    elif name == "scalar.npy":
        np.save(path, np.float64(1.0))
    else:
        path.write_bytes(content)
    (tmp_path / "t.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum((z - jnp.arange(2.0)) ** 2)\n")
    before = sorted(os.listdir(tmp_path))
    code = cli.main(["ksd", str(path), "--target", f"{tmp_path / 't.py'}:logp", "--bootstrap", "20"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("steinax ksd: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


def test_cli_bad_arguments(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(20, 2)))
    (tmp_path / "t.py").write_text("import jax.numpy as jnp\ndef logp(z):\n    return -0.5 * jnp.sum(z * z)\nvalue = 3\n")
    base = ["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 't.py'}:logp"]
    for extra, message in [(["--level", "1.5"], "`level`"), (["--bootstrap", "0"], "`n_bootstrap`"),
                           (["--block-length", "1"], "`block_length`"), (["--block-length", "x"], "`--block-length`"),
                           (["--block-size", "0"], "`block_size`"), (["--estimator", "u", "--kind", "kcc_sd", "--bandwidth", "-2", "--kernel", "rbf"], "`bandwidth` must be finite and > 0"),
                           (["--wild-bootstrap", "dependent", "--block-length", "50"], "leaves fewer than 10 blocks"),
                           (["--wild-bootstrap", "dependent", "--block-length", "2"], None)]:
        code = cli.main(base + extra)
        err = capsys.readouterr().err
        if message is None:
            assert code == 0, err
            continue
        assert code == 2 and message in err and err.count("\n") == 1, (extra, err)
    assert cli.main(["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 't.py'}:value"]) == 2
    assert "`target` must be a log-density function" in capsys.readouterr().err


def test_public_array_functions_do_not_recompile_on_a_second_eager_call():
    """Was: an eager blocked `ksd` retraced its scan on every call (0.45 s against 4.6 ms jitted)."""
    import logging

    from steinax.metrics import mmd2

    x = jax.random.normal(jax.random.key(0), (64, 3))
    calls = {
        "ksd": lambda a: steinax.ksd(a, -a, steinax.IMQ(), block_size=16),
        "kcc_sd": lambda a: kcc_sd(a, -a, steinax.IMQ(), block_size=16),
        "mksd": lambda a: mksd(a, -a, [steinax.RBF(0.5), steinax.RBF(2.0)], block_size=16),
        "gof_test": lambda a: gof_test(a, -a, rng_key=jax.random.key(1), n_bootstrap=20, block_size=16).p_value,
        "svgd_direction": lambda a: steinax.svgd_direction(a, -a, block_size=16),
        "cc_svgd_direction": lambda a: steinax.cc_svgd_direction(a, -a),
        "mmd2": lambda a: mmd2(a, -a, block_size=16),
    }
    x_new = jax.block_until_ready(x + 1.0)  # new values, same shapes
    for name, call in calls.items():
        jax.block_until_ready(call(x))
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("jax").addHandler(handler)
        try:
            with jax.log_compiles(True):
                jax.block_until_ready(call(x_new))  # a new kernel object of the same kind, too
        finally:
            logging.getLogger("jax").removeHandler(handler)
        compiled = [r.getMessage() for r in records if "Compiling" in r.getMessage()]
        assert compiled == [], (name, compiled)


def test_every_kernel_argument_is_checked():
    from steinax.metrics import mmd2
    from steinax.stein import block_ksd, kcc_sd_conditional

    x = jnp.ones((20, 2)) * jnp.arange(20.0)[:, None]  # 20: the fewest samples a test takes
    calls = {
        "ksd": lambda k: steinax.ksd(x, -x, k), "kcc_sd": lambda k: kcc_sd(x, -x, k),
        "block_ksd": lambda k: block_ksd(x, -x, k, block=2), "kcc_sd_conditional": lambda k: kcc_sd_conditional(x, -x, x, -x, k),
        "gof_test": lambda k: gof_test(x, -x, k, rng_key=jax.random.key(0)), "mmd2": lambda k: mmd2(x, x, k),
        "svgd_direction": lambda k: steinax.svgd_direction(x, -x, k), "cc_svgd_direction": lambda k: steinax.cc_svgd_direction(x, -x, k),
        "svgd": lambda k: steinax.svgd(k), "cc_svgd": lambda k: steinax.cc_svgd(k), "mk_svgd": lambda k: steinax.mk_svgd([k]),
        "SVGD class": lambda k: SVGD(kernel=k),
        "sample_quality": lambda k: sample_quality(np.asarray(x), lambda z: -jnp.sum(z * z), kernel=k),
        "run diagnostic": lambda k: steinax.run(steinax.svgd(), lambda z: -jnp.sum(z * z), x, steps=1,
                                                optimizer=steinax.adagrad_momentum(0.1), rng_key=jax.random.key(0),
                                                diagnostic_kernel=k),
    }
    for name, call in calls.items():
        with pytest.raises((TypeError, ValueError), match="must be a steinax kernel|must hold steinax kernels|`bandwidth`") as info:
            call("rbf")
        assert "Traceback" not in str(info.value), name
