"""A fixed set of runs whose particles and traces are stored and compared, bit for bit, across changes of the loop.

``python tests/particles/loop_regression.py OUT.npz`` runs every case below and writes their arrays to ``OUT.npz``
(with the machine and versions that computed them); ``tests/particles/test_loop_regression.py`` runs it in a fresh
process and compares with ``tests/data/loop_regression.npz``, written by the commit before the run loop was split into
parts (issue 48). The cases cover each method, fixed length and run-until-settled, a checkpointed run and its
extension, an interrupted-and-resumed state, the init/step pair, and a run sharded over 4 CPU devices. The process
needs ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (the test sets it) and XLA's default optimisation level.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax


NARROW_SD = 0.0005  # the sd of the narrow target whose run until settled halves the step


def logp(x):
    """A correlated, mildly non-Gaussian 2-D target (a banana with a Gaussian base)."""
    return -0.5 * (x[0] ** 2 / 4.0 + (x[1] - 0.3 * x[0] ** 2 + 1.0) ** 2)


def _methods():
    return {
        "svgd": steinax.svgd(),
        "mk_svgd": steinax.mk_svgd(),
        "cc_svgd": steinax.cc_svgd(),
        "matrix_average": steinax.matrix_svgd("hessian", "average"),
        "matrix_mixture": steinax.matrix_svgd("hessian", "mixture"),
        "svn": steinax.svn(),
        "sliced_svgd": steinax.sliced_svgd(),
        "annealed_svgd": steinax.annealed_svgd(anneal_steps=60, cycles=2),
        "map_ascent": steinax.map_ascent(),
    }


def _arrays(prefix, result, out):
    """The result's particles, trace, state and verdict into ``out`` under ``prefix``."""
    out[prefix + "/particles"] = np.asarray(result.particles)
    for i, leaf in enumerate(jax.tree_util.tree_leaves(result.trace)):
        out[f"{prefix}/trace/{i}"] = np.asarray(leaf)
    for i, leaf in enumerate(jax.tree_util.tree_leaves(result.state.opt_state)):
        out[f"{prefix}/opt_state/{i}"] = np.asarray(leaf)
    for i, leaf in enumerate(jax.tree_util.tree_leaves(result.state.aux)):
        out[f"{prefix}/aux/{i}"] = np.asarray(leaf)
    out[prefix + "/step"] = np.asarray(result.state.step)
    out[prefix + "/converged"] = np.asarray(-1 if result.converged is None else int(result.converged))
    out[prefix + "/delta"] = np.asarray((result.convergence or {}).get("delta", np.nan), np.float64)
    out[prefix + "/learning_rate"] = np.asarray((result.convergence or {}).get("learning_rate") or np.nan, np.float64)


def cases() -> dict:
    """Every case's arrays, keyed ``case/field``."""
    out = {}
    key = jax.random.key(20261128)
    x0 = jax.random.normal(jax.random.key(1), (24, 2))
    warnings.simplefilter("ignore")  # an unsettled short run warns; the arrays are what is compared
    for name, method in _methods().items():
        opt = optax.sgd(0.05) if name == "map_ascent" else None
        _arrays(f"fixed/{name}", steinax.run(method, logp, x0, steps=150, rng_key=key, trace_every=10,
                                             optimizer=opt), out)
    for name in ("svgd", "svn"):
        _arrays(f"settle/{name}", steinax.run(_methods()[name], logp, x0, steps=None, rng_key=key), out)
    # a run until settled whose segments plateau, so that the step is halved (per segment, on its own trace)
    narrow = lambda x: -0.5 * jnp.sum(x * x) / NARROW_SD**2  # noqa: E731
    _arrays("settle/svgd_halving", steinax.run(steinax.svgd(), narrow, x0 * 0.01, steps=None, rng_key=key), out)
    _arrays("fixed/svgd_adagrad", steinax.run(steinax.svgd(), logp, x0, steps=150, rng_key=key,
                                              optimizer=steinax.adagrad_momentum(0.1)), out)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.npz")
        _arrays("checkpoint/first", steinax.run(steinax.svgd(), logp, x0, steps=100, rng_key=key, trace_every=10,
                                                checkpoint=path, checkpoint_every=50), out)
        _arrays("checkpoint/extended", steinax.run(steinax.svgd(), logp, x0, steps=150, rng_key=key,
                                                   checkpoint=path, checkpoint_every=50), out)
    half = steinax.run(steinax.mk_svgd(), logp, x0, steps=70, rng_key=key, trace_every=10)
    _arrays("resume/mk_svgd", steinax.run(steinax.mk_svgd(), logp, steps=80, rng_key=key, trace_every=10,
                                          initial_state=half.state), out)
    algo = steinax.sampling_algorithm(steinax.svgd(), logp, optax.adam(0.05))
    state = algo.init(x0)
    step = jax.jit(algo.step)
    for t in range(50):
        state, _ = step(jax.random.fold_in(key, t), state)
    out["algorithm/svgd/particles"] = np.asarray(state.particles)
    if len(jax.devices()) >= 4:
        mesh = steinax.sharding.particle_mesh(jax.devices()[:4])  # the old path: runs on the pre-split source too
        _arrays("sharded/svgd", steinax.run(steinax.svgd(mesh=mesh), logp, x0, steps=150, rng_key=key,
                                            trace_every=10), out)
    return out


def machine() -> str:
    """What the stored bits depend on besides the code: the CPU, JAX's version, the flags."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            info = fh.read().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
        flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
        cpu += " [" + " ".join(sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))) + "]"
    except OSError:
        pass
    return (f"{cpu} | jax {jax.__version__} | jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else ''}"
            f" | XLA_FLAGS={os.environ.get('XLA_FLAGS', '')} | x64={jax.config.jax_enable_x64}")


if __name__ == "__main__":
    arrays = cases()
    arrays["machine"] = np.asarray(machine())
    np.savez(sys.argv[1], **arrays)
    print(f"{len(arrays) - 1} arrays written to {sys.argv[1]} on {machine()}")
