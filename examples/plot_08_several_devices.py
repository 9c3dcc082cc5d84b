"""
# One run on several devices

Give a method a mesh and its particles are split along n over the mesh's devices; the same
code runs on one machine's devices and, after `jax.distributed.initialize`, across processes.
The documentation is built with four CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=4`, set by `docs/hooks.py` before JAX
starts); on one device the mesh has one device. The two runs agree to float32 rounding, which
200 steps amplify a little (the sharded sums run in another order); on a multimodal target, a
particle near a saddle can then settle in another mode, so compare on a unimodal one. The median
bandwidth is an order statistic: a rounding-level difference can change which pair of particles
defines it, and the two runs then drift apart particle by particle (here by a few hundredths in
means and sds after 200 steps, before the particles have settled). Forced CPU devices share one
machine's cores: the split pays off on accelerators, not here. The exact median bandwidth across
devices (a selection over the sharded pairwise distances, every step) costs most of the sharded
step on CPU devices; with a fixed bandwidth the sharded run costs about what one device's does.
"""

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax.runtime.sharding import particle_mesh


def logdensity(x):
    return -0.5 * jnp.sum(x**2) - 0.1 * jnp.sum(x**4)


mesh = particle_mesh()
print(f"devices: {len(jax.devices())} ({jax.devices()[0].platform})")
x0 = jax.random.normal(jax.random.key(0), (512, 10)) + 2.0
for label, kernel in (("median bandwidth", steinax.RBF("liu")), ("fixed bandwidth h = 1", steinax.RBF(1.0))):
    out = {}
    for name, method in (("one device", steinax.svgd(kernel=kernel)),
                         (f"{len(jax.devices())} devices", steinax.svgd(kernel=kernel, mesh=mesh))):
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # 200 steps time the layouts; they are not meant to settle (said below)
            warnings.simplefilter("ignore", steinax.ConvergenceWarning)
            res = steinax.run(method, logdensity, x0, steps=200, optimizer=steinax.adagrad_momentum(0.05),
                              rng_key=jax.random.key(1))
        out[name] = np.asarray(res.particles)
        print(f"{label}, {name:>10}: {time.perf_counter() - t0:5.1f} s (compilation included); settled: "
              f"{res.converged} (200 steps compare the layouts, not a converged run)")
    a, b = out.values()
    print(f"{label}: largest difference between the runs' particles {np.abs(a - b).max():.1e}, between their "
          f"means {np.abs(a.mean(0) - b.mean(0)).max():.1e}, between their sds {np.abs(a.std(0) - b.std(0)).max():.1e}")
