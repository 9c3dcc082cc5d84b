"""Particle methods (update directions as pure functions), the run loop and optax glue."""

import sys as _sys

from steinax import _aliases

from steinax.particles.annealed import Annealed, annealed_svgd, annealing_schedule
from steinax.particles.sliced import SlicedSVGD, sliced_svgd
from steinax.particles.complete_conditional import CCSVGD, cc_svgd, cc_svgd_direction
from steinax.particles.matrix_valued import SVN, MatrixSVGD, matrix_svgd, matrix_svgd_direction, svn, svn_direction
from steinax.particles.multiple_kernel import MKSVGD, MKState, mk_svgd, rbf_bandwidth_grid
from steinax.particles.base import AbstractParticleMethod, ParticleState, StepInfo
from steinax.particles.algorithm import SamplingAlgorithm, sampling_algorithm
from steinax.particles.baselines import MAPAscent, map_ascent
from steinax.particles.optim import ScaleByAdagradMomentumState, adagrad_momentum, scale_by_adagrad_momentum
from steinax.particles.loop import (AbstractStage, Chain, ConvergenceWarning, DivergenceWarning, FixedSteps,
                                    NonFiniteError, ParticleLoop, RunInterrupted, RunResult, Staged, StoppingRule, Trace,
                                    UntilSettled, run, run_until_converged)
from steinax.particles.svgd import SVGD, svgd, svgd_direction

__all__ = [
    "SamplingAlgorithm",
    "sampling_algorithm",
    "ConvergenceWarning",
    "run_until_converged",
    "StoppingRule",
    "AbstractStage",
    "Staged",
    "ParticleLoop",
    "Chain",
    "FixedSteps",
    "UntilSettled",
    "AbstractParticleMethod",
    "ParticleState",
    "StepInfo",
    "SVGD",
    "Annealed",
    "annealed_svgd",
    "annealing_schedule",
    "SlicedSVGD",
    "sliced_svgd",
    "MKSVGD",
    "MKState",
    "mk_svgd",
    "rbf_bandwidth_grid",
    "CCSVGD",
    "cc_svgd",
    "cc_svgd_direction",
    "svgd",
    "svgd_direction",
    "MatrixSVGD",
    "matrix_svgd",
    "matrix_svgd_direction",
    "SVN",
    "svn",
    "svn_direction",
    "MAPAscent",
    "map_ascent",
    "run",
    "RunResult",
    "Trace",
    "NonFiniteError",
    "RunInterrupted",
    "DivergenceWarning",
    "adagrad_momentum",
    "scale_by_adagrad_momentum",
    "ScaleByAdagradMomentumState",
]


_aliases.register_shadowed(_sys.modules[__name__])  # steinax.particles.run stays the function


def __getattr__(name):  # the loop's old module paths, steinax.particles.converge and .interrupt (steinax._aliases)
    from steinax._aliases import attribute

    return attribute(__name__, name)
