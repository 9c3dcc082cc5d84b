"""Reference moments and draws of the posterior suite (``steinax.posteriors``) from long NUTS runs.

    python experiments/posteriors/make_references.py [--posteriors NAME ...] [--samples 5000] [--out DIR]

For each NumPyro posterior: NumPyro NUTS, 4 chains of 2000 warm-up and 5000 kept draws
(float64), from NumPyro's uniform(-2, 2) initialisation; the hard posteriors (``steinax.posteriors.hard``) after
the usual fixes, non-centred or whitened at target acceptance 0.95, their draws mapped back
(``steinax.posteriors.reference.fixed_target``). Prints and stores in ``--out``
(default ``src/steinax/posteriors/references``, where the library reads them) ``NAME.npz``:
the mean and sd of all 20000 draws, 1000 interleaved thinned draws, the max split R-hat,
the min bulk ESS, the divergences, the gradient evaluations, and the inference gym's Stan
ground truth compared with ours where it has the model, and where a posterior has exact moments
(Brownian motion, by quadrature) those as the reference's moments with NUTS's measured against them;
plus ``references.csv`` (one row of diagnostics per posterior; a rerun of some posteriors replaces their rows) and ``references.png`` (min bulk ESS and max R-hat per posterior).
With ``--all-draws DIR`` it also writes all draws to ``DIR/NAME.npy`` (used by
``diagnostic_calibration.py``; too large for the repository).
"""

import argparse
import os
import sys

import jax
import numpy as np

from steinax.posteriors import NUMPYRO_KINDS, reference_path
from steinax.posteriors.reference import make_reference, save_reference

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(NUMPYRO_KINDS), choices=list(NUMPYRO_KINDS))
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--out", default=os.path.dirname(reference_path("x")))
    p.add_argument("--all-draws", default=None, help="folder for all draws (.npy), for the diagnostic's calibration")
    a = p.parse_args(argv)
    banner("posterior suite references (NumPyro NUTS, float64)",
           {"chains": a.chains, "warm-up": a.warmup, "draws per chain": a.samples, "out": a.out})
    rows = []
    for name in a.posteriors:
        with jax.enable_x64(True):  # scoped: the caller's precision is left as it was
            ref, draws = make_reference(name, chains=a.chains, warmup=a.warmup, samples=a.samples)
        save_reference(name, ref, os.path.join(a.out, f"{name}.npz"))
        if a.all_draws:
            os.makedirs(a.all_draws, exist_ok=True)
            np.save(os.path.join(a.all_draws, f"{name}.npy"), draws.astype(np.float32))
        m = ref.meta
        gym = m.get("inference_gym") or {}
        exact = m.get("nuts_against_exact") or {}
        rows.append({"posterior": name, "d": ref.mean.size, "max_rhat": m["max_rhat"], "min_ess_bulk": m["min_ess_bulk"],
                     "divergences": m["divergences"], "gradient_evaluations": m["gradient_evaluations"],
                     "seconds": m["seconds"], "gym_max_mean_error_over_sd": gym.get("max_mean_error_over_sd", ""),
                     "gym_sd_ratio_min": (gym.get("sd_ratio_range") or [""])[0],
                     "gym_sd_ratio_max": (gym.get("sd_ratio_range") or ["", ""])[1],
                     "moments": m.get("moments", "nuts"),
                     "nuts_vs_exact_max_mean_error_over_sd": exact.get("max_mean_error_over_sd", ""),
                     "nuts_vs_exact_sd_ratio_min": (exact.get("sd_ratio_range") or [""])[0],
                     "nuts_vs_exact_sd_ratio_max": (exact.get("sd_ratio_range") or ["", ""])[1]})
        print(f"{name:28s} d={ref.mean.size:4d} R-hat<={m['max_rhat']:.4f} ESS>={m['min_ess_bulk']:.0f} "
              f"divergences={m['divergences']} grads={m['gradient_evaluations']} {m['seconds']:.0f}s"
              + (f" | inference gym: max mean error {gym['max_mean_error_over_sd']:.3f} sd, sd ratio "
                 f"{gym['sd_ratio_range'][0]:.3f}-{gym['sd_ratio_range'][1]:.3f}" if gym else "")
              + (f" | moments from {m['moments']}; NUTS against them: max mean error "
                 f"{exact['max_mean_error_over_sd']:.3f} sd, sd ratio {exact['sd_ratio_range'][0]:.3f}-"
                 f"{exact['sd_ratio_range'][1]:.3f}" if exact else ""), flush=True)
    rows = merged_rows(os.path.join(a.out, "references.csv"), rows)
    write_csv_atomically(os.path.join(a.out, "references.csv"), rows)
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 0.4 * len(rows) + 1.5), sharey=True)
    names = [r["posterior"] for r in rows]
    ax1.barh(names, [float(r["min_ess_bulk"]) for r in rows])
    ax1.set_xscale("log")
    ax1.set_xlabel("min bulk ESS")
    ax2.barh(names, [float(r["max_rhat"]) - 1.0 for r in rows])
    ax2.set_xlabel("max split R-hat - 1")
    save_figure(fig, os.path.join(a.out, "references.png"))
    return 0


def merged_rows(path, rows):
    """``rows`` in place of the same posteriors' rows of an existing ``references.csv`` (a rerun of some posteriors)."""
    import csv

    if not os.path.exists(path):
        return rows
    with open(path, newline="") as f:
        old = list(csv.DictReader(f))
    new = {r["posterior"]: r for r in rows}
    kept = [new.pop(r["posterior"], r) for r in old]
    return [{k: r.get(k, "") for k in rows[0]} for r in kept + list(new.values())]


if __name__ == "__main__":
    sys.exit(main())
