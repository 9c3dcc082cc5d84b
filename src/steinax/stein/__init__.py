"""Stein kernels and kernel Stein discrepancies."""

from steinax.stein.ksd import ESTIMATORS, SteinTerms, ksd, stein_kernel_from_terms, stein_kernel_matrix, stein_terms
from steinax.stein.mksd import WEIGHT_RULES, kernel_ksds, mk_weights, mksd

__all__ = [
    "ksd",
    "stein_kernel_matrix",
    "stein_kernel_from_terms",
    "stein_terms",
    "SteinTerms",
    "ESTIMATORS",
    "mksd",
    "kernel_ksds",
    "mk_weights",
    "WEIGHT_RULES",
]
