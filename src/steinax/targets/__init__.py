"""Targets: log-densities, minibatch models, toy distributions and the NumPyro adapter."""

from steinax.targets.base import AbstractTarget, LogDensityTarget, MinibatchTarget, ScoreTarget, as_target
from steinax.targets.toys import DoubleBanana, Gaussian, GaussianMixture, Sine, gmm_1d, gmm_2d, star

__all__ = [
    "AbstractTarget",
    "LogDensityTarget",
    "ScoreTarget",
    "MinibatchTarget",
    "as_target",
    "Gaussian",
    "GaussianMixture",
    "gmm_1d",
    "gmm_2d",
    "star",
    "DoubleBanana",
    "Sine",
    "NumPyroTarget",
    "from_numpyro",
]


def __getattr__(name):  # numpyro is an optional extra: import it only when asked for
    if name in ("NumPyroTarget", "from_numpyro"):
        from steinax.targets import numpyro_adapter

        return getattr(numpyro_adapter, name)
    raise AttributeError(name)
