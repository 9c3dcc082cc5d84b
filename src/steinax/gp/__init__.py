"""Stein variational Gaussian processes (Pinder, Nemeth & Leslie 2020): GP models as steinax targets.

Each model is a target whose particles are GP hyperparameters (and, for a
non-Gaussian likelihood, the whitened latent function), so any steinax
particle method samples their posterior (the paper uses SVGD, Algorithm 1).
The GP kernels are tinygp's (``ExpSquared``, ``Matern32`` with the Euclidean
distance, ARD by an input scaling ``tinygp.transforms.Linear``).

* :class:`GPRegression`: Gaussian likelihood, the latent function marginalised
  (paper section 4):
  ``log p(theta | y) = log N(y | 0, K_theta + sigma^2 I) + log p_0(theta) + log |J|``.
* :class:`SparseGP`: ``M`` inducing points ``Z`` (k-means), ``u = L_Z nu``, any
  likelihood, and minibatch scores by the paper's eq. 10, so a step costs
  O(B M^2 + M^3) per particle instead of O(N^3).
* :class:`LatentGP`: a Bernoulli (probit or logit link) or Poisson (log link)
  likelihood with the whitened latent ``f = L_theta nu``, ``L_theta L_theta^T = K_theta + jitter I``,
  ``nu ~ N(0, I)`` (paper section 4, GPflow's GPMC):
  ``log p(theta, nu | y) = sum_i log p(y_i | f_i) + log N(nu | 0, I) + log p_0(theta) + log |J|``.

Parameters (decided once): a particle holds unconstrained values
``theta_u``; the constrained hyperparameters are ``softplus(theta_u)``
(ARD lengthscales, the signal variance, and for regression the noise
variance ``sigma^2``), with the log-Jacobian ``sum log sigmoid(theta_u)``.
Priors: Gamma(shape 1, scale 2) on every constrained hyperparameter (paper
section 5.1). ``ml=True`` drops the priors and the Jacobian (the authors'
regression code differentiates the log marginal likelihood only; with one
particle SVGD then finds the type-II maximum-likelihood estimate, the paper's
J = 1 remark).

Every per-particle quantity needs a Cholesky factor of an ``N x N`` matrix.
Targets evaluate the particles one at a time (``lax.map``) in programs lowered
for the CPU, so each factorisation is a single-matrix LAPACK call (see
:mod:`steinax._linalg`), and batched on accelerators. Predictions map over the
particles on every platform (memory: one particle's ``N_new x N`` matrices at a time).
"""

from steinax.gp.fitting import map_estimate, type2_ml
from steinax.gp.kernels import (
           KERNELS,
           LIKELIHOODS,
           Hyperparameters,
           gaussian_log_marginal,
           kernel_matrix,
)
from steinax.gp.latent import LatentGP
from steinax.gp.regression import GPRegression
from steinax.gp.sparse import SparseGP, kmeans_inducing_points

__all__ = ["KERNELS", "LIKELIHOODS", "Hyperparameters", "GPRegression", "LatentGP", "SparseGP", "kernel_matrix",
           "gaussian_log_marginal", "kmeans_inducing_points", "map_estimate", "type2_ml"]
