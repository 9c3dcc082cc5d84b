"""Diagnostics of any sampler's output: one module per tool.

* :mod:`~steinax.diagnostics.quality`: the kernel Stein discrepancy and its
  goodness-of-fit test (:func:`sample_quality`), and the sample readers.
* :mod:`~steinax.diagnostics.spread`: a collapse (under-dispersion) check from the
  particles' scores alone (:func:`spread_check`).
* :mod:`~steinax.diagnostics.relaxation`: a collapse check that moves the particles with a
  sampler that leaves the target invariant (:func:`relaxation_check`).
* :mod:`~steinax.diagnostics.modes`: a missing-mode check that compares how the particles split
  over the target's modes with the modes' Laplace masses (:func:`mode_check`).
* :mod:`~steinax.diagnostics.thinning`: Stein thinning, the ``m`` draws whose empirical measure has
  the smallest KSD (:func:`stein_thinning`).
* :mod:`~steinax.diagnostics.compression`: compression of biased draws, Stein kernel thinning and its
  low-rank variant through the authors' goodpoints (:func:`stein_kernel_thinning`; ``steinax[compress]``).
* :mod:`~steinax.diagnostics.control_variates`: Stein control variates for posterior expectations
  (polynomial, kernel and semi-exact bases, cross-fitted; :func:`stein_control_variates`).
* :mod:`~steinax.diagnostics.importance`: KSD importance weights, simplex weights on any sample
  that minimise the weighted KSD (:func:`stein_importance_weights`).
* :mod:`~steinax.diagnostics.ess`: the multi-chain effective sample size of a mean and its Monte Carlo
  standard error (:func:`effective_sample_size`, :func:`mean_standard_error`), as Stan and ArviZ compute them.
* :mod:`~steinax.diagnostics.rhat`: nested R-hat for many short chains grouped in superchains
  (:func:`nested_rhat`, Margossian et al. 2024), rank-normalised as ArviZ computes it (:func:`rank_nested_rhat`), and
  superchains of neighbouring starts (:func:`neighbour_superchains`).
* :mod:`~steinax.diagnostics.pareto`: the Pareto k-hat of a function's draws, whether their mean has a CLT
  (:func:`pareto_khat`), as ArviZ computes it.

Every tool reads draws through :func:`~steinax.diagnostics.quality.draws_and_scores` (arrays,
chains, DataTrees, NumPyro sites).
"""

from steinax.diagnostics.compression import Compression, stein_kernel_thinning
from steinax.diagnostics.control_variates import ControlVariateEstimate, stein_control_variates
from steinax.diagnostics.ess import effective_sample_size, mean_standard_error
from steinax.diagnostics.importance import ImportanceWeights, stein_importance_weights
from steinax.diagnostics.modes import MODES_LEVEL, ModeCheck, mode_check
from steinax.diagnostics.rhat import neighbour_superchains, nested_rhat, rank_nested_rhat, rank_split_rhat
from steinax.diagnostics.pareto import pareto_khat
from steinax.diagnostics.quality import SampleQuality, as_sample_array, load_samples, sample_quality
from steinax.diagnostics.relaxation import RELAXATION_LEVEL, RelaxationCheck, relaxation_check
from steinax.diagnostics.spread import CROSS_THRESHOLD, SPREAD_THRESHOLD, SpreadCheck, spread_check
from steinax.diagnostics.thinning import Thinning, stein_thinning

__all__ = ["SampleQuality", "as_sample_array", "load_samples", "sample_quality", "SpreadCheck", "spread_check",
           "SPREAD_THRESHOLD", "CROSS_THRESHOLD", "RelaxationCheck", "relaxation_check", "RELAXATION_LEVEL",
           "ModeCheck", "mode_check", "MODES_LEVEL", "Thinning", "stein_thinning", "Compression", "stein_kernel_thinning",
           "ImportanceWeights", "stein_importance_weights", "ControlVariateEstimate", "stein_control_variates",
           "effective_sample_size", "mean_standard_error", "pareto_khat", "nested_rhat",
           "rank_nested_rhat", "rank_split_rhat", "neighbour_superchains"]
