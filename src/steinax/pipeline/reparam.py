"""The reparameterisation stage: a NumPyro model's hierarchical sites decentred by a learned centredness before any
other stage (issue 57; :mod:`steinax.targets.reparam` holds the maths and its citation).

A centred hierarchy (``theta_j ~ N(mu, tau)``) has a funnel where the data are weak: no affine map and no single step
size serve both ``tau`` large and ``tau`` near 0, and chains started in the neck do not leave it. Learning each
site's centredness (the ELBO of a mean-field guide, Gorinova et al. 2020) takes ``steps * draws`` gradient
evaluations and gives coordinates where the funnel is gone or much milder; every later stage (warm start, particles,
checks, transport, correction) runs in them, and :func:`steinax.sample` maps its draws back to the model's own
coordinates. The map is exact (a triangular bijection with its Jacobian), so the correction stays exact.
**Decided here:** the stage applies to a :class:`~steinax.targets.numpyro_adapter.NumPyroTarget` that holds its
model and has hierarchical location-scale sites; on any other target it does nothing and costs nothing. PyMC and TFP
models are not reparameterised (their model graphs are not rewritten here).
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from steinax._validation import check_settings
from steinax.particles.loop.stages import AbstractStage, Staged

__all__ = ["LearnedCentredness"]


class LearnedCentredness(AbstractStage):
    """Learn each hierarchical site's centredness and hand the next stages the reparameterised target (module
    docstring).

    Attributes:
        steps: Adam steps on the ELBO (guide and centredness jointly).
        learning_rate: Adam's rate.
        draws: the guide's draws per ELBO estimate.

    Learns ``{"reparameterised": a Reparameterised or None (nothing to reparameterise), "sites", "centred"
    (site -> c), "elbo", "evaluations" (``steps * draws``, or 0), "seconds"}``; the particles it hands on are the
    start's in the reparameterised coordinates.
    """

    name: ClassVar[str] = "reparam"
    steps: int = 1000
    learning_rate: float = 0.02
    draws: int = 4

    def __check_init__(self):
        check_settings("LearnedCentredness", self, integers=("steps", "draws"), positive=("learning_rate",))

    @staticmethod
    def applies(target) -> bool:
        """Whether the stage can look at ``target`` (a NumPyro target holding its model); :func:`steinax.sample` runs
        it, and books it in the ledger, only then."""
        from steinax.targets.numpyro_adapter import NumPyroTarget

        return isinstance(target, NumPyroTarget) and target.model is not None

    def apply(self, target, start: Staged, rng_key) -> Staged:
        t0 = time.perf_counter()
        nothing = {"reparameterised": None, "sites": (), "centred": {}, "elbo": float("nan"), "evaluations": 0}
        if not self.applies(target):
            return Staged(particles=start.particles, state=start.state,
                          learnt={**start.learnt, self.name: {**nothing, "seconds": time.perf_counter() - t0}})
        from steinax.targets.reparam import hierarchical_sites, learn_centredness, reparameterise

        sites = hierarchical_sites(target)
        if not sites:
            return Staged(particles=start.particles, state=start.state,
                          learnt={**start.learnt, self.name: {**nothing, "seconds": time.perf_counter() - t0}})
        centred, info = learn_centredness(target, sites=sites, steps=self.steps, learning_rate=self.learning_rate,
                                          draws=self.draws, rng_key=rng_key)
        r = reparameterise(target, centred=centred, rng_key=rng_key)
        learnt = {"reparameterised": r, "sites": sites, "centred": {k: np.asarray(v).tolist() for k, v in centred.items()},
                  "elbo": info["elbo"], "evaluations": info["evaluations"], "seconds": time.perf_counter() - t0}
        return Staged(particles=r.draws_to_reparameterised(start.particles), state=None,
                      learnt={**start.learnt, self.name: learnt})
