"""Gaussian variational inference on a steinax target: the papers' VI baseline.

NumPyro SVI fits a Gaussian ``q`` to ``target.logdensity`` by maximising the ELBO
(``Trace_ELBO``, one reparameterised draw per step, Adam). ``full_rank=True`` uses
``AutoMultivariateNormal`` (a dense Cholesky factor), ``False`` ``AutoNormal`` (a diagonal
covariance). The same target as the particle methods, so a table compares inference methods
and not models. (The Stein-GP paper's VI keeps the GP hyperparameters as point estimates and is
Gaussian over the latent values only; here the Gaussian covers every coordinate of the target,
hyperparameters included, which is the VI that answers the same question as SVGD and NUTS.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from steinax._validation import check_particles
from steinax.targets.base import as_target
from steinax.targets.numpyro_adapter import flat_model

__all__ = ["gaussian_vi"]


def gaussian_vi(
    target,
    initial_position: jax.Array | int,
    *,
    steps: int = 2000,
    learning_rate: float = 0.01,
    num_draws: int = 100,
    full_rank: bool = True,
    rng_key: jax.Array,
) -> jax.Array:
    """Fit a Gaussian to ``target`` by SVI and return ``[num_draws, d]`` draws from it.

    Args:
        target: a steinax target or a log-density function of one ``[d]`` point.
        initial_position: ``[d]``, the initial mean; or the dimension ``d``, to start as NumPyro does by
            default (each coordinate uniform in (-2, 2)). The scale starts at NumPyro's 0.1.
        steps: optimisation steps (Adam, ``learning_rate``).
        num_draws: draws returned from the fitted Gaussian.
        full_rank: dense (``AutoMultivariateNormal``) or diagonal (``AutoNormal``) covariance.
        rng_key: PRNG key.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> sd = jnp.array([1.0, 2.0])  # N(1, diag(sd^2)): the Gaussian family holds the target
        >>> draws = gaussian_vi(lambda x: -0.5 * jnp.sum(((x - 1.0) / sd) ** 2), jnp.zeros(2), steps=3000,
        ...                     num_draws=4000, rng_key=jax.random.key(0))
        >>> bool(jnp.all(jnp.abs(draws.mean(0) - 1.0) < 0.15 * sd)), bool(jnp.allclose(draws.std(0), sd, rtol=0.1))
        (True, True)
    """
    import numpyro
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoMultivariateNormal, AutoNormal
    from numpyro.infer.initialization import init_to_value

    target = as_target(target)
    if isinstance(initial_position, int) and not isinstance(initial_position, bool):
        if initial_position < 1:
            raise ValueError(f"`initial_position` as a dimension must be positive; received {initial_position}")
        x0, init = jnp.zeros(initial_position), {}
    else:
        x0 = check_particles(jnp.asarray(initial_position)[None], "initial_position")[0]
        init = {"init_loc_fn": init_to_value(values={"x": x0})}
    for name, value in (("steps", steps), ("num_draws", num_draws)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
    if not learning_rate > 0:
        raise ValueError(f"`learning_rate` must be positive; received {learning_rate!r}")

    model = flat_model(target.logdensity, x0.shape[0])  # the target's own NumPyro sites blocked from SVI

    guide_class = AutoMultivariateNormal if full_rank else AutoNormal
    guide = guide_class(model, **init)
    svi = SVI(model, guide, numpyro.optim.Adam(learning_rate), Trace_ELBO())
    k1, k2 = jax.random.split(rng_key)
    with jax.numpy_rank_promotion("allow"):  # NumPyro's internals broadcast implicitly
        result = svi.run(k1, steps, progress_bar=False)
        draws = guide.sample_posterior(k2, result.params, sample_shape=(num_draws,))["x"]
    if not bool(jnp.all(jnp.isfinite(draws))):
        raise FloatingPointError("Gaussian VI diverged (non-finite draws); try a smaller `learning_rate`")
    return draws
