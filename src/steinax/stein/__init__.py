"""Stein kernels and kernel Stein discrepancies."""

from steinax.stein.ksd import ESTIMATORS, block_ksd, SteinTerms, ksd, stein_kernel_from_terms, stein_kernel_matrix, stein_kernel_row_sums, stein_terms
from steinax.stein.gof import DISCREPANCIES, GofResult, gof_test, stein_matrix_rows
from steinax.stein.complete_conditional import (complete_conditional_scores, kcc_sd, kcc_sd_conditional,
                                                kcc_sd_coordinates)
from steinax.stein.ksdagg import AggregatedTest, ksdagg_test
from steinax.stein.mksd import WEIGHT_RULES, kernel_ksds, mk_weights, mksd
from steinax.stein.nystrom import nystrom_ksd, nystrom_ksd_test

__all__ = [
    "block_ksd",
    "gof_test",
    "GofResult",
    "ksdagg_test",
    "nystrom_ksd",
    "nystrom_ksd_test",
    "AggregatedTest",
    "DISCREPANCIES",
    "stein_matrix_rows",
    "kcc_sd",
    "kcc_sd_conditional",
    "kcc_sd_coordinates",
    "complete_conditional_scores",
    "ksd",
    "stein_kernel_matrix",
    "stein_kernel_from_terms",
    "stein_kernel_row_sums",
    "stein_terms",
    "SteinTerms",
    "ESTIMATORS",
    "mksd",
    "kernel_ksds",
    "mk_weights",
    "WEIGHT_RULES",
]
