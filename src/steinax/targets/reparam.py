"""Learned centredness for a NumPyro model's hierarchical sites: variationally inferred parameterisation (Gorinova,
Moore and Hoffman 2020, "Automatic reparameterisation of probabilistic programs", sec. 3-4), with NumPyro's
``LocScaleReparam``.

A hierarchical site ``theta ~ Normal(mu, sigma)`` whose ``mu`` or ``sigma`` depend on other latent sites is written
with a centredness ``c`` in [0, 1] (per element) as

.. math::

    \\tilde\\theta \\sim \\mathcal N(c\\,\\mu,\\ \\sigma^{c}), \\qquad
    \\theta = \\mu + \\sigma^{1-c}(\\tilde\\theta - c\\,\\mu)

(``c = 1`` the centred model as written, ``c = 0`` the non-centred one): the same posterior on ``theta``, in
coordinates whose geometry depends on ``c``. A centred hierarchy's funnel (``theta`` squeezed as ``sigma -> 0``)
disappears where the data are weak and ``c -> 0``; where the data pin ``theta`` down the centred form is the better
one. **Decided here:** ``c`` is learned per element by maximising the ELBO of a mean-field normal guide
(``AutoNormal``) jointly with ``c`` (the paper's VIP; NumPyro's ``LocScaleReparam(centered=None)``), Adam, a fixed
number of steps; the sites reparameterised are the latent sites of a location-scale family with real support
(Normal, StudentT, Cauchy, Laplace, Logistic) whose prior depends on another latent site
(``numpyro.infer.inspect.get_dependencies``). The reparameterised model is a new NumPyro model: its posterior is the
original's pushed through the map ``G`` of :meth:`Reparameterised.to_original` (a triangular map, exact), checked in
``tests/targets/test_reparam.py``: ``log p_new(u) = log p(G(u)) + log |det dG/du|`` with the determinant from
``jax.jacfwd``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from steinax.targets.model import flat_site_layout
from steinax.targets.numpyro_adapter import NumPyroTarget, from_numpyro

__all__ = ["hierarchical_sites", "learn_centredness", "model_of", "reparameterise", "Reparameterised"]

_LOC_SCALE = ("Normal", "StudentT", "Cauchy", "Laplace", "Logistic")


def _base(fn):
    """The distribution under NumPyro's Independent and Expanded wrappers."""
    while hasattr(fn, "base_dist"):
        fn = fn.base_dist
    return fn


def model_of(model, model_args=(), model_kwargs=None):
    """A zero-argument NumPyro model: ``model`` with its data bound, or a
    :class:`~steinax.targets.numpyro_adapter.NumPyroTarget`'s own model."""
    if isinstance(model, NumPyroTarget):
        if model.model is None:
            raise ValueError("this NumPyro target does not hold its model (build it with steinax.targets.from_numpyro)")
        if model_args or model_kwargs:
            raise TypeError("a NumPyro target holds its data: give no model arguments with it")
        return model.model
    if not callable(model):
        raise TypeError(f"`model` must be a NumPyro model or a NumPyroTarget; received {type(model).__name__}")
    return functools.partial(model, *model_args, **(model_kwargs or {}))


