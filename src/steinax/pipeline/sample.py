"""``steinax.sample``: one call from a model to draws a practitioner can use, or a clear statement that they cannot.

The stages (each also callable alone, :mod:`steinax.pipeline`):

1. **warm start** (:class:`~steinax.pipeline.LaplaceStart`): L-BFGS to every optimum it finds from a few of the
   target's own starting points (``init``, else ``target.init_particles``, else ``N(0, I)``) and from points spread
   3x wider, and the Laplace normal at each distinct one, each seeding its own share of the particles; or Pathfinder
   (:class:`~steinax.pipeline.PathfinderStart`) where no such normal exists: particles in the typical set and an
   affine map;
2. **particles** (:class:`~steinax.pipeline.WhitenedParticles`): a particle method (default SVGD) until settled,
   in the coordinates that map whitens; skipped where the warm start's normal is measured to be a good importance
   proposal and the tails are not polynomial (:func:`~steinax.pipeline.sizing.particle_stage`: Pareto k-hat of
   ``p / q`` below PSIS's threshold; :func:`~steinax.pipeline.sizing.tail_probe`);
3. **checks**: which hand-off the correction starts from, the warm start's draws or the particles, whichever has
   the smaller KSD in the warm start's whitened coordinates (:func:`~steinax.pipeline.choose_start`); the
   particles' log-densities against the bulk's (:func:`~steinax.pipeline.find_stragglers`) and, with
   ``correction="auto"``, :func:`steinax.diagnostics.sample_quality` with ``spread=True`` (collapse and
   missing-mode checks);
4. **correction** (:class:`~steinax.pipeline.HMCCorrection`): each chosen point continues as a ChEES-HMC chain with
   the ensemble's covariance as its metric until the nested R-hat across chains (superchains of neighbouring starts,
   rank-normalised, in the target's coordinates, as ArviZ computes it) and the bulk ESS say the draws are usable: exact in the limit, whatever the particles got wrong; where the chains sit in separated modes they cannot
   leave, until they have converged within each, and the modes' weights are then estimated by bridge sampling
   (:mod:`steinax.pipeline.modes`): the particles' split between modes does not decide the answer's.

**What ``ok=True`` establishes, exactly.** After a correction: the chains have forgotten where they started
(nested R-hat, or split R-hat and bulk ESS within each separated mode they found, bridge sampling's error on the
modes' masses small), no chain is a straggler, and divergent transitions, if any, are few (at most one per thousand
transitions) and scattered, not concentrated where the chains cannot go (:mod:`steinax.pipeline.divergences`). It also says what the warm start searched: the optima found from so many starts spread so
wide. It cannot establish that no mode was missed: a mode that no start reaches, and that no chain wanders into, is
unseen by every check (:attr:`SampleResult.message` says what was searched). Without a correction, ``ok`` is the
verdict of the particle checks (:func:`steinax.diagnostics.sample_quality` with ``spread=True``, always run then).
``ok`` is false, with :attr:`SampleResult.message` and a :class:`~steinax.particles.ConvergenceWarning`, when the
correction's budget ran out before R-hat and ESS were met, when chains are named as stragglers, or, without a
correction, when the checks flag the particles.

**Decided here** (measured on the posterior suite, ``experiments/posteriors/sample_suite.py`` and
docs/posteriors.md): ``correction="always"`` by default. The checks flag most particle runs anyway, cost about as many
gradient evaluations as the correction's warm-up (their missing-mode ascents alone are ``(n + 64) x 1000``), and
cannot see an error the correction would have removed; R-hat and ESS across 100 chains are the sharper check.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._platform import layout_platform
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.settle import ConvergenceWarning
from steinax.particles.loop.stages import AbstractStage, Staged, StageInterrupted
from steinax.pipeline.arguments import CORRECTIONS, check_sample_arguments
from steinax.pipeline.correction import HMCCorrection
from steinax.pipeline.divergences import divergence_problem
from steinax.pipeline.checks import HandoffChecks
from steinax.pipeline.sizing import SizedParticles, TailProbe
from steinax.pipeline.whitened import WhitenedParticles
from steinax.runtime.sharding import gather
from steinax.targets.base import as_target

__all__ = ["sample", "SampleResult", "SampleInterrupted", "CORRECTIONS"]

FLOAT32_NOTE = ("the run was in float32 (JAX's default): measured on 28 suite posteriors, float32 was as accurate as "
                "float64 (the goal met on 27 both ways) but its leapfrog steps diverged more often (ok on 23 against "
                "26), and on a model in raw units it can fail outright; rerun after "
                "jax.config.update('jax_enable_x64', True)")
"""Added to a not-ok verdict reached in float32 (issue 59's precision decision, docs/getting-started.md#precision)."""

MAX_MASS_ERROR = 0.1
"""The largest relative error of a mode's estimated mass (bridge sampling's) for the answer to count as right."""


class SampleResult(eqx.Module):
    """What :func:`sample` returns.

    Attributes:
        draws: ``[m, d]`` the answer in the target's (unconstrained) space, equally weighted: every kept draw of
            every chain after a correction, else the particles. Where the correction found separated modes, the
            chains' draws resampled by ``weights`` (systematic resampling, as many draws): averages over ``draws``
            are then right between modes too.
        samples: ``draws`` mapped by ``target.postprocess`` (NumPyro: a dict of constrained sites).
        chains: ``[chains, kept, d]`` the correction's draws by chain, or ``None`` where none ran.
        weights: ``None``, or ``[chains * kept]`` the weight of each draw of ``chains.reshape(-1, d)`` (summing to
            1) where the correction found separated modes: each mode's estimated mass over its draws.
        particles: ``[n, d]`` the particle stage's answer (before any correction).
        ok: whether the answer passed its checks (module docstring); ``message`` says why not.
        message: what the checks said, in a sentence.
        stages: per stage, what it found: the warm start's search (``stages["warm_start"]["search"]``: its starts)
            and the distinct optima it kept (``["optima"]``: log-density, Laplace share, particles, starts that reached
            it) or why it fell back (``["fallback_reason"]``); the particle run's steps and verdict; the checks' flags
            and the correction's start (``stages["checks"]["start"]``, with both squared KSDs); the correction's step
            size, R-hat, ESS, divergences, stragglers, modes.
        gradient_evaluations: the cost ledger: per stage (``"arguments"``: the starting points' log-densities,
            checked; ``"warm_start"``, ``"particles"``, ``"checks"``, ``"correction"``), the evaluations of the target
            it made, each a log-density (with its score or not) at one point, counted where it is made (each
            stage's ``learnt["evaluations"]``): L-BFGS's line-search steps, the particle loop's steps, trace records
            and final check, the correction's start check, warm-up restarts, leapfrog steps and bridge sampling; a
            Hessian counts as ``d``; and ``"total"``. Equal to a count taken inside the log-density
            (``experiments/trust/cost_ledger.py``), except where Pathfinder ran (BlackJAX does not report its line
            searches' evaluations: its iterations are counted).
        seconds: wall time per stage, compilation included, and ``"total"``.
        stage_draws: each stage's particles as it handed them on (``"warm_start"``: Pathfinder's draws,
            ``"particles"``: the particle method's), ``[n, d]``: what each stage contributes, measurable.
        labels: the model's ``{"coords", "dims"}`` (PyMC), else ``None``.
        sample_stats: the correction's per-draw statistics, ``[chains, kept]`` each, under ArviZ's names:
            ``"lp"`` (the log-density sampled: the target's, or with a learned centredness the decentred model's),
            ``"acceptance_rate"``, ``"diverging"``, ``"n_steps"`` (leapfrog steps), ``"energy"`` (the Hamiltonian
            at the draw, for ArviZ's energy plot and BFMI) and ``"step_size"``; ``None`` where no correction ran.
    """

    draws: np.ndarray
    samples: object
    chains: np.ndarray | None
    particles: np.ndarray
    ok: bool = eqx.field(static=True)
    message: str = eqx.field(static=True)
    stages: dict = eqx.field(static=True)
    gradient_evaluations: dict = eqx.field(static=True)
    seconds: dict = eqx.field(static=True)
    stage_draws: dict = eqx.field(default_factory=dict)
    labels: dict | None = eqx.field(static=True, default=None)
    weights: np.ndarray | None = None
    sample_stats: dict | None = None

    def to_datatree(self, target=None, var_name: str = "x"):
        """The answer as an ArviZ ``DataTree``: the correction's chains as chains (R-hat and ESS apply, and
        ``sample_stats`` holds :attr:`sample_stats`: divergences, energy, acceptance, step size, log-density), else the
        particles as one chain marked ``steinax_particles = 1`` (as :meth:`steinax.RunResult.to_datatree`). Where
        the correction found separated modes, ``draws`` (resampled by the modes' weights) as one chain marked
        ``steinax_resampled = 1``: chains that stay in one mode each would weigh the modes by their counts.
        NumPyro and PyMC sites need ``target`` to be split by name; without it the draws are one variable."""
        from arviz_base import from_dict

        stats = None
        if self.chains is not None and self.weights is not None:
            by_chain = self.draws[None]
            attrs = {"steinax_stages": ",".join(self.stages), "steinax_ok": int(self.ok), "steinax_resampled": 1}
        elif self.chains is not None:
            by_chain = self.chains
            attrs = {"steinax_stages": ",".join(self.stages), "steinax_ok": int(self.ok)}
            stats = self.sample_stats
        else:
            by_chain = self.particles[None]
            attrs = {"steinax_particles": 1, "steinax_ok": int(self.ok)}
        c, k, d = by_chain.shape
        post = as_target(target).postprocess(jnp.asarray(by_chain.reshape(-1, d))) if target is not None else None
        if not isinstance(post, dict):
            post = {var_name: by_chain.reshape(-1, d)}
        posterior = {name: np.asarray(v).reshape((c, k) + np.shape(v)[1:]) for name, v in post.items()}
        labels = self.labels or {}
        groups = {"posterior": posterior}
        if stats is not None and np.shape(stats["lp"]) == (c, k):  # ArviZ's diagnostics and energy plot read these
            groups["sample_stats"] = dict(stats)
        return from_dict(groups, attrs={"posterior": attrs}, coords=labels.get("coords"), dims=labels.get("dims"))


class SampleInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`sample`: ``.result`` is a :class:`SampleResult` of what was done (``ok=False``, its
    ``message`` saying where it stopped, ``draws`` the latest stage's points: the correction's draws so far, else the
    particles where the particle loop stopped, else the warm start's, else the starting points), ``.stage`` the stage
    it stopped in and ``.where`` how far that stage got."""

    def __init__(self, message: str, stage: str, where: str, result: SampleResult):
        super().__init__(message)
        self.stage, self.where, self.result = stage, where, result


_DRAWS_OF = ("warm_start", "particles")
"""The stages whose points are :attr:`SampleResult.stage_draws`."""

_HANDED_ON = ("affine", "map", "draws", "weights", "reparameterised", "result", "results", "bijection", "start_points",
              "sample_stats")
"""What stages learn for the next ones (maps, arrays, run results) and :attr:`SampleResult.stages` does not hold."""


class _Ledger:
    """What :func:`sample` has done so far: per stage its seconds, its evaluations of the target (the one cost
    ledger: each stage reports ``learnt["evaluations"]``, counted where they are made) and what it found; the latest
    points in the target's space."""

    def __init__(self, scope, args):
        self.scope, self.args, self.t_start = scope, args, time.perf_counter()
        self.seconds, self.grads, self.stages, self.stage_draws = {}, {}, {}, {}
        self.points, self.particles, self.chains = np.asarray(args.init), None, None
        self.back = None  # the reparameterisation's map to the target's own coordinates, once one is in place
        self.grads["arguments"] = int(args.init.shape[0])  # the starting points' log-densities, checked
        self.points_before_checks = self.points

    def stage(self, stage: AbstractStage, target, start: Staged, rng_key) -> Staged:
        """``stage(target, start, rng_key)`` run (:meth:`run`) and booked, the one bookkeeping of every stage: its
        evaluations (``learnt[name]["evaluations"]``, plus ``"hessian_evaluations"``: a warm start's Hessians count
        ``d`` each), what it learnt (without the maps, arrays and results in :data:`_HANDED_ON`) and, for the stages
        in :data:`_DRAWS_OF`, its points. A stage that did not run learns nothing and is not booked; a skipped one
        (``"skipped"``) is recorded with its decision but costs nothing."""
        name = stage.name
        out = self.run(name, lambda: stage(target, start, rng_key))
        learnt = out.learnt.get(name) if out is not start else None
        if learnt is None:
            self.seconds.pop(name, None)
            return out
        self.stages[name] = {k: v for k, v in learnt.items() if k not in _HANDED_ON}
        if learnt.get("skipped"):
            self.seconds.pop(name, None)
            return out
        self.grads[name] = int(learnt.get("evaluations", 0)) + int(learnt.get("hessian_evaluations", 0))
        if name == "reparam" or (name in _DRAWS_OF and not learnt.get("failed")):
            self.points = np.asarray(out.particles)
            if name in _DRAWS_OF:
                self.stage_draws[name] = self.points
            if name == "particles":
                self.particles = self.points
        if name != "checks" and name not in ("transport", "correction"):
            self.points_before_checks = self.points
        return out

    def run(self, name: str, fn):
        """``fn()`` as stage ``name``, timed; Ctrl-C before it, during it (its stage's own partial result) or as it
        ended stops :func:`sample` there."""
        if self.scope.requested:
            raise self.interrupted(name, "before it started")
        t0 = time.perf_counter()
        try:
            out = fn()
        except StageInterrupted as err:
            self.grads[name] = int(err.learnt.get("evaluations", 0))
            self.points = gather(err.particles)
            draws = err.learnt.get("draws")
            if draws is not None and draws.shape[1]:
                self.chains = draws
            self.stages[name] = {k: v for k, v in err.learnt.items() if k not in _HANDED_ON}
            raise self.interrupted(name, err.where) from None
        finally:  # a stage that raised (a non-finite particle stage the correction goes on from) is timed too
            self.seconds[name] = time.perf_counter() - t0
        if self.scope.requested:
            raise self.interrupted(name, "as it finished (its work is kept)")
        return out

    def interrupted(self, stage: str, where: str) -> SampleInterrupted:
        self.scope.honoured = True
        back = self.back or (lambda a: a)
        self.points, self.chains = back(self.points), None if self.chains is None else back(self.chains)
        self.particles = None if self.particles is None else back(self.particles)
        self.stage_draws.update({k: back(v) for k, v in self.stage_draws.items()})
        self.back = None
        d = self.points.shape[1]
        draws = self.chains.reshape(-1, d) if self.chains is not None else self.points
        message = (f"interrupted (Ctrl-C) in the {stage} stage, {where}; stages done: "
                   f"{', '.join(s for s in self.stages if s != stage) or 'none'}; the draws are the "
                   f"{'correction chains so far' if self.chains is not None else 'latest stage points'}, not checked")
        self.grads["total"] = int(sum(v for k, v in self.grads.items() if k != "total"))
        self.seconds["total"] = time.perf_counter() - self.t_start
        tgt = self.args.target
        result = SampleResult(draws=draws, samples=tgt.postprocess(jnp.asarray(draws)), chains=self.chains,
                              particles=self.particles if self.particles is not None else self.points, ok=False,
                              message=message, stages=self.stages, gradient_evaluations=self.grads,
                              seconds=self.seconds, stage_draws=self.stage_draws, labels=getattr(tgt, "labels", None))
        return SampleInterrupted(message + "; `err.result` holds them", stage, where, result)


def sample(target, *, rng_key: jax.Array, num_particles: int | None = None, init=None, method=None,
           warm_start: AbstractStage | bool = True, particles: bool | str = "auto", correction: str = "always",
           corrector: HMCCorrection | None = None, transport: AbstractStage | bool = False,
           reparam: AbstractStage | bool = True, progress: bool | str = "auto", mesh=None) -> SampleResult:
    """Draws from ``target``: warm start, particles, checks, correction (module docstring).

    Args:
        target: a log-density of one ``[d]`` point or a steinax target (``steinax.targets.from_numpyro``,
            ``from_pymc``, ``from_tfp`` for models).
        rng_key: a JAX key.
        num_particles: particles (and, after a correction, chains); default 100, or ``init``'s rows (giving both,
            they must agree).
        init: ``[n, d]`` starting points (default ``target.init_particles``, else ``N(0, I)``); each must have a finite
            log-density. The warm start searches for optima from a few of them and from points spread 3x wider.
        method: the particle method (default ``steinax.svgd()``).
        warm_start: ``True`` (:class:`LaplaceStart`: every optimum it finds and its Laplace normal, Pathfinder where
            no such normal exists), a warm-start stage (``LaplaceStart(...)``, ``PathfinderStart(...)``), or ``False``.
        particles: ``"auto"`` (default: run the particle stage unless the warm start's normal is measured to be a
            good importance proposal, :mod:`steinax.pipeline.sizing`; the decision and its evidence are in
            ``stages["particles"]["decision"]``), ``True`` (always) or ``False`` (never: the correction starts from
            the warm start's draws).
        correction: ``"always"`` (default), ``"auto"`` (when the checks flag the particles or name a straggler),
            or ``"never"``. Without a correction the answer is checked by
            :func:`steinax.diagnostics.sample_quality` with ``spread=True``.
        corrector: the correction stage's settings (default :class:`HMCCorrection()`).
        transport: ``True`` (:class:`~steinax.pipeline.FlowTransport`: a normalizing flow fitted to the correction's
            start and refined against the target, used as the chains' coordinates where it beats the affine map),
            a transport stage, or ``False`` (default).
        reparam: ``True`` (default: :class:`~steinax.pipeline.LearnedCentredness`, for a NumPyro target that holds
            its model and has hierarchical location-scale sites: each site's centredness learned first, every stage
            run in those coordinates, the draws mapped back; on other targets nothing), a reparameterisation stage,
            or ``False``.
        progress: the particle loop's bar (``steinax.run``'s ``progress``).
        mesh: a one-axis device mesh (``steinax.runtime.sharding.particle_mesh()``, or ``distributed_mesh()`` over
            the processes of a ``jax.distributed`` run) that divides the particles: the particle stage's pairwise
            work (``svgd(mesh=mesh)``) and the correction's chains are split over its devices, each device holding
            its share of the particles and chains; the warm start runs whole on every device. ``None``: one device.
            The answer is the single-device one up to the order of sums across devices.

    Returns:
        A :class:`SampleResult`.

    Raises:
        ValueError, TypeError: an argument is wrong (:mod:`steinax.pipeline.arguments`: checked before any work).
        SampleInterrupted: Ctrl-C (a ``KeyboardInterrupt``), seen between the stages' compiled pieces (a warm start's
            L-BFGS, 100 particle steps, a correction's warm-up window or round): ``err.result`` holds what was done.

    Example:
        >>> import jax, jax.numpy as jnp, steinax
        >>> logp = lambda x: -0.5 * jnp.sum(((x - jnp.array([1e3, 0.0])) / jnp.array([50.0, 0.01])) ** 2)
        >>> res = steinax.sample(logp, rng_key=jax.random.key(0), init=jnp.zeros((100, 2)),
        ...                      progress=False)  # doctest: +SKIP
        >>> res.ok, bool(abs(res.draws[:, 0].mean() - 1e3) < 15.0)  # doctest: +SKIP
        (True, True)

    (Not run with the docstrings' examples, for time: the README's first example runs the same call, and
    ``tests/pipeline/test_sample.py`` checks it.)
    """
    with interrupt_scope() as scope:  # the one Ctrl-C scope: every stage, loop and compilation inside joins it
        args = check_sample_arguments(target, rng_key=rng_key, num_particles=num_particles, init=init, method=method,
                                      warm_start=warm_start, particles=particles, correction=correction,
                                      corrector=corrector, progress=progress, transport=transport,
                                      reparam=reparam, mesh=mesh)
        ledger = _Ledger(scope, args)
        if scope.requested:  # pressed during the argument checks
            raise ledger.interrupted("arguments", "before any stage ran")
        result = _stages(args, ledger, rng_key)
        if scope.requested:  # pressed as the result was put together: the result is whole, but the user asked to stop
            ledger.chains, ledger.points = result.chains, result.draws
            raise ledger.interrupted("final", "after every stage ran (the result is complete)")
    if not result.ok:
        warnings.warn(f"steinax.sample: {result.message}", ConvergenceWarning, stacklevel=2)
    return result


def _route(args, rng_key) -> list:
    """The stages :func:`sample` runs, in order, each with its key (module docstring): ``sample`` is this chain.
    Stages that size or skip themselves decide from what the earlier ones learnt (:mod:`steinax.pipeline.sizing`,
    :class:`~steinax.pipeline.checks.HandoffChecks`); the correction and a transport run where the checks chose one."""
    from steinax.particles import svgd

    keys = _keys(rng_key)
    whitened = WhitenedParticles(args.method if args.method is not None else svgd(), steps=None,
                                 options=RunOptions(progress=args.progress))
    corrector = args.corrector
    route = []
    if args.reparam is not None and args.reparam.applies(args.target):  # every later stage in the learned coordinates
        route.append((args.reparam, keys["reparam"]))
    if args.warm_start is not None:
        route += [(args.warm_start, keys["warm_start"]), (TailProbe(), keys["warm_start"])]  # the probe: evidence, whatever `particles`
    route += [(SizedParticles(whitened, args.particles, "raise" if args.correction == "never" else "continue",
                              args.mesh), keys["particles"]),
              (HandoffChecks(args.correction, layout_platform(), 1 if args.mesh is None else int(args.mesh.size),
                             corrector.min_steps, corrector.max_steps), keys["checks"])]
    if args.transport is not None:
        route.append((_IfCorrecting(args.transport), keys["transport"]))
    route.append((_IfCorrecting(corrector), keys["correction"]))
    return route


def _keys(rng_key) -> dict:
    """Each stage's key, from :func:`sample`'s ``rng_key``."""
    warm, particles, checks, correction = jax.random.split(jax.random.fold_in(rng_key, 1), 4)
    return {"warm_start": warm, "particles": particles, "checks": checks, "correction": correction,
            "transport": jax.random.fold_in(rng_key, 2), "reparam": jax.random.fold_in(rng_key, 3)}


class _IfCorrecting(AbstractStage):
    """``stage`` where the checks chose a correction (their ``"correct"``), with the ``min_steps`` they sized (heavy
    tails); otherwise it does not run and learns nothing."""

    stage: AbstractStage

    @property
    def name(self) -> str:
        return self.stage.name

    def apply(self, target, start: Staged, rng_key) -> Staged:
        checks = start.learnt.get("checks") or {}
        if not checks.get("correct"):
            return start
        stage = self.stage
        if "min_steps" in checks and isinstance(stage, HMCCorrection):
            stage = dataclasses.replace(stage, min_steps=checks["min_steps"]["min_steps"])
        return stage(target, start, rng_key)


def _stages(args, ledger: _Ledger, rng_key) -> SampleResult:
    """The route's stages in order (:func:`_route`), each booked by ``ledger``; the answer in the target's own
    coordinates, judged (:func:`_verdict`)."""
    tgt = args.target  # normalised once, by the argument check: every stage receives this target (or the learned one)
    start = Staged(particles=args.init)
    for stage, key in _route(args, rng_key):
        start = ledger.stage(stage, tgt, start, key)
        if stage.name == "reparam" and start.learnt["reparam"]["reparameterised"] is not None:
            reparameterised = start.learnt["reparam"]["reparameterised"]
            tgt = reparameterised.target
            ledger.back = reparameterised.draws_to_original_numpy  # every later point is in the learned coordinates
    stages, stage_draws = ledger.stages, ledger.stage_draws
    dim = int(args.init.shape[1])
    correction = start.learnt.get("correction")
    chains = None if correction is None else correction["draws"]
    weights = None if correction is None else correction["weights"]
    sample_stats = None if correction is None else correction.get("sample_stats")
    particles_out = ledger.points_before_checks
    reparameterised = (start.learnt.get("reparam") or {}).get("reparameterised")
    if reparameterised is not None:  # the answer in the target's own coordinates (chains, particles, stage draws)
        back = reparameterised.draws_to_original_numpy
        chains = None if chains is None else back(chains)
        particles_out = back(particles_out)
        if chains is not None and stages["correction"]["stopped"] == "converged":  # the rule in the user's coordinates
            rhat_user, ess_user, passed = args.corrector.judge(chains, np.asarray(stages["correction"]["superchains"]))
            stages["correction"]["user_coordinates"] = {"rhat": rhat_user, "ess_bulk": ess_user, "passed": passed}
        stage_draws.update({k: back(v) for k, v in stage_draws.items()})
    tgt = args.target
    ok, message = _verdict(stages, chains, stages["checks"]["flagged_any"])
    message = f"{message}; {searched(stages.get('warm_start'))}{reparameterised_clause(stages.get('reparam'))}"
    draws = chains.reshape(-1, dim) if chains is not None else particles_out
    if weights is not None:
        draws = draws[_systematic(weights, jax.random.fold_in(_keys(rng_key)["correction"], 1))]
    grads = ledger.grads
    grads["total"] = int(sum(v for k, v in grads.items() if k != "total"))
    ledger.seconds["total"] = time.perf_counter() - ledger.t_start
    return SampleResult(draws=draws, samples=tgt.postprocess(jnp.asarray(draws)), chains=chains,
                        particles=particles_out, ok=ok, message=message, stages=stages,
                        gradient_evaluations=grads, seconds=ledger.seconds, stage_draws=stage_draws,
                        labels=getattr(tgt, "labels", None), weights=weights, sample_stats=sample_stats)


def reparameterised_clause(learnt: dict | None) -> str:
    """The reparameterisation's clause of :attr:`SampleResult.message` (empty where none was made)."""
    if not learnt or not learnt.get("sites"):
        return ""
    parts = ", ".join(f"{site} {np.mean(learnt['centred'][site]):.2f}" for site in learnt["sites"])
    return (f"; the stages ran with hierarchical sites decentred by a learned centredness (mean per site, 1 = as "
            f"written: {parts}), and the draws are mapped back to the model's coordinates (the rule was judged in "
            "both)")


def _systematic(weights: np.ndarray, rng_key) -> np.ndarray:
    """Indices of systematic resampling (Kitagawa 1996): ``m = len(weights)`` draws, draw ``i`` kept about
    ``m * weights[i]`` times (never more than one off), from one uniform."""
    m = weights.size
    u = (float(jax.random.uniform(rng_key)) + np.arange(m)) / m
    return np.minimum(np.searchsorted(np.cumsum(weights), u), m - 1)


def searched(warm: dict | None) -> str:
    """What the warm start searched for modes, in a clause of :attr:`SampleResult.message`: what ``ok=True`` can and
    cannot establish (a mode no start reached is unseen by every later stage)."""
    if warm is None:
        return ("no warm start searched for other modes (warm_start=False): a mode the starting points do not reach "
                "is unseen")
    search = warm.get("search")
    if warm.get("method") == "laplace" and search is not None:
        k = len(warm["optima"])
        return (f"the warm start found {k} distinct optim{'um' if k == 1 else 'a'} from "
                f"{search['from_start'] + search['wide']} L-BFGS starts ({search['from_start']} of the starting points, "
                f"{search['wide']} spread {search['spread']:g}x wider), each seeding chains: a mode no start reached "
                "is unseen")
    if warm.get("method") == "start":
        return (f"the warm start found no normal approximation ({warm.get('fallback_reason', '').split(';')[0]}); the "
                "later stages started from the starting points: a mode they do not reach is unseen")
    paths = len(warm.get("elbos", ())) or "its"
    return (f"the warm start (Pathfinder, {paths} paths from the starting points) looks for one mode: a mode its "
            "paths did not reach is unseen")


def tail_problems(chains: np.ndarray, probe: dict | None = None) -> list:
    """Heavy tails, as problems for the verdict: the tail probe's polynomial exponent where it is at most
    :data:`~steinax.pipeline.sizing.NO_VARIANCE_EXPONENT` (``probe``: ``stages["sizing"]["tails"]``); else, among
    the correction's draws, each coordinate's Pareto ``k``-hat
    (:func:`steinax.diagnostics.pareto.pareto_khat`, both tails, on at most 20,000 evenly thinned draws). From 1/2
    (:data:`~steinax.diagnostics.pareto.FINITE_VARIANCE_K`) the variance may not exist: the draws' sds, their MCSEs
    and ESS estimate nothing, so ``ok`` (which vouches for them) is false; the draws themselves may still be right
    (rank-normalised R-hat can settle on them), and the message says so. At or above
    :func:`~steinax.diagnostics.pareto.khat_threshold` the draws' means are unreliable too."""
    from steinax.diagnostics.pareto import FINITE_VARIANCE_K, khat_threshold, pareto_khat

    from steinax.pipeline.sizing import NO_VARIANCE_EXPONENT

    if probe is not None and probe.get("exponent", np.inf) <= NO_VARIANCE_EXPONENT:
        return [f"heavy tails: along a ray from the warm start's centre the log-density falls like r^-"
                f"{probe['exponent']:.2f} (at most r^-{NO_VARIANCE_EXPONENT:g}: a marginal with no finite variance, "
                "steinax.pipeline.sizing.tail_probe), so the draws' sds, MCSEs and ESS estimate nothing; the draws "
                "may still follow the target"]
    x = chains.reshape(-1, chains.shape[-1])
    x = x[np.unique(np.linspace(0, x.shape[0] - 1, min(x.shape[0], 20_000)).astype(int))]
    if x.shape[0] < 100:
        return []
    k = np.nan_to_num(pareto_khat(x), nan=-np.inf)
    worst = int(np.argmax(k))
    heavy = np.flatnonzero(k >= FINITE_VARIANCE_K).tolist()
    if not heavy:
        return []
    limit = khat_threshold(x.shape[0])
    text = (f"heavy tails in coordinates {heavy[:10]}{' ...' if len(heavy) > 10 else ''} (Pareto k-hat up to "
            f"{k[worst]:.2f} in coordinate {worst}; from 0.5 the variance may not exist, so the draws' sds, MCSEs "
            "and ESS estimate nothing")
    if k[worst] >= limit:
        return [text + f"; above {limit:.2f} the draws' means are unreliable too)"]
    return [text + "; the draws may still follow the target)"]


def _verdict(stages: dict, chains, flagged: bool) -> tuple[bool, str]:
    if chains is not None:
        c = stages["correction"]
        problems, notes = tail_problems(np.asarray(chains), (stages.get("sizing") or {}).get("tails")), []
        failed = stages.get("particles", {}).get("failed")
        if failed:
            notes.append(f"the particle stage stopped ({failed.split(';')[0]}: a hard boundary of the support?) and "
                         "the correction started from the warm start's draws")
        modes = c.get("modes")
        if modes is not None and not np.all(np.asarray(modes["relative_error"]) <= MAX_MASS_ERROR):  # NaN: no estimate
            problems.append(f"the weights of the {len(modes['weights'])} separated modes are uncertain (bridge "
                            f"sampling's relative errors {np.round(modes['relative_error'], 3).tolist()}, wanted at most "
                            f"{MAX_MASS_ERROR} each)")
        if c["stopped"] not in ("converged", "converged within modes"):
            problems.append(f"the correction stopped at its budget ({c['steps']} transitions per chain) with "
                            f"nested R-hat {c['rhat']:.3f} and bulk ESS {c['ess_bulk']:.0f} (wanted R-hat <= its `rhat` and "
                            "ESS >= its `min_ess`); raise HMCCorrection(max_steps=...)")
        user = c.get("user_coordinates")
        if user is not None and not user["passed"]:
            problems.append(f"in the model's own coordinates the chains miss the rule (nested R-hat {user['rhat']:.3f}, "
                            f"bulk ESS {user['ess_bulk']:.0f}) that they met in the learned ones")
        if c["stragglers"]:
            problems.append(f"chains {c['stragglers']} stayed far below the bulk's log-density (stragglers: a minor "
                            "mode or a stuck chain)")
        problem, note = divergence_problem(c["divergence_places"])
        problems += [problem] if problem else []
        notes += [note] if note else []
        if problems and "flat there" in str(stages.get("warm_start", {}).get("fallback_reason")):
            notes.append("the log-density was flat at the warm start's optimum: the target may be improper (a "
                         "parameter without a prior?), and no sampler can converge on it")
        if problems and np.asarray(chains).dtype == np.float32:
            notes.append(FLOAT32_NOTE)
        if problems:
            return False, "; ".join(problems + notes)
        noted = "".join(f"; {n}" for n in notes)
        if c["stopped"] == "converged within modes":
            shares = ", ".join(f"{w:.3f} ({n} chains)" for w, n in zip(modes["weights"], modes["resident"]))
            return True, (f"converged within {len(modes['weights'])} separated modes (split R-hat at most "
                          f"{np.nanmax(modes['rhat']):.3f} within each) after {c['steps']} transitions per chain; the modes' "
                          f"weights by bridge sampling: {shares}; `draws` are resampled by them{noted}")
        arviz = c.get("rhat_arviz")
        beside = (f" (ArviZ's split R-hat, made for a few long chains and not the rule here: {arviz:.3f})"
                  if arviz is not None and np.isfinite(arviz) else "")
        return True, (f"converged: nested R-hat {c['rhat']:.3f}{beside}, bulk ESS {c['ess_bulk']:.0f} after "
                      f"{c['steps']} transitions per chain{noted}")
    if flagged:
        named = stages["checks"].get("stragglers")
        return False, ("the checks flag the particles" + (f" (stragglers {named})" if named else "")
                       + "; no correction ran (correction='never'): their moments may be wrong")
    if "particles" in stages and not stages["particles"].get("converged", True):
        notes = stages["particles"].get("warnings") or []
        said = f" ({notes[0].split(';')[0]})" if notes else ""
        return False, (f"the particles did not settle{said}; no correction ran (correction='auto' found nothing "
                       "to flag): pass correction='always' (the default) for chains that correct them")
    return True, "the particles passed the checks (no correction ran)"
