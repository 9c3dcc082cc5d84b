"""The particle-method interface.

A particle method is an immutable pytree (equinox Module) with

* ``init(particles, optimizer) -> ParticleState``
* ``step(rng_key, state, target, optimizer) -> (ParticleState, StepInfo)``

and, underneath, the pure function every method defines:

* ``direction(rng_key, particles, scores, aux, curvature=None) -> (phi, aux, info)``

``phi`` is the ascent direction (SVGD's ``phi*``), ``aux`` the method's own
state carried between steps (MK-SVGD's kernel weights, a preconditioner's
running average; ``None`` for SVGD), ``info`` a dict of scalar diagnostics
(the resolved bandwidth).

:meth:`AbstractParticleMethod.evaluate_target` is the single place where a
target is evaluated: once per particle per step, scores and, for a method whose
:meth:`~AbstractParticleMethod.curvature_request` names one, the curvature
(``"hessian"``, ``"gauss_newton"``, ``"fisher"``, ``"kfac"``) through
:meth:`steinax.targets.AbstractTarget.curvature`, with the same key (so a
minibatch target uses one minibatch for both). The result is passed to
``direction`` as ``curvature``. :meth:`AbstractParticleMethod.step` applies the
optimizer.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from steinax.particles.optim import default_optimizer

__all__ = ["ParticleState", "StepInfo", "AbstractParticleMethod"]


class ParticleState(eqx.Module):
    """State of a particle method: particles, optimizer state, method state, step count.

    ``origin``: the optimizer's behaviour signature (:func:`steinax.runtime.checkpoint.optimizer_signature` at fixed
    points) for states made by :func:`steinax.sampling_algorithm`, whose ``step`` refuses a state of
    another optimizer; ``None`` elsewhere (:func:`steinax.run` checks on the host)."""

    particles: jax.Array
    opt_state: optax.OptState
    aux: object
    step: jax.Array
    origin: jax.Array | None = None


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


def check_optimizer_state(optimizer, state, name: str = "initial_state") -> None:
    """``state.opt_state`` must be the state of an optimizer like ``optimizer`` (same structure and shapes).
    Static (shapes only): callable while tracing a compiled step."""
    from steinax.runtime.checkpoint import without_addresses

    want = jax.eval_shape(optimizer.init, state.particles)
    got_struct, want_struct = jax.tree_util.tree_structure(state.opt_state), jax.tree_util.tree_structure(want)
    same = got_struct == want_struct and all(
        jnp.shape(a) == jnp.shape(b) for a, b in zip(jax.tree_util.tree_leaves(state.opt_state),
                                                     jax.tree_util.tree_leaves(want)))
    if not same:
        raise ValueError(
            f"`{name}` holds the state of another optimizer than `optimizer` "
            f"(its state is {without_addresses(str(got_struct))}; `optimizer` needs {without_addresses(str(want_struct))}); "
            "resume with the optimizer of the run that produced it"
        )


def signature_points(particles: jax.Array) -> jax.Array:
    """Three fixed ``[d]`` points in the particles' dtype at which an optimizer's signature is taken."""
    d = particles.shape[-1]
    return (jnp.arange(3 * d, dtype=particles.dtype).reshape(3, d) % 7 - 3.0) * 0.37


def origin_of(optimizer, particles: jax.Array) -> jax.Array:
    """The ``origin`` a state made with ``optimizer`` carries: its signature at :func:`signature_points`, flat."""
    from steinax.runtime.checkpoint import optimizer_signature

    return jnp.ravel(optimizer_signature(optimizer, signature_points(particles)))


def origin_differs(optimizer, state) -> jax.Array:
    """Whether ``state.origin`` is another optimizer's (a traced boolean; False for a state without origin).
    Rounding aside (:data:`steinax.runtime.checkpoint.BEHAVIOUR_ULPS`), the same optimizer gives the same signature."""
    from steinax.runtime.checkpoint import BEHAVIOUR_ULPS

    if state.origin is None:
        return jnp.asarray(False)
    want = origin_of(optimizer, state.particles)
    if want.shape != state.origin.shape:
        return jnp.asarray(True)
    eps = jnp.finfo(want.dtype).eps
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(want)))
    return jnp.any(jnp.abs(want - state.origin) > BEHAVIOUR_ULPS * eps * scale)


ORIGIN_MESSAGE = ("the state was made with another optimizer than this algorithm's (its update at steps 0 to 10^6 "
                  "differs: the learning rate or the schedule); step a state with the algorithm that made it, or "
                  "start again with `init`")


def check_origin(optimizer, state, name: str = "initial_state") -> None:
    """On the host: refuse ``state`` when its ``origin`` is another optimizer's (see :func:`origin_differs`)."""
    if bool(origin_differs(optimizer, state)):
        raise ValueError(f"`{name}`: {ORIGIN_MESSAGE}")


