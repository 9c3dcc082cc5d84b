"""KCC-SD paper, section 5.2: choosing the SGLD step size by KCC-SD / KSD against effective sample size.

Setting (paper): a Bayesian neural network with sigmoid hidden units on yacht data, SGLD, 5 chains,
minibatch 32, 10,000 samples after 50,000 burn-in; the discrepancy picks a step size where ESS
would pick the largest. What changed or was lost, chosen here and printed:

* data: Boston housing (yacht ships in no offline package; ../shared/DATASETS.md), 90/10 split,
  standardised; model :class:`steinax.models.BNNRegression` with 10 sigmoid hidden units (d = 153);
* SGLD from BlackJAX (``blackjax.sgld``, through :func:`steinax.baselines.mcmc.sgld`), minibatch 32, 5 chains
  started from Liu's initialisation; ``--burn-in`` and ``--samples`` steps (default 5,000 each,
  fewer than the paper's, for this 2-core machine);
* per step size: the pooled draws thinned to ``--keep`` (default 1000) points; squared V-statistic
  KSD and KCC-SD with IMQ(1, -1/2) against the exact full-data score; ESS from
  ``numpyro.diagnostics.effective_sample_size`` (mean over coordinates, all draws);
  test RMSE of the pooled draws as a reference.

The paper's finding: ESS keeps growing with the step size, while the discrepancies have an
interior minimum (too small a step: the chains have not moved; too large: the SGLD bias).

    python experiments/kcc_sd/sgld_step_size.py [--step-sizes 1e-6 3e-6 1e-5 3e-5 1e-4 3e-4]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import steinax
from steinax.baselines import mcmc
from steinax.datasets import load_boston, train_test_split
from steinax.models import BNNRegression
from steinax.stein import kcc_sd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--step-sizes", type=float, nargs="+", default=[1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4])
    p.add_argument("--hidden", type=int, default=10)
    p.add_argument("--chains", type=int, default=5)
    p.add_argument("--burn-in", type=int, default=5000)
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--keep", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="docs/experiments/kcc_sd")
    args = p.parse_args(argv)
    from numpyro.diagnostics import effective_sample_size

    X, y = load_boston()
    split = train_test_split(X, y, 0.9, seed=args.seed)
    Xtr, ytr = jnp.asarray(split.X_train, jnp.float32), jnp.asarray(split.y_train, jnp.float32)
    model = BNNRegression(n_features=X.shape[1], hidden=args.hidden, activation="sigmoid")
    exact = model.target(Xtr, ytr, batch_size=None)
    banner("KCC-SD sec. 5.2: SGLD step size by discrepancy vs ESS", {
        "data": f"Boston, 90/10 split (seed {args.seed}), standardised", "model": f"BNN, {args.hidden} sigmoid units, d = {model.dim}",
        "sampler": f"blackjax.sgld, minibatch {args.batch}, {args.chains} chains, burn-in {args.burn_in}, {args.samples} draws",
        "discrepancies": f"squared V-statistic KSD / KCC-SD, IMQ(1, -1/2), {args.keep} pooled thinned draws, exact score",
        "ESS": "numpyro effective_sample_size, mean over coordinates", "step sizes": args.step_sizes,
    })
    x0 = model.init_particles(jax.random.key(args.seed), args.chains, Xtr, ytr)
    rows = []
    print(f"{'step':>8} {'KSD':>10} {'KCC-SD':>10} {'ESS':>10} {'test RMSE':>10}")
    for eps in args.step_sizes:
        try:
            draws = mcmc.sgld(model.target(Xtr, ytr, batch_size=args.batch), x0, steps=args.burn_in + args.samples,
                              step_size=eps, rng_key=jax.random.key(args.seed + 1), burn_in=args.burn_in, keep=args.samples)
        except FloatingPointError:
            draws = None
        if draws is None:
            print(f"{eps:>8.0e}   diverged (non-finite draws)")
            rows.append({"step_size": eps, "ksd": np.nan, "kcc_sd": np.nan, "ess": np.nan, "rmse": np.nan})
            continue
        ess = float(np.mean(effective_sample_size(np.asarray(draws))))
        pooled = draws.reshape(-1, draws.shape[-1])
        thin = pooled[jnp.linspace(0, pooled.shape[0] - 1, args.keep).astype(int)]
        _, scores = exact.evaluate(None, thin)
        k = steinax.IMQ()
        ksd_v = float(steinax.ksd(thin, scores, k))
        kcc_v = float(kcc_sd(thin, scores, k))
        rmse = float(model.evaluate(thin, jnp.asarray(split.X_test, jnp.float32), jnp.asarray(split.y_test, jnp.float32),
                                    split.y_mean, split.y_std).rmse)
        rows.append({"step_size": eps, "ksd": ksd_v, "kcc_sd": kcc_v, "ess": ess, "rmse": rmse})
        print(f"{eps:>8.0e} {ksd_v:>10.4g} {kcc_v:>10.4g} {ess:>10.1f} {rmse:>10.3f}", flush=True)
    write_csv_atomically(os.path.join(args.out, "sgld_step_size.csv"), rows)
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ok = [r for r in rows if np.isfinite(r["ksd"])]
    for key in ("ksd", "kcc_sd"):
        axes[0].plot([r["step_size"] for r in ok], [r[key] for r in ok], marker="o", label=key)
    axes[0].set_ylabel("squared discrepancy (IMQ, V)")
    axes[1].plot([r["step_size"] for r in ok], [r["ess"] for r in ok], marker="o", color="gray")
    axes[1].set_ylabel("ESS (mean over coordinates)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("SGLD step size")
    axes[0].legend()
    axes[0].set_title(f"Boston BNN ({args.hidden} sigmoid units), {args.chains} chains")
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, "sgld_step_size.png"))
    print(f"wrote {args.out}/sgld_step_size.csv and .png")


if __name__ == "__main__":
    main()
