import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax


def test_adagrad_momentum_matches_reference_loop(key):
    """Liu & Wang's svgd.py update, written out in numpy, for 5 steps of given directions."""
    x = np.asarray(jax.random.normal(key, (6, 2)), np.float64)
    phis = np.asarray(jax.random.normal(jax.random.fold_in(key, 1), (5, 6, 2)), np.float64)
    lr, alpha, fudge = 0.3, 0.9, 1e-6
    ref, hist = x.copy(), 0.0
    for it, g in enumerate(phis):
        hist = g**2 if it == 0 else alpha * hist + (1 - alpha) * g**2
        ref = ref + lr * g / (fudge + np.sqrt(hist))
    opt = steinax.adagrad_momentum(lr, alpha, fudge)
    xs = jnp.asarray(x, jnp.float32)
    state = opt.init(xs)
    for g in phis:
        upd, state = opt.update(-jnp.asarray(g, jnp.float32), state, xs)  # the run loop passes -phi
        xs = optax.apply_updates(xs, upd)
    np.testing.assert_allclose(xs, ref, rtol=1e-5, atol=1e-5)
