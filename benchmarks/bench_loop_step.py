"""The cost of a step of ``steinax.run`` (SVGD, the whole loop: trace, progress and Ctrl-C hooks included), this
checkout against another commit, on the same machine in the same benchmark run.

    python benchmarks/bench_loop_step.py --against HEAD~1 [--n 1000] [--d 100] [--steps 300] [--rounds 4]

The other commit is checked out with ``git worktree`` into a temporary folder. Each round runs one child process per
version, alternately (the order flips every round), so a slow period of the shared machine falls on both alike. A
child compiles once (a first run), then times ``--repeats`` runs of ``--steps`` steps from the same particles and
prints the median wall time per step; the parent prints every round and the ratio of the medians (this checkout over
the other: below 1 is faster). Target ``N(0, I_d)``, Adam 0.05, float32, the default trace spacing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def child(a) -> None:
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    import steinax

    def logp(x):
        return -0.5 * jnp.sum(x * x)

    x0 = jax.random.normal(jax.random.key(0), (a.n, a.d))
    opt = optax.adam(0.05)

    def once():
        t0 = time.perf_counter()
        res = steinax.run(steinax.svgd(), logp, x0, steps=a.steps, optimizer=opt, rng_key=jax.random.key(1),
                          progress=False)
        jax.block_until_ready(res.particles)
        return time.perf_counter() - t0

    import warnings

    warnings.simplefilter("ignore")  # a fixed-length run's settling verdict is not what is timed
    once()  # compile
    times = [once() / a.steps for _ in range(a.repeats)]
    print(json.dumps({"ms_per_step": 1e3 * float(np.median(times)), "steinax": os.path.dirname(steinax.__file__)}))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--against", default="HEAD~1", help="the other commit (any git revision)")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child(a)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", a.against], check=True, capture_output=True,
                         text=True).stdout.strip()
    here = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "src"], capture_output=True,
                           text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        other = os.path.join(tmp, "other")
        subprocess.run(["git", "-C", root, "worktree", "add", "--detach", other, rev], check=True, capture_output=True)
        try:
            versions = {f"this checkout ({here}{' + changes' if dirty else ''})": os.path.join(root, "src"),
                        f"{a.against} ({rev})": os.path.join(other, "src")}
            print(f"SVGD through steinax.run: n = {a.n}, d = {a.d}, {a.steps} steps per run, median of {a.repeats} "
                  f"runs per child, {a.rounds} rounds (alternating order)", flush=True)
            ms = {name: [] for name in versions}
            for r in range(a.rounds):
                order = list(versions) if r % 2 == 0 else list(versions)[::-1]
                for name in order:
                    env = dict(os.environ, PYTHONPATH=versions[name])
                    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--n", str(a.n),
                                          "--d", str(a.d), "--steps", str(a.steps), "--repeats", str(a.repeats)],
                                         check=True, capture_output=True, text=True, env=env, cwd=tmp)
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                    assert got["steinax"].startswith(versions[name]), f"the child imported {got['steinax']}"
                    ms[name].append(got["ms_per_step"])
                    print(f"  round {r + 1}: {name}: {got['ms_per_step']:.3f} ms per step", flush=True)
        finally:
            subprocess.run(["git", "-C", root, "worktree", "remove", "--force", other], capture_output=True)
    import statistics

    (mine, theirs) = (statistics.median(v) for v in ms.values())
    print(f"median ms per step: {mine:.3f} (this checkout), {theirs:.3f} ({a.against}); ratio "
          f"{mine / theirs:.3f} (below 1: this checkout is faster)")


if __name__ == "__main__":
    main()