def hierarchical_sites(model, *model_args, **model_kwargs) -> tuple[str, ...]:
    """The latent sites of ``model`` (a NumPyro model and its data, or a ``NumPyroTarget``) that
    :func:`reparameterise` can decentre (module docstring), in trace order.

    A site's prior depends on other latent sites when its ``loc`` or ``scale`` changes as they change: the model is
    traced twice, at the target's initial point and at a point moved in every unconstrained coordinate (eager, two
    runs of the model; NumPyro's ``get_dependencies`` found the same sites on the suite at 5-14 s a model). Every
    latent site is substituted, so a site NumPyro cannot draw from (``ImproperUniform``) is never drawn."""
    import numpyro.distributions.constraints as constraints
    from numpyro import handlers
    from numpyro.distributions.distribution import validation_enabled

    target = model if isinstance(model, NumPyroTarget) else from_numpyro(model, *model_args, **model_kwargs)
    x0 = target.init_position
    x1 = x0 + 0.5 + 0.25 * jax.random.normal(jax.random.key(0), x0.shape, x0.dtype)

    def trace_at(x):
        values = target.constrain_fn(target.unravel_fn(x))
        at = handlers.substitute(model_of(target), data={k: values[k] for k in target.site_names})
        # the moved point may overflow a likelihood in raw units (a rate e^(b x), x ~ 3000): only the latent sites'
        # loc and scale are read, so NumPyro's argument validation must not raise on the observed ones
        with validation_enabled(False):
            return handlers.trace(handlers.seed(at, 0)).get_trace()

    first, moved = trace_at(x0), trace_at(x1)
    out = []
    for name in target.site_names:
        fn, other = _base(first[name]["fn"]), _base(moved[name]["fn"])
        support = fn.support.base_constraint if isinstance(fn.support, constraints.independent) else fn.support
        if type(fn).__name__ not in _LOC_SCALE or support is not constraints.real:
            continue
        if any(not np.array_equal(np.asarray(getattr(fn, p)), np.asarray(getattr(other, p))) for p in ("loc", "scale")):
            out.append(name)
    return tuple(n for n in first if n in out)


def _reparam_config(centred: dict):
    from numpyro.infer.reparam import LocScaleReparam

    def config(site):
        if site["name"] not in centred:
            return None
        shape = ("df",) if type(_base(site["fn"])).__name__ == "StudentT" else ()
        return LocScaleReparam(centered=centred[site["name"]], shape_params=shape)

    return config


