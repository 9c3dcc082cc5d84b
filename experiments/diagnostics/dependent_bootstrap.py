"""Level of the KSD goodness-of-fit test on autocorrelated chains: i.i.d. vs dependent wild bootstrap.

Setting: target p = N(0, I_d); each replication draws ``chains`` stationary
AR(1) chains ``x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t`` (``x_0 ~ p``,
``e_t ~ N(0, I)``), whose stationary law is exactly p, so H0 holds and every
rejection is a false one. Each data set is tested twice with the squared KSD
(IMQ(1, -1/2), V-statistic; U gives the same decisions) at the same level and
with the same number of bootstrap draws: with i.i.d. Rademacher multipliers,
and with the dependent wild bootstrap (sign process flipping with probability
1 / block_length, block_length = ceil(8 tau), tau the estimated integrated
autocorrelation time; ``steinax.stein.gof_test(bootstrap="dependent")``).

A calibrated test's rejection count is Binomial(reps, level); the script
prints its 99% interval next to both counts.

    python experiments/diagnostics/dependent_bootstrap.py [--reps 200] [--phis 0.5 0.7 0.9]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax.stein import gof_test

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, read_csv, save_figure, write_csv_atomically  # noqa: E402


def ar1_chains(rng_key, chains: int, draws: int, d: int, phi: float) -> jax.Array:
    """``[chains, draws, d]`` stationary AR(1) chains with N(0, I_d) marginals and lag-1 correlation ``phi``."""
    k0, k1 = jax.random.split(rng_key)
    x0 = jax.random.normal(k0, (chains, d))
    noise = jax.random.normal(k1, (draws - 1, chains, d))

    def step(x, e):
        x = phi * x + jnp.sqrt(1.0 - phi * phi) * e
        return x, x

    _, xs = jax.lax.scan(step, x0, noise)
    return jnp.transpose(jnp.concatenate([x0[None], xs]), (1, 0, 2))


def rejections(phi, reps, chains, draws, d, n_bootstrap, level, seed):
    """``(iid rejections, dependent rejections, median block length, untestable)`` over ``reps`` replications.

    ``untestable``: replications whose automatic block length leaves fewer than
    ``steinax.stein.gof.MIN_BLOCKS`` blocks per chain; the dependent test makes no decision there
    (counted neither as a rejection nor as an acceptance).
    """
    import warnings

    from steinax.stein.gof import UntestableWarning

    counts = {"iid": 0, "dependent": 0}
    lengths, untestable = [], 0
    for r in range(reps):
        key = jax.random.fold_in(jax.random.key(seed), r)
        k_data, k_boot = jax.random.split(key)
        x = ar1_chains(k_data, chains, draws, d, phi).reshape(-1, d)
        for mode in counts:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UntestableWarning)
                res = gof_test(x, -x, rng_key=k_boot, n_bootstrap=n_bootstrap, level=level, bootstrap=mode, chains=chains)
            counts[mode] += bool(res.reject)  # None (untestable, no decision) is not a rejection
            if mode == "dependent":
                lengths.append(res.block_length)
                untestable += res.untestable is not None
    return counts["iid"], counts["dependent"], float(np.median(lengths)), untestable


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--phis", type=float, nargs="+", default=[0.0, 0.5, 0.7, 0.9])
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=500, help="draws per chain; the dependent test needs >= 10 blocks of 8 tau")
    p.add_argument("--d", type=int, default=3)
    p.add_argument("--bootstrap", type=int, default=300)
    p.add_argument("--level", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", default="docs/experiments/diagnostics")
    p.add_argument("--replot", action="store_true", help="redraw the figure from the CSV in --out, no computation")
    args = p.parse_args(argv)
    if args.replot:
        rows = read_csv(os.path.join(args.out, "dependent_bootstrap.csv"))
        plot(rows, os.path.join(args.out, "dependent_bootstrap.png"))
        return rows
    from scipy.stats import binom

    lo, hi = binom.interval(0.99, args.reps, args.level)
    banner("KSD test on autocorrelated AR(1) chains (H0 true): i.i.d. vs dependent wild bootstrap", {
        "p": f"N(0, I_{args.d})", "chains x draws": f"{args.chains} x {args.draws}", "level": args.level,
        "bootstrap draws": args.bootstrap, "kernel": "IMQ(1, -1/2), V-statistic", "replications": args.reps,
        "dependent block length": "ceil(8 tau), tau = estimated integrated autocorrelation time",
        "calibrated: rejections within": f"[{int(lo)}, {int(hi)}] (binomial 99%)", "seed": args.seed,
    })
    print(f"{'phi':>5} {'tau (exact)':>11} {'block':>6} {'iid rej':>8} {'rate':>6} {'dep rej':>8} {'rate':>6} {'untestable':>10}"
          "  calibrated (iid / dependent)")
    rows = []
    for phi in args.phis:
        t0 = time.perf_counter()
        iid, dep, block, untestable = rejections(phi, args.reps, args.chains, args.draws, args.d, args.bootstrap, args.level,
                                                 args.seed)
        tau = (1 + phi) / (1 - phi)
        ok = lambda c: "yes" if lo <= c <= hi else "NO"  # noqa: E731
        print(f"{phi:>5.2f} {tau:>11.2f} {block:>6.0f} {iid:>8d} {iid / args.reps:>6.3f} {dep:>8d} {dep / args.reps:>6.3f} {untestable:>10d}  "
              f"{ok(iid)} / {ok(dep)}   ({time.perf_counter() - t0:.0f} s)", flush=True)
        rows.append({"phi": phi, "tau": tau, "median_block_length": block, "reps": args.reps, "iid_rejections": iid,
                     "dependent_rejections": dep, "untestable": untestable, "interval_lo": int(lo), "interval_hi": int(hi),
                     "chains": args.chains, "draws": args.draws, "d": args.d, "level": args.level})
    if args.out:
        path = os.path.join(args.out, "dependent_bootstrap.csv")
        write_csv_atomically(path, rows)
        plot(rows, path[:-4] + ".png")
        print(f"wrote {path} and .png")
    return rows


def plot(rows, path):
    """Rejection rate against phi for both bootstraps, with the binomial 99% band of a calibrated test."""
    plt = pyplot()
    phi = [float(r["phi"]) for r in rows]
    reps = int(rows[0]["reps"])
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.axhspan(int(rows[0]["interval_lo"]) / reps, int(rows[0]["interval_hi"]) / reps, color="0.85",
               label="binomial 99% interval at the level")
    ax.plot(phi, [int(r["iid_rejections"]) / reps for r in rows], "o-", label="i.i.d. wild bootstrap")
    ax.plot(phi, [int(r["dependent_rejections"]) / reps for r in rows], "s-", label="dependent wild bootstrap")
    ax.axhline(float(rows[0]["level"]), color="k", lw=0.8, ls="--")
    ax.set_xlabel(r"AR(1) coefficient $\phi$ (H0 true)")
    ax.set_ylabel(f"rejection rate ({reps} replications)")
    ax.set_yscale("log")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
