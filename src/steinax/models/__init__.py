"""Reusable Bayesian models for the papers' experiments (targets built on :mod:`steinax.targets`)."""

from steinax.models.bnn import BNNRegression

__all__ = ["BNNRegression"]
