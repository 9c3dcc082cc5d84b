"""Stages (``steinax.particles.loop.stages``): each usable alone, chained with the keys and the record of what each
learnt as documented; the particle loop as a stage is ``steinax.run`` itself, bit for bit."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax.particles import AbstractStage, Chain, ParticleLoop, Staged


def logp(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2 / jnp.array([1.0, 4.0]))


X0 = jax.random.normal(jax.random.key(3), (30, 2))
KEY = jax.random.key(5)


class Spread(AbstractStage):
    """A stage that learns a diagnostic and leaves the particles alone."""

    name = "spread"

    def apply(self, target, start, rng_key):
        return Staged(particles=start.particles, state=start.state,
                      learnt={**start.learnt, self.name: {"sd": jnp.std(start.particles, axis=0)}})


def test_particle_loop_alone_is_run():
    warnings.simplefilter("ignore")
    out = ParticleLoop(steinax.svgd(), steps=120)(logp, X0, KEY)
    ref = steinax.run(steinax.svgd(), logp, X0, steps=120, rng_key=KEY)
    np.testing.assert_array_equal(out.particles, ref.particles)
    np.testing.assert_array_equal(out.learnt["loop"]["result"].trace.ksd, ref.trace.ksd)
    assert out.state.step == 120


def test_chain_runs_each_stage_from_the_last_with_its_own_key():
    warnings.simplefilter("ignore")
    warm = ParticleLoop(steinax.map_ascent(), steps=40, optimizer=optax.sgd(0.05))
    chain = Chain(warm, Spread(), ParticleLoop(steinax.svgd(), steps=80))
    out = chain(logp, X0, KEY)
    first = steinax.run(steinax.map_ascent(), logp, X0, steps=40, optimizer=optax.sgd(0.05),
                        rng_key=jax.random.fold_in(KEY, 0))
    second = steinax.run(steinax.svgd(), logp, first.particles, steps=80, rng_key=jax.random.fold_in(KEY, 2))
    np.testing.assert_array_equal(out.particles, second.particles)
    assert set(out.learnt) == {"loop", "spread", "loop:2"}
    np.testing.assert_array_equal(out.learnt["spread"]["sd"], jnp.std(first.particles, axis=0))
    np.testing.assert_array_equal(out.learnt["loop"]["result"].particles, first.particles)


def test_chain_refuses_what_is_not_a_stage():
    with pytest.raises(TypeError, match="`stages` must be one or more steinax stages"):
        Chain(steinax.svgd())
    with pytest.raises(TypeError, match="`stages` must be one or more"):
        Chain()
