"""What every Stein variational GP model shares: input checks, the mixture predictive over particles, and the base
target (hyperparameters from particles, predictions mapped over particles)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._linalg import per_particle
from steinax._validation import is_concrete
from steinax.gp.kernels import (
    _PRIOR_SCALE,
    _PRIOR_SHAPE,
    KERNELS,
    Hyperparameters,
    _gamma_logpdf,
    _softplus_inverse,
    kernel_matrix,
)
from steinax.targets.base import AbstractTarget


def _check_inputs(X, y, name_X="X", name_y="y"):
    X = np.asarray(X, dtype=float) if is_concrete(X) else X
    y = np.asarray(y, dtype=float) if is_concrete(y) else y
    if np.ndim(X) == 1:
        X = X[:, None]
    if np.ndim(X) != 2:
        raise ValueError(f"`{name_X}` must be [N, D]; received shape {np.shape(X)}")
    if np.ndim(y) != 1:
        raise ValueError(f"`{name_y}` must be [N]; received shape {np.shape(y)}")
    if np.shape(X)[0] != np.shape(y)[0]:
        raise ValueError(
            f"`{name_X}` and `{name_y}` must have the same number of rows; received {np.shape(X)[0]} and {np.shape(y)[0]}"
        )
    if is_concrete(X):
        bad = np.flatnonzero(~np.all(np.isfinite(X), axis=1))
        if bad.size:
            raise ValueError(f"`{name_X}` must be finite; rows {bad[:5].tolist()} hold NaN or inf")
    if is_concrete(y):
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size:
            raise ValueError(f"`{name_y}` must be finite; entries {bad[:5].tolist()} are NaN or inf")
    return jnp.asarray(X), jnp.asarray(y)


def _check_likelihood_data(likelihood, X, y):
    """:func:`_check_inputs`, then binary labels (mapped to {0, 1}) or non-negative integer counts."""
    X, y = _check_inputs(X, y)
    if likelihood.startswith("bernoulli") and is_concrete(y):
        from steinax.datasets import check_binary_labels

        y = jnp.asarray(check_binary_labels(np.asarray(y)), X.dtype)
    if likelihood == "poisson" and is_concrete(y):
        yn = np.asarray(y)
        bad = (yn < 0) | (yn != np.round(yn))
        if np.any(bad):
            raise ValueError("`y` must hold non-negative integer counts for a Poisson likelihood; "
                             f"received values such as {yn[bad][:5].tolist()}")
    return X, y


def _mixture_moments(mu, var):
    """Mean and variance ``[N*]`` of the equal-weight mixture of ``N(mu_j, var_j)`` (rows ``j``)."""
    mean = jnp.mean(mu, axis=0)
    return mean, jnp.mean(var + mu * mu, axis=0) - mean * mean


def _mixture_log_predictive(mu, var, y):
    """``mean_i log avg_j N(y_i | mu_ji, var_ji)``."""
    logp = -0.5 * (jnp.log(2 * jnp.pi * var) + (y[None] - mu) ** 2 / var)
    return jnp.mean(jax.scipy.special.logsumexp(logp, axis=0) - jnp.log(mu.shape[0]))


def _marginal_samples(rng_key, mu, var, num_samples):
    """``[J, K, N*]``: ``K`` draws of ``N(mu_j, var_j)`` per row ``j`` (Algorithm 2, marginal at each point)."""
    z = jax.random.normal(rng_key, (mu.shape[0], num_samples, mu.shape[1]), mu.dtype)
    return mu[:, None, :] + jnp.sqrt(jnp.maximum(var, 0.0))[:, None, :] * z


class _GPBase(AbstractTarget):
    X: jax.Array
    y: jax.Array
    kernel: str = eqx.field(static=True, default="se")
    ml: bool = eqx.field(static=True, default=False)
    jitter: float = eqx.field(static=True, default=1e-6)

    def _check_common(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"`kernel` must be one of {KERNELS}; received {self.kernel!r}")
        if not self.jitter >= 0:
            raise ValueError(f"`jitter` must be >= 0; received {self.jitter!r}")

    @property
    def num_inputs(self) -> int:
        return int(self.X.shape[1])

    @property
    def num_data(self) -> int:
        return int(self.X.shape[0])

    def _new_inputs(self, X_new, y_new=None):
        """``X_new`` (and ``y_new``) checked as the training inputs: ``[N*, D]`` with the model's ``D`` columns
        (a 1-D array is one column, so only for ``D = 1``; before, a wrong width broadcast to wrong numbers)."""
        X_new, y_checked = _check_inputs(X_new, np.zeros(np.shape(X_new)[0]) if y_new is None else y_new, "X_new", "y_new")
        if X_new.shape[1] != self.num_inputs:
            raise ValueError(f"`X_new` must have {self.num_inputs} columns, as the training inputs `X`; received shape "
                             f"{tuple(np.shape(X_new))}")
        return X_new if y_new is None else (X_new, y_checked)

    @property
    def _has_noise(self) -> bool:
        """Whether the hyperparameters include a Gaussian noise variance (the last one)."""
        return False

    @property
    def num_hyperparameters(self) -> int:
        return self.num_inputs + 1 + (1 if self._has_noise else 0)

    def hyperparameters(self, theta: jax.Array) -> Hyperparameters:
        """The constrained hyperparameters of one particle (``softplus`` of its first entries)."""
        c = jax.nn.softplus(theta[: self.num_hyperparameters])
        D = self.num_inputs
        return Hyperparameters(c[:D], c[D], c[D + 1] if self._has_noise else None)

    def _hyper_logprior(self, theta):
        """``log p_0(softplus(theta_u)) + log |J|`` (0 with ``ml=True``)."""
        if self.ml:
            return jnp.zeros((), theta.dtype)
        u = theta[: self.num_hyperparameters]
        return jnp.sum(_gamma_logpdf(jax.nn.softplus(u))) + jnp.sum(jax.nn.log_sigmoid(u))

    def _gram(self, hyp: Hyperparameters, X1, X2=None):
        return kernel_matrix(self.kernel, hyp.lengthscale, hyp.variance, X1, X1 if X2 is None else X2)

    def evaluate(self, rng_key, particles):
        """Log-densities and scores, one particle at a time (single-matrix Cholesky factorisations)."""
        del rng_key
        return per_particle(jax.value_and_grad(self.logdensity), particles)

    def _init_hyper(self, rng_key, n, dtype):
        """``[n, num_hyperparameters]`` unconstrained values drawn from the Gamma(1, scale 2) priors."""
        c = jax.random.gamma(rng_key, _PRIOR_SHAPE, (n, self.num_hyperparameters), dtype) * _PRIOR_SCALE
        return _softplus_inverse(jnp.maximum(c, 1e-3))
