"""Run by tests/sharding/test_sharding.py in fresh processes (its device count is fixed at JAX's start).

    python worker.py single OUT              # 4 CPU devices, one process: unsharded vs sharded
    python worker.py multi OUT PORT RANK     # one of two processes (2 CPU devices each) of a jax.distributed run
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax

N, D, STEPS = 64, 3, 6


def logp(x):
    return -0.5 * jnp.sum((x - 1.0) ** 2) - 0.1 * jnp.sum(x**4)


def start():
    return jax.random.normal(jax.random.key(0), (N, D))


def run(method):
    return steinax.run(method, logp, start(), steps=STEPS, optimizer=optax.sgd(0.1), rng_key=jax.random.key(1),
                       trace_every=1)


def save(out, res):
    np.savez(out, particles=steinax.sharding.gather(res.particles), ksd=np.asarray(res.trace.ksd),
             bandwidth=np.asarray(res.trace.method["bandwidth"]))


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "single":
        assert jax.device_count() == 4, jax.devices()
        mesh = steinax.sharding.particle_mesh()
        ref = run(steinax.svgd())
        for name, method in [("sharded", steinax.svgd(mesh=mesh)), ("sharded_blocked", steinax.svgd(mesh=mesh, block_size=5))]:
            res = run(method)
            spec = res.particles.sharding.spec
            assert tuple(spec)[:1] == ("particles",), spec  # the particles stay sharded
            save(f"{out}_{name}.npz", res)
        save(f"{out}_ref.npz", ref)
        # the exact median inside shard_map equals the unsharded one bit for bit
        x = jax.random.normal(jax.random.key(3), (400, 5))
        # the same distances (blocks of 7 rows; other block shapes round the products differently)
        want = steinax.kernels.median_bandwidth(x, "liu", block_size=7)
        spec = steinax.sharding.particle_spec(mesh)
        got = jax.shard_map(
            lambda xl: steinax.kernels.median_bandwidth(jax.lax.all_gather(xl, "particles", tiled=True), "liu",
                                                        block_size=7, axis_name="particles"),
            mesh=mesh, in_specs=spec, out_specs=jax.sharding.PartitionSpec(), check_vma=False)(x)
        np.savez(f"{out}_median.npz", want=np.asarray(want), got=np.asarray(got))
    else:
        port, rank = sys.argv[3], int(sys.argv[4])
        jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=rank,
                                   local_device_ids=None)
        assert jax.process_count() == 2 and jax.device_count() == 4, (jax.process_count(), jax.devices())
        res = run(steinax.svgd(mesh=steinax.sharding.distributed_mesh()))
        save(f"{out}_rank{rank}.npz", res)
        jax.distributed.shutdown()
