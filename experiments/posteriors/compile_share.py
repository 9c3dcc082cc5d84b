"""Where the wall time goes (issue 49): ``steinax.sample`` and NumPyro NUTS on the same posterior, each in a fresh
process, wall time split into JAX's compilation (tracing, lowering and XLA's compile, from ``jax.monitoring``'s
duration events) and the rest (running the programs, and Python between them).

    python experiments/posteriors/compile_share.py [--posteriors NAME ...] [--seed 0] [--out DIR]

The suite's wall time counts compilation, as a user's first call pays it. On small posteriors ``steinax.sample``
compiles four to five programs (the warm start, the particle run, the hand-off's KSD, the correction's warm-up and
its sampling rounds), NUTS two; this script measures how much of each wall time that is, so the suite's wall-time
column can be read for what it is. Settings as the suite's: float64, 100 particles, defaults; NUTS with 4 chains,
1000 warm-up draws, blocks of 1000 until the minimum bulk ESS reaches 1000. Rows go to ``DIR/results.csv`` (a rerun
skips done rows); ``DIR/summary.md`` has the table and ``DIR/compile_share.png`` the bars.
"""

import argparse
import os
import subprocess
import sys
import time

import jax
import numpy as np

from steinax._io import append_row, atomic_write_text, check_output, read_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure

DEFAULT = ("german_logistic", "gp_classification", "eight_schools_centered", "eight_schools_noncentered",
           "lake_huron_trend", "mtcars_regression")
METHODS = ("sample", "nuts")
FIELDS = ("posterior", "d", "seed", "method", "wall_s", "compile_s", "run_s", "programs", "mean_error_max")
KEY = ("posterior", "seed", "method")
HERE = os.path.dirname(os.path.abspath(__file__))


def measure(name: str, method: str, seed: int) -> dict:
    """One call of ``method`` on posterior ``name`` in this process (as the suite makes it): its wall time, the part
    JAX spent compiling during it, and the number of XLA programs compiled (eager operations' small ones included);
    loading the posterior and scoring the draws are outside."""
    import steinax
    from steinax.baselines.mcmc import nuts
    from steinax.posteriors.sampling import compile_seconds
    from steinax.posteriors import get

    post = get(name)
    ref = post.reference()
    key = jax.random.key(seed)
    with compile_seconds() as compiled:  # the one listener (steinax.posteriors.sampling)
        t0 = time.perf_counter()
        if method == "sample":
            draws = steinax.sample(post.target, rng_key=key, num_particles=100, progress=False).draws
        else:  # as steinax.posteriors.sampling.nuts_row
            key_init, key_run = jax.random.split(key)
            init = getattr(post.target, "init_particles", None)
            x0 = init(key_init, 4) if init is not None else post.init(key_init, 4)
            draws = nuts(post.target, x0, num_warmup=1000, num_samples=1000, rng_key=key_run, min_ess=1000.0)
        draws = np.asarray(draws, np.float64).reshape(-1, post.dim)
        wall = time.perf_counter() - t0
    error = float(np.max(np.abs(draws.mean(0) - ref.mean) / ref.sd))
    return {"posterior": name, "d": post.dim, "seed": seed, "method": method, "wall_s": round(wall, 2),
            "compile_s": round(compiled["seconds"], 2), "run_s": round(wall - compiled["seconds"], 2),
            "programs": compiled["programs"], "mean_error_max": error}


def summary(rows) -> str:
    lines = [("| posterior | d | sample: wall / compile / rest (s), programs | NUTS: wall / compile / rest (s), programs "
             "| wall, sample / NUTS | rest, sample / NUTS |"), "|---|---|---|---|---|---|"]
    by = {(r["posterior"], r["method"]): r for r in rows}
    for name in dict.fromkeys(r["posterior"] for r in rows):
        s, n = by.get((name, "sample")), by.get((name, "nuts"))
        if s is None or n is None:
            continue
        cell = lambda r: f"{float(r['wall_s']):.1f} / {float(r['compile_s']):.1f} / {float(r['run_s']):.1f}, {r['programs']}"
        lines.append(f"| {name} | {s['d']} | {cell(s)} | {cell(n)} | {float(s['wall_s']) / float(n['wall_s']):.2f} | "
                     f"{float(s['run_s']) / float(n['run_s']):.2f} |")
    return "\n".join(lines) + "\n"


def figure(rows, path: str) -> None:
    """Stacked bars per posterior and method: compilation, then the rest."""
    plt = pyplot()
    labels = [f"{r['posterior']} / {'NUTS' if r['method'] == 'nuts' else 'sample'}" for r in rows]
    compile_s = [float(r["compile_s"]) for r in rows]
    rest = [float(r["run_s"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1.2))
    ax.barh(labels, compile_s, color="tab:gray", label="compilation")
    ax.barh(labels, rest, left=compile_s, color="tab:blue", label="the rest")
    ax.invert_yaxis()
    ax.set_xlabel("wall time of a first call (s), one core, float64")
    ax.legend(loc="lower right")
    fig.tight_layout()
    save_figure(fig, path)


def main(argv=None):
    from steinax.posteriors import NAMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posteriors", nargs="+", default=list(DEFAULT), choices=NAMES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "compile_share"))
    parser.add_argument("--one", nargs=2, metavar=("POSTERIOR", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = os.path.join(args.out, "results.csv")
    if args.one:  # a process of its own: 64-bit throughout, as the suite's runs
        jax.config.update("jax_enable_x64", True)
        append_row(path, measure(args.one[0], args.one[1], args.seed), FIELDS, KEY)
        return
    check_output(path)
    banner("steinax.sample and NUTS: wall time split into compilation and the rest (float64)",
           {"posteriors": len(args.posteriors), "seed": args.seed, "out": args.out, "devices": jax.devices()})
    done = {(r["posterior"], r["method"]) for r in read_rows(path) if int(r["seed"]) == args.seed}
    for name in args.posteriors:
        for method in METHODS:
            if (name, method) in done:
                continue
            subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, method, "--seed", str(args.seed),
                            "--out", args.out], check=True)
            row = [r for r in read_rows(path) if (r["posterior"], r["method"], int(r["seed"])) == (name, method, args.seed)][-1]
            print(f"{name:26s} {method:7s} wall {row['wall_s']:>7s} s, compile {row['compile_s']:>6s} s "
                  f"({row['programs']} programs), rest {row['run_s']:>7s} s, err {float(row['mean_error_max']):.3f} sd")
    rows = [r for r in read_rows(path) if int(r["seed"]) == args.seed]
    table = summary(rows)
    atomic_write_text(os.path.join(args.out, "summary.md"), table)
    figure(rows, os.path.join(args.out, "compile_share.png"))
    print(table)
    return np.asarray([float(r["wall_s"]) for r in rows])


if __name__ == "__main__":
    main()
