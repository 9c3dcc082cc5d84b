"""The posterior metrics' covariance helper against closed forms."""

import numpy as np

from steinax.metrics.posterior import whitened_covariance


def test_whitened_covariance_is_the_identity_for_draws_with_the_target_covariance_and_scales_with_it():
    """Draws built to have sample covariance exactly ``cov`` (ddof 1) whiten to the identity; shrinking them by
    ``c`` gives ``c^2 I``; a coupling that per-coordinate sds cannot see (the same marginals, correlation flipped)
    shows as eigenvalues ``(1 - rho) / (1 + rho)`` and its inverse (float64, rounding only: 1e-10)."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 3))
    z = z - z.mean(0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z.T))).T  # sample covariance exactly I
    rho = 0.6
    cov = np.array([[1.0, rho, 0.0], [rho, 1.0, 0.0], [0.0, 0.0, 2.0]])
    x = z @ np.linalg.cholesky(cov).T + 5.0
    np.testing.assert_allclose(whitened_covariance(x, cov), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(whitened_covariance(0.5 * x, cov), 0.25 * np.eye(3), atol=1e-10)
    flipped = np.array([[1.0, -rho, 0.0], [-rho, 1.0, 0.0], [0.0, 0.0, 2.0]])
    y = z @ np.linalg.cholesky(flipped).T
    assert np.allclose(y.std(0, ddof=1), x.std(0, ddof=1))  # the same per-coordinate sds
    ev = np.linalg.eigvalsh(whitened_covariance(y, cov))
    np.testing.assert_allclose(ev, [(1 - rho) / (1 + rho), 1.0, (1 + rho) / (1 - rho)], atol=1e-10)
