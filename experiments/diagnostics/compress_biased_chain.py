"""Compressing a biased chain: Stein kernel thinning (SKT, LSKT) against standard and Stein thinning.

The setting of Li, Dwivedi & Mackey (ICML 2024), Sec. 5, in small: a chain whose draws are biased for
the target, here unadjusted Langevin (ULA, step ``--step``, no Metropolis correction, so its invariant
law is not the target) started far out with no burn-in removed, on the posterior suite's banana
(exact moments). Its ``n = 4^k`` draws are compressed to ``m = 2^k = sqrt(n)`` points by

* standard thinning (every ``n / m``-th draw),
* Stein thinning (Riabiz et al. 2022; :func:`steinax.diagnostics.stein_thinning`, same kernel),
* SKT and LSKT (:func:`steinax.diagnostics.stein_kernel_thinning`, the authors' goodpoints),

and each coreset's squared KSD (IMQ Stein kernel, median length scale, V-statistic) and worst error of
the coordinate means (in posterior sds) are reported beside those of all ``n`` draws.

    python experiments/diagnostics/compress_biased_chain.py [--log4n 6 7] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax.diagnostics import stein_kernel_thinning, stein_thinning
from steinax.diagnostics.compression import weighted_ksd
from steinax.posteriors import get

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

METHODS = ("all draws", "standard thinning", "Stein thinning", "SKT", "LSKT")


def ula_chain(logp, key, x0, n, step):
    """``n`` draws of unadjusted Langevin ``x' = x + step * grad log p(x) + sqrt(2 step) xi``."""
    grad = jax.grad(logp)

    def move(x, k):
        y = x + step * grad(x) + jnp.sqrt(2.0 * step) * jax.random.normal(k, x.shape)
        return y, y

    return jax.lax.scan(move, x0, jax.random.split(key, n))[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log4n", type=int, nargs="+", default=[6, 7])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--step", type=float, default=0.1)
    p.add_argument("--out", default="docs/experiments/diagnostics")
    a = p.parse_args(argv)
    post = get("banana")
    ref = post.reference()
    logp = post.target.logdensity
    banner("Compressing a biased chain (ULA on the banana, no burn-in removed) to sqrt(n) points", {
        "n": [4**k for k in a.log4n], "coreset size m": [2**k for k in a.log4n], "seeds": a.seeds,
        "ULA step": a.step, "start": "(6, 6), no burn-in removed",
        "kernel": "Langevin Stein kernel of IMQ (1 + |x - y|^2 / l^2)^(-1/2), l^2 the median squared distance",
        "mean error": "worst |coreset mean - exact mean| over coordinates, in posterior sds"})
    rows = []
    for k4 in a.log4n:
        n, m = 4**k4, 2**k4
        for seed in range(a.seeds):
            x = ula_chain(logp, jax.random.key(seed), jnp.full((2,), 6.0), n, a.step)
            s = jax.vmap(jax.grad(logp))(x)
            results = {}
            t = time.perf_counter()
            skt = stein_kernel_thinning(x, None, m, scores=s, seed=seed)
            results["SKT"] = (np.asarray(skt.weights), time.perf_counter() - t)
            ell2 = skt.length_scale2
            t = time.perf_counter()
            lskt = stein_kernel_thinning(x, None, method="lskt", scores=s, seed=seed)
            results["LSKT"] = (np.asarray(lskt.weights), time.perf_counter() - t)
            t = time.perf_counter()
            th = stein_thinning(x, None, m, scores=s, preconditioner=ell2, standardize=False)
            w = np.bincount(np.asarray(th.indices), minlength=n) / m
            results["Stein thinning"] = (w, time.perf_counter() - t)
            w = np.zeros(n)
            w[np.arange(n // m - 1, n, n // m)] = 1.0 / m
            results["standard thinning"] = (w, 0.0)
            results["all draws"] = (np.full(n, 1.0 / n), 0.0)
            for name, (w, secs) in results.items():
                ksd2 = float(skt.ksd_input) if name == "all draws" else float(weighted_ksd(x, s, w, ell2))
                mean = np.asarray(w, np.float64) @ np.asarray(x, np.float64)
                err = float(np.max(np.abs(mean - ref.mean) / ref.sd))
                rows.append({"n": n, "m": m, "seed": seed, "method": name, "ksd2": ksd2, "mean_error_sd": err,
                             "seconds": secs})
                print(f"n = {n:6d} m = {m:4d} seed {seed}: {name:18s} squared KSD {ksd2:.3e}  mean error "
                      f"{err:.3f} sd  ({secs:.1f} s)", flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "compress_biased_chain.csv"), rows)
    print("\nmedian over seeds (squared KSD; mean error in sds):")
    ns = sorted({r["n"] for r in rows})
    medians = {}
    for n in ns:
        for name in METHODS:
            sel = [r for r in rows if r["n"] == n and r["method"] == name]
            medians[n, name] = np.median([r["ksd2"] for r in sel])
            print(f"  n = {n:6d} {name:18s} {medians[n, name]:.3e}  {np.median([r['mean_error_sd'] for r in sel]):.3f}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for i, name in enumerate(METHODS):
        ax.plot(ns, [medians[n, name] for n in ns], "o-", color=f"C{i}", label=name)
    ax.set(xscale="log", yscale="log", xlabel="draws n (coreset m = sqrt(n))",
           ylabel="squared KSD (median over seeds)", title="ULA on the banana, no burn-in removed")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, os.path.join(a.out, "compress_biased_chain.png"))
    print(f"wrote {a.out}/compress_biased_chain.csv and compress_biased_chain.png")


if __name__ == "__main__":
    main()
