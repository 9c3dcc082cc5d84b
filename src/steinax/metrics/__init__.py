"""Sample-quality and predictive metrics."""

from steinax.metrics.calibration import expected_calibration_error
from steinax.metrics.mmd import mmd2

__all__ = ["mmd2", "expected_calibration_error"]
