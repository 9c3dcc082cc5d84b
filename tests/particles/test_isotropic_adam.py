"""Isotropic Adam (issue 49): Adam with one second moment per particle. Rotation-equivariant, and Adam itself
(optax) where a particle has one coordinate."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from steinax.particles.optim import isotropic_adam, scale_by_isotropic_adam


def _steps(opt, gs):
    state, out = opt.init(gs[0]), []
    for g in gs:
        u, state = opt.update(g, state)
        out.append(u)
    return np.stack(out)


def test_it_is_adam_in_one_dimension():
    with jax.enable_x64(True):
        gs = jnp.asarray(np.random.default_rng(0).standard_normal((6, 5, 1)))
        np.testing.assert_allclose(_steps(isotropic_adam(0.1, eps=1e-8), gs), _steps(optax.adam(0.1, eps=1e-8), gs),
                                   rtol=1e-12)


def test_a_rotation_of_the_coordinates_rotates_the_steps():
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        gs = jnp.asarray(rng.standard_normal((6, 5, 4)) * np.array([10.0, 1.0, 0.1, 0.01]))
        Q = jnp.asarray(np.linalg.qr(rng.standard_normal((4, 4)))[0])
        for opt in (scale_by_isotropic_adam(), isotropic_adam()):
            np.testing.assert_allclose(_steps(opt, gs @ Q), _steps(opt, gs) @ np.asarray(Q), atol=1e-12)
        # coordinate-wise Adam does not: the check can fail
        assert np.max(np.abs(_steps(optax.adam(0.1), gs @ Q) - _steps(optax.adam(0.1), gs) @ np.asarray(Q))) > 1e-2
