"""The one argument check of :func:`steinax.sample`: every stage's settings, before any work.

It applies the library's input and dtype policy (:mod:`steinax._validation`, the same as :func:`steinax.run`'s): an
error names the argument, what it received and what was expected, and is raised before the warm start compiles
anything. What it checks, beyond each stage's own settings (refused when the stage object is made:
``LaplaceStart(...)``, ``HMCCorrection(...)``):

* ``target``: a log-density or steinax target; a NumPyro model function passed as it is refused with the wrapper to
  use; the log-density is traced at one starting point (no computation) and must return a real scalar; it is then
  evaluated at every starting point, each of which must give a finite log-density (a point outside the support
  is named by its row of ``init``);
* ``rng_key``: one JAX key;
* ``init``: ``[n, d]`` float32 or float64, finite, ``d`` the target's; ``num_particles``, when also given, must be
  ``n``;
* the stages' switches: ``warm_start``, ``particles`` (``"auto"`` or a bool), ``correction``, ``corrector`` (a correction stage),
  ``method`` (a particle method), ``progress``; ``mesh`` (a one-axis device mesh dividing the particles, given to
  the default method and to the correction); a combination that does nothing (no warm start, no particles, no
  correction: the starting points handed back as the answer) is refused;
* the correction's rule against the chains it will have: ``min_ess`` no more than the draws ``max_steps`` allows.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import check_key, check_particles, user_stacklevel
from steinax.particles.base import AbstractParticleMethod
from steinax.particles.loop.stages import AbstractStage
from steinax.targets.base import (
    LogDensityTarget,
    _is_probabilistic_model,
    as_target,
    check_target,
    logdensities,
)

__all__ = ["SampleArguments", "check_sample_arguments", "CORRECTIONS", "LARGE_PARTICLES"]

CORRECTIONS = ("always", "auto", "never")

LARGE_PARTICLES = 20_000
"""Above this many particles :func:`check_sample_arguments` warns with the particle stage's cost per step."""


