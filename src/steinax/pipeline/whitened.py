"""The particle loop in whitened coordinates: a method run on :class:`~steinax.targets.AffineTarget` with the map a
warm start learnt (or, without one, the start particles' own mean and covariance), the particles mapped back.

Every method's kernel, step and settle rule then work in coordinates where the target has about unit scale and no
correlation (exactly so for a Gaussian), whatever the user's units. **Decided here:** the map is fixed for the run
(the warm start's); updating it from the ensemble's covariance as the run goes is the next step of issue 49.
The loop's state lives in the whitened coordinates, so the stage hands the next one particles, not a state to
resume.
"""

from __future__ import annotations

from typing import ClassVar

from steinax.particles.base import AbstractParticleMethod
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.stages import AbstractStage, Staged
from steinax.particles.loop.stopping import as_stopping_rule
from steinax.targets.affine import AffineMap, AffineTarget

__all__ = ["WhitenedParticles"]


class WhitenedParticles(AbstractStage):
    """``method`` on the target in whitened coordinates (module docstring), with ``steps`` (an integer, ``None``
    until settled, or a stopping rule), ``optimizer`` and the run's ``options``. The map is the ``"affine"`` learnt by
    the stage named ``affine_from`` (default the warm start), else the start particles' moments. Learns
    ``{"result": RunResult in z, "affine": AffineMap}``; the result's ``samples`` are in the target's own space."""

    name: ClassVar[str] = "particles"
    method: AbstractParticleMethod
    steps: object = None
    optimizer: object = None
    options: RunOptions = RunOptions()
    affine_from: str = "warm_start"

    def apply(self, target, start: Staged, rng_key) -> Staged:
        affine = start.learnt.get(self.affine_from, {}).get("affine")
        if affine is None:
            affine = AffineMap.from_particles(start.particles)
        result = as_stopping_rule(self.steps).run(self.method, AffineTarget(target, affine),
                                                  affine.inverse(start.particles), optimizer=self.optimizer,
                                                  rng_key=rng_key, initial_state=None, options=self.options)
        return Staged(particles=affine.forward(result.particles), state=None,
                      learnt={**start.learnt, self.name: {"result": result, "affine": affine}})
