"""Particles sharded across devices and hosts, on JAX's own machinery.

The particles (and their scores) are split along ``n`` over a one-axis device
mesh (:class:`jax.sharding.Mesh`, ``PartitionSpec(axis)``). Per-particle work
(scores, the optimizer update) is partitioned by XLA from the arrays'
``NamedSharding``; the pairwise work (the SVGD direction and its median
bandwidth) runs under :func:`jax.shard_map`: each device gathers all particles
and scores (``all_gather``, O(n d) traffic) and computes the direction of its
own rows against them, block by block. The median bandwidth counts each
device's rows and sums the counts (``psum``), so it is the exact median of all
``n^2`` distances (:mod:`steinax.kernels.select`), bit for bit the single-device
value for distances computed in blocks of the same shape (matrix products of
other shapes may round a distance differently in the last bit); no host
callback runs inside a sharded step.

The same code runs on one device, on several devices of one host, and on the
devices of several processes after :func:`jax.distributed.initialize`
(:func:`distributed_mesh`). ``n`` must be a multiple of the number of devices:
a mesh that does not divide the particles is refused with a clear error (pad
the particles yourself if you must; extra particles change the method).

Example (4 CPU devices, ``XLA_FLAGS=--xla_force_host_platform_device_count=4``)::

    mesh = steinax.sharding.particle_mesh()
    res = steinax.run(steinax.svgd(mesh=mesh), logp, x0, steps=500,
                      optimizer=optax.adam(1e-2), rng_key=key)
    x = steinax.sharding.gather(res.particles)   # numpy, on every process
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["particle_mesh", "distributed_mesh", "shard_particles", "gather", "check_mesh", "particle_spec"]

AXIS = "particles"


def particle_mesh(devices: Sequence | None = None, *, axis_name: str = AXIS) -> Mesh:
    """A one-axis mesh over ``devices`` (default: every device of every process).

    Args:
        devices: the devices to shard the particles over (default ``jax.devices()``).
        axis_name: the mesh axis name.
    """
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must hold at least one device; received an empty sequence")
    return Mesh(np.asarray(devices), (axis_name,))


def distributed_mesh(*, axis_name: str = AXIS) -> Mesh:
    """The mesh over the devices of all processes of a :func:`jax.distributed.initialize`-d run.

    Raises:
        RuntimeError: the distributed runtime was not initialised in this process.
    """
    if not jax.distributed.is_initialized():
        raise RuntimeError(
            "the JAX distributed runtime is not initialised in this process: call "
            "jax.distributed.initialize(coordinator_address='host:port', num_processes=N, process_id=i) "
            "in every process before building a multi-process mesh (use particle_mesh() for one process)"
        )
    return particle_mesh(jax.devices(), axis_name=axis_name)


def check_mesh(mesh, n: int | None = None, name: str = "mesh") -> Mesh:
    """Validate a particle mesh (one axis) and, with ``n``, that it divides the particles."""
    if not isinstance(mesh, Mesh):
        raise TypeError(f"`{name}` must be a jax.sharding.Mesh (steinax.sharding.particle_mesh()); "
                        f"received {type(mesh).__name__}")
    if len(mesh.axis_names) != 1:
        raise ValueError(f"`{name}` must have one axis (the particles'); received axes {mesh.axis_names}")
    if n is not None and n % mesh.size:
        raise ValueError(
            f"the {mesh.size} devices of `{name}` do not divide the n = {n} particles; expected n to be a "
            f"multiple of {mesh.size} (e.g. n = {mesh.size * (n // mesh.size + 1)}), or a mesh over fewer devices"
        )
    return mesh


def particle_spec(mesh: Mesh) -> PartitionSpec:
    return PartitionSpec(mesh.axis_names[0])


def shard_particles(particles, mesh: Mesh) -> jax.Array:
    """``[n, ...]`` array -> a global array split along ``n`` over ``mesh``.

    In a multi-process run every process passes the same full array (e.g. drawn
    from the same key); each keeps its devices' rows.
    """
    check_mesh(mesh, np.shape(particles)[0])
    sharding = NamedSharding(mesh, particle_spec(mesh))
    if isinstance(particles, jax.Array) and particles.sharding == sharding:
        return particles
    if jax.process_count() == 1:
        return jax.device_put(particles, sharding)
    host = np.asarray(particles)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def gather(x) -> np.ndarray:
    """A (possibly multi-process) sharded array as one NumPy array on every process."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
