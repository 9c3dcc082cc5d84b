"""steinax: Stein methods in JAX.

Particle variational inference (SVGD and its variants) and kernel Stein
discrepancies, as pure functions on arrays with thin method and run-loop layers.
"""

from steinax import _linalg  # noqa: F401  (first: it sets OPENBLAS_NUM_THREADS; see single_threaded_lapack)
from steinax import _aliases

_aliases.install()  # old module paths of moved modules (steinax._aliases.ALIASES)
from steinax import datasets, diagnostics, kernels, metrics, models, stein, targets
from steinax import gp, unfold
from steinax.runtime import sharding
from steinax.runtime.compilation_cache import enable_compilation_cache, enable_from_environment
from steinax.kernels import IMQ, RBF
from steinax.particles import (
    ConvergenceWarning,
    DivergenceWarning,
    NonFiniteError,
    RunInterrupted,
    ParticleState,
    RunResult,
    Trace,
    adagrad_momentum,
    annealed_svgd,
    cc_svgd,
    cc_svgd_direction,
    map_ascent,
    matrix_svgd,
    matrix_svgd_direction,
    mk_svgd,
    run,
    run_until_converged,
    sampling_algorithm,
    sliced_svgd,
    scale_by_adagrad_momentum,
    svgd,
    svgd_direction,
    svn,
)
from steinax.stein import ksd
from steinax.pipeline import SampleInterrupted, SampleResult, sample

__version__ = "0.1.0"

enable_from_environment()  # STEINAX_COMPILATION_CACHE set: JAX's persistent cache there (opt-in)

__all__ = [
    "ConvergenceWarning",
    "run_until_converged",
    "sampling_algorithm",
    "datasets",
    "sharding",
    "enable_compilation_cache",
    "diagnostics",
    "kernels",
    "models",
    "stein",
    "targets",
    "metrics",
    "unfold",
    "gp",
    "RBF",
    "IMQ",
    "ksd",
    "svgd",
    "svgd_direction",
    "mk_svgd",
    "matrix_svgd",
    "matrix_svgd_direction",
    "svn",
    "cc_svgd",
    "annealed_svgd",
    "sliced_svgd",
    "cc_svgd_direction",
    "map_ascent",
    "run",
    "RunResult",
    "SampleInterrupted",
    "Trace",
    "ParticleState",
    "NonFiniteError",
    "RunInterrupted",
    "DivergenceWarning",
    "adagrad_momentum",
    "scale_by_adagrad_momentum",
]


def __getattr__(name):  # moved modules at their old paths, e.g. steinax.checkpoint (steinax._aliases)
    return _aliases.attribute(__name__, name)
