"""``steinax.sample``'s ``ok`` on targets with known answers (issue 56): when it says ok, the answer is right.

    python experiments/trust/known_answers.py [--cases ...] [--seed 0] [--out DIR]

Each case runs ``steinax.sample`` (float64, 100 particles, its defaults, ``init`` drawn from ``N(0, I)`` scaled by
the case's ``spread``) on a target with known means and sds. A run is **right** when every mean is within 0.2 sd of
the truth and every sd within a factor 1.25; where the sd does not exist (t with 1.5 degrees of freedom, Cauchy, a
flat direction) nothing is right and ``ok`` must be false. The rule checked: ``ok`` implies right. The cases are
those the issue names: Gaussians with scales 1e-4 and 1e4, correlation 0.999, d = 200 (sds 0.1 to 10), Student-t with
3 degrees of freedom, a 3-sd and a 6-sd two-mode mixture, Neal's funnel, t with 1.5, Cauchy, a flat direction, and
hard supports (a uniform box, a half-normal).
"""

import argparse
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, barh_figure, write_csv_atomically  # noqa: E402

NO_VARIANCE = None


def _student(df):
    return lambda x: jnp.sum(-0.5 * (df + 1.0) * jnp.log1p(x**2 / df))


def _mixture(half_gap):
    from jax.scipy.special import logsumexp

    return lambda x: logsumexp(jnp.stack([-0.5 * jnp.sum((x - jnp.array([half_gap, 0.0])) ** 2),
                                          -0.5 * jnp.sum((x + jnp.array([half_gap, 0.0])) ** 2)]))


def _gaussian(mean, sd, corr=0.0):
    mean, sd = np.asarray(mean, np.float64), np.asarray(sd, np.float64)
    cov = np.diag(sd**2)
    if corr:
        cov[0, 1] = cov[1, 0] = corr * sd[0] * sd[1]
    prec = np.linalg.inv(cov)
    return (lambda x: -0.5 * (x - mean) @ jnp.asarray(prec) @ (x - mean)), mean, sd


def cases() -> dict:
    """``name: (log-density, d, mean or None, sd or None, init spread)`` (module docstring)."""
    from steinax.posteriors.closed_form import funnel

    out = {}
    for name, (mean, sd, corr) in {"gaussian_sd_1e-4": ([1e-3, -2e-3], [1e-4, 1e-4], 0.0),
                                   "gaussian_sd_1e4": ([3e4, -1e4], [1e4, 1e4], 0.0),
                                   "gaussian_corr_0.999": ([1.0, -1.0], [1.0, 1.0], 0.999),
                                   "gaussian_d200": (np.zeros(200), np.logspace(-1, 1, 200), 0.0)}.items():
        f, m, s = _gaussian(mean, sd, corr)
        out[name] = (f, m.size, m, s, 1.0)
    out["student_t3"] = (_student(3.0), 2, np.zeros(2), np.full(2, np.sqrt(3.0)), 1.0)
    out["mixture_3sd"] = (_mixture(1.5), 2, np.zeros(2), np.array([np.sqrt(1 + 1.5**2), 1.0]), 1.0)
    out["mixture_6sd"] = (_mixture(3.0), 2, np.zeros(2), np.array([np.sqrt(1 + 3.0**2), 1.0]), 1.0)
    f = funnel(10)
    out["funnel"] = (f.logdensity, 10, *f.moments(), 1.0)
    out["student_t1.5"] = (_student(1.5), 2, NO_VARIANCE, NO_VARIANCE, 1.0)
    out["cauchy"] = (_student(1.0), 2, NO_VARIANCE, NO_VARIANCE, 1.0)
    out["flat_direction"] = (lambda x: -0.5 * x[0] ** 2, 2, NO_VARIANCE, NO_VARIANCE, 1.0)
    out["uniform_box"] = (lambda x: jnp.where(jnp.all(jnp.abs(x) < 1.0), 0.0, -jnp.inf), 2, np.zeros(2),
                          np.full(2, 1 / np.sqrt(3.0)), 0.3)
    half = np.sqrt(2 / np.pi)
    out["half_normal"] = (lambda x: jnp.where(x[0] > 0, -0.5 * jnp.sum(x**2), -jnp.inf), 2, np.array([half, 0.0]),
                          np.array([np.sqrt(1 - half**2), 1.0]), 1.0)
    return out


def run_case(name: str, seed: int = 0) -> dict:
    import steinax

    logp, d, mean, sd, spread = cases()[name]
    with jax.enable_x64(True):
        z = jax.random.normal(jax.random.key(100 + seed), (100, d), jnp.float64)
        init = jnp.abs(z) if name in ("half_normal",) else spread * z
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = steinax.sample(logp, rng_key=jax.random.key(seed), init=init, progress=False)
        except Exception as exc:  # an error is an honest "not ok", but it is reported as one
            return {"case": name, "ok": False, "right": False, "error_sd": float("nan"), "sd_ratio": float("nan"),
                    "seconds": time.perf_counter() - t0, "message": f"raised {type(exc).__name__}: {exc}"[:400]}
        x = res.draws
        if mean is None:
            err = ratio = float("nan")
            right = False
        else:
            err = float(np.max(np.abs(x.mean(0) - mean) / sd))
            r = x.std(0) / sd
            ratio = float(r[np.argmax(np.abs(np.log(r)))])
            right = bool(err <= 0.2 and 0.8 <= ratio <= 1.25)
        return {"case": name, "ok": bool(res.ok), "right": right, "error_sd": err, "sd_ratio": ratio,
                "seconds": time.perf_counter() - t0, "message": res.message}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=list(cases()), choices=list(cases()))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    banner("steinax.sample: ok implies right", {"cases": a.cases, "seed": a.seed, "particles": 100,
                                                "dtype": "float64", "right": "means within 0.2 sd, sds within 1.25x"})
    rows = [run_case(name, a.seed) for name in a.cases]
    lies = 0
    for r in rows:
        lie = r["ok"] and not r["right"]
        lies += lie
        print(f"{r['case']:20s} ok {r['ok']!s:5s} right {r['right']!s:5s} error {r['error_sd']:8.3f} sd, sd ratio "
              f"{r['sd_ratio']:6.3f}, {r['seconds']:5.0f} s{'  OK WITH A WRONG ANSWER' if lie else ''}\n"
              f"    {r['message'][:300]}", flush=True)
    print(f"ok with a wrong answer: {lies} of {len(rows)}")
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "known_answers.csv"), rows)
    barh_figure(os.path.join(a.out, "known_answers.png"),
                [r["case"] + ("" if np.isfinite(r["error_sd"]) else " (no variance)") for r in rows],
                {"error": [r["error_sd"] if np.isfinite(r["error_sd"]) else 0.0 for r in rows]},
                "worst error of the mean (sds); green: ok=True, gray: ok=False",
                colors=["tab:green" if r["ok"] else "tab:gray" for r in rows], xscale="symlog", line=0.2)
    return 0 if lies == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
