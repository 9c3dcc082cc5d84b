"""Targets: log-densities, minibatch models, toy distributions, and NumPyro, PyMC and TFP models."""

from steinax.targets.affine import AffineMap, AffineTarget
from steinax.targets.flow import FlowTarget
from steinax.targets.base import (AbstractTarget, LogDensityTarget, MinibatchTarget, ScoreTarget, as_target, hessian_at,
                                  logdensities)
from steinax.targets.model import ModelTarget
from steinax.targets.toys import DoubleBanana, Gaussian, GaussianMixture, Sine, gmm_1d, gmm_2d, star

__all__ = [
    "AbstractTarget",
    "LogDensityTarget",
    "ScoreTarget",
    "MinibatchTarget",
    "as_target",
    "logdensities",
    "hessian_at",
    "Gaussian",
    "GaussianMixture",
    "gmm_1d",
    "gmm_2d",
    "star",
    "DoubleBanana",
    "Sine",
    "ModelTarget",
    "AffineMap",
    "AffineTarget",
    "FlowTarget",
    "NumPyroTarget",
    "from_numpyro",
    "from_pymc",
    "from_tfp",
]

_OPTIONAL = {"NumPyroTarget": "numpyro_adapter", "from_numpyro": "numpyro_adapter", "from_pymc": "pymc_adapter",
             "from_tfp": "tfp_adapter"}


def __getattr__(name):  # NumPyro, PyMC and TFP are optional extras: their adapters are imported when asked for
    if name in _OPTIONAL:
        import importlib

        return getattr(importlib.import_module(f"steinax.targets.{_OPTIONAL[name]}"), name)
    raise AttributeError(name)
