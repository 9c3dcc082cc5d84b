"""The first ``sample_quality(spread=True, test=True)`` of a process: its wall time, and the time and count of
XLA compilations inside it (JAX's compile log), against a second call on other draws of the same shape.

    python benchmarks/bench_first_call.py [--n 1000] [--d 5]

A first call compiles every program it runs; most were small eager operations compiled one by one (134
compilations, 7.0 s of XLA at n = 1000, d = 5 before issue 47). Run it at two commits on the same machine to compare.
"""

from __future__ import annotations

import argparse
import logging
import re
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--d", type=int, default=5)
    a = p.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from steinax.diagnostics import sample_quality

    compiled = []

    class Log(logging.Handler):
        def emit(self, record):
            m = re.match(r"Finished XLA compilation of (.*) in ([0-9.e-]+) sec", record.getMessage())
            if m:
                compiled.append(float(m.group(2)))

    logging.getLogger("jax").addHandler(Log())
    logging.getLogger("jax").setLevel(logging.DEBUG)
    jax.config.update("jax_log_compiles", True)
    for h in logging.getLogger("jax").handlers:  # keep the log's own lines off the terminal
        if not isinstance(h, Log):
            h.setLevel(logging.CRITICAL)
    rng = np.random.default_rng(0)
    logp = lambda z: -0.5 * jnp.sum(z**2)  # noqa: E731
    print(f"jax {jax.__version__} on {jax.default_backend()}; sample_quality(spread=True, test=True) on "
          f"{a.n} draws of N(0, I_{a.d}), float32")
    for label in ("first call", "second call"):
        x = rng.normal(size=(a.n, a.d)).astype(np.float32)
        before = len(compiled)
        t0 = time.perf_counter()
        sample_quality(x, logp, spread=True, test=True, rng_key=jax.random.key(0))
        wall = time.perf_counter() - t0
        print(f"{label}: {wall:.1f} s wall; {len(compiled) - before} XLA compilations, "
              f"{sum(compiled[before:]):.1f} s", flush=True)


if __name__ == "__main__":
    main()
