"""Bayesian neural network regression: Liu & Wang (2016)'s model, reused by every paper's BNN experiment.

Default: one hidden layer of ``hidden`` units with biases, ``f(x) = act(x W1 + b1) w2 + b2``
(ReLU by default; ``activation="sigmoid"`` or ``"tanh"`` for other papers' networks),
Gaussian noise of precision ``gamma``, and a Gaussian prior of precision ``lambda``
on all weights and biases; ``gamma, lambda ~ Gamma(a0, rate b0)``. A particle is the
flat vector ``theta = [W1, b1, w2, b2, log gamma, log lambda]`` of dimension
``p * hidden + 2 * hidden + 3`` (ALGORITHMS.md, "BNN regression"):

.. math::

    \\log p(\\theta \\mid \\mathcal D) = \\sum_n \\Big[\\tfrac12(\\log\\gamma - \\log 2\\pi)
        - \\tfrac\\gamma2 (f(x_n) - y_n)^2\\Big]
      + a_0 \\log\\gamma - b_0 \\gamma
      - \\tfrac{W}{2}(\\log 2\\pi - \\log\\lambda) - \\tfrac\\lambda2 \\lVert w \\rVert^2
      + a_0 \\log\\lambda - b_0 \\lambda + \\text{const},

where ``W`` counts weights and biases and ``a0 log(.)`` is ``(a0 - 1) log(.)`` plus the
log-Jacobian of the log parameterisation. Defaults ``a0 = 1``, ``b0 = 0.1`` as in the
authors' code; data are standardised (:func:`steinax.datasets.train_test_split`).

The other papers' networks are options of the same model:

* matrix-SVGD (its code, ALGORITHMS.md section C): ``hidden=(50, 50), bias=False,
  noise_variance=0.5, prior_variance=1.0`` -- two hidden ReLU layers without biases, the
  noise variance fixed at 0.5 and a fixed N(0, 1) prior, so a particle holds weights only;
* DUSVGD: ``b0=0.01`` (Gamma(1, 0.01) priors on both precisions);
* KCC-SD: the default network; its fixed bandwidth is the kernel's (``steinax.svgd(RBF(h))``).

With a fixed noise or prior variance the matching ``log gamma`` / ``log lambda`` coordinate
is absent; the learned ones always come last, ``log gamma`` before ``log lambda``.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.kernels.matrix import KFACFactors
from steinax.models.base import Evaluation
from steinax.targets.base import MinibatchTarget

__all__ = ["BNNRegression", "BNNTarget"]

_LOG_2PI = math.log(2.0 * math.pi)
_ACTIVATIONS = {"relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}


class BNNRegression(eqx.Module):
    """A fully connected Bayesian regression network on ``n_features`` inputs (Liu & Wang's by default).

    Args:
        n_features: input dimension ``p``.
        hidden: units of the hidden layer, or a tuple of units per hidden layer.
        a0, b0: shape and rate of the Gamma priors on the learned precisions.
        activation: ``"relu"``, ``"sigmoid"`` or ``"tanh"`` (hidden layers; the output is linear).
        bias: whether every layer has a bias vector.
        noise_variance: a fixed noise variance (standardised units) instead of a learned ``gamma``.
        prior_variance: a fixed N(0, prior_variance) weight prior instead of a learned ``lambda``.

    Example:
        >>> BNNRegression(n_features=13, hidden=50).dim
        753
        >>> BNNRegression(13, hidden=(50, 50), bias=False, noise_variance=0.5, prior_variance=1.0).dim
        3200
    """

    n_features: int = eqx.field(static=True)
    hidden: int | tuple[int, ...] = eqx.field(static=True, default=50)
    a0: float = eqx.field(static=True, default=1.0)
    b0: float = eqx.field(static=True, default=0.1)
    activation: str = eqx.field(static=True, default="relu")
    bias: bool = eqx.field(static=True, default=True)
    noise_variance: float | None = eqx.field(static=True, default=None)
    prior_variance: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not isinstance(self.n_features, int) or isinstance(self.n_features, bool) or self.n_features < 1:
            raise ValueError(f"`n_features` must be a positive integer; received {self.n_features!r}")
        units = self.hidden if isinstance(self.hidden, tuple) else (self.hidden,)
        if not units or any(not isinstance(u, int) or isinstance(u, bool) or u < 1 for u in units):
            raise ValueError(f"`hidden` must be a positive integer or a tuple of them; received {self.hidden!r}")
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"`activation` must be 'relu', 'sigmoid' or 'tanh'; received {self.activation!r}")
        if not (self.a0 > 0 and self.b0 > 0):
            raise ValueError(f"`a0` and `b0` must be positive; received a0={self.a0!r}, b0={self.b0!r}")
        for name in ("noise_variance", "prior_variance"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be None (learned) or positive; received {value!r}")

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """``(p, hidden..., 1)``."""
        units = self.hidden if isinstance(self.hidden, tuple) else (self.hidden,)
        return (self.n_features, *units, 1)

    @property
    def num_weights(self) -> int:
        """Weights and biases (the prior's ``W``)."""
        sizes = self.layer_sizes
        return sum(i * o + (o if self.bias else 0) for i, o in zip(sizes[:-1], sizes[1:]))

    @property
    def learns_noise(self) -> bool:
        return self.noise_variance is None

    @property
    def learns_prior(self) -> bool:
        return self.prior_variance is None

    @property
    def dim(self) -> int:
        """Dimension of a particle: the weights, then ``log gamma`` and ``log lambda`` where learned."""
        return self.num_weights + int(self.learns_noise) + int(self.learns_prior)

    def unflatten(self, theta: jax.Array):
        """``(layers, log_gamma, log_lambda)`` from a flat ``[dim]`` vector; ``layers`` is a list of
        ``(W [n_in, n_out], b [n_out] or None)``; a fixed precision is returned as a constant."""
        layers, at = [], 0
        sizes = self.layer_sizes
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            w = theta[at : at + n_in * n_out].reshape(n_in, n_out)
            at += n_in * n_out
            b = None
            if self.bias:
                b = theta[at : at + n_out]
                at += n_out
            layers.append((w, b))
        return layers, self.log_gamma(theta), self.log_lambda(theta)

    def log_gamma(self, theta: jax.Array) -> jax.Array:
        """Log noise precision (standardised units): learned coordinate or ``-log noise_variance``."""
        if self.learns_noise:
            return theta[self.num_weights]
        return jnp.asarray(-math.log(self.noise_variance), theta.dtype)

    def log_lambda(self, theta: jax.Array) -> jax.Array:
        """Log prior precision of the weights: learned coordinate (last) or ``-log prior_variance``."""
        if self.learns_prior:
            return theta[-1]
        return jnp.asarray(-math.log(self.prior_variance), theta.dtype)

    def predict(self, theta: jax.Array, X: jax.Array) -> jax.Array:
        """Network output ``f(X)`` (``[N]``, standardised units) for one particle."""
        layers, _, _ = self.unflatten(theta)
        h = X
        for i, (w, b) in enumerate(layers):
            h = h @ w + (0.0 if b is None else b[None, :])
            if i < len(layers) - 1:
                h = _ACTIVATIONS[self.activation](h)
        return h[:, 0]

    def loglik(self, theta: jax.Array, example) -> jax.Array:
        """``log N(y | f(x), 1/gamma)`` for one example ``(x [p], y [])``."""
        x, y = example
        log_gamma = self.log_gamma(theta)
        resid = self.predict(theta, x[None])[0] - y
        return 0.5 * (log_gamma - _LOG_2PI) - 0.5 * jnp.exp(log_gamma) * resid * resid

    def logprior(self, theta: jax.Array) -> jax.Array:
        """Gaussian prior on the weights, Gamma priors on the learned precisions (in log space, with Jacobians)."""
        w = theta[: self.num_weights]
        log_lambda = self.log_lambda(theta)
        out = -0.5 * self.num_weights * (_LOG_2PI - log_lambda) - 0.5 * jnp.exp(log_lambda) * jnp.sum(w * w)
        if self.learns_noise:
            log_gamma = self.log_gamma(theta)
            out = out + self.a0 * log_gamma - self.b0 * jnp.exp(log_gamma)
        if self.learns_prior:
            out = out + self.a0 * log_lambda - self.b0 * jnp.exp(log_lambda)
        return out

    def kfac_layout(self) -> tuple:
        """Per layer ``(weight offset, n_in, n_out, bias offset or -1)`` in the flat particle."""
        layout, at, sizes = [], 0, self.layer_sizes
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            b0 = at + n_in * n_out if self.bias else -1
            layout.append((at, n_in, n_out, b0))
            at += n_in * n_out + (n_out if self.bias else 0)
        return tuple(layout)

    def kfac_factors(self, theta: jax.Array, X: jax.Array, y: jax.Array, num_data: int) -> KFACFactors:
        """KFAC factors of one particle on a batch (see :class:`~steinax.kernels.matrix.KFACFactors`).

        ``A_l = mean_b a_b a_b^T`` over the layer's inputs (a 1 appended when the
        layer has a bias) and ``G_l = num_data * mean_b g_b g_b^T`` with ``g_b`` the
        gradient of example ``b``'s log-likelihood with respect to the layer's
        pre-activations: one forward and one backward pass of the batch.
        """
        layers, log_gamma, _ = self.unflatten(theta)
        batch = X.shape[0]

        def loglik(eps):
            h, inputs = X, []
            for i, (w, b) in enumerate(layers):
                inputs.append(h)
                z = h @ w + (0.0 if b is None else b[None, :]) + eps[i]
                h = _ACTIVATIONS[self.activation](z) if i < len(layers) - 1 else z
            resid = h[:, 0] - y
            return jnp.sum(0.5 * (log_gamma - _LOG_2PI) - 0.5 * jnp.exp(log_gamma) * resid * resid), inputs

        eps = [jnp.zeros((batch, w.shape[1]), X.dtype) for w, _ in layers]
        grads, inputs = jax.grad(loglik, has_aux=True)(eps)
        a_fac, g_fac = [], []
        for a, g in zip(inputs, grads):
            if self.bias:
                a = jnp.concatenate([a, jnp.ones((batch, 1), a.dtype)], axis=1)
            a_fac.append(a.T @ a / batch)
            g_fac.append(num_data * (g.T @ g) / batch)
        return KFACFactors(tuple(a_fac), tuple(g_fac), self.kfac_layout())

    def target(self, X, y, batch_size: int | None = 100) -> "BNNTarget":
        """The posterior given standardised data, with minibatch scores (``batch_size=None``: exact)."""
        X = jnp.asarray(X)
        y = jnp.asarray(y, X.dtype)
        if X.ndim != 2 or X.shape[1] != self.n_features or y.shape != (X.shape[0],):
            raise ValueError(
                f"`X` must be [N, {self.n_features}] and `y` [N]; received shapes {X.shape} and {y.shape}"
            )
        return BNNTarget(self.logprior, self.loglik, (X, y), batch_size, model=self)

    def _hyper_columns(self, n, log_gamma, log_lambda, dtype):
        cols = ([log_gamma] if self.learns_noise else []) + ([log_lambda] if self.learns_prior else [])
        return [jnp.broadcast_to(jnp.asarray(c, dtype), (n,))[:, None] for c in cols]

    def init_particles(self, rng_key, n: int, X=None, y=None, *, scheme: str = "liu", dtype=jnp.float32):
        """``[n, dim]`` initial particles.

        ``scheme="liu"`` (the authors' code, ``bayesian_nn.py``): each layer's weights
        ``N(0, 1/(n_in + 1))``, biases 0, ``lambda ~ np.random.gamma(a0, b0)`` and
        ``gamma = 1 / mean((f(x) - y)^2)`` of the initial network on the data (``X``, ``y``
        needed when ``gamma`` is learned). numpy's second argument is a *scale*, so the code starts ``lambda`` near
        ``a0 * b0`` (0.1), not near the prior mean ``a0 / b0`` (10) of its own rate-``b0``
        prior; we follow the code, because the outcome depends on it: with AdaGrad at
        step 1e-3 ``log lambda`` moves about 1e-3 per step, so 2000 steps cannot undo a
        start 4.6 nats higher, and a start at the prior mean over-regularises the network
        (Boston: train RMSE 3.1 instead of 1.8 after 2000 steps; docs/benchmarks.md).
        ``scheme="standard"``: every weight and bias ``N(0, 1)`` and ``log gamma = log lambda = 0``
        (KCC-SD paper, Fig. 6).
        """
        if scheme not in ("liu", "standard"):
            raise ValueError(f"`scheme` must be 'liu' or 'standard'; received {scheme!r}")
        k_w, k_lam = jax.random.split(rng_key)
        if scheme == "standard":
            theta = jax.random.normal(k_w, (n, self.num_weights), dtype)
            return jnp.concatenate([theta, *self._hyper_columns(n, 0.0, 0.0, dtype)], axis=1)
        if self.learns_noise and (X is None or y is None):
            raise ValueError("`scheme='liu'` sets gamma from the initial network's error: pass `X` and `y`")
        blocks, sizes = [], self.layer_sizes
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            blocks.append(jax.random.normal(jax.random.fold_in(k_w, i), (n, n_in * n_out), dtype) / jnp.sqrt(n_in + 1.0))
            if self.bias:
                blocks.append(jnp.zeros((n, n_out), dtype))
        weights = jnp.concatenate(blocks, axis=1)
        log_lam = jnp.log(jax.random.gamma(k_lam, self.a0, (n,), dtype) * self.b0)  # numpy gamma(a0, scale b0)
        theta = jnp.concatenate([weights, *self._hyper_columns(n, 0.0, log_lam, dtype)], axis=1)
        if not self.learns_noise:
            return theta
        X, y = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
        mse = jax.vmap(lambda t: jnp.mean((self.predict(t, X) - y) ** 2))(theta)
        return theta.at[:, self.num_weights].set(-jnp.log(mse))

    def reestimate_noise(self, particles: jax.Array, X_dev: jax.Array, y_dev: jax.Array) -> jax.Array:
        """Liu & Wang's dev-set step: per particle, replace ``gamma`` by ``1 / mean((f(x) - y)^2)`` on a
        development set if that raises the particle's dev log-likelihood (ALGORITHMS.md section 0).

        Off unless asked for (``steinax bench --dev-noise``): it is a post-hoc fit of the noise to
        held-out data, not part of the posterior. The authors' code computes the new ``gamma`` in
        original units and stores it where training keeps a standardised-units ``gamma``; here both
        candidates are in standardised units (``X_dev``, ``y_dev`` standardised as the training data),
        so the comparison is the same and the units stay consistent.
        """

        if not self.learns_noise:
            raise ValueError("`reestimate_noise` needs a learned noise precision; this model has a fixed `noise_variance`")

        def one(theta):
            resid = self.predict(theta, X_dev) - y_dev
            mse = jnp.mean(resid * resid)

            def dev_ll(log_gamma):
                return jnp.sum(0.5 * (log_gamma - _LOG_2PI) - 0.5 * jnp.exp(log_gamma) * resid * resid)

            candidate = -jnp.log(mse)
            current = self.log_gamma(theta)
            return theta.at[self.num_weights].set(jnp.where(dev_ll(candidate) > dev_ll(current), candidate, current))

        return jax.vmap(one)(jnp.asarray(particles))

    def evaluate(self, particles, X, y, y_mean: float = 0.0, y_std: float = 1.0) -> Evaluation:
        """Test RMSE of the particle-averaged prediction and mean test log-likelihood, in original units.

        The predictive density is the equal-weight mixture over particles of
        ``N(y | f(x), 1/gamma)``, mapped to original units by ``y_mean``, ``y_std``.
        """
        preds = jax.vmap(lambda t: self.predict(t, X))(particles) * y_std + y_mean  # [n, N]
        y_orig = y * y_std + y_mean
        rmse = jnp.sqrt(jnp.mean((jnp.mean(preds, axis=0) - y_orig) ** 2))
        var = y_std**2 * jnp.exp(-jax.vmap(self.log_gamma)(particles))[:, None]
        logpdf = -0.5 * (jnp.log(2.0 * jnp.pi * var) + (preds - y_orig[None, :]) ** 2 / var)
        ll = jax.scipy.special.logsumexp(logpdf, axis=0) - jnp.log(particles.shape[0])
        return Evaluation(loglik=jnp.mean(ll), rmse=rmse)


class BNNTarget(MinibatchTarget):
    """The posterior of a :class:`BNNRegression` with minibatch scores and Kronecker-factored Fisher blocks."""

    model: BNNRegression = eqx.field(kw_only=True)

    def kfac(self, rng_key, particles):
        """:class:`~steinax.kernels.matrix.KFACFactors` of every particle on the minibatch of ``rng_key``
        (the one :meth:`evaluate` uses with that key), ``[n, ...]``."""
        (X, y), _ = self._batch(rng_key)
        return jax.vmap(lambda t: self.model.kfac_factors(t, X, y, self.num_data))(particles)
