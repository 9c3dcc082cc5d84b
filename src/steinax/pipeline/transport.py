"""A nonlinear transport fitted to the particles and refined against the target, used as the correction's coordinates
(NeuTra: Hoffman et al. 2019; nutpie's flow adaptation does the same for PyMC users from its warm-up draws).

One affine map and one step size cannot serve a funnel's neck and its mouth. A normalizing flow ``F`` that pushes
``N(0, I)`` close to the target makes the target, pulled back through ``F`` (:class:`~steinax.targets.FlowTarget`),
close to ``N(0, I)``: the correction's chains then run where one step size serves everywhere, and the draws mapped by
``F`` are exact in the limit whatever ``F`` is (its Jacobian is exact). The particles are what a NUTS warm-up lacks: a
cloud of points over the typical set to fit ``F`` to before any chain runs. **Decided here:**

* **Coordinates**: the flow acts on the whitened coordinates ``y`` of the previous stage's map (the particles' or the
  warm start's, refitted to the particles: the correction's own start), so it learns only what is not affine.
* **The flow**: flowjax's coupling flow with rational-quadratic spline transformers (``layers`` couplings, ``knots``
  knots on ``[-interval, interval]`` in whitened units, the identity outside; conditioners of one hidden layer of
  ``width`` units). Coupling flows are as fast in both directions, and the chains need the forward map and its
  log-determinant at every leapfrog step.
* **Fit** (no evaluation of the target): maximum likelihood on the particles, full batch, Adam; 20% of the
  particles held out, and the flow kept at its best held-out likelihood (a few hundred particles in tens of
  dimensions are easy to overfit).
* **Refine** (against the target): the reverse KL (flowjax's ``ElboLoss``, ``draws`` per step), Adam, for
  ``refine_steps`` steps; a step whose loss is not finite is skipped (optax's ``apply_if_finite``).
* **Is it worth it** (measured, not assumed): the ELBO of the flow and of ``N(0, I)`` in ``y`` (the affine map
  alone), on the same number of fresh draws, and the Pareto k-hat of the flow's importance ratios. The flow is used
  only where its ELBO exceeds the affine map's by at least ``min_gain`` nats: on a Gaussian it buys nothing and the
  correction runs as before. Every evaluation is in the ledger.

Learns ``{"used": bool, "reason", "bijection" (``y -> x``: the affine map after the flow; ``None`` where not used),
"affine", "elbo": {"affine", "flow"}, "khat": {"affine", "flow"}, "fit": {"steps", "held_out_nll"}, "refine":
{"steps", "skipped"}, "evaluations", "seconds"}``. The particles are handed on unchanged.
"""

from __future__ import annotations

import time
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import check_settings
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.stages import AbstractStage, Staged, StageInterrupted
from steinax.targets.affine import AffineMap, AffineTarget
from steinax.targets.base import as_target

__all__ = ["FlowTransport", "AffineThenFlow"]

_CHUNK = 50
"""Optimisation steps per compiled piece (Ctrl-C is seen between pieces)."""


class AffineThenFlow(eqx.Module):
    """``x = affine.forward(flow(u))``: a flowjax-style bijection (``transform_and_log_det``, ``inverse_and_log_det``,
    ``transform``, ``inverse`` on one ``[d]`` point) of the whitening map after the flow."""

    affine: AffineMap
    flow: eqx.Module
    shape: tuple = eqx.field(static=True)

    def __init__(self, affine: AffineMap, flow):
        self.affine, self.flow, self.shape = affine, flow, (affine.dim,)

    def transform_and_log_det(self, u, condition=None):
        y, log_det = self.flow.transform_and_log_det(u)
        return y @ self.affine.matrix.T + self.affine.shift, log_det + self.affine.log_det()

    def inverse_and_log_det(self, x, condition=None):
        y = self.affine.inverse(x)
        u, log_det = self.flow.inverse_and_log_det(y)
        return u, log_det - self.affine.log_det()

    def transform(self, u, condition=None):
        return self.transform_and_log_det(u)[0]

    def inverse(self, x, condition=None):
        return self.inverse_and_log_det(x)[0]


