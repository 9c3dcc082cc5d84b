"""Expected calibration error against a hand computation and its limiting cases."""

import numpy as np
import pytest

from steinax.metrics import expected_calibration_error


def test_ece_by_hand():
    p = np.array([0.9, 0.8, 0.28, 0.55, 0.05, 0.62])  # no confidence on a bin edge
    y = np.array([1, 0, 0, 1, 0, 0])
    # confidences 0.9, 0.8, 0.72, 0.55, 0.95, 0.62; correct 1, 0, 1, 1, 1, 0; 5 bins of width 0.1 on [0.5, 1]
    # bin [0.5, 0.6): {0.55: 1}; [0.6, 0.7): {0.62: 0}; [0.7, 0.8): {0.72: 1}; [0.8, 0.9): {0.8: 0}; [0.9, 1]: {0.9, 0.95: 1, 1}
    expected = (abs(1 - 0.55) + abs(0 - 0.62) + abs(1 - 0.72) + abs(0 - 0.8) + 2 * abs(1 - 0.925)) / 6
    assert expected_calibration_error(p, y, num_bins=5) == pytest.approx(expected, rel=1e-12)


def test_ece_limits():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200_000)
    y = (rng.uniform(size=p.size) < p).astype(int)  # calibrated by construction
    assert expected_calibration_error(p, y) < 0.01  # sampling error ~ 1/sqrt(20,000 per bin)
    assert expected_calibration_error(np.ones(10), np.zeros(10, int)) == pytest.approx(1.0)  # sure and always wrong


def test_ece_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_calibration_error(np.array([1.2]), np.array([1]))
    with pytest.raises(ValueError, match="one length"):
        expected_calibration_error(np.array([0.2, 0.3]), np.array([1]))
    with pytest.raises(ValueError, match="labels"):
        expected_calibration_error(np.array([0.2]), np.array([2]))
