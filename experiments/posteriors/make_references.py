"""Reference moments and draws of the posterior suite (``steinax.posteriors``) from long NUTS runs.

    python experiments/posteriors/make_references.py [--posteriors NAME ...] [--samples 5000]

For each NumPyro posterior: NumPyro NUTS, 4 chains of 2000 warm-up and 5000 kept draws
(float64), from NumPyro's uniform(-2, 2) initialisation. Prints and stores (in
``src/steinax/posteriors/references/NAME.npz``) the mean and sd of all 20000 draws, 1000
interleaved thinned draws, the max split R-hat, the min bulk ESS, the divergences, the
gradient evaluations, and the inference gym's Stan ground truth compared with ours where it
has the model. With ``--all-draws DIR`` it also writes all 20000 draws to ``DIR/NAME.npy``
(used by ``experiments/posteriors/diagnostic_calibration.py``; not stored in the repository).
"""

import argparse
import json
import os
import sys

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from steinax.posteriors import NUMPYRO_KINDS  # noqa: E402
from steinax.posteriors.reference import make_reference, save_reference  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=list(NUMPYRO_KINDS), choices=list(NUMPYRO_KINDS))
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--samples", type=int, default=5000)
    p.add_argument("--all-draws", default=None, help="folder for all draws (.npy), for the diagnostic's calibration")
    a = p.parse_args(argv)
    for name in a.posteriors:
        ref, draws = make_reference(name, chains=a.chains, warmup=a.warmup, samples=a.samples)
        path = save_reference(name, ref)
        if a.all_draws:
            os.makedirs(a.all_draws, exist_ok=True)
            np.save(os.path.join(a.all_draws, f"{name}.npy"), draws.astype(np.float32))
        m = ref.meta
        print(f"{name:28s} d={ref.mean.size:4d} R-hat<={m['max_rhat']:.4f} ESS>={m['min_ess_bulk']:.0f} "
              f"divergences={m['divergences']} grads={m['gradient_evaluations']} {m['seconds']:.0f}s"
              + (f" | inference gym: max mean error {m['inference_gym']['max_mean_error_over_sd']:.3f} sd, "
                 f"sd ratio {m['inference_gym']['sd_ratio_range'][0]:.3f}-{m['inference_gym']['sd_ratio_range'][1]:.3f}"
                 if "inference_gym" in m else ""), flush=True)
        print("   ", path, json.dumps({k: v for k, v in m.items() if k != "inference_gym"}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
