"""Stein variational GPs, section 5.3, Table 3 and Figures 2 and 5: a sparse spatio-temporal GP against NUTS.

The paper's data (UK NOx, AURN network, February 2019) are not available
offline; this uses the rural background PM10 network of Germany (Debian
``r-cran-spacetime``, ``steinax.datasets.load_pm10``) instead, with the same
model and protocol:

* Data: daily mean PM10 at the 70 stations, ``--start`` for ``--days`` days
  (default 2003-07-01, 230 days: 11,216 observations, the 230-day window with
  the most, close to the paper's 11,440). The
  day ``--test-day`` (default the window's middle day) is held out: every
  station's value that day is a test point; all other observed values train.
  Inputs (longitude, latitude, day) are standardised on the training points.
  The output is log PM10, standardised (PM10 is right-skewed and positive).
* Model: ``steinax.gp.SparseGP``, Gaussian likelihood, Matern-3/2 with ARD
  lengthscales, Gamma(1, scale 2) priors on the softplus-constrained
  hyperparameters, M = ``--inducing`` (300) inducing points by k-means (seed =
  the initialisation index), whitened ``u = L_Z nu``.
* SteinGP-J, J in {2, 5, 10, 20}: SVGD with minibatch scores (eq. 10,
  ``--batch`` 1000), AdaGrad-momentum ``--lr`` (the authors' sparse step 0.05)
  for ``--steps`` iterations, particles from the prior.
* NUTS: as the paper's HMC, started at the MAP (Adam, 300 iterations on the
  full data), then ``--nuts-warmup`` + ``--nuts-samples`` draws on the full-data
  posterior (trees of depth at most ``--nuts-max-tree-depth``), every 5th
  kept; the MAP is timed with it.

Metrics on the held-out day: the mean test log-likelihood of the predictive
mixture (standardised log units, the paper's Table 3 scale), and the RMSE of
``exp`` of the predictive mean of log PM10 (the predictive median, in ug/m3).
Runtimes include compilation. Maps (Figures 2 and 5): the predictive mean and
standard deviation of log PM10 on a grid over Germany on the held-out day,
SteinGP-20 and NUTS side by side, stations coloured by the held-out values.

    python experiments/stein_gp/air_quality.py [--inits 5] [--steps 1000] [--nuts-inits 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax import datasets
from steinax.gp import SparseGP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import (  # noqa: E402
    banner, map_estimate, pyplot, run_steingp, resumable_rows, save_figure, save_npz_atomically, write_csv_atomically)

PARTICLES = (2, 5, 10, 20)
METRICS = ("test_loglik", "rmse", "seconds")
PAPER_M300 = {"SteinGP2": (-1.62, 12.96), "SteinGP5": (-1.61, 26.83), "SteinGP10": (-1.60, 49.49),
              "SteinGP20": (-1.61, 94.88), "NUTS": (-1.59, 1959.0)}  # Table 3, M = 300: test LL, seconds (HMC row)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--start", default="2003-07-01")
    p.add_argument("--days", type=int, default=230)
    p.add_argument("--test-day", default=None, help="YYYY-MM-DD inside the window (default: its middle day)")
    p.add_argument("--inducing", type=int, default=300)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--inits", type=int, default=5)
    p.add_argument("--particles", type=int, nargs="+", default=list(PARTICLES))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--map-steps", type=int, default=300)
    p.add_argument("--nuts-inits", type=int, default=1)
    p.add_argument("--nuts-warmup", type=int, default=500)
    p.add_argument("--nuts-samples", type=int, default=500)
    p.add_argument("--nuts-max-tree-depth", type=int, default=8)
    p.add_argument("--grid", type=int, default=60)
    p.add_argument("--out", default="docs/experiments/stein_gp")
    return p.parse_args(argv)


def window(air, start: str, days: int, test_day: str | None):
    """Training and test points ``(X [n, 3], log PM10 [n])`` of the window; the test set is one whole day."""
    first = int(np.searchsorted(air.dates, np.datetime64(start)))
    if first + days > len(air.dates) or air.dates[first] != np.datetime64(start):
        raise SystemExit(f"--start/--days: the window must lie in {air.dates[0]} .. {air.dates[-1]}")
    test = first + days // 2 if test_day is None else int(np.searchsorted(air.dates, np.datetime64(test_day)))
    if not first <= test < first + days:
        raise SystemExit(f"--test-day {test_day} is outside the window")
    s, t = np.nonzero(np.isfinite(air.values[:, first:first + days]))
    t = t + first
    X = np.stack([air.lonlat[s, 0], air.lonlat[s, 1], (t - first).astype(np.float64)], axis=1)
    y = np.log(np.maximum(air.values[s, t], 0.5))  # a few zeros in the record: floored at half the resolution
    held = t == test
    return X[~held], y[~held], X[held], y[held], str(air.dates[test]), test - first


def main(argv=None):
    args = parse(argv)
    os.makedirs(args.out, exist_ok=True)
    air = datasets.load_pm10()
    Xtr_raw, ytr_raw, Xte_raw, yte_raw, test_date, test_index = window(air, args.start, args.days, args.test_day)
    x_mean, x_std = Xtr_raw.mean(0), Xtr_raw.std(0)
    y_mean, y_std = ytr_raw.mean(), ytr_raw.std()
    banner("Stein variational GPs, sparse spatio-temporal GP (section 5.3, Table 3, Figures 2 and 5)", {
        "data": f"rural PM10, Germany (spacetime::air), {args.start} + {args.days} days: {len(ytr_raw)} training "
                f"points, held-out day {test_date} ({len(yte_raw)} stations)",
        "model": f"sparse GP, Gaussian likelihood on standardised log PM10, ARD Matern-3/2, Gamma(1, 2) priors, "
                 f"M = {args.inducing} k-means inducing points (seed = init)",
        "SteinGP": f"J in {args.particles}, SVGD, minibatch {args.batch} (eq. 10), AdaGrad-momentum {args.lr}, "
                   f"{args.steps} iterations, {args.inits} initialisations of Z",
        "NUTS": f"MAP (Adam 0.05, {args.map_steps} steps) then {args.nuts_warmup} warmup + {args.nuts_samples} draws, "
                f"max tree depth {args.nuts_max_tree_depth}, every 5th kept, full data, {args.nuts_inits} "
                "initialisation(s) of Z",
        "metrics": "held-out day: test LL (standardised log PM10), RMSE of exp(predictive mean) in ug/m3, seconds",
        "jax": f"{jax.__version__}, {jax.default_backend()}, float64",
    })
    setting = (f"{args.start}+{args.days}-test{test_date}-M{args.inducing}-B{args.batch}-T{args.steps}-lr{args.lr:g}-"
               f"map{args.map_steps}-nuts{args.nuts_warmup}.{args.nuts_samples}.{args.nuts_max_tree_depth}")
    path = os.path.join(args.out, "air_quality_runs.csv")
    rows = resumable_rows(path, setting, ("init",), METRICS)
    done = {(r["init"], r["method"]) for r in rows}
    grid_lon = np.linspace(5.8, 15.1, args.grid)
    grid_lat = np.linspace(47.2, 55.1, args.grid)
    glon, glat = np.meshgrid(grid_lon, grid_lat)
    X_grid = np.stack([glon.ravel(), glat.ravel(), np.full(glon.size, float(test_index))], axis=1)
    maps_path = os.path.join(args.out, "air_quality_maps.npz")
    with jax.enable_x64(True):
        Xtr = jnp.asarray((Xtr_raw - x_mean) / x_std)
        ytr = jnp.asarray((ytr_raw - y_mean) / y_std)
        Xte = jnp.asarray((Xte_raw - x_mean) / x_std)
        yte = jnp.asarray((yte_raw - y_mean) / y_std)
        Xg = jnp.asarray((X_grid - x_mean) / x_std)
        # SteinGP for every initialisation first, then NUTS: a run stopped in the long NUTS part keeps the rest
        plan = [(init, f"SteinGP{J}") for init in range(args.inits) for J in args.particles]
        plan += [(init, "NUTS") for init in range(min(args.nuts_inits, args.inits))]
        for init, method in plan:
            want_map = init == 0 and method in ("SteinGP20", "NUTS") and method not in _saved_maps(maps_path)
            if (init, method) in done and not want_map:
                continue
            model = SparseGP(Xtr, ytr, "gaussian", "matern32", num_inducing=args.inducing, batch_size=args.batch,
                             seed=init)
            key = jax.random.key(init)
            t0 = time.perf_counter()
            if method == "NUTS":
                from steinax.baselines.mcmc import nuts

                model = SparseGP(Xtr, ytr, "gaussian", "matern32", inducing=model.Z, batch_size=None)  # full data
                x_map = map_estimate(model, model.init_particles(jax.random.fold_in(key, 3), 1)[0], args.map_steps)
                draws = nuts(model, x_map[None], num_warmup=args.nuts_warmup, num_samples=args.nuts_samples,
                             max_tree_depth=args.nuts_max_tree_depth, rng_key=jax.random.fold_in(key, 4))
                particles = jax.block_until_ready(draws[0, ::5])
            else:
                particles, _ = run_steingp(model, key, int(method[len("SteinGP"):]), args.steps, args.lr)
            seconds = time.perf_counter() - t0
            if want_map:
                mean, var = model.predict(particles, Xg, include_noise=False)
                saved = _saved_maps(maps_path)
                saved[method] = np.stack([np.asarray(mean) * y_std + y_mean, np.sqrt(np.asarray(var)) * y_std])
                save_npz_atomically(maps_path, saved)
            if (init, method) not in done:
                mean, _ = model.predict(particles, Xte)
                rows.append({
                    "init": init, "method": method, "setting": setting,
                    "test_loglik": float(model.log_predictive(particles, Xte, yte)),
                    "rmse": float(np.sqrt(np.mean((np.exp(np.asarray(mean) * y_std + y_mean) - np.exp(yte_raw)) ** 2))),
                    "seconds": seconds,
                })
                done.add((init, method))
                write_csv_atomically(path, rows)
                r = rows[-1]
                print(f"   init {init} {method}: test LL {r['test_loglik']:.3f}  RMSE {r['rmse']:.2f} ug/m3  "
                      f"{seconds:.1f} s", flush=True)
            jax.clear_caches()

    summary = []
    print(f"   {'method':<10} {'inits':>5} {'test LL':>15} {'RMSE ug/m3':>15} {'seconds':>9} {'x NUTS':>7}"
          f"   paper (M=300, NOx): LL, seconds")
    nuts_secs = [r["seconds"] for r in rows if r["method"] == "NUTS"]
    for m in [f"SteinGP{J}" for J in args.particles] + ["NUTS"]:
        vals = {k: np.array([r[k] for r in rows if r["method"] == m]) for k in METRICS}
        n = len(vals["seconds"])
        if n == 0:
            continue
        se = {k: float(np.std(v, ddof=1) / np.sqrt(n)) if n > 1 else float("nan") for k, v in vals.items()}
        ratio = float(vals["seconds"].mean() / np.mean(nuts_secs)) if nuts_secs else float("nan")
        paper = PAPER_M300.get(m, (float("nan"), float("nan")))
        summary.append({"method": m, "inits": n, **{k: float(v.mean()) for k, v in vals.items()},
                        **{f"{k}_se": se[k] for k in METRICS}, "seconds_over_NUTS": ratio,
                        "paper_test_loglik": paper[0], "paper_seconds": paper[1]})
        print(f"   {m:<10} {n:>5} {vals['test_loglik'].mean():>7.3f} ± {se['test_loglik']:<5.3f} "
              f"{vals['rmse'].mean():>7.2f} ± {se['rmse']:<5.2f} {vals['seconds'].mean():>9.1f} {ratio:>7.3f}"
              f"   {paper[0]:.2f}, {paper[1]:.0f}")
    if summary:
        write_csv_atomically(os.path.join(args.out, "air_quality_summary.csv"), summary)
    maps = _saved_maps(maps_path)
    if maps:
        maps = {m: (maps[m][0], maps[m][1]) for m in ("SteinGP20", "NUTS") if m in maps}
        plot_maps(maps, glon, glat, air, Xte_raw, yte_raw, test_date, os.path.join(args.out, "air_quality_map.png"))
    return summary


def _saved_maps(path):
    if not os.path.exists(path):
        return {}
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def plot_maps(maps, glon, glat, air, Xte_raw, yte_raw, test_date, path):
    """Predictive mean and sd of log PM10 over Germany (outside the border masked), one row per method."""
    from matplotlib.path import Path

    plt = pyplot()
    inside = np.zeros(glon.size, bool)
    for ring in air.outline:
        if len(ring) > 50:  # the mainland and the larger islands
            inside |= Path(ring).contains_points(np.stack([glon.ravel(), glat.ravel()], 1))
    inside = inside.reshape(glon.shape)
    fig, axes = plt.subplots(len(maps), 2, figsize=(9, 4.6 * len(maps)), squeeze=False)
    lo = min(float(m[0][inside.ravel()].min()) for m in maps.values())
    hi = max(float(m[0][inside.ravel()].max()) for m in maps.values())
    sd_hi = max(float(m[1][inside.ravel()].max()) for m in maps.values())
    for row, (method, (mean, sd)) in enumerate(maps.items()):
        for col, (field, title, vmin, vmax, cmap) in enumerate((
                (mean, "predictive mean of log PM10", lo, hi, "viridis"),
                (sd, "predictive sd of log PM10", 0.0, sd_hi, "magma"))):
            ax = axes[row, col]
            im = ax.pcolormesh(glon, glat, np.where(inside, field.reshape(glon.shape), np.nan), vmin=vmin, vmax=vmax,
                               cmap=cmap, shading="auto")
            for ring in air.outline:
                ax.plot(ring[:, 0], ring[:, 1], color="k", lw=0.5)
            if col == 0:
                ax.scatter(Xte_raw[:, 0], Xte_raw[:, 1], c=yte_raw, vmin=vmin, vmax=vmax, cmap=cmap, s=18,
                           edgecolors="w", linewidths=0.6)
            else:
                ax.scatter(air.lonlat[:, 0], air.lonlat[:, 1], c="c", s=5)
            ax.set(title=f"{method}: {title}, {test_date}", xlabel="longitude", ylabel="latitude", aspect=1.5)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