class FlowTransport(AbstractStage):
    """A flow fitted to the particles and refined against the target (module docstring).

    Attributes:
        layers, knots, interval, width: the coupling flow's shape.
        fit_steps: maximum-likelihood steps on the particles, at most.
        refine_steps: reverse-KL steps against the target.
        draws: the flow's draws per reverse-KL step (each one evaluation of the target with its score).
        learning_rate: Adam's, both phases.
        check_draws: draws for the ELBO comparison and k-hat (each one evaluation, for the flow and for the affine map).
        min_gain: the ELBO gain in nats over the affine map below which the flow is not used.
        affine_from: stages whose learnt ``"affine"`` is refitted for the whitening, first found first.
    """

    name: ClassVar[str] = "transport"
    layers: int = 4
    knots: int = 8
    interval: float = 5.0
    width: int = 32
    fit_steps: int = 500
    refine_steps: int = 500
    draws: int = 32
    learning_rate: float = 3e-3
    check_draws: int = 256
    min_gain: float = 0.1
    affine_from: tuple = ("particles", "warm_start")

    def __check_init__(self):
        check_settings("FlowTransport", self, integers=("layers", "knots", "width", "draws", "check_draws"),
                       counts=("fit_steps", "refine_steps"), positive=("interval", "learning_rate"))
        if isinstance(self.min_gain, bool) or not isinstance(self.min_gain, (int, float)) or not np.isfinite(
                self.min_gain):
            raise ValueError(f"FlowTransport: `min_gain` must be a finite number; received {self.min_gain!r}")

    def apply(self, target, start: Staged, rng_key) -> Staged:
        try:
            from flowjax.bijections import RationalQuadraticSpline
            from flowjax.distributions import Normal
            from flowjax.flows import coupling_flow
        except ImportError as exc:
            raise ImportError("the transport stage (FlowTransport) needs flowjax: pip install 'steinax[sample]'") from exc
        from steinax.pipeline.correction import whitening

        tgt = as_target(target)
        t0 = time.perf_counter()
        affine = whitening(start, self.affine_from)
        y = affine.inverse(jnp.asarray(start.particles))
        n, d = y.shape
        learnt = {"used": False, "bijection": None, "affine": affine, "evaluations": 0}
        if d < 2:
            learnt.update(reason="one coordinate: a coupling flow needs two", seconds=time.perf_counter() - t0)
            return Staged(particles=start.particles, state=None, learnt={**start.learnt, self.name: learnt})
        key_init, key_fit, key_refine, key_check = jax.random.split(rng_key, 4)
        flow = coupling_flow(key_init, base_dist=Normal(jnp.zeros(d, y.dtype)),
                             transformer=RationalQuadraticSpline(knots=self.knots, interval=self.interval),
                             flow_layers=self.layers, nn_width=self.width)
        flow = jax.tree.map(lambda a: a.astype(y.dtype) if eqx.is_inexact_array(a) else a, flow)
        ytgt = AffineTarget(tgt, affine)
        with interrupt_scope() as scope:
            flow, fit = _fit(flow, y, key_fit, self, scope, learnt)
            flow, refine = _refine(flow, ytgt, key_refine, self, scope, learnt)
        learnt.update(fit=fit, refine=refine)
        learnt["evaluations"] = refine["steps"] * self.draws
        check = _compare(flow, ytgt, key_check, self.check_draws)
        learnt["evaluations"] += 2 * self.check_draws
        gain = check["elbo"]["flow"] - check["elbo"]["affine"]
        used = bool(np.isfinite(gain) and gain >= self.min_gain)
        learnt.update(check, used=used, reason=(f"the flow's ELBO exceeds the affine map's by {gain:.3g} nats" if used
                                                else f"the flow's ELBO gain over the affine map, {gain:.3g} nats, is "
                                                     f"below min_gain = {self.min_gain:g}"))
        if used:
            learnt["bijection"] = AffineThenFlow(affine, flow.bijection)
        learnt["seconds"] = time.perf_counter() - t0
        return Staged(particles=start.particles, state=None, learnt={**start.learnt, self.name: learnt})


def _partition(flow):
    import paramax

    return eqx.partition(flow, eqx.is_inexact_array, is_leaf=lambda leaf: isinstance(leaf, paramax.NonTrainable))