def _all_finite(*trees) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for t in trees for x in jax.tree_util.tree_leaves(t)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


class AbstractParticleMethod(eqx.Module):
    """Base class of particle methods (see the module docstring)."""

    def init_aux(self, particles: jax.Array, target=None):
        """Initial method state (``None`` unless the method carries state).

        ``target`` is given by :func:`steinax.run` (a method whose state holds a
        running average of the target's curvature reads its structure from it).
        """
        del particles, target
        return None

    def init(self, particles: jax.Array, optimizer: optax.GradientTransformation, target=None) -> ParticleState:
        from steinax._validation import check_particles

        particles = check_particles(particles)
        return ParticleState(
            particles=particles,
            opt_state=optimizer.init(particles),
            aux=self.init_aux(particles, target),
            step=jnp.zeros((), jnp.int32),
        )

    def refresh_aux(self, rng_key, target, particles, aux, step):
        """Update the method's state from the target before the step's direction (default: unchanged).

        Called once per step with the step count; a method that needs more of the target than the
        per-particle scores and curvature (e.g. the curvature at the particles' mean every few
        steps, :func:`steinax.sliced_svgd`) reads it here.
        """
        del rng_key, target, particles, step
        return aux

    def default_optimizer(self) -> optax.GradientTransformation:
        """The optimizer :func:`steinax.run` uses when none is given: Adam at 0.05 with an injectable learning
        rate (:func:`steinax.particles.optim.default_optimizer`), unless the method knows better."""
        return default_optimizer()

    def curvature_request(self) -> str | None:
        """The curvature this method needs from the target each step (``None``: scores only)."""
        return None

    @abc.abstractmethod
    def direction(self, rng_key, particles, scores, aux, curvature=None) -> tuple[jax.Array, object, dict]:
        """Pure core: the ascent direction ``phi`` ``[n, d]``, the new ``aux`` and a dict of scalars.

        ``curvature`` is what :meth:`curvature_request` asked for (``None`` otherwise).
        """

    def evaluate_target(self, rng_key, target, particles):
        """``(logdensities, scores, curvature)``: everything the method needs from ``target`` this step."""
        from steinax.targets.base import curvature as target_curvature, evaluate

        logdens, scores = evaluate(target, rng_key, particles)
        name = self.curvature_request()
        curvature = None if name is None else target_curvature(target, name, rng_key, particles)
        return logdens, scores, curvature

    def step(self, rng_key, state: ParticleState, target, optimizer) -> tuple[ParticleState, StepInfo]:
        """One update: evaluate the target once per particle, compute ``phi``, apply the optimizer."""
        key_target, key_direction = jax.random.split(rng_key)
        logdens, scores, curvature = self.evaluate_target(key_target, target, state.particles)
        aux = self.refresh_aux(key_target, target, state.particles, state.aux, state.step)
        phi, aux, info = self.direction(key_direction, state.particles, scores, aux, curvature)
        updates, opt_state = optimizer.update(-phi, state.opt_state, state.particles)
        particles = optax.apply_updates(state.particles, updates)
        finite = _all_finite(logdens, scores, phi, particles)
        norm = jnp.sqrt(jnp.mean(jnp.sum(phi * phi, axis=1)))
        new = ParticleState(particles=particles, opt_state=opt_state, aux=aux, step=state.step + 1, origin=state.origin)
        return new, StepInfo(direction_norm=norm, finite=finite, method=info)
