"""What the yardstick's GPU rows should show, estimated before a device is lent (issue 58): the cost of one
sequential step of ``steinax.sample``'s chains and of NUTS's, from flop counts measured here, and the wall time to
b2(x^2) < 0.01 they imply on an H100.

    python experiments/posteriors/gpu_estimate.py [--posteriors NAME ...] [--chains 1024 4096]
        [--yardstick DIR] [--out DIR]

**Measured (on this machine's CPU):** XLA's own flop count (``compiled.cost_analysis()["flops"]``) of one batched
value-and-gradient of each posterior's log-density at 1, 1024 and 4096 points, in float64, as the correction's
leapfrog step makes it; and the sequential steps each sampler needed to b2(x^2) < 0.01 in the yardstick's rows at
256 chains (``--yardstick``, ``sequential_to_x2_max``: leapfrog steps one after another, tuning included).

**Assumed (stated, not measured):** an H100's float64 throughput, 50 TFLOP/s (the tensor-core peak is 67, the
vector peak 34: 50 is between); and a floor per sequential step, the time a compiled step takes however little it
computes (kernel launches and a loop iteration on the device), 30 microseconds (measured GPUs run a fused
leapfrog step of a small model in 10-100). A step costs ``max(flops / throughput, floor)``.

**The estimate:** wall ~ sequential steps x step cost. NUTS (4 chains) is floor-bound on every posterior here; a
step of ``sample``'s chains stays floor-bound until ``chains x flops per point`` passes 1.5 GFLOP. The sequential
steps are those at 256 chains: with more chains the ESS the stop rule asks for is reached in fewer transitions, so
the estimate is an upper bound for ``sample`` at 1024 and 4096. Compilation is apart (about as on a CPU). The
prepared command that measures all of it on a device is in docs/yardstick.md and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np

from steinax._io import atomic_write_text, read_rows

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically

HERE = os.path.dirname(os.path.abspath(__file__))
THROUGHPUT = 50e12
"""Float64 flop/s assumed for an H100 (module docstring)."""
FLOOR = 30e-6
"""Seconds assumed per sequential step however little it computes (module docstring)."""
DEFAULT = ("lake_huron_trend", "german_logistic", "pima_logistic", "eight_schools_noncentered", "gp_classification",
           "mcycle_gp", "stochastic_volatility")


def gradient_flops(target, dim: int, points: int) -> float:
    """XLA's flop count of one value-and-gradient of ``target`` at ``points`` points in float64 (compiled here)."""
    x = jax.ShapeDtypeStruct((points, dim), np.float64)
    fn = jax.jit(jax.vmap(jax.value_and_grad(target.logdensity)))
    cost = fn.lower(x).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", np.nan))


def step_seconds(flops: float) -> float:
    """One sequential step's estimated seconds (module docstring)."""
    return max(flops / THROUGHPUT, FLOOR)


def main(argv=None):
    from steinax.posteriors import NAMES, get

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(DEFAULT), choices=list(NAMES))
    p.add_argument("--chains", nargs="+", type=int, default=[1024, 4096])
    p.add_argument("--yardstick", default=os.path.join(HERE, "results", "yardstick_issue58"),
                   help="the yardstick's results (its rows at 256 chains give the sequential steps)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "gpu_estimate"))
    a = p.parse_args(argv)
    banner("GPU estimate: step cost from CPU flop counts (float64)",
           {"posteriors": len(a.posteriors), "chains": a.chains, "assumed throughput": f"{THROUGHPUT / 1e12:g} TFLOP/s",
            "assumed floor": f"{FLOOR * 1e6:g} us per sequential step", "yardstick": a.yardstick,
            "devices": jax.devices()})
    rows = read_rows(os.path.join(a.yardstick, "results.csv"))
    seq = {(r["posterior"], r["sampler"]): float(r["sequential_to_x2_max"] or "nan") for r in rows
           if r["chains"] == "256" and r.get("sequential_to_x2_max") not in (None, "")}
    head = ("| posterior | d | flops per point | " + " | ".join(f"step at {c} chains (us)" for c in a.chains)
            + " | sequential steps sample / NUTS | " + " | ".join(f"wall sample at {c} (s)" for c in a.chains)
            + " | wall NUTS, 4 chains (s) |")
    lines = [head, "|---|---|---|" + "---|" * (2 * len(a.chains) + 2)]
    table = []
    with jax.enable_x64(True):
        for name in a.posteriors:
            post = get(name)
            per_point = gradient_flops(post.target, post.dim, 1)
            steps = {c: step_seconds(gradient_flops(post.target, post.dim, c)) for c in a.chains}
            nuts_step = step_seconds(gradient_flops(post.target, post.dim, 4))
            s_seq, n_seq = seq.get((name, "steinax.sample"), np.nan), seq.get((name, "numpyro_nuts"), np.nan)
            lines.append(f"| {name} | {post.dim} | {per_point:.3g} | "
                         + " | ".join(f"{steps[c] * 1e6:.0f}" for c in a.chains)
                         + f" | {s_seq:,.0f} / {n_seq:,.0f} | "
                         + " | ".join(f"{s_seq * steps[c]:.2g}" for c in a.chains) + f" | {n_seq * nuts_step:.2g} |")
            print(lines[-1], flush=True)
            table.append({"posterior": name, "d": post.dim, "flops_per_point": per_point,
                          **{f"step_us_{c}": steps[c] * 1e6 for c in a.chains}, "sequential_sample": s_seq,
                          "sequential_nuts": n_seq, **{f"wall_sample_{c}": s_seq * steps[c] for c in a.chains},
                          "wall_nuts": n_seq * nuts_step})
    write_csv_atomically(os.path.join(a.out, "gpu_estimate.csv"), table)
    figure(table, a.chains, os.path.join(a.out, "gpu_estimate.png"))
    text = ("Estimated, not measured (experiments/posteriors/gpu_estimate.py): flop counts are XLA's on this CPU; "
            f"throughput {THROUGHPUT / 1e12:g} TFLOP/s and a floor of {FLOOR * 1e6:g} us per sequential step are "
            "assumed; sequential steps to b2(x^2) < 0.01 are the yardstick's at 256 chains ('nan': not reached).\n\n"
            + "\n".join(lines) + "\n")
    atomic_write_text(os.path.join(a.out, "summary.md"), text)
    print(text)
    return 0


def figure(table, chains, path: str) -> None:
    """Estimated seconds to b2(x^2) < 0.01 on an H100 (log scale), ``sample`` at each chain count beside NUTS."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(table) + 1.5))
    y = np.arange(len(table))
    bars = [(f"steinax.sample, {c} chains", [r[f"wall_sample_{c}"] for r in table]) for c in chains]
    bars.append(("NumPyro NUTS, 4 chains", [r["wall_nuts"] for r in table]))
    h = 0.8 / len(bars)
    for k, (label, values) in enumerate(bars):
        ax.barh(y + k * h - 0.4 + h / 2, values, height=h, label=label)
    ax.set_xscale("log")
    ax.set_yticks(y, [r["posterior"] for r in table])
    ax.set_xlabel("estimated seconds to b2(x^2) < 0.01 on an H100 (compilation apart)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    raise SystemExit(main())
