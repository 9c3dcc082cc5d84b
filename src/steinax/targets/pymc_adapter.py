"""PyMC models as steinax targets (needs the ``pymc`` extra).

The log-density is PyMC's own, compiled to JAX by PyMC (``pymc.sampling.jax.get_jaxified_logp``,
the function PyMC's JAX NUTS samples): no hand translation of the model. Particles live in PyMC's
**transformed** (unconstrained) space, the value variables of ``model.value_vars`` (``tau_log__`` for
a positive ``tau``), flattened in sorted order of the **constrained** variables' names (``tau``), the
layout of every adapter (:mod:`steinax.targets.model`). ``result.samples`` holds the constrained free
variables and the model's ``Deterministic`` s by name, what ``pm.sample`` puts in its posterior group;
:meth:`~steinax.particles.loop.result.RunResult.to_datatree` gives them PyMC's ``dims`` and ``coords``.

Importing PyTensor's JAX backend switches JAX to float64 for the whole process; :func:`from_pymc`
restores the caller's setting, so the compiled model runs in steinax's default float32 unless
``jax_enable_x64`` was on.

Unsupported, with an error naming it: discrete free variables (SVGD needs a density on ``R^d``;
marginalise them first), and operations PyMC cannot compile to JAX.
"""

from __future__ import annotations

import functools
import warnings

import jax.numpy as jnp
import numpy as np

from steinax.targets.model import ModelTarget, flat_site_layout

__all__ = ["from_pymc"]


def _pymc():
    import jax

    x64 = jax.config.jax_enable_x64
    try:
        import pymc
        from pymc.sampling.jax import get_jaxified_graph, get_jaxified_logp
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError("from_pymc needs PyMC 5: pip install 'pymc>=5.20' 'matplotlib<3.11' (the steinax `pymc` "
                          f"extra); import failed with: {exc}") from exc
    finally:  # PyTensor's JAX backend turns on float64 for the whole process on import: the user's setting stands
        jax.config.update("jax_enable_x64", x64)
    return pymc, get_jaxified_graph, get_jaxified_logp


def _jaxify(build, what: str):
    """``build()`` (a PyMC-to-JAX compilation), with PyMC's error for an operation JAX lacks made plain."""
    try:
        return build()
    except NotImplementedError as exc:
        raise NotImplementedError(f"from_pymc: PyMC cannot compile the model's {what} to JAX (an operation without a "
                                  f"JAX implementation): {exc}") from exc


def _float64_quiet(fn):
    """``fn`` without JAX's warning that PyTensor's float64 casts become float32 (float32 is intended)."""

    @functools.wraps(fn)
    def quiet(*args):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Explicitly requested dtype float64")
            return fn(*args)

    return quiet


def from_pymc(model) -> ModelTarget:
    """Build a target from a PyMC model (module docstring).

    Args:
        model: a ``pymc.Model`` (its observed data fixed for the run).

    Returns:
        A :class:`~steinax.targets.model.ModelTarget`; ``site_names`` are the free variables' names.

    Raises:
        TypeError: ``model`` is not a ``pymc.Model``.
        ValueError: the model has discrete free variables, or none at all.
        NotImplementedError: an operation of the model has no JAX implementation in PyMC.

    Example:
        >>> import numpy as np, pymc as pm
        >>> with pm.Model() as model:
        ...     mu = pm.Normal("mu", 0.0, 1.0)
        ...     sigma = pm.HalfNormal("sigma", 1.0)
        ...     _ = pm.Normal("y", mu, sigma, observed=np.array([0.5, 1.0]))
        >>> target = from_pymc(model)
        >>> target.dim, target.site_names
        (2, ('mu', 'sigma'))
    """
    pymc, get_jaxified_graph, get_jaxified_logp = _pymc()
    from pymc.backends.arviz import coords_and_dims_for_inferencedata
    from pymc.util import get_default_varnames
    from pytensor.graph.replace import graph_replace

    if not isinstance(model, pymc.Model):
        raise TypeError(f"`model` must be a pymc.Model; received {type(model).__name__}")
    if model.discrete_value_vars:
        names = [model.values_to_rvs[v].name for v in model.discrete_value_vars]
        raise ValueError(f"from_pymc: the model has discrete free variables {names}; SVGD and the Stein tools need a "
                         "density on R^d: marginalise them out (pymc-extras' `marginalize`) or make them observed")
    if not model.free_RVs:
        raise ValueError("from_pymc: the model has no free variables to infer")
    values = list(model.value_vars)
    rv_of = {v.name: model.values_to_rvs[v].name for v in values}  # "tau_log__" -> "tau"
    names = tuple(sorted(rv_of.values()))
    order = {rv_of[v.name]: i for i, v in enumerate(values)}  # site name -> position in model.value_vars

    logp = _jaxify(lambda: get_jaxified_logp(model, negative_logp=True), "log-density")
    outputs = list(get_default_varnames(model.unobserved_value_vars, include_transformed=False))
    constrain_graph = _jaxify(lambda: get_jaxified_graph(inputs=values, outputs=outputs), "constrained variables")
    out_names = [rv_of.get(o.name, o.name) for o in outputs]

    # the inverse: each free variable's transform applied to its constrained value, with every free variable in
    # the transform's inputs (an interval's bounds may be random) replaced by its own constrained value
    placeholders = {rv.name: rv.type(rv.name) for rv in model.free_RVs}
    forward = []
    for rv in model.free_RVs:
        tr = model.rvs_to_transforms.get(rv)
        forward.append(placeholders[rv.name] if tr is None else tr.forward(placeholders[rv.name], *rv.owner.inputs))
    forward = graph_replace(forward, {rv: placeholders[rv.name] for rv in model.free_RVs}, strict=False)
    free_names = [rv.name for rv in model.free_RVs]
    unconstrain_graph = _jaxify(lambda: get_jaxified_graph(inputs=[placeholders[k] for k in free_names],
                                                           outputs=forward), "transforms")

    def in_pymc_order(u):
        return [u[k] for k in sorted(u, key=order.__getitem__)]

    @_float64_quiet
    def logdensity_fn(u):
        return logp(in_pymc_order(u))

    @_float64_quiet
    def constrain_fn(u):
        return dict(zip(out_names, constrain_graph(*in_pymc_order(u))))

    @_float64_quiet
    def unconstrain_fn(c):
        return dict(zip(free_names, unconstrain_graph(*[c[k] for k in free_names])))

    point = model.initial_point()
    flat, unravel = flat_site_layout({rv_of[k]: np.asarray(v) for k, v in point.items()}, names)
    coords, dims = coords_and_dims_for_inferencedata(model)
    return ModelTarget(
        logdensity_fn=logdensity_fn,
        constrain_fn=constrain_fn,
        unravel_fn=unravel,
        init_position=jnp.asarray(flat, dtype=jnp.result_type(float)),
        site_names=names,
        unconstrain_fn=unconstrain_fn,
        labels={"coords": {k: list(np.asarray(v).tolist()) for k, v in coords.items()},
                "dims": {k: list(v) for k, v in dims.items() if k in out_names}},
        language="pymc",
    )
