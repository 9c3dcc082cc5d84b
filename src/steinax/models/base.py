"""What the models share: the typed result of evaluating particles on held-out data."""

from __future__ import annotations

import equinox as eqx
import jax

__all__ = ["Evaluation"]


class Evaluation(eqx.Module):
    """Predictive metrics of a particle approximation on test data (``None`` where a metric does not apply).

    Attributes:
        loglik: mean over test points of the log of the particle-averaged predictive density
            (regression) or probability of the observed label (classification).
        rmse: root mean squared error of the particle-averaged prediction (regression, original units).
        accuracy: fraction of test labels predicted (particle-averaged probability > 1/2; classification).
    """

    loglik: jax.Array
    rmse: jax.Array | None = None
    accuracy: jax.Array | None = None
