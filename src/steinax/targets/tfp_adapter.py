"""TensorFlow Probability joint distributions (JAX substrate) as steinax targets (needs the ``tfp`` extra).

A joint distribution with named parts (``JointDistributionNamed``, ``JointDistributionCoroutine``
with ``name=`` on each part, and their auto-batched forms), its observed parts pinned
(``observed={"obs": y}``, TFP's ``experimental_pin``). Particles live in the unconstrained space of
its **default event-space bijector** (``experimental_default_event_space_bijector``, or ``bijector``
when given): the log-density is ``log p(f(u)) + log |det J_f(u)|`` with ``f`` the bijector, flattened
in sorted order of the parts' names, the layout of every adapter (:mod:`steinax.targets.model`).

TFP's default bijector is not always NumPyro's and PyMC's: for ``HalfCauchy`` it is ``exp`` (as
theirs), for ``HalfNormal``, ``Gamma`` and ``Exponential`` ``softplus`` (theirs: ``exp``). The same
model then has another unconstrained space, the same posterior; pass ``bijector`` (a joint bijector
with the model's structure, for instance ``tfb.JointMap({"tau": tfb.Exp(), ...})``) to match.

Stable TFP does not import with current JAX: the extra pins ``tfp-nightly``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from steinax.targets.model import ModelTarget, flat_site_layout

__all__ = ["from_tfp"]


def _as_dict(structure) -> dict:
    """A joint distribution's value (a dict or a named tuple) as a dict by part name."""
    if isinstance(structure, dict):
        return dict(structure)
    if hasattr(structure, "_asdict"):
        return dict(structure._asdict())
    raise TypeError("from_tfp: the joint distribution's parts must be named (JointDistributionNamed, or "
                    "JointDistributionCoroutine with `name=` on every part); received a value of type "
                    f"{type(structure).__name__}")


def _tfp_ranks(fn):
    """``fn`` under implicit rank promotion: TFP's internals rely on it, whatever the caller's JAX setting."""

    @functools.wraps(fn)
    def allowed(*args, **kwargs):
        with jax.numpy_rank_promotion("allow"):
            return fn(*args, **kwargs)

    return allowed


@_tfp_ranks
def from_tfp(model, observed: dict | None = None, *, bijector=None, rng_key: jax.Array | None = None) -> ModelTarget:
    """Build a target from a TFP joint distribution on the JAX substrate (module docstring).

    Args:
        model: a ``tfd.JointDistribution`` with named parts, or one already pinned
            (``JointDistributionPinned``).
        observed: ``{part name: value}`` of the observed parts (pinned here).
        bijector: the joint bijector from the unconstrained space to the parts' supports (default:
            the model's default event-space bijector).
        rng_key: key for the initial point, a draw of the unpinned parts (default ``jax.random.key(0)``).

    Raises:
        TypeError: not a TFP joint distribution; unnamed parts.
        ValueError: a discrete latent part.
        NotImplementedError: a part without a default event-space bijector (pass ``bijector``).

    Example:
        >>> import numpy as np
        >>> import tensorflow_probability.substrates.jax as tfp
        >>> tfd = tfp.distributions
        >>> model = tfd.JointDistributionNamed(dict(
        ...     mu=tfd.Normal(0.0, 1.0),
        ...     y=lambda mu: tfd.Sample(tfd.Normal(mu, 1.0), 2)))
        >>> target = from_tfp(model, observed={"y": np.array([0.5, 1.0], np.float32)})
        >>> target.dim, target.site_names
        (1, ('mu',))
    """
    try:
        import tensorflow_probability.substrates.jax as tfp
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError("from_tfp needs TensorFlow Probability's JAX substrate: pip install tfp-nightly (the steinax "
                          f"`tfp` extra; stable TFP does not import with current JAX); import failed with: {exc}") from exc
    tfd = tfp.distributions
    pinned_type = tfp.experimental.distributions.JointDistributionPinned
    if not isinstance(model, (tfd.JointDistribution, pinned_type)):
        raise TypeError(f"`model` must be a TFP joint distribution (JAX substrate); received {type(model).__name__}")
    if observed:
        if isinstance(model, pinned_type):
            raise ValueError("`observed`: the model is already pinned; pass the unpinned joint distribution")
        model = model.experimental_pin(**observed)
    pinned = model if isinstance(model, pinned_type) else None
    log_prob = model.unnormalized_log_prob if pinned is not None else model.log_prob
    key = jax.random.key(0) if rng_key is None else rng_key
    if bijector is None:  # per part first, so that an error can name the part
        base = model.distribution if pinned is not None else model
        parts = _as_dict(base.sample_distributions(seed=key)[0])
        latent = [k for k in parts if pinned is None or k not in _as_dict(model.pins)]
        discrete, missing = [], []
        for name in sorted(latent):
            try:
                if parts[name].experimental_default_event_space_bijector() is None:
                    discrete.append(name)  # TFP's discrete distributions have none
            except (AttributeError, NotImplementedError, TypeError) as exc:
                missing.append(f"{name} ({exc})")
        if discrete:
            raise ValueError(f"from_tfp: the model has discrete latent parts {discrete}; SVGD and the Stein tools need a "
                             "density on R^d: marginalise them out, or pin them with `observed`")
        if missing:
            raise NotImplementedError(f"from_tfp: the parts {missing} have no default event-space bijector; pass "
                                      "`bijector`, a joint bijector with the model's structure")
        bijector = model.experimental_default_event_space_bijector()
    draw = model.sample_unpinned(seed=key) if pinned is not None else model.sample(seed=key)
    names = tuple(sorted(_as_dict(draw)))
    structure = type(draw)

    def to_structure(d):
        return d if structure is dict else structure(**d)

    @_tfp_ranks
    def logdensity_fn(u):
        z = to_structure(u)
        return log_prob(bijector.forward(z)) + bijector.forward_log_det_jacobian(z)

    @_tfp_ranks
    def constrain_fn(u):
        return _as_dict(bijector.forward(to_structure(u)))

    @_tfp_ranks
    def unconstrain_fn(c):
        return _as_dict(bijector.inverse(to_structure({k: c[k] for k in names})))

    start = unconstrain_fn(_as_dict(draw))
    flat, unravel = flat_site_layout(start, names)
    if not bool(jnp.all(jnp.isfinite(flat))):
        raise ValueError("from_tfp: the bijector maps the model's draw to a non-finite point; check `bijector`")
    return ModelTarget(
        logdensity_fn=logdensity_fn,
        constrain_fn=constrain_fn,
        unravel_fn=unravel,
        init_position=jnp.asarray(flat, dtype=jnp.result_type(float)),
        site_names=names,
        unconstrain_fn=unconstrain_fn,
        language="tfp",
    )
