"""NUTS's wall time to a minimum bulk ESS of 1000 on suite posteriors, measured as the suite does, without scoring.

    python benchmarks/nuts_time_to_ess.py --posteriors item_response_theory [--seeds 1]

The suite's NUTS (NumPyro, 4 chains, its warm-up and draws, from N(0, I); compilation counted)
and :func:`steinax.posteriors.peers.nuts_seconds_to_ess`'s extrapolation, for comparing wall times
when a posterior's implementation changed (the suite's rows also score the draws: for d = 501 that
takes longer than the run). Prints one line per run.
"""

import argparse
import time

import jax

from steinax.posteriors import get
from steinax.posteriors.peers import PEERS, nuts_seconds_to_ess
from steinax.posteriors.suite import SuiteSettings


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", required=True)
    p.add_argument("--seeds", type=int, default=1)
    a = p.parse_args(argv)
    s = SuiteSettings()
    print(f"NUTS as in the suite: {s.tag()}; time to a minimum bulk ESS of 1000 extrapolated from each run")
    for name in a.posteriors:
        post = get(name)
        for seed in range(a.seeds):
            t0 = time.perf_counter()
            _, _, info = PEERS["nuts"](post, jax.random.key(seed), s)
            wall = time.perf_counter() - t0
            to_ess = nuts_seconds_to_ess(wall, info["min_ess_bulk"], s.nuts_warmup, s.nuts_samples)
            print(f"{name:24s} seed {seed}: wall {wall:.1f} s, min bulk ESS {info['min_ess_bulk']:.0f}, "
                  f"to ESS 1000 {to_ess:.0f} s", flush=True)


if __name__ == "__main__":
    main()
