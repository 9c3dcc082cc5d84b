"""``steinax.sample`` against NumPyro NUTS (4 chains, 1000 warm-up + 1000 draws) on suite posteriors, in the same run:
gradient evaluations and wall time, first call and cached call (issue 58).

    python benchmarks/bench_sample_vs_nuts.py [--posteriors NAME ...] [--seed 0] [--x64] [--out FILE.csv]

Every run is a fresh Python process, as a user's script is, so every wall time includes compilation:

* ``sample first``: ``steinax.sample(target, rng_key=key(seed))`` with its defaults, JAX's persistent compilation
  cache on in an empty folder (:func:`steinax.enable_compilation_cache`: the first call writes it);
* ``sample cached``: the same call in a new process with that folder (a user's second run of the script);
* ``NUTS``: :func:`steinax.baselines.mcmc.nuts`, 4 chains from the model's initialiser, 1000 warm-up and 1000 kept
  draws each (NumPyro's defaults), no cache.

Printed per posterior: gradient evaluations of each and their ratio; wall seconds of the three and the ratios
``sample first / NUTS`` and ``sample cached / NUTS``; each answer's worst |mean error| (reference sds) and median sd
ratio; ``sample``'s ``ok`` and what its sizing chose (particle stage run or skipped, chains). Ratios below 1 are
where ``sample`` is cheaper. One seed; the suite table (``experiments/posteriors/sample_suite.py``) has 5.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

DEFAULT = ("lake_huron_trend", "challenger_binomial", "eight_schools_noncentered", "german_logistic", "pima_logistic",
           "faithful_mixture", "quine_negbin", "gp_classification")


def child(kind: str, name: str, seed: int, cache: str | None, x64: bool) -> dict:
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    import numpy as np

    import steinax
    from steinax.posteriors import get
    from steinax.posteriors.sampling import scores

    post = get(name)
    ref = post.reference()
    if kind == "sample":
        steinax.enable_compilation_cache(cache)
        t1 = time.perf_counter()
        res = steinax.sample(post.target, rng_key=jax.random.key(seed), progress=False)
        wall = time.perf_counter() - t1
        st = res.stages
        return {"grads": int(res.gradient_evaluations["total"]), "wall": wall, "ok": bool(res.ok),
                "particles": "skipped" if st.get("particles", {}).get("skipped") else "run",
                "chains": int(res.chains.shape[0]) if res.chains is not None else 0,
                "ledger": {k: int(v) for k, v in res.gradient_evaluations.items()},
                **scores(np.asarray(res.draws, np.float64), ref)}
    from steinax.baselines.mcmc import nuts

    init = getattr(post.target, "init_particles", None)
    key_init, key_run = jax.random.split(jax.random.key(seed))
    x0 = init(key_init, 4) if init is not None else post.init(key_init, 4)
    t1 = time.perf_counter()
    draws, info = nuts(post.target, x0, num_warmup=1000, num_samples=1000, rng_key=key_run, return_info=True)
    wall = time.perf_counter() - t1
    return {"grads": int(np.sum(np.asarray(info["num_steps"]))), "wall": wall,
            **scores(np.asarray(draws, np.float64).reshape(-1, post.dim), ref)}


def run_child(kind, name, seed, cache, x64) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--posteriors", name, "--seed", str(seed)]
    cmd += (["--cache", cache] if cache else []) + (["--x64"] if x64 else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        raise RuntimeError(f"{kind} on {name} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--posteriors", nargs="+", default=list(DEFAULT))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--x64", action="store_true", help="float64 (the suite's precision); default float32, a user's")
    p.add_argument("--out", default=None, help="also write the rows to this CSV")
    p.add_argument("--child", choices=("sample", "nuts"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.posteriors[0], a.seed, a.cache, a.x64)))
        return 0
    import jax

    print(f"steinax.sample against NumPyro NUTS (4 x (1000 + 1000)); seed {a.seed}; "
          f"{'float64' if a.x64 else 'float32'}; jax {jax.__version__} on {jax.default_backend()}, "
          f"{os.cpu_count()} CPUs visible; each run a fresh process, compilation included")
    head = (f"{'posterior':28s} {'grads sample':>12s} {'NUTS':>10s} {'ratio':>6s} | {'wall first':>10s} {'cached':>7s} "
            f"{'NUTS':>6s} {'first/N':>7s} {'cached/N':>8s} | {'err s':>6s} {'sd s':>5s} {'err N':>6s} {'sd N':>5s} "
            f"| ok  particles chains")
    print(head, flush=True)
    rows = []
    for name in a.posteriors:
        with tempfile.TemporaryDirectory(prefix="steinax-cache-") as cache:
            first = run_child("sample", name, a.seed, cache, a.x64)
            cached = run_child("sample", name, a.seed, cache, a.x64)
        ref = run_child("nuts", name, a.seed, None, a.x64)
        row = {"posterior": name, "seed": a.seed, "grads_sample": first["grads"], "grads_nuts": ref["grads"],
               "grads_ratio": first["grads"] / ref["grads"], "wall_first": first["wall"], "wall_cached": cached["wall"],
               "wall_nuts": ref["wall"], "first_over_nuts": first["wall"] / ref["wall"],
               "cached_over_nuts": cached["wall"] / ref["wall"], "err_sample": first["mean_error_max"],
               "sd_sample": first["sd_ratio_median"], "err_nuts": ref["mean_error_max"], "sd_nuts": ref["sd_ratio_median"],
               "ok": first["ok"], "particles": first["particles"], "chains": first["chains"],
               "ledger": json.dumps(first["ledger"])}
        rows.append(row)
        print(f"{name:28s} {row['grads_sample']:12,d} {row['grads_nuts']:10,d} {row['grads_ratio']:6.2f} | "
              f"{row['wall_first']:10.1f} {row['wall_cached']:7.1f} {row['wall_nuts']:6.1f} {row['first_over_nuts']:7.2f} "
              f"{row['cached_over_nuts']:8.2f} | {row['err_sample']:6.3f} {row['sd_sample']:5.2f} {row['err_nuts']:6.3f} "
              f"{row['sd_nuts']:5.2f} | {'yes' if row['ok'] else 'no ':3s} {row['particles']:9s} {row['chains']:6d}",
              flush=True)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
