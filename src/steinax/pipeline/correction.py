"""A correction stage that makes the answer exact in the limit: each particle continues as a Markov chain of a
Metropolis-adjusted kernel, ChEES-HMC (Hoffman, Radul & Sountsov 2021; BlackJAX's ``chees_adaptation`` and
``dynamic_hmc``), run in the coordinates the ensemble whitens.

Particle methods with a fixed number of particles are not exact: their errors do not shrink with more steps. Chains
of an adjusted kernel leave the target invariant, so their draws are right in the limit whatever the start; started
from particles already in the typical set they need no burn-in to speak of. **Decided here:**

* **Metric**: first, the map of the previous stage (the particles' whitening, or the warm start's) refitted to the
  particles (:meth:`~steinax.targets.AffineMap.refit`, shrunk toward it with weight ``d / (n + d)``); the chains run
  on :class:`~steinax.targets.AffineTarget` with a unit mass matrix, which is HMC with the ensemble's covariance as
  its inverse mass matrix.
* **The metric adapted**: particles of a method with a fixed ``n`` can be collapsed in some directions (SVGD's sd
  ratio 0.04 in one coordinate of a regression with unscaled predictors), and chains whitened by their covariance
  then crawl along those directions (measured: split R-hat 1.05 after 2000 transitions). The warm-up is split into
  three equal windows (one compilation serves all three); after each but the last the map is refitted to the
  chains' draws of the window's second half, pooled over chains, and the adaptation restarts in the new coordinates
  from the last window's step size.
* **Step size and trajectory length**: ChEES's adaptation across the ensemble (every chain at once: the ensemble's
  acceptance rate, target 0.651, and the change in the estimator of the expected square), with Adam at 0.025 on their
  logarithms (the ChEES paper's setting), from step size 0.5 in whitened units, then each window's last.
* **How long** (issue 58): rounds of ``round_steps`` transitions, judged after the first round and then where
  :meth:`HMCCorrection.next_check` puts the next check (where the ESS is projected to reach ``min_ess``, else
  half as many transitions again), until the R-hat across the chains is at most ``rhat`` and the bulk ESS of every
  coordinate at least ``min_ess`` (``numpyro.diagnostics``), or ``max_steps`` transitions; which of these ended it
  is reported, with every check (``learnt["checks"]``). With rounds of 100 and a check after each, 100 chains
  stopped at bulk ESS 8,000-28,000 where 400 was asked (measured, issue 58).
* **Which R-hat** (issue 57): rank-normalised nested R-hat (Margossian et al. 2024, as
  ``arviz_stats.rhat_nested(method="rank")`` computes it: :func:`~steinax.diagnostics.rank_nested_rhat`) in the
  target's coordinates (the user's, not the whitened ones), over superchains of about ``superchain_size`` chains
  whose starts are neighbours (:func:`~steinax.diagnostics.neighbour_superchains`). Classic split R-hat across
  100-1000 short chains of a converged run is about ``1 + 1 / (2 ESS per chain)``: its 1.01 (set for 4 long
  chains) asks every chain for an ESS of about 50, and called right answers not ok at the budget (measured:
  ``experiments/diagnostics/nested_rhat_calibration.py``). Nested R-hat asks whether the chains have forgotten where
  they started: chains stuck near their starts keep the superchains' means apart. ``superchain_size=1`` is the
  classic rule (rank-normalised, unsplit superchains of one chain each). The ids are learnt (``"superchains"``), so
  the user's ArviZ gives the same number.
* **Divergences** (:mod:`steinax.pipeline.divergences`): where the chains were when a trajectory diverged, and
  whether those places concentrate in some coordinate, are learnt; the verdict's policy is there.
* **Separated modes** (:mod:`steinax.pipeline.modes`): where the nested R-hat across all chains stays high, the
  draws are grouped by mode (:func:`~steinax.pipeline.modes.separated_modes`); when each mode's resident chains pass
  the R-hat and ESS rules there (:func:`~steinax.pipeline.modes.within_modes`), the chains have converged within
  modes they leave rarely or never, and the stage stops (``stopped="converged within modes"``). Then, and only
  then, the modes' masses are estimated by bridge sampling (:func:`~steinax.pipeline.modes.mode_weights`) and every
  draw carries its mode's weight divided by the mode's draws: the chains' split between modes, inherited from the
  particles, no longer decides the answer's. **Decided here:** groups found in a run that ends at its budget are not
  weighted (a funnel's mouth split from its neck, 0.7% of the draws with a bridge relative error of 0.44, measured);
  the run says it did not converge, as before.
* **Stragglers**: a chain whose log-density over its last round stays below the bulk's
  (:func:`~steinax.pipeline.stragglers.find_stragglers` on its round's median) is named in what the stage learns.

The answer is every kept draw of every chain (``[chains * kept, d]``); the stage hands the next one the chains'
last states as particles.
"""

