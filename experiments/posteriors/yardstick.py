"""Samplers measured as samplers are measured (issue 50): gradient evaluations, sequential gradient steps and wall
time until the squared bias of ``E[x^2]`` (worst coordinate, in units of ``Var[x^2]``) stays below 0.01, for
``steinax.sample`` and its peers, on the suite's posteriors, at 256 and 1024 chains (particles).

    python experiments/posteriors/yardstick.py [--posteriors NAME ...] [--chains 256 1024] [--samplers ...]
        [--seeds 1] [--steps 200] [--warmup 1000] [--timeout 1800] [--out DIR] [--summary-only]

Each (posterior, sampler, chains, seed) runs in a fresh process (compilation counted as a user's first call pays
it); its row goes to ``DIR/results.csv`` (a rerun skips done rows: resumable) and its trace to ``DIR/traces/``. The
caps, reported where hit: the MCMC peers run ``--warmup`` adaptation steps and ``--steps`` transitions (a cost not
reached within them is ``inf``); a run over ``--timeout`` seconds is stopped and its row says so. ``DIR/summary.md``
has the tables and the goal's counts; ``DIR/yardstick.png`` and ``DIR/yardstick_seconds.png`` the traces (squared
bias against gradient evaluations, and against seconds with compilation apart; tuning included; one panel per
posterior). Settings: :mod:`steinax.posteriors.yardstick.bench`; the trace's
conventions: :mod:`steinax.posteriors.yardstick.trace`.

The floor: ``c`` exact draws give a squared bias of about ``1 / c`` (0.004 at 256, 0.001 at 1024), so one transition
of converged chains is below 0.01 at both counts; the cost of reaching it is then mostly the tuning's.
"""

import argparse
import os
import re
import subprocess
import sys

import jax
import numpy as np

from steinax._io import append_row, atomic_write_text, check_output, read_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, save_npz_atomically

from steinax.posteriors.yardstick.bench import fmt_cost, harness_check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
from steinax.posteriors.yardstick.bench import KEY


def _trace_path(out, name, sampler, chains, seed) -> str:
    return os.path.join(out, "traces", f"{name}__{sampler}__{chains}__{seed}.npz")


def run_one(args, name, sampler, chains, seed, path) -> None:
    """In this process: the run, its row and its trace written."""
    from steinax.posteriors import get
    from steinax.posteriors.yardstick.bench import FIELDS, trace_row
    from steinax.posteriors.yardstick.bench import run_one as run

    trace = run(name, sampler, chains, seed, args.steps, args.warmup)
    append_row(path, trace_row(trace, name, get(name).dim, seed, args.steps, args.warmup,
                               note=str(trace.info.get("message", ""))[:200], chains=chains), FIELDS, KEY)
    t = trace.tuning
    keep = _log_spaced(len(trace.gradient_evaluations))  # for the figure; the row holds the exact costs
    save_npz_atomically(_trace_path(args.out, name, sampler, chains, seed),
                        {"gradient_evaluations": (trace.gradient_evaluations + t["gradient_evaluations"])[keep],
                         "sequential_steps": (trace.sequential_steps + t["sequential_steps"])[keep],
                         "seconds": (trace.seconds + t["seconds"])[keep],
                         **{k: v[keep] for k, v in trace.biases.items()}})


def _log_spaced(n: int, points: int = 300) -> np.ndarray:
    """At most ``points`` indices of ``range(n)``, log-spaced, the first and last included."""
    return np.unique(np.concatenate([np.geomspace(1, n, points).astype(int) - 1, [n - 1]]))


def unfinished_row(name, sampler, chains, seed, args, note: str) -> dict:
    """The row of a run that wrote none: stopped at the time cap, or failed (``note`` says which, and why)."""
    from steinax.posteriors import get

    inf = float("inf")
    return {"posterior": name, "d": get(name).dim, "chains": chains, "sampler": sampler, "seed": seed,
            "steps": args.steps, "warmup": args.warmup, **{k: inf for k in (
                "grads_to_x2_max", "grads_to_x2_mean", "grads_to_x_max", "sequential_to_x2_max", "seconds_to_x2_max",
                "chain_grads_to_x2_mean", "chain_grads_to_x2_max")},
            **{k: float("nan") for k in ("x2_max_end", "x2_mean_end", "chain_x2_max_end")},
            "note": note[:200]}


