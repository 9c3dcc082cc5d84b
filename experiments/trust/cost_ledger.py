"""``steinax.sample``'s cost ledger against a count taken inside the log-density (issue 56).

    python experiments/trust/cost_ledger.py [--posteriors german_logistic eight_schools_noncentered]
                                            [--particles 256] [--seed 0] [--out DIR]

Each posterior's log-density is wrapped so that every evaluation at one point calls the host
(``jax.debug.callback``: under ``vmap`` once per point, under ``grad`` once, in the forward pass), and the call is
charged to the stage whose code the main thread is running at that moment (its Python stack:
``check_sample_arguments``, the warm start's ``apply``, ``WhitenedParticles.apply``, the checks, ``HMCCorrection``).
``steinax.sample`` (float64, its defaults, the posterior's own starting points) then runs on it, and each stage's
``res.gradient_evaluations`` is printed beside the count. The issue's bound: within 1% per stage and in total. A
Hessian (``jax.hessian``: one forward pass, then ``d`` sweeps of the reverse pass, its cost) is one call to the
counter and ``d`` in the ledger: the count printed adds ``d - 1`` per Hessian, which the warm start reports.
"""

import argparse
import os
import sys
import threading
import warnings

import jax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, barh_figure, write_csv_atomically  # noqa: E402

STAGE_OF = (("check_sample_arguments", "arguments"), ("LaplaceStart", "warm_start"), ("PathfinderStart", "warm_start"),
            ("WhitenedParticles", "particles"), ("HandoffChecks", "checks"), ("TailProbe", "sizing"),
            ("HMCCorrection", "correction"))
BOUND = 0.01


class Counter:
    """Counts calls of the wrapped log-density, by the stage the main thread is in (module docstring)."""

    def __init__(self):
        self.counts, self.main = {}, threading.main_thread().ident

    def stage(self) -> str:
        frame = sys._current_frames().get(self.main)
        while frame is not None:
            owner = frame.f_locals.get("self")
            names = (frame.f_code.co_name, type(owner).__name__ if owner is not None else "")
            for key, stage in STAGE_OF:
                if key in names:
                    return stage
            frame = frame.f_back
        return "other"

    def __call__(self, *_):
        s = self.stage()
        self.counts[s] = self.counts.get(s, 0) + 1

    def wrap(self, logdensity):
        def counted(x):
            jax.debug.callback(self, x[..., 0])
            return logdensity(x)

        return counted


def count(target, rng_key, init, **kwargs):
    """``(result, counts by stage)`` of ``steinax.sample`` on ``target`` with its log-density counted."""
    import steinax
    from steinax.targets.base import LogDensityTarget

    counter = Counter()
    wrapped = LogDensityTarget(counter.wrap(target.logdensity))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = steinax.sample(wrapped, rng_key=rng_key, init=init, progress=False, **kwargs)
    counts = dict(counter.counts)
    counts["total"] = sum(counts.values())
    return res, counts


def hessian_calls(res) -> dict:
    """What the ledger counts beyond the counter's calls, by stage: ``d - 1`` per Hessian of the warm start (module
    docstring), and in total."""
    warm = res.stages.get("warm_start", {})
    extra = int(warm.get("hessian_evaluations", 0))
    extra -= extra // res.draws.shape[1]  # d per Hessian in the ledger, one call to the counter
    return {"warm_start": extra, "total": extra}


def main(argv=None):
    from steinax.posteriors import NAMES, get

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--posteriors", nargs="+", default=["german_logistic", "eight_schools_noncentered"],
                   choices=list(NAMES))
    p.add_argument("--particles", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("steinax.sample's ledger against a count inside the log-density",
           {"posteriors": a.posteriors, "particles": a.particles, "seed": a.seed, "dtype": "float64",
            "bound": f"{BOUND:.0%} per stage and in total"})
    print("(counted: calls of the log-density, plus d - 1 per Hessian the warm start reports)")
    rows, worst = [], 0.0
    with jax.enable_x64(True):
        for name in a.posteriors:
            post = get(name)
            init = post.target.init_particles(jax.random.key(1000 + a.seed), a.particles)
            res, counts = count(post.target, jax.random.key(a.seed), init)
            ledger, seen = res.gradient_evaluations, hessian_calls(res)
            for stage in sorted(set(counts) | set(ledger), key=lambda s: (s == "total", s)):
                c, g = counts.get(stage, 0) + seen.get(stage, 0), ledger.get(stage, 0)
                rel = abs(g - c) / max(c, 1)
                worst = max(worst, rel)
                rows.append({"posterior": name, "stage": stage, "counted": c, "ledger": g, "relative_difference": rel})
                print(f"{name:28s} {stage:12s} counted {c:>10,d}  ledger {g:>10,d}  difference {rel:7.3%}", flush=True)
            print(f"    ok={res.ok}: {res.message[:120]}")
    print(f"worst relative difference: {worst:.3%} (bound {BOUND:.0%})")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "cost_ledger.csv"), rows)
    barh_figure(os.path.join(a.out, "cost_ledger.png"), [f"{r['posterior']}: {r['stage']}" for r in rows],
                {"counted inside the log-density": [max(r["counted"], 1) for r in rows],
                 "res.gradient_evaluations": [max(r["ledger"], 1) for r in rows]},
                "evaluations of the log-density", xscale="log")
    return 0 if worst <= BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