from __future__ import annotations

import time
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from steinax._validation import check_settings
from steinax.diagnostics.rhat import neighbour_superchains, rank_nested_rhat, rank_split_rhat
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.stages import AbstractStage, Staged, StageInterrupted
from steinax.pipeline.divergences import where_divergences
from steinax.pipeline.modes import mode_weights, separated_modes, within_modes
from steinax.pipeline.stragglers import find_stragglers
from steinax.runtime.sharding import check_mesh, gather, shard_particles
from steinax.targets.affine import AffineMap, AffineTarget
from steinax.targets.base import as_target, logdensities
from steinax.targets.flow import FlowTarget

__all__ = ["HMCCorrection"]

_STORED_NUMBERS = 20_000_000
"""At most this many numbers of draws are kept (thinning evenly beyond): 160 MB in float64."""


_MAX_PLACES = 10_000
"""At most this many places where a trajectory diverged are kept."""


MAX_STEPS = 10**7
"""The most transitions per chain a correction may ask for (the Halton counter's bits and the stored draws stay
bounded; 10^7 transitions of one cheap chain already take hours)."""


MAX_LEAPFROG_STEPS = 1000
"""ChEES's cap on a trajectory's leapfrog steps (BlackJAX's default)."""


def _windows(warmup: int) -> tuple:
    """The warm-up's windows: three equal ones (``warmup // 3`` steps each; one window below 60 steps)."""
    if warmup < 60:
        return (warmup,)
    return (warmup // 3,) * 3


def whitening(start: Staged, names) -> AffineMap:
    """The first of ``names``' learnt ``"affine"`` maps refitted to ``start``'s particles, else the particles' own."""
    for name in names:
        affine = (start.learnt.get(name) or {}).get("affine")
        if affine is not None:
            return affine.refit(start.particles)
    return AffineMap.from_particles(start.particles)


def _identity(x):
    return x


class HMCCorrection(AbstractStage):
    """ChEES-HMC chains from the particles (module docstring).

    Attributes:
        warmup: ChEES adaptation steps (every chain).
        round_steps: transitions per chain of one compiled round; the first check of R-hat and ESS is after one,
            later ones where :meth:`next_check` puts them.
        min_steps: transitions per chain before the first check (``steinax.sample`` sets 100 where the tails look
            heavy, :mod:`steinax.pipeline.sizing`).
        max_steps: transitions per chain after the adaptation, at most.
        rhat: R-hat across chains to reach (every coordinate; rank-normalised nested R-hat, module docstring).
        superchain_size: chains per superchain of nested R-hat (about, and at most a quarter of the chains, so that
            there are at least 4 superchains; 1: classic R-hat).
        min_ess: bulk ESS to reach (every coordinate, all chains pooled).
        affine_from: stages whose learnt ``"affine"`` is refitted for the metric, first found first.
        mesh: a one-axis device mesh (:mod:`steinax.runtime.sharding`) to split the chains over (their number a
            multiple of its size); ``None``: one device. The ensemble's means (ChEES's adaptation) are reductions
            across devices, so the answer is the single-device one up to the order of those sums.

    Learns ``{"draws": [chains, kept, d] in the target's space, "sample_stats" (per kept draw, [chains, kept] each:
    "lp", "acceptance_rate", "diverging", "n_steps", "energy", "step_size"), "affine", "step_size", "leapfrog_steps" (the
    adapted mean), "acceptance" (mean over sampling), "divergences", "rhat", "ess_bulk" (worst coordinates),
    "rhat_arviz" (the worst coordinate's rank-normalised split R-hat, as ArviZ reports it: not the rule),
    "steps" (transitions per chain after warm-up), "thin", "stopped" ("converged", "converged within modes" or
    "max_steps"), "modes" (``None``, or per mode its resident chains, split R-hat and ESS over them, draws, weight,
    bridge sampling's relative error, and the log-density evaluations spent), "weights" (``None``, or
    ``[chains * kept]`` per draw, summing to 1),
    "gradient_evaluations": {"start" (the start's check), "warmup" (each window's chains started afresh and every
    leapfrog step), "sampling", "bridge" (bridge sampling's log-densities)}: evaluations of the target, all chains,
    "evaluations": their sum, "sequential_steps": {"warmup", "sampling"} (per
    transition the most leapfrog steps any chain took, summed), "rounds": per round its {"gradient_evaluations",
    "sequential_steps", "kept" (draws per chain kept so far)}, "checks": per check of the rule its {"steps",
    "rhat", "ess_bulk", "next" (the transitions per chain of the next check, ``None`` where it passed)},
    "stragglers": chain indices, "devices": how many devices the chains were split over (``mesh``), "seconds": {"warmup",
    "sampling"}}``.
    """

    name: ClassVar[str] = "correction"
    warmup: int = 200
    round_steps: int = 20
    min_steps: int = 0
    max_steps: int = 2000
    rhat: float = 1.01
    superchain_size: int = 16
    min_ess: float = 400.0
    affine_from: tuple = ("particles", "warm_start")
    mesh: Mesh | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        """Refused when made, not when the correction starts after every earlier stage."""
        check_settings("HMCCorrection", self, integers=("warmup", "round_steps", "max_steps", "superchain_size"),
                       counts=("min_steps",))
        if self.max_steps < self.round_steps:
            raise ValueError(f"HMCCorrection: `max_steps` ({self.max_steps}) must be at least `round_steps` "
                             f"({self.round_steps}): the chains are checked once per round")
        if self.max_steps > MAX_STEPS:
            raise ValueError(f"HMCCorrection: `max_steps` must be at most {MAX_STEPS} transitions per chain; received "
                             f"{self.max_steps!r}")
        rhat = self.rhat
        if isinstance(rhat, bool) or not isinstance(rhat, (int, float)) or not 1.0 < rhat < 2.0:
            raise ValueError(f"HMCCorrection: `rhat` must be a number in (1, 2) (R-hat is about 1 for chains that "
                             f"agree, and its rule reads R-hat <= `rhat`); received {rhat!r}")
        ess = self.min_ess
        if isinstance(ess, bool) or not isinstance(ess, (int, float)) or not (np.isfinite(ess) and ess > 0):
            raise ValueError(f"HMCCorrection: `min_ess` must be a finite number > 0; received {ess!r}")
        if self.mesh is not None:
            check_mesh(self.mesh, name="HMCCorrection.mesh")
        if not isinstance(self.affine_from, tuple) or not all(isinstance(a, str) for a in self.affine_from):
            raise TypeError(f"HMCCorrection: `affine_from` must be a tuple of stage names; received {self.affine_from!r}")

    def check_chains(self, chains: int) -> None:
        """Refuse a rule that ``chains`` chains cannot meet: ``min_ess`` above ``m log10 m``, ``m`` the pooled draws
        ``max_steps`` allows (the bulk ESS of antithetic chains exceeds ``m``; ``m log10 m`` is Stan's cap on it)."""
        m = chains * self.max_steps
        cap = m * np.log10(max(m, 10))
        if self.min_ess > cap:
            raise ValueError(f"HMCCorrection: `min_ess` = {self.min_ess:g} can never be reached: {chains} chains of at "
                             f"most `max_steps` = {self.max_steps} transitions give {m} draws, whose ESS is at most "
                             f"about {cap:.3g}; lower min_ess or raise max_steps")

    def apply(self, target, start: Staged, rng_key) -> Staged:
        try:
            import blackjax  # noqa: F401
            import numpyro  # noqa: F401
        except ImportError as exc:
            raise ImportError("the correction stage (HMCCorrection, steinax.sample's default) needs BlackJAX and "
                              "NumPyro: pip install 'steinax[sample]'") from exc

        tgt = as_target(target)
        with interrupt_scope() as scope:  # joins steinax.sample's: Ctrl-C is seen between windows and rounds
            return self._run(tgt, start, rng_key, scope)

    def superchains_of(self, z) -> np.ndarray:
        """The superchain ids of chains started at ``z`` (``[chains, d]``; module docstring)."""
        chains = z.shape[0]
        if self.superchain_size == 1 or chains < 8:
            return np.arange(chains)
        return neighbour_superchains(np.asarray(z), min(self.superchain_size, chains // 4))  # at least 4 superchains

    def judge(self, draws, superchains) -> tuple[float, float, bool]:
        """The convergence rule on ``draws`` (``[chains, kept, d]``, the target's coordinates): ``(rhat, ess,
        passed)``, the worst coordinate's rank-normalised nested R-hat over ``superchains`` and bulk ESS (NumPyro's
        estimator, all chains pooled), and whether ``rhat <= self.rhat`` and ``ess >= self.min_ess``. The one place
        the rule lives (the correction's rounds and its calibration, ``experiments/diagnostics/convergence_rule.py``,
        call it)."""
        from numpyro.diagnostics import effective_sample_size

        draws = np.asarray(draws)
        rhat = float(np.max(rank_nested_rhat(draws, superchains)))
        ess = float(np.min(effective_sample_size(draws)))
        return rhat, ess, bool(rhat <= self.rhat and ess >= self.min_ess)

    def next_check(self, steps: int, rhat: float, ess: float) -> int:
        """Transitions per chain at which the rule is judged next, after a check at ``steps`` that it did not pass
        (the one schedule: the correction and its calibration, ``experiments/diagnostics/convergence_rule.py``).

        Where R-hat passed and only the ESS is short, the ESS grows about linearly with the draws: the next check is
        where it is projected to reach ``min_ess``, 10% over (so the run stops near the ESS asked for, not at a
        floor of transitions that overshoots it). Otherwise half as many again (a geometric schedule: checks stay
        few, ``O(log(max_steps))``, so chains that have not mixed get few chances to pass by chance). Always at
        least one more round, at most ``max_steps``, in whole rounds."""
        if rhat <= self.rhat and np.isfinite(ess) and ess > 0:
            want = steps * self.min_ess / ess * 1.1
        else:
            want = steps * 1.5
        want = max(want, self.min_steps)
        rounds = -(-int(np.ceil(min(want, self.max_steps))) // self.round_steps)
        return int(min(max(rounds * self.round_steps, steps + self.round_steps), self.max_steps))

    def _run(self, user, start: Staged, rng_key, scope) -> Staged:
        transport = (start.learnt.get("transport") or {}).get("bijection")
        x0 = jnp.asarray(start.particles)
        if transport is not None:  # the chains run on u, x = transport(u): the flow's coordinates (FlowTransport)
            tgt = FlowTarget(user, transport)
            u0 = tgt.inverse(x0)
            affine, to_user = AffineMap.from_particles(u0), tgt.forward
        else:
            tgt, u0, affine, to_user = user, x0, whitening(start, self.affine_from), _identity
        z = affine.inverse(u0)

        def forward(a):
            """Chain coordinates to the target's (``[n, d]``)."""
            return np.asarray(to_user(affine.forward(jnp.asarray(gather(a)))))

        chains, d = z.shape
        self.check_chains(chains)
        bad = np.flatnonzero(~np.isfinite(np.asarray(logdensities(AffineTarget(tgt, affine), z))))
        if bad.size:  # a chain started there would never move (every proposal's ratio is NaN), silently
            raise FloatingPointError(f"the correction's start: the log-density is not finite at particles "
                                     f"{bad[:10].tolist()}{' ...' if bad.size > 10 else ''} ({bad.size} of {chains}); "
                                     "check the target there, or start the correction elsewhere")
        superchains = self.superchains_of(z)
        key_warm, key_run = jax.random.split(rng_key)
        spent = {"start": chains, "warmup": 0, "sampling": 0, "bridge": 0}  # log-density evaluations, all chains

        def stop(where: str, positions, draws_z=None):
            """Ctrl-C: the stage's partial learnt (the draws so far) with the chains' positions."""
            draws_x = None if draws_z is None else forward(draws_z.reshape(-1, d)).reshape(draws_z.shape)
            learnt = {"draws": draws_x, "evaluations": int(sum(spent.values())), "gradient_evaluations": dict(spent),
                      "stopped": "interrupted", "where": where}
            return StageInterrupted(f"interrupted (Ctrl-C) in the correction {where}", self.name, where,
                                    forward(positions), learnt)

        if self.mesh is not None:  # the chains split over the mesh's devices; the compiled programs follow the split
            z = shard_particles(z, self.mesh)
        t0 = time.perf_counter()
        windows = _windows(self.warmup)
        step_size, warm_sequential = jnp.asarray(0.5, z.dtype), 0
        for w, length in enumerate(windows):  # equal windows: one compilation serves them all
            if scope.requested:
                raise stop(f"before warm-up window {w + 1} of {len(windows)}", z)
            states, (step_size, leapfrogs), seen, n_int = _warm_window(tgt, affine, z, jax.random.fold_in(key_warm, w),
                                                                      step_size, length)
            # each window starts its chains afresh (one evaluation each), then one per leapfrog step
            spent["warmup"] += chains + int(np.sum(gather(n_int)))
            warm_sequential += int(np.sum(np.max(gather(n_int), axis=1)))
            if w < len(windows) - 1:  # the metric from the chains' second half of the window, pooled
                refit = affine.refit(affine.forward(jnp.asarray(gather(seen)).reshape(-1, d)))
                z, affine = refit.inverse(affine.forward(states.position)), refit
                z = z if self.mesh is None else shard_particles(z, self.mesh)
        t1 = time.perf_counter()

        bits = int(np.ceil(np.log2(max(windows) + self.max_steps + 1)))
        thin = max(1, -(-self.max_steps * chains * d // _STORED_NUMBERS))
        kept, steps, accept, divergent, stopped = [], 0, [], 0, "max_steps"
        stats = {}  # per transition kept, [chains, kept] each: ArviZ's sample_stats
        diverged_at = []  # whitened positions where a trajectory diverged (at most _MAX_PLACES kept)
        rounds = {"gradient_evaluations": [], "sequential_steps": [], "kept": []}
        rhat = ess = float("nan")
        logd_last, modes = None, None
        check_at, checks = min(max(self.round_steps, self.min_steps), self.max_steps), []
        while steps < self.max_steps:
            if scope.requested:
                raise stop(f"after {steps} transitions per chain (warm-up done)", states.position,
                           np.concatenate(kept, axis=1) if kept else None)
            states, (pos, logd, n_int, acc, div, energy) = _sampling_round(
                tgt, affine, states, jax.random.fold_in(key_run, steps), step_size, leapfrogs, self.round_steps, bits)
            steps += self.round_steps
            spent["sampling"] += int(np.sum(gather(n_int)))
            rounds["gradient_evaluations"].append(int(np.sum(gather(n_int))))
            rounds["sequential_steps"].append(int(np.sum(np.max(gather(n_int), axis=1))))
            accept.append(float(np.mean(gather(acc))))
            div = gather(div)
            divergent += int(np.sum(div))
            if div.any() and sum(len(p) for p in diverged_at) < _MAX_PLACES:
                diverged_at.append(gather(pos)[div][:_MAX_PLACES])
            kept.append(np.swapaxes(gather(pos)[::thin], 0, 1))  # [chains, draws, d]
            for name, value in (("lp", logd), ("acceptance_rate", acc), ("diverging", div), ("n_steps", n_int),
                                ("energy", energy)):  # ArviZ's sample_stats, thinned as the draws are
                stats.setdefault(name, []).append(np.swapaxes(np.asarray(gather(value))[::thin], 0, 1))
            logd_last = gather(logd)
            rounds["kept"].append(int(sum(k.shape[1] for k in kept)))
            if steps < min(check_at, self.max_steps):  # the next check is rounds away (the ESS's projection)
                continue
            draws = np.concatenate(kept, axis=1)
            if draws.shape[1] >= 4:
                draws_x = forward(draws.reshape(-1, d)).reshape(draws.shape)
                rhat, ess, passed = self.judge(draws_x, superchains)
                check_at = self.next_check(steps, rhat, ess)
                checks.append({"steps": steps, "rhat": rhat, "ess_bulk": ess, "next": None if passed else check_at})
                if passed:
                    stopped = "converged"
                    break
                labels = separated_modes(draws, per_chain=50) if rhat > self.rhat else None  # chains disagree
                modes = None if labels is None else within_modes(draws, labels, self.rhat, self.min_ess)
                if modes is not None and modes["converged"]:
                    stopped = "converged within modes"
                    break
        t2 = time.perf_counter()
        draws_z = np.concatenate(kept, axis=1)
        draws_x = forward(draws_z.reshape(-1, d)).reshape(draws_z.shape)
        weights = None
        if stopped == "converged within modes":  # the same grouping on every draw; the masses by bridge sampling
            shares = mode_weights(lambda y: logdensities(AffineTarget(tgt, affine), jnp.asarray(y, z.dtype)),
                                  draws_z, separated_modes(draws_z), jax.random.fold_in(key_run, 2**31 - 1))
            labels = shares.pop("labels")
            modes.update({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in shares.items()})
            weights = (shares["weights"] / np.maximum(shares["draws"], 1))[labels.reshape(-1)]
            spent["bridge"] = int(shares["evaluations"])
        else:
            modes = None
        stragglers = find_stragglers(np.median(logd_last, axis=0), d).tolist()
        places = np.concatenate(diverged_at)[:_MAX_PLACES] if diverged_at else np.zeros((0, d))
        places = where_divergences(forward(np.asarray(places, z.dtype)), draws_x.reshape(-1, d),
                                   divergent, steps * chains)
        sample_stats = {k: np.concatenate(v, axis=1) for k, v in stats.items()}
        # lp: the target's log-density (the whitening's constant log-determinant taken off AffineTarget's)
        sample_stats["lp"] = sample_stats["lp"] - float(affine.log_det())
        sample_stats["step_size"] = np.full(sample_stats["lp"].shape, float(step_size))
        # beside the rule's nested R-hat, the one ArviZ reports on the same chains (made for a few long chains: it
        # exceeds 1.01 on many short converged ones, so it does not decide ok)
        rhat_arviz = float(np.nanmax(rank_split_rhat(draws_x))) if draws_x.shape[1] >= 4 else float("nan")
        learnt = {"draws": draws_x, "rhat_arviz": rhat_arviz, "sample_stats": sample_stats, "affine": affine, "step_size": float(step_size),
                  "leapfrog_steps": float(leapfrogs),
                  "acceptance": float(np.mean(accept)), "divergences": divergent, "divergence_places": places,
                  "rhat": rhat, "ess_bulk": ess, "superchains": superchains.tolist(),
                  "steps": steps, "thin": thin, "stopped": stopped, "modes": modes, "weights": weights,
                  "gradient_evaluations": dict(spent), "evaluations": int(sum(spent.values())),
                  "sequential_steps": {"warmup": warm_sequential, "sampling": int(sum(rounds["sequential_steps"]))},
                  "rounds": rounds, "checks": checks,
                  "devices": 1 if self.mesh is None else int(self.mesh.size),
                  "stragglers": stragglers, "seconds": {"warmup": t1 - t0, "sampling": t2 - t1}}
        return Staged(particles=jnp.asarray(forward(states.position), z.dtype), state=None,
                      learnt={**start.learnt, self.name: learnt})


@eqx.filter_jit
def _warm_window(tgt, affine, z, key, step_size, length: int):
    """One window of ChEES's adaptation on ``tgt`` in ``affine``'s coordinates: the chains' states, the adapted
    ``(step size, mean leapfrog steps)``, the positions of the window's second half and every transition's leapfrog
    steps."""
    import blackjax
    import optax

    with jax.numpy_rank_promotion("allow"):  # BlackJAX broadcasts implicitly
        warm = blackjax.chees_adaptation(AffineTarget(tgt, affine).logdensity, z.shape[0],
                                         max_leapfrog_steps=MAX_LEAPFROG_STEPS)
        (states, params), info = warm.run(key, z, step_size, optax.adam(0.025), length)
    return (states, (params["step_size"], params["integration_steps_params"][0]), info.state.position[length // 2:],
            info.info.num_integration_steps)


@eqx.filter_jit
def _sampling_round(tgt, affine, states, key, step_size, leapfrogs, steps: int, bits: int):
    """``steps`` transitions of every chain with the adapted jittered HMC: each transition's number of leapfrog steps
    is ``ceil(u_i L)``, ``u_i`` the Halton sequence on ``bits`` bits at the chain's counter (the kernel ChEES's
    adaptation tunes and hands back, ``jitter_amount = 1``, with the counter's range covering warm-up and sampling)."""
    import blackjax
    from blackjax.mcmc.dynamic_hmc import halton_sequence

    chains, d = states.position.shape
    kernel = blackjax.dynamic_hmc(
        AffineTarget(tgt, affine).logdensity, step_size=step_size, inverse_mass_matrix=jnp.ones(d, states.position.dtype),
        next_random_arg_fn=lambda i: i + 1,
        integration_steps_fn=lambda i, length: jnp.ceil(halton_sequence(i, bits) * length).astype(int),
        integration_steps_params=(leapfrogs,))

    def step(states, key):
        with jax.numpy_rank_promotion("allow"):
            states, info = jax.vmap(kernel.step)(jax.random.split(key, chains), states)
        return states, (states.position, states.logdensity, info.num_integration_steps, info.acceptance_rate,
                        info.is_divergent, info.energy)

    return jax.lax.scan(step, states, jax.random.split(key, steps))
