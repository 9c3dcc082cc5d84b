"""Sample-quality metrics."""

from steinax.metrics.mmd import mmd2

__all__ = ["mmd2"]