def learn_centredness(model, *model_args, sites=None, steps: int = 1000, learning_rate: float = 0.02,
                      draws: int = 4, rng_key=None, **model_kwargs) -> tuple[dict, dict]:
    """The centredness of each hierarchical site that maximises the ELBO (module docstring).

    Args:
        model, *model_args, **model_kwargs: a NumPyro model and its data, or a ``NumPyroTarget``.
        sites: the sites to decentre (default :func:`hierarchical_sites`).
        steps, learning_rate: Adam's steps and rate on the ELBO (guide and centredness jointly).
        draws: the guide's draws per ELBO estimate.
        rng_key: default ``jax.random.key(0)``.

    Returns:
        ``(centred, info)``: ``centred`` maps each site to its learned ``c`` (an array of the site's shape, in
        [0, 1]); ``info`` holds ``"elbo"`` (the last 10% of steps' mean), ``"sites"`` and ``"evaluations"``
        (``steps * draws`` gradient evaluations of the model's log-density).
    """
    import numpyro
    from numpyro import handlers
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal

    for field, value in (("steps", steps), ("draws", draws)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"learn_centredness: `{field}` must be a positive integer; received {value!r}")
    model = model_of(model, model_args, model_kwargs)
    sites = hierarchical_sites(model) if sites is None else tuple(sites)
    if not sites:
        return {}, {"elbo": float("nan"), "sites": (), "evaluations": 0}
    learnable = handlers.reparam(model, config=_reparam_config({s: None for s in sites}))
    guide = AutoNormal(learnable)
    svi = SVI(learnable, guide, numpyro.optim.Adam(learning_rate), Trace_ELBO(num_particles=draws))
    key = jax.random.key(0) if rng_key is None else rng_key
    result = svi.run(key, steps, progress_bar=False)
    centred = {s: np.asarray(result.params[f"{s}_centered"]) for s in sites}
    tail = np.asarray(result.losses)[-max(1, steps // 10):]
    return centred, {"elbo": float(-np.mean(tail)), "sites": sites, "evaluations": int(steps * draws)}


@dataclasses.dataclass(frozen=True)
class Reparameterised:
    """A NumPyro model reparameterised with a centredness per site, as a steinax target and the map back.

    Attributes:
        target: the reparameterised model's :class:`~steinax.targets.numpyro_adapter.NumPyroTarget` (its flat
            unconstrained vector holds ``<site>_decentered`` in place of each decentred site).
        original: the model as written, a ``NumPyroTarget``.
        centred: ``site -> c``.
    """

    target: NumPyroTarget
    original: NumPyroTarget
    centred: dict

    def to_original(self, u):
        """``G``: one ``[d]`` point of :attr:`target`'s flat space to :attr:`original`'s (the decentred sites
        recomputed, every site then unconstrained by the original's bijections)."""
        values = self.target.constrain_fn(self.target.unravel_fn(u))  # the decentred sites are deterministic here
        params = {name: values[name] for name in self.original.site_names}
        return flat_site_layout(self.original.unconstrain_fn(params), self.original.site_names)[0]

    def draws_to_original(self, draws):
        """``[..., d]`` points of :attr:`target` to :attr:`original`'s coordinates (:meth:`to_original`, jitted)."""
        return _mapped(self.to_original, draws)

    def draws_to_original_numpy(self, draws) -> np.ndarray:
        """:meth:`draws_to_original` as a NumPy array of ``draws``' dtype (what :func:`steinax.sample` hands back)."""
        return np.asarray(self.draws_to_original(draws), np.asarray(draws).dtype)

    def to_reparameterised(self, x):
        """``G^{-1}``: one ``[d]`` point of :attr:`original`'s flat space to :attr:`target`'s: each decentred site's
        ``theta~ = c mu + (theta - mu) / sigma^(1 - c)`` with ``mu`` and ``sigma`` from the original model run at
        ``x`` (its parents' values), the other sites as they are."""
        from numpyro import handlers

        unconstrained = self.original.unravel_fn(x)
        values = self.original.constrain_fn(unconstrained)
        trace = handlers.trace(handlers.substitute(self.original.model, data=values)).get_trace()
        sites = {}
        for name in self.original.site_names:
            if name in self.centred:
                fn, c = _base(trace[name]["fn"]), jnp.asarray(self.centred[name])
                sites[f"{name}_decentered"] = c * fn.loc + (values[name] - fn.loc) / fn.scale ** (1.0 - c)
            else:
                sites[name] = unconstrained[name]
        return flat_site_layout(sites, self.target.site_names)[0]

    def draws_to_reparameterised(self, draws):
        """``[..., d]`` points of :attr:`original` to :attr:`target`'s coordinates (:meth:`to_reparameterised`)."""
        return _mapped(self.to_reparameterised, draws)


def _mapped(f, draws):
    draws = jnp.asarray(draws)
    flat = jax.jit(jax.vmap(f))(draws.reshape(-1, draws.shape[-1]))
    return flat.reshape(draws.shape[:-1] + flat.shape[-1:])


def reparameterise(model, *model_args, centred=None, rng_key=None, **model_kwargs) -> Reparameterised:
    """``model`` with its hierarchical sites decentred (module docstring).

    Args:
        model, *model_args, **model_kwargs: a NumPyro model and its data, or a ``NumPyroTarget``.
        centred: ``site -> c`` (a number or an array of the site's shape, in [0, 1]), or one number for every
            hierarchical site (``0.0``: non-centred); default: learned (:func:`learn_centredness`).
        rng_key: for the learning and NumPyro's initialisation (default ``jax.random.key(0)``).
    """
    from numpyro import handlers

    key = jax.random.key(0) if rng_key is None else rng_key
    original = model if isinstance(model, NumPyroTarget) else from_numpyro(model, *model_args, rng_key=key,
                                                                             **model_kwargs)
    sites = hierarchical_sites(original)
    if centred is None:
        centred = learn_centredness(original, sites=sites, rng_key=key)[0]
    elif isinstance(centred, (int, float)) and not isinstance(centred, bool):
        centred = {s: float(centred) for s in sites}
    if not isinstance(centred, dict):
        raise TypeError(f"`centred` must be None, a number in [0, 1] or a dict site -> centredness; received "
                        f"{type(centred).__name__}")
    for site, c in centred.items():
        c = np.asarray(c, np.float64)
        if not np.all((c >= 0.0) & (c <= 1.0)):
            raise ValueError(f"`centred[{site!r}]` must lie in [0, 1]; received {c}")
    unknown = sorted(set(centred) - set(sites))
    if unknown:
        raise ValueError(f"`centred` names sites {unknown} that are not hierarchical location-scale sites of the model "
                         f"(those are {list(sites)})")
    new = handlers.reparam(model_of(original), config=_reparam_config(centred))
    return Reparameterised(from_numpyro(new, rng_key=key), original, dict(centred))