def particles_report(out, rows) -> str:
    """Where the particles help and where they only cost: for each ``steinax.sample`` run, the worst coordinate's
    b2(x) and b2(x^2) of the warm start's draws and of the particles (its first two checkpoints), and what the
    particle stage cost, from the stored traces. The verdict reads the worse of the two moments, so that particles
    that fix E[x^2] while putting the wrong weights on symmetric modes (which only b2(x) sees) are not called
    better."""
    lines = ["### Where the particles help: b2(x) / b2(x^2), worst coordinate, of the warm start and of the particles",
             "", "| posterior | chains | warm start | particles | particle stage (gradient evaluations / sequential) | "
             "verdict (the worse moment) |", "|---|---|---|---|---|---|"]
    better = worse = 0
    for r in rows:
        f = _trace_path(out, r["posterior"], r["sampler"], r["chains"], r["seed"])
        if r["sampler"] != "steinax.sample" or not os.path.exists(f):
            continue
        t = np.load(f)
        if len(t["x2_max"]) < 2:
            continue
        (wx, px), (w, p) = (t["x_max"][:2].astype(float), t["x2_max"][:2].astype(float))
        g = t["gradient_evaluations"][1] - t["gradient_evaluations"][0]
        q = t["sequential_steps"][1] - t["sequential_steps"][0]
        worse_w, worse_p = max(wx, w), max(px, p)
        verdict = "better" if worse_p < 0.5 * worse_w else "worse" if worse_p > 2 * worse_w else "about the same"
        better += verdict == "better"
        worse += verdict == "worse"
        lines.append(f"| {r['posterior']} | {r['chains']} | {wx:.2g} / {w:.2g} | {px:.2g} / {p:.2g} | "
                     f"{g:,.0f} / {q:,.0f} | {verdict} |")
    lines += ["", f"The particles improved on the warm start (the worse of b2(x) and b2(x^2) halved or better) on "
              f"{better} runs and made it worse (doubled or more) on {worse}; the correction starts from whichever "
              "the hand-off's KSD prefers."]
    return "\n".join(lines) + "\n" if len(lines) > 6 else ""