class SampleArguments:
    """The checked arguments: ``target`` (a steinax target), ``init`` (``[n, d]``), ``logdensity`` (``[n]`` at
    ``init``), ``warm_start`` (a stage or ``None``), ``particles`` (``"auto"`` or a bool), ``correction``, ``corrector``, ``method``,
    ``progress``, ``transport`` and ``reparam`` (each a stage or ``None``)."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def _warm_stage(warm_start):
    from steinax.pipeline.laplace import LaplaceStart

    if warm_start is True:
        return LaplaceStart()
    if warm_start is False:
        return None
    if isinstance(warm_start, AbstractStage) and warm_start.name == "warm_start":
        return warm_start
    raise TypeError(f"`warm_start` must be True, False or a warm-start stage (LaplaceStart, PathfinderStart); "
                    f"received {warm_start!r}")


def _corrector(corrector):
    from steinax.pipeline.correction import HMCCorrection

    if corrector is None:
        return HMCCorrection()
    if not isinstance(corrector, HMCCorrection):
        raise TypeError(f"`corrector` must be an HMCCorrection (e.g. HMCCorrection(max_steps=4000)) or None; received "
                        f"{corrector!r}")
    return corrector


def _optional_stage(value, argument: str, stage_name: str, make, example: str):
    """``True``: ``make()``; ``False``/``None``: ``None``; a stage named ``stage_name``: itself; else refused."""
    if value is True:
        return make()
    if value is False or value is None:
        return None
    if isinstance(value, AbstractStage) and value.name == stage_name:
        return value
    raise TypeError(f"`{argument}` must be True, False or a {stage_name} stage ({example}); received {value!r}")


def _transport_stage(transport):
    from steinax.pipeline.transport import FlowTransport

    return _optional_stage(transport, "transport", "transport", FlowTransport, "FlowTransport(...)")


def _reparam_stage(reparam):
    from steinax.pipeline.reparam import LearnedCentredness

    return _optional_stage(reparam, "reparam", "reparam", LearnedCentredness, "LearnedCentredness(...)")


def _initial(tgt, rng_key, num_particles, init):
    if init is not None:
        x = check_particles(init, "init")
        if num_particles is not None and num_particles != x.shape[0]:
            raise ValueError(f"`num_particles` ({num_particles}) and `init` ({x.shape[0]} rows) disagree: the particles "
                             "are init's rows; give one of them")
        return x
    n = 100 if num_particles is None else num_particles
    make = getattr(tgt, "init_particles", None)
    if make is not None:
        return check_particles(jnp.asarray(make(rng_key, n)), "target.init_particles(...)")
    dim = getattr(tgt, "dim", None)
    if not isinstance(dim, int):
        raise ValueError("`init` is needed: the target (a plain log-density) has neither `init_particles` nor a `dim` "
                         "to draw N(0, I) in; pass init=[n, d] starting points")
    return jax.random.normal(rng_key, (n, dim), jnp.result_type(float))


def check_sample_arguments(target, *, rng_key, num_particles, init, method, warm_start, particles, correction,
                           corrector, progress, transport=False, reparam=False, mesh=None) -> SampleArguments:
    """Every argument of :func:`steinax.sample` checked (module docstring); the starting points drawn with
    ``rng_key`` where ``init`` is not given."""
    tgt = as_target(target)
    if isinstance(tgt, LogDensityTarget) and _is_probabilistic_model(tgt.logdensity_fn):
        raise ValueError("`target` is a probabilistic-programming model (it calls numpyro.sample), not a log-density of "
                         "one [d] point: wrap it, steinax.targets.from_numpyro(model, *data)")
    check_key(rng_key, "rng_key")
    if num_particles is not None and (isinstance(num_particles, bool) or not isinstance(num_particles, (int, np.integer))
                                      or num_particles < 2):
        raise ValueError(f"`num_particles` must be an integer >= 2; received {num_particles!r}")
    if correction not in CORRECTIONS:
        raise ValueError(f"`correction` must be one of {CORRECTIONS}; received {correction!r}")
    warm = _warm_stage(warm_start)
    if not (particles is True or particles is False or particles == "auto"):
        raise ValueError(f"`particles` must be 'auto', True or False; received {particles!r}")
    corrector = _corrector(corrector)
    transport = _transport_stage(transport)
    reparam = _reparam_stage(reparam)
    if transport is not None and correction == "never":
        raise ValueError("`transport` is used by the correction, and `correction='never'` runs none: drop one")
    if method is not None and not isinstance(method, AbstractParticleMethod):
        raise TypeError(f"`method` must be a steinax particle method (e.g. steinax.svgd()) or None; received {method!r}")
    if not (isinstance(progress, bool) or progress == "auto"):
        raise ValueError(f"`progress` must be True, False or 'auto'; received {progress!r}")
    if warm is None and not particles and correction == "never":
        raise ValueError("`warm_start=False, particles=False, correction='never'` runs no stage: the answer would be "
                         "`init` handed back. Turn on at least one stage")
    key_init = jax.random.fold_in(rng_key, 0)
    x = _initial(tgt, key_init, num_particles, init)
    if x.shape[0] < 2:
        raise ValueError(f"`init` must hold at least 2 starting points; received {x.shape[0]}")
    dim = getattr(tgt, "dim", None)
    if isinstance(dim, int) and x.shape[1] != dim:
        raise ValueError(f"`init` must have shape [n, {dim}] for this target; received shape {tuple(x.shape)}")
    if correction != "never":
        corrector.check_chains(int(x.shape[0]))
    method, corrector = _on_mesh(mesh, int(x.shape[0]), method, corrector)
    if x.shape[0] > LARGE_PARTICLES and particles:
        n, d = x.shape
        warnings.warn(f"`num_particles` = {n}: the particle stage's pairwise work is about n^2 d = {float(n) ** 2 * d:.2g} "
                      f"multiply-adds per step, for hundreds to thousands of steps (and its kernel blocks take "
                      f"{8.0 * n * min(n, 2048) / 2**30:.2g} GiB); most posteriors need 100-1000", UserWarning,
                      stacklevel=user_stacklevel())
    check_target(tgt, jax.random.key(0), x[:2], "target")
    logd = np.asarray(logdensities(tgt, x))
    bad = np.flatnonzero(~np.isfinite(logd))
    if bad.size and init is None:  # the default starts: say where they came from, and how to give others
        made = ("target.init_particles (uniform on (-2, 2) in unconstrained coordinates, rows that were not finite "
                "drawn again around the model's own initial point)" if hasattr(tgt, "init_particles")
                else "N(0, I)")
        raise ValueError(f"no finite start: the target's log-density is not finite at {bad.size} of the {x.shape[0]} "
                         f"default starting points, from {made}; values {logd[bad[:3]].tolist()}. Pass starting points "
                         "inside the support with `init=`, e.g. init=x0 + 0.01 * jax.random.normal(key, (100, d)) "
                         "for a point x0 ([d], unconstrained) where the log-density is finite")
    if bad.size:
        raise ValueError(f"`init`: the target's log-density is not finite at rows {bad[:10].tolist()}"
                         f"{' ...' if bad.size > 10 else ''} ({bad.size} of {x.shape[0]}; values "
                         f"{logd[bad[:3]].tolist()}): start inside the support (a constrained parameter needs its "
                         "unconstrained coordinates)")
    return SampleArguments(target=tgt, init=x, logdensity=logd, warm_start=warm, particles=particles,
                           correction=correction, corrector=corrector, method=method, progress=progress,
                           transport=transport, reparam=reparam, mesh=mesh)


def _on_mesh(mesh, n: int, method, corrector):
    """The particle method and the correction split over ``mesh`` (checked: one axis, dividing the ``n`` particles):
    the default method becomes ``svgd(mesh=mesh)``; a given method must be on the same mesh (it shards its own
    pairwise work), and a given corrector gets it."""
    if mesh is None:
        return method, corrector
    import dataclasses

    from steinax.particles import svgd
    from steinax.runtime.sharding import check_mesh

    check_mesh(mesh, n, "mesh")
    if method is None:
        method = svgd(mesh=mesh)
    elif getattr(method, "mesh", None) is not mesh:
        raise ValueError(f"`method` must be split over the same mesh as `sample`'s (e.g. steinax.svgd(mesh=mesh)); "
                         f"received a method with mesh {getattr(method, 'mesh', None)!r}")
    if corrector.mesh is not None and corrector.mesh is not mesh:
        raise ValueError("`corrector.mesh` and `mesh` differ: give the mesh once, to `sample`")
    return method, dataclasses.replace(corrector, mesh=mesh)
