"""Where the correction's trajectories diverged, and the policy that decides whether a few divergences spoil the answer.

A divergent transition is a leapfrog trajectory whose energy error blew up: the integrator could not follow the
target there (high curvature: a funnel's neck, a hard boundary where the log-density is ``-inf``). The kernel rejects
it, so the draws stay exact in the limit; what a divergence costs is that the chains may avoid the region where it
happened, and a region the chains avoid is missing from the answer. One policy, stated once (issue 57):

* **Where** (:func:`where_divergences`): the places the chains were when their trajectories diverged, each placed by
  its quantile among the draws in every coordinate (the target's coordinates). If the divergences fall where the draws
  are (no region the chains avoid), each quantile is uniform, and the mean quantile of ``k`` of them has sd
  ``1 / sqrt(12 k)``. A coordinate where that mean is further from 1/2 than the two-sided 1% level, Bonferroni
  over the coordinates, and by at least :data:`MIN_SHIFT`, is where they *concentrate*: a centred hierarchy's scale
  near 0 is the classic case.
* **What they cost**: divergences that concentrate mark a region the sampler cannot enter, whose mass is not
  measurable from the draws; so a run whose divergences concentrate is not ok, however few there are. Scattered
  divergences at a rate of at most :data:`MAX_DIVERGENCE_RATE` per transition are numerical accidents in the tails
  (measured: 1-6 among 100 chains x 2000 transitions on models whose answer was right within 0.07 sd): the run may be
  ok, and its message names them. Above that rate the run is not ok.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_DIVERGENCE_RATE", "MIN_SHIFT", "where_divergences", "divergence_problem"]

MAX_DIVERGENCE_RATE = 1e-3
"""Scattered divergent transitions per transition (all chains) that a run called ok may have."""

_LEVEL = 0.01
"""The two-sided level of the concentration test, split over the coordinates (Bonferroni)."""

MIN_SHIFT = 0.1
"""The least shift of the places' mean quantile from 1/2 called a concentration, however many places: with thousands
of divergences (a hard boundary on both sides: the uniform box of ``experiments/trust/known_answers.py``, mean
quantile 0.49) a shift of 0.01 is significant and means nothing."""


def where_divergences(places, draws, count: int, transitions: int) -> dict:
    """Where the trajectories diverged, against the draws (module docstring).

    Args:
        places: ``[k, d]`` positions (target's coordinates) where a trajectory diverged (all of them or the first
            ones kept).
        draws: ``[S, d]`` the run's draws (target's coordinates).
        count: every divergent transition of the run (``>= k``).
        transitions: the run's transitions, all chains.

    Returns:
        ``{"count", "rate" (count / transitions), "quantiles": the places' mean quantile per coordinate (a list of
        ``d``; NaN with none), "z": its distance from 1/2 in sds (a list), "concentrated": coordinates beyond the
        level, worst first}``: plain Python values, as everything in ``SampleResult.stages``.
    """
    places = np.asarray(places, np.float64).reshape(-1, np.shape(draws)[-1])
    draws = np.asarray(draws, np.float64)
    d = draws.shape[-1]
    rate = count / max(transitions, 1)
    if places.shape[0] == 0:
        nan = [float("nan")] * d
        return {"count": int(count), "rate": rate, "quantiles": nan, "z": nan, "concentrated": []}
    ordered = np.sort(draws, axis=0)
    q = np.stack([np.searchsorted(ordered[:, j], places[:, j]) for j in range(d)], axis=1) / max(draws.shape[0], 1)
    mean = q.mean(axis=0)
    z = np.abs(mean - 0.5) * np.sqrt(12.0 * places.shape[0])
    from scipy.special import ndtri

    bound = float(ndtri(1.0 - _LEVEL / (2 * d)))
    worst = np.argsort(-z)
    return {"count": int(count), "rate": rate, "quantiles": mean.tolist(), "z": z.tolist(),
            "concentrated": [int(j) for j in worst if z[j] > bound and abs(mean[j] - 0.5) >= MIN_SHIFT]}


def divergence_problem(report: dict, names=None) -> tuple[str | None, str | None]:
    """The policy (module docstring): ``(problem, note)``, one of them ``None`` (both with no divergence).

    ``names``: the coordinates' names for the message (default their indices)."""
    count = report["count"]
    if not count:
        return None, None

    def name(j):
        return names[j] if names is not None else f"coordinate {j}"

    if report["concentrated"]:
        where = ", ".join(f"{name(j)} (their mean quantile {report['quantiles'][j]:.2f} among the draws)"
                          for j in report["concentrated"][:3])
        return (f"{count} divergent transitions concentrated in {where}: a region the chains cannot enter, whose "
                "mass the draws miss (reparameterise it, e.g. non-centre a hierarchy, or lower the step size)"), None
    if report["rate"] > MAX_DIVERGENCE_RATE:
        return (f"{count} divergent transitions ({report['rate']:.2g} per transition, above {MAX_DIVERGENCE_RATE:g}): "
                "the draws may miss a region of high curvature, or proposals left a hard boundary of the support"), None
    return None, (f"{count} divergent transitions, scattered (no coordinate where they concentrate; "
                  f"{report['rate']:.2g} per transition, at most {MAX_DIVERGENCE_RATE:g} allowed)")
