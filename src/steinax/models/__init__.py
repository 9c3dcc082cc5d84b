"""Reusable Bayesian models for the papers' experiments (targets built on :mod:`steinax.targets`)."""

from steinax.models.base import Evaluation
from steinax.models.bnn import BNNRegression
from steinax.models.logistic import LogisticRegression

__all__ = ["BNNRegression", "Evaluation", "LogisticRegression"]
