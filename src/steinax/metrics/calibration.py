"""Calibration of binary predictive probabilities."""

from __future__ import annotations

import numpy as np

__all__ = ["expected_calibration_error"]


def expected_calibration_error(probabilities, labels, num_bins: int = 10) -> float:
    """Expected calibration error of binary predictions (Guo et al. 2017), in [0, 1].

    Binning (decided once): each prediction's *confidence* is
    ``max(p, 1 - p)`` for ``p = P(y = 1)``, and its predicted class is
    ``p >= 0.5``. The confidences fall into ``num_bins`` equal-width bins of
    ``[0.5, 1]`` (the range a binary confidence can take; the last bin is
    closed). Then ``ECE = sum_b (n_b / N) |accuracy_b - mean confidence_b|``
    over non-empty bins. (The Stein-GP authors' code bins ``p`` itself on
    ``[0, 1]``, which scores a confident wrong prediction as calibrated when it
    shares a bin with right ones; ALGORITHMS.md section D.)

    Args:
        probabilities: ``[N]`` predicted ``P(y = 1)`` in [0, 1].
        labels: ``[N]`` in {0, 1}.
        num_bins: number of bins.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim != 1 or y.shape != p.shape:
        raise ValueError(f"`probabilities` and `labels` must be [N] vectors of one length; received {p.shape} and "
                         f"{y.shape}")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("`probabilities` must lie in [0, 1]")
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise ValueError(f"`labels` must be in {{0, 1}}; received values {sorted(set(np.unique(y).tolist()))[:6]}")
    if isinstance(num_bins, bool) or not isinstance(num_bins, (int, np.integer)) or num_bins < 1:
        raise ValueError(f"`num_bins` must be a positive integer; received {num_bins!r}")
    confidence = np.maximum(p, 1.0 - p)
    correct = ((p >= 0.5).astype(int) == y).astype(np.float64)
    index = np.minimum(((confidence - 0.5) * 2 * num_bins).astype(int), num_bins - 1)
    ece = 0.0
    for b in range(num_bins):
        mask = index == b
        if mask.any():
            ece += mask.mean() * abs(correct[mask].mean() - confidence[mask].mean())
    return float(ece)
