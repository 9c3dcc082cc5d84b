"""``steinax.sample``: one call from a model to draws a practitioner can use, or a clear statement that they cannot.

The stages (each also callable alone, :mod:`steinax.pipeline`):

1. **warm start** (:class:`~steinax.pipeline.LaplaceStart`): L-BFGS to every optimum it finds from a few of the
   target's own starting points (``init``, else ``target.init_particles``, else ``N(0, I)``) and from points spread
   3x wider, and the Laplace normal at each distinct one, each seeding its own share of the particles; or Pathfinder
   (:class:`~steinax.pipeline.PathfinderStart`) where no such normal exists: particles in the typical set and an
   affine map;
2. **particles** (:class:`~steinax.pipeline.WhitenedParticles`): a particle method (default SVGD) until settled,
   in the coordinates that map whitens;
3. **checks**: which hand-off the correction starts from, the warm start's draws or the particles, whichever has
   the smaller KSD in the warm start's whitened coordinates (:func:`~steinax.pipeline.choose_start`); the
   particles' log-densities against the bulk's (:func:`~steinax.pipeline.find_stragglers`) and, with
   ``correction="auto"``, :func:`steinax.diagnostics.sample_quality` with ``spread=True`` (collapse and
   missing-mode checks);
4. **correction** (:class:`~steinax.pipeline.HMCCorrection`): each chosen point continues as a ChEES-HMC chain with
   the ensemble's covariance as its metric until the split R-hat across chains and the bulk ESS say the draws are
   usable: exact in the limit, whatever the particles got wrong; where the chains sit in separated modes they cannot
   leave, until they have converged within each, and the modes' weights are then estimated by bridge sampling
   (:mod:`steinax.pipeline.modes`): the particles' split between modes does not decide the answer's.

**What ``ok=True`` establishes, exactly.** After a correction: the chains agree (split R-hat and bulk ESS within
each separated mode they found, bridge sampling's error on the modes' masses small), no chain is a straggler, and no
transition diverged. It also says what the warm start searched: the optima found from so many starts spread so
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

import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.settle import ConvergenceWarning
from steinax.particles.loop.stages import AbstractStage, Staged
from steinax.pipeline.correction import HMCCorrection
from steinax.pipeline.handoff import choose_start
from steinax.pipeline.laplace import LaplaceStart
from steinax.pipeline.stragglers import find_stragglers
from steinax.pipeline.whitened import WhitenedParticles
from steinax.targets.base import as_target, logdensities

__all__ = ["sample", "SampleResult"]

CORRECTIONS = ("always", "auto", "never")

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
        stages: per stage, what it found (Pathfinder's ELBOs, the particle run's steps and verdict, the checks'
            flags and the correction's start (``stages["checks"]["start"]``, with both squared KSDs), the correction's step size, R-hat, ESS, divergences, stragglers).
        gradient_evaluations: per stage (``"warm_start"`` counts L-BFGS iterations, not their line searches' extra
            evaluations, and the Hessian as ``d``; Pathfinder's ELBO estimates' log-density evaluations are in
            ``stages``), and ``"total"``.
        seconds: wall time per stage, compilation included, and ``"total"``.
        stage_draws: each stage's particles as it handed them on (``"warm_start"``: Pathfinder's draws,
            ``"particles"``: the particle method's), ``[n, d]``: what each stage contributes, measurable.
        labels: the model's ``{"coords", "dims"}`` (PyMC), else ``None``.
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

    def to_datatree(self, target=None, var_name: str = "x"):
        """The answer as an ArviZ ``DataTree``: the correction's chains as chains (R-hat and ESS apply), else the
        particles as one chain marked ``steinax_particles = 1`` (as :meth:`steinax.RunResult.to_datatree`). Where
        the correction found separated modes, ``draws`` (resampled by the modes' weights) as one chain marked
        ``steinax_resampled = 1``: chains that stay in one mode each would weigh the modes by their counts.
        NumPyro and PyMC sites need ``target`` to be split by name; without it the draws are one variable."""
        from arviz_base import from_dict

        if self.chains is not None and self.weights is not None:
            by_chain = self.draws[None]
            attrs = {"steinax_stages": ",".join(self.stages), "steinax_ok": int(self.ok), "steinax_resampled": 1}
        elif self.chains is not None:
            by_chain = self.chains
            attrs = {"steinax_stages": ",".join(self.stages), "steinax_ok": int(self.ok)}
        else:
            by_chain = self.particles[None]
            attrs = {"steinax_particles": 1, "steinax_ok": int(self.ok)}
        c, k, d = by_chain.shape
        post = as_target(target).postprocess(jnp.asarray(by_chain.reshape(-1, d))) if target is not None else None
        if not isinstance(post, dict):
            post = {var_name: by_chain.reshape(-1, d)}
        posterior = {name: np.asarray(v).reshape((c, k) + np.shape(v)[1:]) for name, v in post.items()}
        labels = self.labels or {}
        return from_dict({"posterior": posterior}, attrs={"posterior": attrs}, coords=labels.get("coords"),
                         dims=labels.get("dims"))


def _initial(target, rng_key, n: int, init):
    if init is not None:
        x = jnp.asarray(init)
        if x.ndim != 2:
            raise ValueError(f"`init` must be [n, d] starting points; received shape {tuple(x.shape)}")
        return x
    make = getattr(target, "init_particles", None)
    if make is not None:
        return jnp.asarray(make(rng_key, n))
    dim = getattr(target, "dim", None)
    if not isinstance(dim, int):
        raise ValueError("`init` is needed: the target has neither `init_particles` nor a `dim` to draw N(0, I) in")
    return jax.random.normal(rng_key, (n, dim), jnp.result_type(float))


def _warm_stage(warm_start) -> AbstractStage:
    if warm_start is True:
        return LaplaceStart()
    if isinstance(warm_start, AbstractStage) and warm_start.name == "warm_start":
        return warm_start
    raise TypeError(f"`warm_start` must be True, False or a warm-start stage (LaplaceStart, PathfinderStart); "
                    f"received {warm_start!r}")


def _check_arguments(num_particles, correction):
    if isinstance(num_particles, bool) or not isinstance(num_particles, (int, np.integer)) or num_particles < 2:
        raise ValueError(f"`num_particles` must be an integer >= 2; received {num_particles!r}")
    if correction not in CORRECTIONS:
        raise ValueError(f"`correction` must be one of {CORRECTIONS}; received {correction!r}")


def sample(target, *, rng_key: jax.Array, num_particles: int = 100, init=None, method=None,
           warm_start: AbstractStage | bool = True, particles: bool = True, correction: str = "always",
           corrector: HMCCorrection | None = None, progress: bool | str = "auto") -> SampleResult:
    """Draws from ``target``: warm start, particles, checks, correction (module docstring).

    Args:
        target: a log-density of one ``[d]`` point or a steinax target (``steinax.targets.from_numpyro``,
            ``from_pymc``, ``from_tfp`` for models).
        rng_key: a JAX key.
        num_particles: particles (and, after a correction, chains).
        init: ``[n, d]`` starting points (default ``target.init_particles``, else ``N(0, I)``).
        method: the particle method (default ``steinax.svgd()``).
        warm_start: ``True`` (:class:`LaplaceStart`: MAP and Laplace, Pathfinder where the MAP's normal does not
            exist), a warm-start stage (``LaplaceStart(...)``, ``PathfinderStart(...)``), or ``False``.
        particles: run the particle stage (``False``: the correction starts from the warm start's draws).
        correction: ``"always"`` (default), ``"auto"`` (when the checks flag the particles or name a straggler),
            or ``"never"``.
        corrector: the correction stage's settings (default :class:`HMCCorrection()`).
        progress: the particle loop's bar (``steinax.run``'s ``progress``).

    Returns:
        A :class:`SampleResult`.

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
    from steinax.particles import svgd

    _check_arguments(num_particles, correction)
    tgt = as_target(target)
    key_init, key_warm, key_particles, key_checks, key_correct = jax.random.split(rng_key, 5)
    t_start = time.perf_counter()
    stage = Staged(particles=_initial(tgt, key_init, int(num_particles), init))
    dim = int(stage.particles.shape[1])
    seconds, grads, stages, stage_draws = {}, {}, {}, {}

    if warm_start is not False:
        t0 = time.perf_counter()
        stage = _warm_stage(warm_start)(tgt, stage, key_warm)
        seconds["warm_start"] = time.perf_counter() - t0
        learnt = stage.learnt["warm_start"]
        grads["warm_start"] = int(sum(learnt["lbfgs_iterations"])) + int(learnt.get("hessian_evaluations", 0))
        stages["warm_start"] = {k: v for k, v in learnt.items() if k not in ("affine", "map")}
        stage_draws["warm_start"] = np.asarray(stage.particles)

    warm = stage
    if particles:
        t0 = time.perf_counter()
        whitened = WhitenedParticles(method if method is not None else svgd(), steps=None,
                                     options=RunOptions(progress=progress))
        stage = whitened(tgt, stage, key_particles)
        seconds["particles"] = time.perf_counter() - t0
        learnt = stage.learnt["particles"]
        grads["particles"] = int(learnt["score_evaluations"])
        result = learnt["result"]
        stages["particles"] = {"steps": int(result.state.step), "converged": result.converged}
        stage_draws["particles"] = np.asarray(stage.particles)

    t0 = time.perf_counter()
    checks = {}
    if particles and warm_start is not False:  # the correction's start: the hand-off with the smaller KSD
        chosen, ksds = choose_start(tgt, {"warm_start": warm.particles, "particles": stage.particles},
                                    warm.learnt["warm_start"]["affine"])
        checks.update(start=chosen, start_ksd=ksds)
        grads["checks"] = int(warm.particles.shape[0] + stage.particles.shape[0])
    logd = np.asarray(logdensities(tgt, stage.particles))
    named = find_stragglers(logd, dim).tolist()
    checks["stragglers"] = named
    grads["checks"] = grads.get("checks", 0) + int(logd.size)
    flagged = bool(named)
    if correction == "auto" or (correction == "never" and particles):
        from steinax.diagnostics.quality import sample_quality

        quality = sample_quality(stage.particles, tgt, spread=True, rng_key=key_checks)
        checks.update(collapsed=bool(quality.collapsed), flagged=bool(quality.flagged),
                      ksd=float(quality.discrepancy))
        flagged = flagged or bool(quality.flagged)
    seconds["checks"] = time.perf_counter() - t0
    stages["checks"] = checks

    before_correction = np.asarray(stage.particles)
    chains = weights = None
    if correction == "always" or (correction == "auto" and flagged):
        t0 = time.perf_counter()
        start = warm if checks.get("start") == "warm_start" else stage
        stage = (corrector or HMCCorrection())(tgt, start, key_correct)
        seconds["correction"] = time.perf_counter() - t0
        learnt = stage.learnt["correction"]
        grads["correction"] = int(sum(learnt["gradient_evaluations"].values()))
        chains = learnt["draws"]
        weights = learnt["weights"]
        stages["correction"] = {k: v for k, v in learnt.items() if k not in ("draws", "affine", "weights")}

    ok, message = _verdict(stages, chains is not None, flagged)
    message = f"{message}; {searched(stages.get('warm_start'))}"
    draws = chains.reshape(-1, dim) if chains is not None else np.asarray(stage.particles)
    if weights is not None:
        draws = draws[_systematic(weights, jax.random.fold_in(key_correct, 1))]
    grads["total"] = int(sum(grads.values()))
    seconds["total"] = time.perf_counter() - t_start
    if not ok:
        warnings.warn(f"steinax.sample: {message}", ConvergenceWarning, stacklevel=2)
    return SampleResult(draws=draws, samples=tgt.postprocess(jnp.asarray(draws)), chains=chains,
                        particles=before_correction, ok=ok, message=message, stages=stages, gradient_evaluations=grads, seconds=seconds,
                        stage_draws=stage_draws, labels=getattr(tgt, "labels", None), weights=weights)


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
    paths = len(warm.get("elbos", ())) or "its"
    return (f"the warm start (Pathfinder, {paths} paths from the starting points) looks for one mode: a mode its "
            "paths did not reach is unseen")


def _verdict(stages: dict, corrected: bool, flagged: bool) -> tuple[bool, str]:
    if corrected:
        c = stages["correction"]
        problems = []
        modes = c.get("modes")
        if modes is not None and not np.all(np.asarray(modes["relative_error"]) <= MAX_MASS_ERROR):  # NaN: no estimate
            problems.append(f"the weights of the {len(modes['weights'])} separated modes are uncertain (bridge "
                            f"sampling's relative errors {np.round(modes['relative_error'], 3).tolist()}, wanted at most "
                            f"{MAX_MASS_ERROR} each)")
        if c["stopped"] not in ("converged", "converged within modes"):
            problems.append(f"the correction stopped at its budget ({c['steps']} transitions per chain) with split "
                            f"R-hat {c['rhat']:.3f} and bulk ESS {c['ess_bulk']:.0f} (wanted R-hat <= its `rhat` and "
                            "ESS >= its `min_ess`); raise HMCCorrection(max_steps=...)")
        if c["stragglers"]:
            problems.append(f"chains {c['stragglers']} stayed far below the bulk's log-density (stragglers: a minor "
                            "mode or a stuck chain)")
        if c["divergences"]:
            problems.append(f"{c['divergences']} divergent transitions (the draws may miss a region of high "
                            "curvature)")
        if problems:
            return False, "; ".join(problems)
        if c["stopped"] == "converged within modes":
            shares = ", ".join(f"{w:.3f} ({n} chains)" for w, n in zip(modes["weights"], modes["resident"]))
            return True, (f"converged within {len(modes['weights'])} separated modes (split R-hat at most "
                          f"{np.nanmax(modes['rhat']):.3f} within each) after {c['steps']} transitions per chain; the modes' "
                          f"weights by bridge sampling: {shares}; `draws` are resampled by them")
        return True, (f"converged: split R-hat {c['rhat']:.3f}, bulk ESS {c['ess_bulk']:.0f} after "
                      f"{c['steps']} transitions per chain")
    if flagged:
        named = stages["checks"].get("stragglers")
        return False, ("the checks flag the particles" + (f" (stragglers {named})" if named else "")
                       + "; no correction ran (correction='never'): their moments may be wrong")
    if "particles" in stages and not stages["particles"]["converged"]:
        return False, "the particles did not settle; no correction ran"
    return True, "the particles passed the checks (no correction ran)"
