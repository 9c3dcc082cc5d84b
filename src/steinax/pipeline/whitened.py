"""The particle loop in whitened coordinates: a method run on :class:`~steinax.targets.AffineTarget` with the map a
warm start learnt (or, without one, the start particles' own mean and covariance), refitted from the ensemble's
covariance as the run goes, the particles mapped back.

Every method's kernel, step and settle rule then work in coordinates where the target has about unit scale and no
correlation (exactly so for a Gaussian), whatever the user's units.

**Affine invariance.** A linear reparameterisation ``x = A y + b`` of the target, with the start's particles
reparameterised alike, changes the whitened coordinates only by a rotation: the ensemble's Cholesky factor of ``y``
is ``A^{-1} L Q`` for an orthogonal ``Q``. The answer is therefore unchanged (to rounding) when the method's
direction, its kernel and its step are rotation-equivariant: SVGD's with the RBF median rule is, coordinate-wise Adam
is not. **Decided here:** the stage's default step is :func:`steinax.particles.optim.isotropic_adam` (Adam with one
second moment per particle), which is; an optimizer passed in is used as given. The settle rule compares each
whitened coordinate's move with its own sd, so in two parameterisations a run until settled may stop a segment
apart; fixed-length runs agree to rounding (``tests/pipeline/test_affine_invariance.py``).

**Refits.** After each run the map is composed with the one the particles' own mean and covariance give in the
whitened coordinates, shrunk toward the identity there (:meth:`~steinax.targets.AffineMap.refit`; equivariant,
unlike a refit in ``x``, which would add a ridge along the user's axes when there are no more particles than
dimensions), and the method runs again from the particles, ``refits`` times. A warm start's covariance is a normal approximation's; the ensemble's is the
target's as the particles see it. The loop's state lives in the whitened coordinates of its round, so the stage hands
the next one particles, not a state to resume.
"""

from __future__ import annotations

from typing import ClassVar

import jax

from steinax.particles.base import AbstractParticleMethod
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.result import NonFiniteError, RunInterrupted
from steinax.particles.loop.stages import AbstractStage, Staged, StageInterrupted
from steinax.particles.loop.stopping import as_stopping_rule
from steinax.particles.optim import isotropic_adam
from steinax.targets.affine import AffineMap, AffineTarget

__all__ = ["WhitenedParticles"]


class WhitenedParticles(AbstractStage):
    """``method`` on the target in whitened coordinates (module docstring), with ``steps`` (an integer, ``None``
    until settled, or a stopping rule), ``optimizer`` (default :func:`~steinax.particles.optim.isotropic_adam`) and
    the run's ``options``, then ``refits`` more runs, each in the coordinates the ensemble's covariance whitens. The
    first map is the ``"affine"`` learnt by the stage named ``affine_from`` (default the warm start; ``None`` to
    ignore it), else the start particles' moments.

    Learns ``{"result": RunResult of the last round (in z), "results": every round's, "affine": the last round's
    AffineMap, "evaluations": every evaluation of the target the rounds made (:attr:`~steinax.particles.RunResult.evaluations`)}``; Ctrl-C raises
    :class:`~steinax.particles.loop.stages.StageInterrupted` with the particles where the run stopped; the results' ``samples`` are in the
    target's own space.
    """

    name: ClassVar[str] = "particles"
    method: AbstractParticleMethod
    steps: object = None
    optimizer: object = None
    options: RunOptions = RunOptions()
    affine_from: str | None = "warm_start"
    refits: int = 0

    def apply(self, target, start: Staged, rng_key) -> Staged:
        if not isinstance(self.refits, int) or self.refits < 0:
            raise ValueError(f"`refits` must be a non-negative integer; received {self.refits!r}")
        affine = start.learnt.get(self.affine_from, {}).get("affine") if self.affine_from else None
        if affine is None:
            affine = AffineMap.from_particles(start.particles)
        optimizer = self.optimizer if self.optimizer is not None else isotropic_adam()
        rule = as_stopping_rule(self.steps)
        particles, results = start.particles, []
        for i in range(self.refits + 1):
            if i > 0:  # refit: the ensemble's moments in the current coordinates, composed with the map
                affine = affine.refit(particles)
            z = affine.inverse(particles)
            try:
                result = rule.run(self.method, AffineTarget(target, affine), z, optimizer=optimizer,
                                  rng_key=rng_key if i == 0 else jax.random.fold_in(rng_key, i), initial_state=None,
                                  options=self.options)
            except NonFiniteError as err:  # named as this stage's, with what it did
                raise NonFiniteError(f"the particle stage (round {i + 1} of {self.refits + 1}, in whitened "
                                     f"coordinates): {err}", err.step, err.result) from None
            except RunInterrupted as err:  # the particles where it stopped, in the target's space, with the rounds
                done = results + [err.result]
                raise StageInterrupted(
                    f"interrupted (Ctrl-C) in the particle stage at step {err.step} of round {i + 1} of "
                    f"{self.refits + 1}", self.name, f"step {err.step} of round {i + 1} of {self.refits + 1}",
                    affine.forward(err.result.particles), _learnt(done, affine)) from None
            particles = affine.forward(result.particles)
            results.append(result)
        return Staged(particles=particles, state=None, learnt={**start.learnt, self.name: _learnt(results, affine)})


def _learnt(results: list, affine: AffineMap) -> dict:
    """What the stage learns from its rounds' results: "evaluations" is every round's
    :attr:`~steinax.particles.RunResult.evaluations`."""
    return {"result": results[-1], "results": results, "affine": affine,
            "evaluations": sum(int(r.evaluations or 0) for r in results)}
