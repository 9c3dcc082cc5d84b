"""NumPyro models as steinax targets (needs the ``numpyro`` extra).

Inference runs in NumPyro's **unconstrained** space: the model's latent sites
are transformed to ``R^{d_i}`` with NumPyro's bijections (the log-Jacobians are
part of the potential), then flattened into one vector of length
``d = sum_i d_i`` in sorted site order (:func:`steinax.targets.model.flat_site_layout`,
the layout of every language's adapter). Particles live in that space;
:meth:`~steinax.targets.model.ModelTarget.postprocess` maps them back to a dict of
constrained site values (deterministic sites included), which is what
:func:`steinax.run` returns as ``result.samples``.
"""

from __future__ import annotations

import functools
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.targets.model import ModelTarget, flat_site_layout

__all__ = ["NumPyroTarget", "from_numpyro", "flat_model"]


class NumPyroTarget(ModelTarget):
    """A NumPyro model's posterior on its flattened unconstrained space (a :class:`~steinax.targets.model.ModelTarget`).

    Attributes:
        model: the model with its data bound (a zero-argument NumPyro model, ``functools.partial``), for what needs
            the model itself (:mod:`steinax.targets.reparam`); ``None`` where unknown.
    """

    model: Callable | None = eqx.field(static=True, default=None)


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
    from numpyro.distributions.distribution import validation_enabled

    # NumPyro's initialisation draws uniform points until the density is finite; with argument validation on (its
    # default) a draw that overflows a likelihood in raw units (a rate e^(b x), x ~ 3000) raises instead of being
    # redrawn (issue 59), so it runs without it
    with validation_enabled(False):
        info = initialize_model(rng_key, model, model_args=model_args, model_kwargs=model_kwargs, dynamic_args=False)
    z0 = info.param_info.z
    if not z0:
        raise ValueError("the NumPyro model has no latent sample sites to infer")
    names = tuple(sorted(z0))
    flat, unravel = flat_site_layout(z0, names)
    potential = info.potential_fn
    return NumPyroTarget(
        logdensity_fn=lambda u: -potential(u),
        constrain_fn=info.postprocess_fn,
        unravel_fn=unravel,
        init_position=jnp.asarray(flat, dtype=jnp.result_type(float)),
        site_names=names,
        unconstrain_fn=lambda params: unconstrain_fn(model, model_args, model_kwargs, params),
        language="numpyro",
        model=functools.partial(model, *model_args, **model_kwargs),
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
