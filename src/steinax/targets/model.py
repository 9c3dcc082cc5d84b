"""A probabilistic program's posterior as a target: the one class behind NumPyro, PyMC and TFP models.

Every adapter (:func:`~steinax.targets.from_numpyro`, :func:`~steinax.targets.from_pymc`,
:func:`~steinax.targets.from_tfp`) reduces its language's model to four functions on a dict of
**named sites**, keyed by the constrained variables' names (``"tau"``, never PyMC's ``"tau_log__"``):

* ``logdensity_fn(u)``: the log posterior density of the unconstrained values ``u`` (each latent
  site mapped to ``R^{d_i}`` by the language's own bijection, log-Jacobian included);
* ``constrain_fn(u)``: the constrained site values, with the model's deterministic quantities;
* ``unconstrain_fn(c)``: the inverse on the latent sites, from constrained values;
* ``unravel_fn(x)``: the flat vector ``x`` ``[d]`` (the sites in ``site_names`` order, each
  flattened row-major) back to the dict.

Particles live in the flat unconstrained space; :meth:`ModelTarget.postprocess` gives the
constrained draws by name, which :func:`steinax.run` returns as ``result.samples`` and
:meth:`~steinax.particles.loop.result.RunResult.to_datatree` labels with the model's dimensions and
coordinates (``labels``) where the language has them (PyMC's ``dims``).
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from steinax.targets.base import AbstractTarget

__all__ = ["ModelTarget", "flat_site_layout", "RESPREAD"]

RESPREAD = (10.0, 100.0, 1000.0, float("inf"))
"""How much :meth:`ModelTarget.init_particles` shrinks the uniform offsets around ``init_position`` for a start whose
log-density is not finite, tried in this order (``inf``: the point itself)."""


class ModelTarget(AbstractTarget):
    """A model's posterior on its flattened unconstrained space (module docstring).

    Attributes:
        logdensity_fn, constrain_fn, unconstrain_fn, unravel_fn: the four functions of the module
            docstring (``unconstrain_fn`` may be ``None``: named draws then cannot be read).
        init_position: ``[d]`` a valid flat unconstrained point (the language's initial point).
        site_names: the latent sites, in the flat vector's order.
        labels: ``{"coords": ..., "dims": ...}`` for the DataTree of the draws, or ``None``.
        language: ``"numpyro"``, ``"pymc"`` or ``"tfp"``.
    """

    logdensity_fn: Callable = eqx.field(static=True)
    constrain_fn: Callable = eqx.field(static=True)
    unravel_fn: Callable = eqx.field(static=True)
    init_position: jax.Array
    site_names: tuple = eqx.field(static=True)
    unconstrain_fn: Callable | None = eqx.field(static=True, default=None)
    labels: dict | None = eqx.field(static=True, default=None)
    language: str = eqx.field(static=True, default="model")

    @property
    def dim(self) -> int:
        return self.init_position.shape[0]

    def logdensity(self, x):
        return self.logdensity_fn(self.unravel_fn(x))

    def evaluate(self, rng_key, particles):
        del rng_key
        return jax.vmap(jax.value_and_grad(self.logdensity))(particles)

    def init_particles(self, rng_key: jax.Array, n: int, radius: float = 2.0) -> jax.Array:
        """``[n, d]`` starting points: uniform on ``(-radius, radius)`` in unconstrained space (NumPyro's
        ``init_to_uniform``), each row where the log-density is not finite drawn again around the language's own
        initial point ``init_position`` (:data:`RESPREAD`: the same uniform offsets shrunk 10, 100 and 1000 times,
        then the point itself), the widest at which it is finite.

        On a model in raw units the uniform box can miss the support of the likelihood entirely: a negative binomial
        regression with a predictor near 3000 and a coefficient drawn in (-2, 2) has a rate of ``e^6000`` (0 of 100
        draws finite, issue 59), while NumPyro's own initial point, searched for a finite density, is finite. A row
        that no spread makes finite stays as drawn (the caller's check names it, :func:`steinax.sample`)."""
        u = jax.random.uniform(rng_key, (n, self.dim), self.init_position.dtype, minval=-radius, maxval=radius)
        logd = jax.vmap(self.logdensity)(u)
        if bool(jnp.all(jnp.isfinite(logd))):
            return u
        centre = self.init_position
        out, todo = u, ~jnp.isfinite(logd)
        for shrink in RESPREAD:
            if not bool(jnp.any(todo)):
                break
            trial = centre[None] + u / shrink if shrink != float("inf") else jnp.broadcast_to(centre[None], u.shape)
            fine = todo & jnp.isfinite(jax.vmap(self.logdensity)(trial))
            out = jnp.where(fine[:, None], trial, out)
            todo = todo & ~fine
        return out

    def sites(self, particles: jax.Array) -> dict:
        """Dict ``site -> [n, ...]`` of the particles' **unconstrained** values, by site name."""
        return jax.vmap(self.unravel_fn)(particles)

    def ravel(self, sites: dict) -> jax.Array:
        """``[n, d]`` flat points from a dict ``site -> [n, ...]`` of unconstrained values (inverse of :meth:`sites`)."""
        missing = [name for name in self.site_names if name not in sites]
        if missing:
            raise ValueError(f"`sites` lacks the model's latent sites {missing}; received {sorted(sites)}")
        return jax.vmap(lambda s: flat_site_layout({k: s[k] for k in self.site_names}, self.site_names)[0])(
            {k: jnp.asarray(sites[k]) for k in self.site_names})

    def unconstrain(self, samples: dict) -> jax.Array:
        """``[n, d]`` unconstrained flat points from a dict ``site -> [n, ...]`` of constrained draws.

        The inverse of :meth:`postprocess` on the latent sites (the language's bijections),
        e.g. to measure MCMC draws in the space where the scores are taken.
        """
        if self.unconstrain_fn is None:
            raise ValueError(f"this {self.language} target cannot read constrained draws (no inverse transform)")
        missing = [name for name in self.site_names if name not in samples]
        if missing:
            raise ValueError(f"the samples lack the model's latent sites {missing}; received sites {sorted(samples)}")
        params = {name: jnp.asarray(samples[name]) for name in self.site_names}
        shapes = {k: jnp.shape(v) for k, v in self.constrain_fn(self.unravel_fn(self.init_position)).items()}
        n = params[self.site_names[0]].shape[0] if params[self.site_names[0]].ndim else None
        for name, value in params.items():
            want = shapes[name]
            if value.ndim == 0 or tuple(value.shape[1:]) != tuple(want) or value.shape[0] != n:
                raise ValueError(
                    f"site {name!r} must have shape [n, {', '.join(map(str, want))}]"
                    f"{'' if n is None else f' with n = {n}'}; received {tuple(value.shape)}"
                )
        return jax.vmap(lambda p: flat_site_layout(self.unconstrain_fn(p), self.site_names)[0])(params)

    def postprocess(self, particles):
        """Dict ``site -> [n, ...]`` of constrained values (deterministic quantities included)."""
        return jax.vmap(lambda z: self.constrain_fn(self.unravel_fn(z)))(particles)


def flat_site_layout(sites: dict, names=None) -> tuple[jax.Array, Callable]:
    """``(flat [d], unravel)`` for a dict of one point's site values, in ``names`` order (default: sorted).

    ``unravel(flat)`` returns the dict; every adapter uses this one layout, so that equal models
    written in different languages have equal flat vectors when their sites are named alike.
    """
    names = tuple(sorted(sites)) if names is None else tuple(names)
    flat, unravel_list = ravel_pytree([jnp.asarray(sites[k]) for k in names])

    def unravel(x):
        return dict(zip(names, unravel_list(x)))

    return flat, unravel
