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

    mesh = steinax.runtime.sharding.particle_mesh()
    res = steinax.run(steinax.svgd(mesh=mesh), logp, x0, steps=500,
                      optimizer=optax.adam(1e-2), rng_key=key)
    x = steinax.runtime.sharding.gather(res.particles)   # numpy, on every process
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from steinax.targets.base import AbstractTarget, MinibatchTarget, draw_minibatch

__all__ = ["particle_mesh", "distributed_mesh", "shard_particles", "gather", "check_mesh", "particle_spec",
           "DataParallelTarget", "data_parallel"]

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
        raise TypeError(f"`{name}` must be a jax.sharding.Mesh (steinax.runtime.sharding.particle_mesh()); "
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


class DataParallelTarget(AbstractTarget):
    """A :class:`~steinax.targets.MinibatchTarget` whose data are split over a mesh (see :func:`data_parallel`)."""

    target: MinibatchTarget
    mesh: Mesh = eqx.field(static=True)

    def evaluate(self, rng_key, particles):
        """Log-densities and scores of all particles, each device summing the log-likelihood of its data shard.

        Every device draws ``B / D`` examples from its own ``N / D`` (a stratified
        minibatch: the same ``N / B`` estimator, still unbiased), differentiates
        their sum at every particle, and the sums are added across devices
        (``psum``); the prior is added once. With ``batch_size=None`` the result is
        the full-data score, equal to the unsharded one up to the order of the sum.
        """
        t, axis = self.target, self.mesh.axis_names[0]
        local_batch = None if t.batch_size is None or t.batch_size >= t.num_data else t.batch_size // self.mesh.size

        def local(x, data, key):
            batch, factor = draw_minibatch(jax.random.fold_in(key, jax.lax.axis_index(axis)), data, local_batch,
                                           t.sampling)
            value, grad = jax.vmap(jax.value_and_grad(lambda p: factor * jnp.sum(t.per_example_loglik(p, batch))))(x)
            value, grad = jax.lax.psum(value, axis), jax.lax.psum(grad, axis)
            prior, prior_grad = jax.vmap(jax.value_and_grad(t.logprior_fn))(x)
            return value + prior, grad + prior_grad

        data_spec = jax.tree_util.tree_map(lambda _: PartitionSpec(axis), t.data)
        return jax.shard_map(local, mesh=self.mesh, in_specs=(PartitionSpec(), data_spec, PartitionSpec()),
                             out_specs=(PartitionSpec(), PartitionSpec()), check_vma=False)(particles, t.data, rng_key)

    # everything else is the wrapped target's (not split over the data)
    def logdensity(self, x):
        return self.target.logdensity(x)

    def hessian(self, x):
        return self.target.hessian(x)

    def fisher(self, rng_key, x):
        return self.target.fisher(rng_key, x)

    def per_example_loglik(self, x, batch):
        return self.target.per_example_loglik(x, batch)

    def curvature(self, name, rng_key, particles):
        return self.target.curvature(name, rng_key, particles)

    def postprocess(self, particles):
        return self.target.postprocess(particles)


def data_parallel(target: MinibatchTarget, mesh: Mesh) -> DataParallelTarget:
    """``target`` with its dataset split over ``mesh`` and its scores summed across the devices.

    For models whose data, not particles, are large: the scores' cost is spread
    over the devices (``jax.shard_map``, a ``psum`` of ``n x d`` partial scores).
    Combine with ``svgd(mesh=mesh)`` to split the pairwise work too. The data are
    placed on the mesh here, once.

    Raises:
        TypeError: ``target`` is not a :class:`~steinax.targets.MinibatchTarget`, or ``mesh`` not a mesh.
        ValueError: the devices do not divide the number of examples ``N`` or the batch size ``B``.
    """
    if not isinstance(target, MinibatchTarget):
        raise TypeError("`target` must be a steinax.targets.MinibatchTarget (a prior, a per-example "
                        f"log-likelihood and data); received {type(target).__name__}")
    check_mesh(mesh)
    n_data, size = target.num_data, mesh.size
    if n_data % size:
        raise ValueError(f"the {size} devices of `mesh` do not divide the N = {n_data} examples of `target.data`; "
                         f"expected N to be a multiple of {size}")
    if target.batch_size is not None and target.batch_size < n_data and target.batch_size % size:
        raise ValueError(f"the {size} devices of `mesh` do not divide `batch_size` = {target.batch_size}; expected "
                         f"a multiple of {size} (each device draws batch_size / {size} of its own examples)")
    data = jax.tree_util.tree_map(lambda a: shard_particles(a, mesh), target.data)  # rows = examples
    return DataParallelTarget(eqx.tree_at(lambda t: t.data, target, data), mesh)
