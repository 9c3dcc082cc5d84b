"""The correction's convergence rule, calibrated (issue 57): how often ``steinax.sample``'s rule calls a right answer
not converged (a false alarm), and a wrong one converged (a silent failure), at the chain counts it runs.

    python experiments/diagnostics/convergence_rule.py [--reps 100] [--d 10] [--chains 16 100 256] [--out DIR]

The rule is :meth:`steinax.pipeline.HMCCorrection.judge` as the correction applies it, on the correction's schedule
(after ``round_steps`` draws per chain, then where :meth:`~steinax.pipeline.HMCCorrection.next_check` puts the next
check: where the ESS is projected to reach its target, else half as many draws again): the worst coordinate's
rank-normalised nested R-hat over neighbour superchains of 16 (grouped by the chains' starting points,
:meth:`~steinax.pipeline.HMCCorrection.superchains_of`) at most 1.01 and bulk ESS at least 400; the run stops at the
first check that passes, or calls itself not converged at ``max_steps``.
The chains are AR(1) processes with N(0, 1) marginals in ``d`` coordinates (a mixing chain's autocorrelation
``rho``), in three scenarios:

* ``stationary``: every chain starts at an exact draw (the ideal hand-over from the particles);
* ``overdispersed``: starts 3x too wide (a cloud not yet contracted), forgotten at the rate ``rho``;
* ``stuck group``: the eighth of the chains whose starts are lowest in coordinate 0 starts 3 sd further down and
  mixes with ``rho = 0.999`` (a neck those chains cannot leave); the rest are stationary with ``rho``.

At the stopping point the pooled draws are **right** when every mean is within 0.1 sd and every sd within 5% (the
issue's false-alarm definition), **wrong** when a mean is off by more than 0.2 sd or an sd by more than 25%.
Printed per setting: runs, share right, the false-alarm rate (right, called not ok) and the silent-failure rate
(wrong, called ok), and the mean draws per chain at the stop.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

SCENARIOS = ("stationary", "overdispersed", "stuck group")


def chains(rng, scenario: str, c: int, n: int, d: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """``(starts [c, d], draws [c, n, d])`` of ``scenario`` (module docstring)."""
    starts = rng.standard_normal((c, d))
    rhos = np.full((c, 1), rho)
    x0 = starts.copy()
    if scenario == "overdispersed":
        x0 = 3.0 * starts
    elif scenario == "stuck group":
        low = np.argsort(starts[:, 0])[: max(1, c // 8)]
        x0[low, 0] -= 3.0
        rhos[low] = 0.999
    scale = np.sqrt(1.0 - rhos**2)
    x = np.empty((c, n, d))
    prev = x0
    for t in range(n):
        prev = rhos * prev + scale * rng.standard_normal((c, d))
        x[:, t] = prev
    return starts, x


def classify(draws: np.ndarray) -> str:
    pooled = draws.reshape(-1, draws.shape[-1])
    err, sd = np.max(np.abs(pooled.mean(0))), pooled.std(0)
    if err <= 0.1 and np.all(np.abs(sd - 1.0) <= 0.05):
        return "right"
    if err > 0.2 or np.any((sd < 0.8) | (sd > 1.25)):
        return "wrong"
    return "between"


def run(rng, rule, scenario, c, d, rho):
    """One correction's sequence of checks: ``(verdict ok, class at the stop, draws per chain at the stop)``."""
    starts, x = chains(rng, scenario, c, rule.max_steps, d, rho)
    groups = rule.superchains_of(starts)
    n = rule.round_steps
    while True:
        rhat, ess, passed = rule.judge(x[:, :n], groups)
        if passed or n >= rule.max_steps:
            return passed, classify(x[:, :n]), n
        n = rule.next_check(n, rhat, ess)


def main(argv=None):
    from steinax.pipeline import HMCCorrection

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rho", type=float, nargs="+", default=[0.5, 0.95])
    p.add_argument("--chains", type=int, nargs="+", default=[16, 100, 256])
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    rule = HMCCorrection(max_steps=a.max_steps)
    banner("steinax.sample's convergence rule on AR(1) chains", {
        "reps": a.reps, "d": a.d, "rho": a.rho, "chains": a.chains, "scenarios": a.scenarios,
        "rule": f"rank nested R-hat <= {rule.rhat} over neighbour superchains of {rule.superchain_size}, bulk ESS >= "
                f"{rule.min_ess:g}, checked after {rule.round_steps} draws, then where HMCCorrection.next_check puts it, "
                f"up to {rule.max_steps}",
        "right": "means within 0.1 sd, sds within 5%", "wrong": "a mean off by > 0.2 sd or an sd by > 25%"})
    rng = np.random.default_rng(0)
    rows = []
    for scenario in a.scenarios:
        for rho in a.rho:
            for c in a.chains:
                out = [run(rng, rule, scenario, c, a.d, rho) for _ in range(a.reps)]
                ok = np.array([o[0] for o in out])
                cls = np.array([o[1] for o in out])
                right, wrong = cls == "right", cls == "wrong"
                row = {"scenario": scenario, "rho": rho, "chains": c, "runs": a.reps,
                       "right": int(right.sum()), "wrong": int(wrong.sum()), "ok": int(ok.sum()),
                       "false_alarm_rate": float(np.mean(~ok[right])) if right.any() else float("nan"),
                       "silent_failure_rate": float(np.mean(ok[wrong])) if wrong.any() else float("nan"),
                       "mean_draws_at_stop": float(np.mean([o[2] for o in out]))}
                rows.append(row)
                print(f"{scenario:13s} rho {rho:4.2f} chains {c:4d}: ok {row['ok']:3d}/{a.reps}, right {row['right']:3d}, "
                      f"wrong {row['wrong']:3d}; false alarms {row['false_alarm_rate']:6.1%} of right, silent "
                      f"failures {row['silent_failure_rate']:6.1%} of wrong; {row['mean_draws_at_stop']:6.0f} draws "
                      "per chain at the stop", flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_csv_atomically(os.path.join(a.out, "convergence_rule.csv"), rows)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    for ax, key, title in zip(axes, ("false_alarm_rate", "silent_failure_rate"),
                              ("right answers called not ok", "wrong answers called ok")):
        for scenario, marker in zip(a.scenarios, "osd"):
            for rho, style in zip(a.rho, ("-", "--")):
                sub = [r for r in rows if r["scenario"] == scenario and r["rho"] == rho]
                ax.plot([r["chains"] for r in sub], [r[key] for r in sub], style, marker=marker,
                        label=f"{scenario}, rho {rho}")
        ax.set_xscale("log")
        ax.set_xlabel("chains")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("rate")
    axes[0].legend(fontsize=6)
    save_figure(fig, os.path.join(a.out, "convergence_rule.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
