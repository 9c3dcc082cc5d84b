"""Stein kernels and kernel Stein discrepancies."""

from steinax.stein.ksd import ESTIMATORS, ksd, stein_kernel_matrix

__all__ = ["ksd", "stein_kernel_matrix", "ESTIMATORS"]
