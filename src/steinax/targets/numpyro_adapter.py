"""NumPyro models as steinax targets (needs the ``numpyro`` extra).

Inference runs in NumPyro's **unconstrained** space: the model's latent sites
are transformed to ``R^{d_i}`` with NumPyro's bijections (the log-Jacobians are
part of the potential), then flattened into one vector of length
``d = sum_i d_i`` with :func:`jax.flatten_util.ravel_pytree`. Particles live in
that space; :meth:`NumPyroTarget.postprocess` maps them back to a dict of
constrained site values (deterministic sites included), which is what
:func:`steinax.run` returns as ``result.samples``.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from steinax.targets.base import AbstractTarget

__all__ = ["NumPyroTarget", "from_numpyro", "flat_model"]


class NumPyroTarget(AbstractTarget):
    """A NumPyro model's posterior on its flattened unconstrained space."""

    potential_fn: Callable = eqx.field(static=True)
    postprocess_fn: Callable = eqx.field(static=True)
    unravel_fn: Callable = eqx.field(static=True)
    init_position: jax.Array
    site_names: tuple = eqx.field(static=True)
    unconstrain_fn: Callable | None = eqx.field(static=True, default=None)

    @property
    def dim(self) -> int:
        return self.init_position.shape[0]

    def logdensity(self, x):
        return -self.potential_fn(self.unravel_fn(x))

    def evaluate(self, rng_key, particles):
        del rng_key
        return jax.vmap(jax.value_and_grad(self.logdensity))(particles)

    def init_particles(self, rng_key: jax.Array, n: int, radius: float = 2.0) -> jax.Array:
        """``[n, d]`` particles uniform on ``(-radius, radius)`` in unconstrained space (NumPyro's ``init_to_uniform``)."""
        return jax.random.uniform(
            rng_key, (n, self.dim), self.init_position.dtype, minval=-radius, maxval=radius
        )

    def unconstrain(self, samples: dict) -> jax.Array:
        """``[n, d]`` unconstrained flat points from a dict ``site -> [n, ...]`` of constrained draws.

        The inverse of :meth:`postprocess` on the latent sites (NumPyro's bijections),
        e.g. to measure MCMC draws in the space where the scores are taken.
        """
        missing = [name for name in self.site_names if name not in samples]
        if missing:
            raise ValueError(f"the samples lack the model's latent sites {missing}; received sites {sorted(samples)}")
        params = {name: jnp.asarray(samples[name]) for name in self.site_names}
        shapes = {k: jnp.shape(v) for k, v in self.postprocess_fn(self.unravel_fn(self.init_position)).items()}
        n = params[self.site_names[0]].shape[0] if params[self.site_names[0]].ndim else None
        for name, value in params.items():
            want = shapes[name]
            if value.ndim == 0 or tuple(value.shape[1:]) != tuple(want) or value.shape[0] != n:
                raise ValueError(
                    f"site {name!r} must have shape [n, {', '.join(map(str, want))}]"
                    f"{'' if n is None else f' with n = {n}'}; received {tuple(value.shape)}"
                )
        return jax.vmap(lambda p: ravel_pytree(self.unconstrain_fn(p))[0])(params)

    def postprocess(self, particles):
        """Dict ``site -> [n, ...]`` of constrained values (deterministic sites included)."""
        return jax.vmap(lambda z: self.postprocess_fn(self.unravel_fn(z)))(particles)


def from_numpyro(model, *model_args, rng_key: jax.Array | None = None, **model_kwargs) -> NumPyroTarget:
    """Build a target from a NumPyro model via ``numpyro.infer.util.initialize_model``.

    Args:
        model: a NumPyro model function.
        *model_args, **model_kwargs: the model's arguments (data), fixed for the run.
        rng_key: key for NumPyro's initialisation (default ``jax.random.key(0)``).

    Example:
        >>> import numpyro, numpyro.distributions as dist
        >>> def model(y):
        ...     mu = numpyro.sample("mu", dist.Normal(0, 1))
        ...     numpyro.sample("y", dist.Normal(mu, 1), obs=y)
        >>> target = from_numpyro(model, jnp.array([0.5, 1.0]))
        >>> target.dim
        1
    """
    try:
        from numpyro.infer.util import initialize_model, unconstrain_fn
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError("from_numpyro needs NumPyro: pip install numpyro (the steinax `numpyro` extra)") from exc
    if not callable(model):
        raise TypeError(f"`model` must be a NumPyro model function; received {type(model).__name__}")
    rng_key = jax.random.key(0) if rng_key is None else rng_key
    info = initialize_model(rng_key, model, model_args=model_args, model_kwargs=model_kwargs, dynamic_args=False)
    z0 = info.param_info.z
    if not z0:
        raise ValueError("the NumPyro model has no latent sample sites to infer")
    flat, unravel = ravel_pytree(z0)
    flat = jnp.asarray(flat, dtype=jnp.result_type(float))
    return NumPyroTarget(
        potential_fn=info.potential_fn,
        postprocess_fn=info.postprocess_fn,
        unravel_fn=unravel,
        init_position=flat,
        site_names=tuple(sorted(z0)),
        unconstrain_fn=lambda params: unconstrain_fn(model, model_args, model_kwargs, params),
    )


def flat_model(logdensity: Callable, dim: int, site: str = "x"):
    """A NumPyro model of one real ``[dim]`` site ``site`` whose density is ``logdensity`` (the inverse of
    :func:`from_numpyro`, for NumPyro's inference algorithms: SVI, SteinVI).

    The site is declared ``Normal(0, 1)`` (so NumPyro can trace and initialise it; an improper
    site cannot be sampled by SteinVI's initialisation) and a ``factor`` replaces that density
    by ``logdensity``: the model's density is exactly the target's. A NumPyro target's own
    model runs under ``handlers.block``, so its sites do not reach the outer inference's
    handlers (else a guide would fit them too, and a constrained site's log-det factor would
    be met twice: "all sites must have unique names").
    """
    import numpyro
    import numpyro.distributions as dist

    base = dist.Normal(0.0, 1.0).expand([dim]).to_event(1)

    def model():
        x = numpyro.sample(site, base)
        with numpyro.handlers.block():
            logp = logdensity(x)
        numpyro.factor(f"{site}_logdensity", logp - base.log_prob(x))

    return model
