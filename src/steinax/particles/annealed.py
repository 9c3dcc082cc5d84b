"""Annealed SVGD (D'Angelo & Fortuin 2021, "Annealed Stein Variational Gradient Descent", eq. 6).

The driving (score) term of any SVGD-type direction is scaled by a temperature
``gamma(t)`` in ``[0, 1]`` while the repulsion is kept:

.. math::

    \\phi_t(x_i) = \\frac{1}{n} \\sum_j \\left[ \\gamma(t)\\, k(x_j, x_i) \\nabla \\log p(x_j)
                   + \\nabla_{x_j} k(x_j, x_i) \\right],

so early steps spread the particles (at ``gamma = 0`` the flow is pure repulsion) and
later ones bring the target in. The schedule is the paper's cyclical one:
``gamma(t) = ((t mod L) / L)^p`` for ``t < C L`` (``C`` cycles of length ``L``), then 1.
Because every SVGD-type direction in steinax is linear in the scores with a kernel that
does not read them, the annealed direction is the base method's direction at the scores
``gamma(t) s``: :class:`Annealed` wraps any such method (SVGD, CC-SVGD, sliced SVGD).
NumPyro's ``ASVGD`` (contrib.einstein) is the same idea with a tanh-shaped cycle.
"""

from __future__ import annotations

import jax.numpy as jnp

from steinax.particles.base import AbstractParticleMethod

__all__ = ["Annealed", "annealed_svgd", "annealing_schedule"]


def annealing_schedule(step, anneal_steps: int, cycles: int, power: float):
    """``gamma(t)`` of the module docstring (step ``t`` counted from 0)."""
    length = max(1, anneal_steps // cycles)
    t = jnp.asarray(step)
    gamma = (jnp.mod(t, length) / length) ** power
    return jnp.where(t < length * cycles, gamma, 1.0)


class Annealed(AbstractParticleMethod):
    """A method whose scores are scaled by the cyclical temperature of :func:`annealing_schedule`."""

    base: AbstractParticleMethod
    anneal_steps: int = 1000
    cycles: int = 10
    power: float = 1.0

    def __check_init__(self):
        for name in ("anneal_steps", "cycles"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer; received {value!r}")
        if not self.power > 0:
            raise ValueError(f"`power` must be positive; received {self.power!r}")

    def init_aux(self, particles, target=None):
        return (jnp.zeros((), jnp.int32), self.base.init_aux(particles, target))

    def curvature_request(self):
        return self.base.curvature_request()

    def refresh_aux(self, rng_key, target, particles, aux, step):
        return (step, self.base.refresh_aux(rng_key, target, particles, aux[1], step))

    def direction(self, rng_key, particles, scores, aux, curvature=None):
        step, base_aux = aux
        gamma = annealing_schedule(step, self.anneal_steps, self.cycles, self.power).astype(scores.dtype)
        phi, base_aux, info = self.base.direction(rng_key, particles, gamma * scores, base_aux, curvature)
        return phi, (step, base_aux), dict(info, temperature=gamma)


def annealed_svgd(base: AbstractParticleMethod | None = None, *, anneal_steps: int = 1000, cycles: int = 10,
                  power: float = 1.0) -> Annealed:
    """Annealed SVGD: ``base`` (default :func:`steinax.svgd`) with the cyclical temperature of the module docstring.

    Args:
        base: an SVGD-type method (its direction linear in the scores).
        anneal_steps: steps over which the ``cycles`` cycles run; afterwards ``gamma = 1``
            (give the run more steps than this, so it ends at the target).
        cycles: number of cycles ``C`` (the paper's default 10).
        power: the exponent ``p`` of each cycle's ramp (the paper uses 1 to 10).
    """
    from steinax.particles.svgd import svgd

    return Annealed(base=svgd() if base is None else base, anneal_steps=anneal_steps, cycles=cycles, power=power)
