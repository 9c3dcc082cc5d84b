"""Scalar kernels, bandwidth rules and the pairwise-distance module."""

from steinax.kernels.bandwidth import BANDWIDTH_RULES, kth_smallest, median_bandwidth
from steinax.kernels.base import IMQ, RBF, AbstractKernel
from steinax.kernels.matrix import (
    AbstractMatrixKernel,
    AbstractPreconditioner,
    CallableMatrixKernel,
    DiagonalMatrixKernel,
    KFACFactors,
    KroneckerPreconditioner,
    MixtureKernel,
    PreconditionedKernel,
    Preconditioner,
    ScalarMatrixKernel,
    positive_definite,
)
from steinax.kernels.pairwise import fold_row_blocks, map_row_blocks, scan_row_blocks, squared_distances

__all__ = [
    "AbstractKernel",
    "RBF",
    "IMQ",
    "AbstractMatrixKernel",
    "ScalarMatrixKernel",
    "CallableMatrixKernel",
    "DiagonalMatrixKernel",
    "PreconditionedKernel",
    "MixtureKernel",
    "AbstractPreconditioner",
    "Preconditioner",
    "positive_definite",
    "KFACFactors",
    "KroneckerPreconditioner",
    "median_bandwidth",
    "kth_smallest",
    "BANDWIDTH_RULES",
    "squared_distances",
    "map_row_blocks",
    "scan_row_blocks",
    "fold_row_blocks",
]
