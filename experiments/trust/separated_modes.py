"""``steinax.sample`` on separated modes, from a narrow and a 10x wider start (issue 56).

    python experiments/trust/separated_modes.py [--cases half:0 half:1 tenth:0 tenth:1 three:0] [--spreads 1 10]
                                                [--particles 100] [--out DIR]

The targets (unit Gaussians in 2-D): ``half``, weights 0.5/0.5 at (0, 0) and (12, 0); ``tenth``, weights 0.1/0.9
there; ``three``, equal weights at (-8, 0), (0, 8), (8, 0). Each case ``name:seed`` runs ``steinax.sample`` (float64,
its defaults) from ``init = spread * N(0, I)`` drawn with key ``100 + seed``, sample key ``seed``. A row is **right**
when the draws' mean is within 0.2 sd (the mixture's per-coordinate sd) of the truth. The rule checked (issue 56):
from the wider start every row is right or ``ok=False``; from any start the message says what the warm start searched.
Prints each row with the optima found, ``ok``, the worst error in sds and the message.
"""

import argparse
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, barh_figure, write_csv_atomically  # noqa: E402

CASES = {"half": ([[0.0, 0.0], [12.0, 0.0]], [0.5, 0.5]),
         "tenth": ([[0.0, 0.0], [12.0, 0.0]], [0.1, 0.9]),
         "three": ([[-8.0, 0.0], [0.0, 8.0], [8.0, 0.0]], [1 / 3, 1 / 3, 1 / 3])}
RIGHT = 0.2
"""A row is right when every coordinate's mean is within this many of the mixture's sds of the truth."""


def target(name: str):
    from steinax.targets import GaussianMixture

    means, weights = CASES[name]
    return GaussianMixture(jnp.asarray(weights), jnp.asarray(means), jnp.stack([jnp.eye(2)] * len(weights)))


def run_case(name: str, seed: int, spread: float, particles: int = 100) -> dict:
    """One row (module docstring); float64 inside."""
    import steinax
    from steinax.posteriors.closed_form import moments

    with jax.enable_x64(True):
        tgt = target(name)
        mean, sd = moments(tgt)
        init = spread * jax.random.normal(jax.random.key(100 + seed), (particles, 2), jnp.float64)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = steinax.sample(tgt, rng_key=jax.random.key(seed), init=init, progress=False)
        err = float(np.max(np.abs(res.draws.mean(0) - mean) / sd))
        warm = res.stages["warm_start"]
        return {"case": name, "seed": seed, "spread": spread, "optima": len(warm.get("optima", ())), "ok": res.ok,
                "error_sd": err, "right": err <= RIGHT, "seconds": time.perf_counter() - t0, "message": res.message}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["half:0", "half:1", "tenth:0", "tenth:1", "three:0"])
    p.add_argument("--spreads", nargs="+", type=float, default=[1.0, 10.0])
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("steinax.sample on separated modes", {"cases": a.cases, "spreads": a.spreads, "particles": a.particles,
                                                 "right": f"mean within {RIGHT} sd", "dtype": "float64"})
    rows, broken = [], 0
    for spread in a.spreads:
        for case in a.cases:
            name, seed = case.split(":")
            row = run_case(name, int(seed), spread, a.particles)
            rows.append(row)
            broken += row["ok"] and not row["right"] and spread >= 10.0
            print(f"{name:6s} seed {seed} spread {spread:4g}: optima {row['optima']}  ok {row['ok']!s:5s}  "
                  f"error {row['error_sd']:.3f} sd  right {row['right']!s:5s}  {row['seconds']:.0f} s\n"
                  f"    {row['message']}", flush=True)
    print(f"ok with a wrong answer from the wider start: {broken}")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "separated_modes.csv"), rows)
    barh_figure(os.path.join(a.out, "separated_modes.png"),
                [f"{r['case']}:{r['seed']} x{r['spread']:g}" for r in rows], {"error": [r["error_sd"] for r in rows]},
                "worst error of the mean (sds); green: ok=True, gray: ok=False",
                colors=["tab:green" if r["ok"] else "tab:gray" for r in rows], xscale="symlog", line=RIGHT)
    return 0 if broken == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
