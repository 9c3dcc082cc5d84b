"""Bayesian logistic regression: Liu & Wang (2016)'s model, and the N(0, I)-prior variant of the matrix-SVGD paper.

Labels ``y in {0, 1}``, ``p(y = 1 | x, w) = sigma(w^T x)`` (a column of ones in ``x`` gives
an intercept; :meth:`LogisticRegression.target` can add it).

``prior="gamma"`` (Liu & Wang; ALGORITHMS.md section 0): ``w | alpha ~ N(0, I / alpha)``,
``alpha ~ Gamma(a0, rate b0)``, ``a0 = 1``, ``b0 = 0.01``; a particle is ``[w, log alpha]``
(dimension ``p + 1``) and

.. math::

    \\log p(w, \\log\\alpha \\mid \\mathcal D) = \\sum_n \\log \\sigma\\big((2 y_n - 1)\\, w^\\top x_n\\big)
        + \\tfrac{p}{2} \\log\\alpha - \\tfrac{\\alpha}{2} \\lVert w \\rVert^2
        + a_0 \\log\\alpha - b_0 \\alpha + \\text{const}

(``a0 log alpha`` is ``(a0 - 1) log alpha`` plus the log-Jacobian of ``log alpha``).
``prior="normal"``: ``w ~ N(0, I)``, a particle is ``w`` (dimension ``p``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.datasets import check_binary_labels
from steinax.models.base import Evaluation
from steinax.targets.base import MinibatchTarget

__all__ = ["LogisticRegression"]

PRIORS = ("gamma", "normal")


class LogisticRegression(eqx.Module):
    """Bayesian logistic regression on ``n_features`` inputs (see the module docstring).

    Example:
        >>> model = LogisticRegression(n_features=24)
        >>> model.dim              # 24 weights and log alpha
        25
    """

    n_features: int = eqx.field(static=True)
    prior: str = eqx.field(static=True, default="gamma")
    a0: float = eqx.field(static=True, default=1.0)
    b0: float = eqx.field(static=True, default=0.01)

    def __check_init__(self):
        if isinstance(self.n_features, bool) or not isinstance(self.n_features, int) or self.n_features < 1:
            raise ValueError(f"`n_features` must be a positive integer; received {self.n_features!r}")
        if self.prior not in PRIORS:
            raise ValueError(f"`prior` must be one of {PRIORS}; received {self.prior!r}")
        if not (self.a0 > 0 and self.b0 > 0):
            raise ValueError(f"`a0` and `b0` must be positive; received a0={self.a0!r}, b0={self.b0!r}")

    @property
    def dim(self) -> int:
        return self.n_features + (1 if self.prior == "gamma" else 0)

    def weights(self, theta: jax.Array) -> jax.Array:
        return theta[: self.n_features]

    def logits(self, theta: jax.Array, X: jax.Array) -> jax.Array:
        """``X w`` (``[N]``) for one particle."""
        return X @ self.weights(theta)

    def loglik(self, theta: jax.Array, example) -> jax.Array:
        """``log p(y | x, w)`` for one example ``(x [p], y in {0, 1})``, computed stably from the logit."""
        x, y = example
        z = x @ self.weights(theta)
        return jax.nn.log_sigmoid(jnp.where(y > 0.5, z, -z))

    def logprior(self, theta: jax.Array) -> jax.Array:
        w = self.weights(theta)
        if self.prior == "normal":
            return -0.5 * jnp.sum(w * w)
        log_alpha = theta[-1]
        alpha = jnp.exp(log_alpha)
        return 0.5 * self.n_features * log_alpha - 0.5 * alpha * jnp.sum(w * w) + self.a0 * log_alpha - self.b0 * alpha

    def target(self, X, y, batch_size: int | None = 100) -> MinibatchTarget:
        """The posterior given ``X [N, p]`` and labels ``y`` in ``{0, 1}`` or ``{-1, 1}``, with minibatch scores."""
        X = jnp.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"`X` must be [N, {self.n_features}]; received shape {X.shape}")
        if not bool(jnp.all(jnp.isfinite(X))):
            raise ValueError("`X` must be finite; received NaN or inf")
        y = jnp.asarray(check_binary_labels(y), X.dtype)
        if y.shape != (X.shape[0],):
            raise ValueError(f"`y` must be [N] with N = {X.shape[0]}; received shape {y.shape}")
        return MinibatchTarget(self.logprior, self.loglik, (X, y), batch_size)

    def init_particles(self, rng_key: jax.Array, n: int, *, scheme: str = "prior", dtype=jnp.float32) -> jax.Array:
        """``[n, dim]`` initial particles.

        ``scheme="prior"``: draws from the prior (``alpha ~ Gamma(a0, rate b0)``, ``w ~ N(0, I / alpha)``;
        ``w ~ N(0, I)`` for the normal prior). ``scheme="liu"``: Liu & Wang's code, whose
        ``np.random.gamma(1, 0.01)`` reads 0.01 as a *scale* (mean 0.01, so ``w`` is wide) while the
        prior reads it as a rate; kept to compare with their numbers.
        """
        if scheme not in ("prior", "liu"):
            raise ValueError(f"`scheme` must be 'prior' or 'liu'; received {scheme!r}")
        k1, k2 = jax.random.split(rng_key)
        if self.prior == "normal":
            return jax.random.normal(k2, (n, self.n_features), dtype)
        g = jax.random.gamma(k1, self.a0, (n,), dtype)
        alpha = g / self.b0 if scheme == "prior" else g * self.b0
        w = jax.random.normal(k2, (n, self.n_features), dtype) / jnp.sqrt(alpha)[:, None]
        return jnp.concatenate([w, jnp.log(alpha)[:, None]], axis=1)

    def predict_proba(self, particles: jax.Array, X: jax.Array) -> jax.Array:
        """Posterior predictive ``p(y = 1 | x)``: the particle average of ``sigma(w^T x)`` (``[N]``)."""
        return jnp.mean(jax.vmap(lambda t: jax.nn.sigmoid(self.logits(t, X)))(particles), axis=0)

    def evaluate(self, particles: jax.Array, X: jax.Array, y) -> Evaluation:
        """Test accuracy and log-likelihood of the particle-averaged predictive probability (Liu & Wang's metrics)."""
        X = jnp.asarray(X)
        y = jnp.asarray(check_binary_labels(y), X.dtype)
        sign = 2.0 * y - 1.0
        # log of the particle average of sigma(+-z), by logsumexp: the average of probabilities
        # saturates to 0 in float32 for confident wrong predictions (|z| > ~17), log 0 = -inf
        log_terms = jax.vmap(lambda t: jax.nn.log_sigmoid(sign * self.logits(t, X)))(particles)  # [n, N]
        log_p_obs = jax.scipy.special.logsumexp(log_terms, axis=0) - jnp.log(particles.shape[0])
        return Evaluation(loglik=jnp.mean(log_p_obs), accuracy=jnp.mean((log_p_obs > jnp.log(0.5)).astype(X.dtype)))
