"""Shared fixtures: strict rank promotion, fixed keys, dtype-aware tolerances.

``tolerance(dtype, scale)`` is the one tolerance helper of the suite (tests import it
with ``from conftest import tolerance``); tolerances that are statistical (a
standard error, a binomial interval) are written out where used, with their reason.

Tolerances: float32 has a unit roundoff of 6e-8; the quantities compared are
sums of O(n) terms of O(1) size computed in different orders (matrix products
vs loops), so we allow rtol 1e-4 / atol 1e-5 in float32 and 1e-10 / 1e-12 in
float64 (unit roundoff 1.1e-16, same reasoning).
"""

import os
import sys

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/reference.py: naive reference implementations

jax.config.update("jax_numpy_rank_promotion", "raise")


TOL = {
    "float32": dict(rtol=1e-4, atol=1e-5),
    "float64": dict(rtol=1e-10, atol=1e-12),
}


@pytest.fixture(autouse=True)
def _global_precision_unchanged(request):
    """A test (or the code it runs: an experiment's ``main``, the CLI in-process) must not leave JAX's 64-bit mode
    switched: a leaked ``jax.config.update("jax_enable_x64", True)`` changes every later test on the same xdist
    worker (CI once failed six unrelated tests that way). The flag is restored, and the test that changed it fails."""
    before = bool(jax.config.read("jax_enable_x64"))
    yield
    after = bool(jax.config.read("jax_enable_x64"))
    if after != before:
        jax.config.update("jax_enable_x64", before)
        pytest.fail(f"{request.node.nodeid} left jax_enable_x64 {after} (it was {before}); scope it with "
                    "`with jax.enable_x64(...)`")


RSS_CLEAR_BYTES = 3 * 2**30
"""A worker holding more than this after a test module drops JAX's compilation caches (below)."""


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: never cleared
        return 0


_clear_above = [RSS_CLEAR_BYTES]


@pytest.fixture(autouse=True)
def _bounded_worker_memory():
    """An xdist worker keeps every program it compiled: over CI's slow pass (226 tests, many long sampler runs) two
    workers grew past 5.8 GB each by a third of the way (measured here), and CI's run lost a worker ("node down: Not
    properly terminated") two thirds of the way, twice. After a test that leaves its worker holding more than
    ``RSS_CLEAR_BYTES`` (or 1 GiB more than after the last clearing, so that a worker that cannot shrink does not
    recompile after every test), ``jax.clear_caches()`` drops the compiled programs, ``gc.collect()`` the arrays they
    held, and glibc's ``malloc_trim`` hands the freed pages back to the system."""
    yield
    if _resident_bytes() > _clear_above[0]:
        import ctypes
        import gc

        jax.clear_caches()
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass
        _clear_above[0] = max(RSS_CLEAR_BYTES, _resident_bytes() + 2**30)


@pytest.fixture
def key():
    return jax.random.key(20261122)


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """Run the test in float32 and in float64 (x64 enabled for the test only)."""
    if request.param == "float64":
        with jax.enable_x64(True):
            yield request.param
    else:
        yield request.param


@pytest.fixture
def tols(dtype):
    """``dict(rtol=..., atol=...)`` for the current ``dtype`` (see the module docstring); = ``tolerance(dtype)``."""
    return tolerance(dtype)


def tolerance(dtype, scale: float = 1.0) -> dict:
    """``dict(rtol=..., atol=...)`` for arrays of ``dtype`` (the one tolerance helper; see the module docstring).

    ``scale`` widens both for quantities that accumulate more rounding than an O(n) sum
    (e.g. eigenvalues of an n x n matrix: ``scale=n``); say why where it is used.
    """
    name = jnp.dtype(dtype).name
    base = TOL[name]
    return {k: v * scale for k, v in base.items()}

