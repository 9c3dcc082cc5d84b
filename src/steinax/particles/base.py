"""The particle-method interface.

A particle method is an immutable pytree (equinox Module) with

* ``init(particles, optimizer) -> ParticleState``
* ``step(rng_key, state, target, optimizer) -> (ParticleState, StepInfo)``

and, underneath, the pure function every method defines:

* ``direction(rng_key, particles, scores, aux) -> (phi, aux, info)``

``phi`` is the ascent direction (SVGD's ``phi*``), ``aux`` the method's own
state carried between steps (MK-SVGD's kernel weights, a preconditioner's
running average; ``None`` for SVGD), ``info`` a dict of scalar diagnostics
(the resolved bandwidth). :meth:`AbstractParticleMethod.step` is the single
place where a target is evaluated (once per particle per step) and the
optimizer applied; methods that need more of the target (Hessians, Fisher
information) override :meth:`AbstractParticleMethod.target_quantities`.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

__all__ = ["ParticleState", "StepInfo", "AbstractParticleMethod"]


class ParticleState(eqx.Module):
    """State of a particle method: particles, optimizer state, method state, step count."""

    particles: jax.Array
    opt_state: optax.OptState
    aux: object
    step: jax.Array


class StepInfo(eqx.Module):
    """Per-step diagnostics.

    Attributes:
        direction_norm: ``sqrt(mean_i ||phi(x_i)||^2)``, the RMS particle velocity.
        finite: whether log-densities, scores, direction and new particles are all finite.
        method: the method's own scalars (e.g. ``{"bandwidth": h}``).
    """

    direction_norm: jax.Array
    finite: jax.Array
    method: dict


def _all_finite(*trees) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for t in trees for x in jax.tree_util.tree_leaves(t)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


class AbstractParticleMethod(eqx.Module):
    """Base class of particle methods (see the module docstring)."""

    def init_aux(self, particles: jax.Array):
        """Initial method state (``None`` unless the method carries state)."""
        del particles
        return None

    def init(self, particles: jax.Array, optimizer: optax.GradientTransformation) -> ParticleState:
        from steinax._validation import check_particles

        particles = check_particles(particles)
        return ParticleState(
            particles=particles,
            opt_state=optimizer.init(particles),
            aux=self.init_aux(particles),
            step=jnp.zeros((), jnp.int32),
        )

    @abc.abstractmethod
    def direction(self, rng_key, particles, scores, aux) -> tuple[jax.Array, object, dict]:
        """Pure core: the ascent direction ``phi`` ``[n, d]``, the new ``aux`` and a dict of scalars."""

    def step(self, rng_key, state: ParticleState, target, optimizer) -> tuple[ParticleState, StepInfo]:
        """One update: evaluate the target once per particle, compute ``phi``, apply the optimizer."""
        key_target, key_direction = jax.random.split(rng_key)
        logdens, scores = target.evaluate(key_target, state.particles)
        phi, aux, info = self.direction(key_direction, state.particles, scores, state.aux)
        updates, opt_state = optimizer.update(-phi, state.opt_state, state.particles)
        particles = optax.apply_updates(state.particles, updates)
        finite = _all_finite(logdens, scores, phi, particles)
        norm = jnp.sqrt(jnp.mean(jnp.sum(phi * phi, axis=1)))
        new = ParticleState(particles=particles, opt_state=opt_state, aux=aux, step=state.step + 1)
        return new, StepInfo(direction_norm=norm, finite=finite, method=info)
