"""Run by tests/sharding/test_sharding.py in fresh processes (its device count is fixed at JAX's start).

    python worker.py single OUT              # 4 CPU devices, one process: unsharded vs sharded
    python worker.py multi OUT PORT RANK     # one of two processes (2 CPU devices each) of a jax.distributed run
    python worker.py data OUT                # 4 CPU devices: data-parallel minibatch scores
    python worker.py sample OUT              # 4 CPU devices: steinax.sample unsharded vs over a mesh
    python worker.py sample_multi OUT PORT RANK  # one of two processes running steinax.sample over their mesh
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
    np.savez(out, particles=steinax.runtime.sharding.gather(res.particles), ksd=np.asarray(res.trace.ksd),
             bandwidth=np.asarray(res.trace.method["bandwidth"]))


def data_parallel(out):
    """Scores of a regression model with its 64 examples split over 4 devices, against the unsplit target."""
    from steinax.targets import MinibatchTarget

    mesh = steinax.runtime.sharding.particle_mesh()
    k1, k2 = jax.random.split(jax.random.key(5))
    features = jax.random.normal(k1, (64, D))
    y = features @ jnp.array([1.0, -2.0, 0.5]) + 0.1 * jax.random.normal(k2, (64,))

    def loglik(w, example):
        return -0.5 * (example[0] - example[1] @ w) ** 2

    def logprior(w):
        return -0.5 * jnp.sum(w * w)

    full = MinibatchTarget(logprior, loglik, (y, features))
    split = steinax.runtime.sharding.data_parallel(full, mesh)
    x = jax.random.normal(jax.random.key(1), (8, D))
    want = full.evaluate(jax.random.key(0), x)
    got = jax.jit(lambda k, p: split.evaluate(k, p))(jax.random.key(0), x)
    # minibatches of 16 (4 per device): the mean over many draws estimates the full score
    mini = steinax.runtime.sharding.data_parallel(MinibatchTarget(logprior, loglik, (y, features), batch_size=16), mesh)
    draws = jax.jit(jax.vmap(lambda k, p: mini.evaluate(k, p)[1], in_axes=(0, None)))(
        jax.random.split(jax.random.key(2), 4000), x)
    errors = []
    for bad in (MinibatchTarget(logprior, loglik, (y, features), batch_size=10),  # 4 does not divide B
                MinibatchTarget(logprior, loglik, (y[:62], features[:62]))):  # nor N
        try:
            steinax.runtime.sharding.data_parallel(bad, mesh)
        except ValueError as exc:
            errors.append(str(exc))
    x0 = jax.random.normal(jax.random.key(3), (16, D))
    args = dict(steps=STEPS, optimizer=optax.sgd(1e-2), rng_key=jax.random.key(4), trace_every=1)
    res = steinax.run(steinax.svgd(mesh=mesh), split, x0, **args)
    ref = steinax.run(steinax.svgd(), full, x0, **args)
    np.savez(out, want_logp=np.asarray(want[0]), got_logp=np.asarray(got[0]), want=np.asarray(want[1]),
             got=np.asarray(got[1]), draw_mean=np.asarray(draws.mean(0)), draw_sd=np.asarray(draws.std(0)),
             n_draws=draws.shape[0], errors=np.asarray(errors), run=steinax.runtime.sharding.gather(res.particles), run_ref=np.asarray(ref.particles))


def sample_gaussian(mesh, particles):
    """``steinax.sample`` on a correlated Gaussian in float64, short correction, over ``mesh`` or one device."""
    from steinax.pipeline import HMCCorrection
    from steinax.targets import Gaussian

    jax.config.update("jax_enable_x64", True)
    target = Gaussian(jnp.array([3.0, -1.0, 0.5]), jnp.array([[4.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 0.01]]))
    init = jax.random.normal(jax.random.key(3), (32, 3), jnp.float64)
    res = steinax.sample(target, rng_key=jax.random.key(0), init=init, particles=particles, progress=False, mesh=mesh,
                         corrector=HMCCorrection(warmup=60, round_steps=20, max_steps=60, min_ess=50))
    return res


def save_sample(out, res):
    np.savez(out, chains=np.asarray(res.chains), particles=np.asarray(res.particles),
             step_size=res.stages["correction"]["step_size"], steps=res.stages["correction"]["steps"],
             grads=res.gradient_evaluations["total"], chain_count=res.chains.shape[0],
             devices=res.stages["correction"]["devices"])


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "sample":
        assert jax.device_count() == 4, jax.devices()
        mesh = steinax.runtime.sharding.particle_mesh()
        for particles in (True, False):  # with the particle stage, and skipped (fewer chains, a multiple of 4)
            tag = "particles" if particles else "skipped"
            save_sample(f"{out}_{tag}_ref.npz", sample_gaussian(None, particles))
            save_sample(f"{out}_{tag}_mesh.npz", sample_gaussian(mesh, particles))
    elif mode == "sample_multi":
        port, rank = sys.argv[3], int(sys.argv[4])
        jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=rank,
                                   local_device_ids=None)
        save_sample(f"{out}_rank{rank}.npz",
                    sample_gaussian(steinax.runtime.sharding.distributed_mesh(), True))
        jax.distributed.shutdown()
    elif mode == "data":
        assert jax.device_count() == 4, jax.devices()
        data_parallel(out)
    elif mode == "single":
        assert jax.device_count() == 4, jax.devices()
        mesh = steinax.runtime.sharding.particle_mesh()
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
        spec = steinax.runtime.sharding.particle_spec(mesh)
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
        res = run(steinax.svgd(mesh=steinax.runtime.sharding.distributed_mesh()))
        save(f"{out}_rank{rank}.npz", res)
        jax.distributed.shutdown()
