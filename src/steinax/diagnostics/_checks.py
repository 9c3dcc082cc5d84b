"""What the target-based checks (:mod:`~steinax.diagnostics.relaxation`, :mod:`~steinax.diagnostics.modes`) share:
their input validation and the whitening by the particles' own mean and sd."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def checked_inputs(target, particles, rng_key, level, check: str, **integers):
    """``(target, particles [n, d], rng_key)`` after the checks' common validation.

    ``integers`` maps an argument's name to ``(value, lowest allowed)``. ``check`` names the check in errors.
    """
    from steinax._validation import check_particles
    from steinax.targets.base import as_target, check_target

    target = as_target(target)
    x = check_particles(particles)
    if x.shape[0] < 10:
        raise ValueError(f"`particles` must have at least 10 rows for the {check}; received {x.shape[0]}")
    for name, (value, low) in integers.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; received {value!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be in (0, 1); received {level!r}")
    rng_key = jax.random.key(0) if rng_key is None else rng_key
    check_target(target, rng_key, x)
    return target, x, rng_key


@jax.jit
def whitened(x):
    """``(center, scale, (x - center) / scale)``: the particles in the coordinates both checks move them in."""
    center, scale = whitening(x)
    return center, scale, (x - center[None]) / scale[None]


@jax.jit
def whitening(x):
    """``(center, scale)``: the particles' mean and per-coordinate sd, the sd floored at ``sqrt(eps) (1 + |center|)``
    so that a coordinate where every particle agrees (a MAP ensemble) is whitened by a floor, not by 0."""
    center = jnp.mean(x, axis=0)
    floor = jnp.sqrt(jnp.finfo(x.dtype).eps) * (1.0 + jnp.abs(center))
    return center, jnp.maximum(jnp.std(x, axis=0), floor)


def host_rng(rng_key, stream: int = 0) -> np.random.Generator:
    """A NumPy generator seeded by a JAX key's data and a stream number: the checks' resampling draws (bootstrap
    counts, sign flips, extra starts) are small host arrays, and drawing them with JAX compiled a random-number
    program per shape (0.2-0.3 s each on a first call)."""
    return np.random.default_rng(np.random.SeedSequence(np.asarray(jax.random.key_data(rng_key)).ravel().tolist()
                                                        + [int(stream)]))