def _fit(flow, y, key, stage: FlowTransport, scope, learnt):
    """Maximum likelihood on the particles, 20% held out, the best held-out flow kept."""
    import optax
    from flowjax.train.losses import MaximumLikelihoodLoss

    if stage.fit_steps == 0:
        return flow, {"steps": 0, "held_out_nll": float("nan")}
    n = y.shape[0]
    order = jax.random.permutation(key, n)
    held = max(1, n // 5)
    val, train = y[order[:held]], y[order[held:]]
    loss = MaximumLikelihoodLoss()
    params, static = _partition(flow)
    opt = optax.adam(stage.learning_rate)
    state = opt.init(params)
    best, best_params, steps = float(loss(params, static, val)), params, 0
    while steps < stage.fit_steps:
        if scope.requested:
            raise StageInterrupted("interrupted (Ctrl-C) in the transport's fit", "transport",
                                   f"after {steps} fitting steps", None, {**learnt, "evaluations": 0})
        params, state, held_nll = _ml_chunk(params, static, state, opt, train, val, loss)
        steps += _CHUNK
        if float(held_nll) < best:
            best, best_params = float(held_nll), params
        else:  # the held-out likelihood stopped improving: the flow is fitting the particles' noise
            break
    return eqx.combine(best_params, static), {"steps": steps, "held_out_nll": best}


@eqx.filter_jit
def _ml_chunk(params, static, state, opt, train, val, loss):
    def body(carry, _):
        params, state = carry
        grads = eqx.filter_grad(loss)(params, static, train)
        updates, state = opt.update(grads, state, params)
        return (eqx.apply_updates(params, updates), state), None

    (params, state), _ = jax.lax.scan(body, (params, state), None, length=_CHUNK)
    return params, state, loss(params, static, val)


def _refine(flow, ytgt, key, stage: FlowTransport, scope, learnt):
    """The reverse KL against the target in ``y``; non-finite steps skipped."""
    import optax
    from flowjax.train.losses import ElboLoss

    if stage.refine_steps == 0:
        return flow, {"steps": 0, "skipped": 0}
    loss = ElboLoss(ytgt.logdensity, stage.draws)
    params, static = _partition(flow)
    opt = optax.apply_if_finite(optax.adam(stage.learning_rate), max_consecutive_errors=10**9)
    state = opt.init(params)
    steps = 0
    while steps < stage.refine_steps:
        if scope.requested:
            raise StageInterrupted("interrupted (Ctrl-C) in the transport's refinement", "transport",
                                   f"after {steps} refining steps", None,
                                   {**learnt, "evaluations": steps * stage.draws})
        length = min(_CHUNK, stage.refine_steps - steps)
        params, state = _elbo_chunk(params, static, state, opt, jax.random.fold_in(key, steps), loss, length)
        steps += length
    return eqx.combine(params, static), {"steps": steps, "skipped": int(state.total_notfinite)}


@eqx.filter_jit
def _elbo_chunk(params, static, state, opt, key, loss, length: int):
    def body(carry, key):
        params, state = carry
        grads = eqx.filter_grad(loss)(params, static, key)
        updates, state = opt.update(grads, state, params)
        return (eqx.apply_updates(params, updates), state), None

    (params, state), _ = jax.lax.scan(body, (params, state), jax.random.split(key, length))
    return params, state


def _compare(flow, ytgt, key, draws: int) -> dict:
    """The ELBO and importance ratios' Pareto k-hat of the flow and of ``N(0, I)`` in ``y`` (the affine map alone)."""
    from steinax.diagnostics.pareto import importance_khat

    k1, k2 = jax.random.split(key)
    u, logq = _flow_draws(flow, k1, draws)
    logp = _logdensities(ytgt, u)
    z = jax.random.normal(k2, u.shape, u.dtype)
    logq0 = -0.5 * jnp.sum(z * z, axis=1) - 0.5 * z.shape[1] * jnp.log(2 * jnp.pi)
    logp0 = _logdensities(ytgt, z)
    out = {"elbo": {}, "khat": {}}
    for name, lp, lq in (("flow", logp, logq), ("affine", logp0, logq0)):
        ratio = np.asarray(lp - lq, np.float64)
        finite = np.isfinite(ratio)
        out["elbo"][name] = float(np.mean(ratio)) if finite.all() else float("-inf")
        out["khat"][name] = importance_khat(ratio[finite])  # of the weights, not the log-ratios
    return out


@eqx.filter_jit
def _flow_draws(flow, key, draws: int):
    return flow.sample_and_log_prob(key, (draws,))


@eqx.filter_jit
def _logdensities(tgt, x):
    return jax.vmap(tgt.logdensity)(x)