# The heaviest cross-checks of the default suite (each 14-37 s on two loaded cores, measured with
# `--durations=40`; about 4 minutes of worker time together), run with the slow tests: CI's second pass
# (`-m slow`) still runs every one of them. Docs snippets and user-path tests stay in the default suite.
HEAVY = {
    "tests/diagnostics/test_control_variates.py::test_auto_takes_the_basis_with_the_shortest_simulated_interval",
    "tests/gp/test_gp.py::test_log_marginal_likelihood_equals_cholesky_and_scipy[se]",
    "tests/particles/test_matrix_svgd.py::test_mixture_kernel_equals_naive_eq_9_10[True-None]",
    "tests/gp/test_gp.py::test_log_marginal_likelihood_equals_cholesky_and_scipy[matern32]",
    "tests/test_platform.py::test_device_selection_equals_host_selection[liu]",
    "tests/sharding/test_sharding.py::test_data_parallel_scores_equal_the_unsplit_target",
    "tests/targets/test_languages.py::test_scores_agree_at_100_points",
    "tests/kernels/test_bandwidth.py::test_blocked_median_equals_dense[1-liu]",
    "tests/targets/test_languages.py::test_svgd_particles_agree_after_100_steps",
    "tests/particles/test_matrix_svgd.py::test_preconditioned_kernel_equals_naive_eq_9_10[True]",
    "tests/kernels/test_interpolation.py::test_chunks_of_coordinates_take_their_own_degrees",
    "tests/kernels/test_bandwidth.py::test_blocked_median_reads_each_pair_once_and_matches_numpy[True-400]",
    "tests/particles/test_matrix_svgd.py::test_methods_run_and_report",
    "tests/test_edge_numerics.py::test_coincident_particles_get_the_documented_bandwidth[float64-liu]",
    "tests/kernels/test_bandwidth.py::test_blocked_median_reads_each_pair_once_and_matches_numpy[False-400]",
    "tests/test_diagnostics.py::test_numpyro_model_draws_are_measured_in_unconstrained_space",
    "tests/particles/test_mk_cc_svgd.py::test_mk_with_one_kernel_equals_svgd",
    "tests/test_diagnostics.py::test_bootstrap_choice_follows_the_input",
    "tests/test_unfold.py::test_saved_and_loaded_schedule_is_identical[False]",
    "tests/test_unfold.py::test_stacked_problems_and_data_losses",
    "tests/models/test_bnn.py::test_matrix_svgd_network_by_hand",
    "tests/test_unfold.py::test_learning_rate_zero_leaves_the_schedule_unchanged",
    "tests/test_properties.py::test_gram_is_symmetric_and_positive_semidefinite",
    "tests/test_properties.py::test_stein_kernel_is_symmetric",
    "tests/kernels/test_bandwidth.py::test_subsampled_rule",
    "tests/test_docs.py::test_docs_snippets_run[docs/methods/matrix-svgd.md]",
    "tests/particles/test_matrix_svgd.py::test_mixture_kernel_equals_naive_eq_9_10[False-1.0]",
    # added at 10m18s wall for the default suite uncontended (`--durations=30`; 10-15 s each): their siblings or
    # neighbours stay in the default suite (device selection's per-dimension rule, the float32 bandwidths,
    # unfolding's training and gradients, the host and device medians)
    "tests/test_platform.py::test_device_selection_equals_host_selection[pairs]",
    "tests/test_unfold.py::test_incremental_training_follows_algorithm_2",
    "tests/kernels/test_per_dimension_select.py::test_device_path_counts_past_2_to_31_pairs",
    "tests/test_edge_numerics.py::test_coincident_particles_get_the_documented_bandwidth[float64-pairs]",
    "tests/models/test_logistic.py::test_svgd_agrees_with_nuts_on_a_small_problem",
}


def pytest_configure(config):
    """The default suite (``-m "not slow"``) compiles with XLA's backend (LLVM) optimisation level 0.

    Most of its time is compiling small programs once (measured: ``tests/test_unfold.py`` 184 s at the default
    level, 121 s at 0, on the same loaded cores; the whole default suite 12m16s and 8m01s). Results can differ
    from the default level's in the last bits (whether LLVM fuses a multiply and an add); XLA's CPU backend uses
    no fast-math reassociation at either level, and the tolerances above are dtype roundoff, not a particular
    rounding; tests that compare two programs to the bit compile both at the same level. The slow tests
    (statistical calibration, experiments: long runs of the same programs) keep the default level, so the
    optimised code users run is tested in CI too. A level already in ``XLA_FLAGS`` is left as it is. Set
    here, before the first computation initialises the backend, in every xdist worker."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "not slow" in (config.option.markexpr or "") and "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0".strip()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid in HEAVY:
            item.add_marker(pytest.mark.slow)