def figure(out, rows, path, x: str = "gradient_evaluations") -> None:
    """One panel per posterior: the worst coordinate's b2(x^2) against ``x`` (gradient evaluations or seconds,
    tuning included, compilation apart), every sampler; solid 256 chains or fewer, dashed more."""
    plt = pyplot()
    names = list(dict.fromkeys(r["posterior"] for r in rows))
    cols = min(4, max(1, len(names)))
    fig, axes = plt.subplots(-(-len(names) // cols), cols, figsize=(4 * cols, 3 * -(-len(names) // cols)),
                             squeeze=False)
    colours = {}
    for ax, name in zip(axes.flat, names):
        for r in rows:
            if r["posterior"] != name:
                continue
            f = _trace_path(out, name, r["sampler"], r["chains"], r["seed"])
            if not os.path.exists(f):
                continue
            t = np.load(f)
            colour = colours.setdefault(r["sampler"], f"C{len(colours)}")
            ax.loglog(np.maximum(t[x], 1e-3), t["x2_max"], color=colour, marker="o" if len(t[x]) == 1 else None, ls="-" if int(r["chains"]) <= 256 else "--",
                      label=f"{r['sampler']} ({r['chains']})" if int(r["seed"]) == 0 else None)
        ax.axhline(0.01, color="k", lw=0.8, ls=":")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel({"gradient_evaluations": "gradient evaluations (tuning included)",
                       "seconds": "seconds (tuning included, compilation apart)"}[x], fontsize=8)
        ax.set_ylabel("b2(x^2), worst coordinate", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    legend = {}
    for ax in axes.flat:  # every sampler once, whichever panel it first appears in
        for h, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, h)
    handles, labels = list(legend.values()), list(legend)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save_figure(fig, path)


def main(argv=None):
    from steinax.posteriors import NAMES
    from steinax.posteriors.yardstick.bench import SAMPLERS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(NAMES), choices=list(NAMES))
    p.add_argument("--chains", nargs="+", type=int, default=[256, 1024])
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=list(SAMPLERS))
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--steps", type=int, default=200, help="MCMC peers' transitions after adaptation (the cap)")
    p.add_argument("--warmup", type=int, default=1000, help="MCMC peers' adaptation steps (their documented default)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run before it is stopped and reported")
    p.add_argument("--out", default=os.path.join(HERE, "results", "yardstick"))
    p.add_argument("--summary-only", action="store_true")
    p.add_argument("--in-process", action="store_true", help="run every job in this process (no timeout)")
    p.add_argument("--one", nargs=4, metavar=("POSTERIOR", "SAMPLER", "CHAINS", "SEED"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    path = os.path.join(a.out, "results.csv")
    if a.one:
        run_one(a, a.one[0], a.one[1], int(a.one[2]), int(a.one[3]), path)
        return 0
    check_output(path)
    banner("The yardstick: cost to b2(x^2) < 0.01 (worst coordinate), steinax.sample and peers (float64)",
           {"posteriors": len(a.posteriors), "chains": a.chains, "samplers": a.samplers, "seeds": a.seeds,
            "MCMC peers": f"{a.warmup} adaptation steps, then {a.steps} transitions (the cap)",
            "timeout": f"{a.timeout} s per run", "out": a.out, "devices": jax.devices(),
            "matmul precision": jax.config.jax_default_matmul_precision or "JAX's default (float64 dots are float64; "
                                "float32 ones may use TF32 on a GPU)",
            "jax": jax.__version__})
    done = {tuple(str(r[k]) for k in KEY) for r in read_rows(path)}
    for name in ([] if a.summary_only else a.posteriors):
        for chains in a.chains:
            for sampler in a.samplers:
                for seed in range(a.seeds):
                    if (name, sampler, str(chains), str(seed)) in done:
                        continue
                    if a.in_process:
                        run_one(a, name, sampler, chains, seed, path)
                    else:
                        cmd = [sys.executable, os.path.abspath(__file__), "--one", name, sampler, str(chains),
                               str(seed), "--steps", str(a.steps), "--warmup", str(a.warmup), "--out", a.out]
                        from steinax.posteriors.yardstick.bench import FIELDS

                        try:
                            child = subprocess.run(cmd, check=False, timeout=a.timeout, stderr=subprocess.PIPE,
                                                   text=True)
                        except subprocess.TimeoutExpired:
                            append_row(path, unfinished_row(name, sampler, chains, seed, a,
                                                            f"stopped: over the {a.timeout} s cap"), FIELDS, KEY)
                        else:
                            if child.returncode != 0:  # a sampler that raises: its row says so, with the error
                                err = [ln for ln in child.stderr.splitlines() if ln.strip()]
                                print("\n".join(err[-15:]), file=sys.stderr)
                                raised = [ln for ln in err if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
                                why = (raised or err or [f"exit status {child.returncode}"])[-1]
                                append_row(path, unfinished_row(name, sampler, chains, seed, a, "failed: " + why),
                                           FIELDS, KEY)
                    row = [r for r in read_rows(path) if (r["posterior"], r["sampler"], r["chains"], r["seed"])
                           == (name, sampler, str(chains), str(seed))]
                    if row:
                        r = row[-1]
                        print(f"{name:26s} {sampler:15s} {chains:5d} seed {seed}: to 0.01 {fmt_cost(r['grads_to_x2_max'])} "
                              f"grads, {fmt_cost(r['sequential_to_x2_max'])} sequential, {r['seconds_to_x2_max']} s "
                              f"(compile {r['compile_seconds']} s); end b2 {float(r['x2_max_end']):.1e} "
                              f"{r['note'][:60]}", flush=True)
    rows = read_rows(path)
    text = (summary(rows, sorted({int(r["chains"]) for r in rows})) + "\n" + harness_check(rows) + "\n"
            + particles_report(a.out, rows))
    atomic_write_text(os.path.join(a.out, "summary.md"), text)
    figure(a.out, rows, os.path.join(a.out, "yardstick.png"))
    figure(a.out, rows, os.path.join(a.out, "yardstick_seconds.png"), x="seconds")
    print(text)
    return 0


if __name__ == "__main__":
    main()
