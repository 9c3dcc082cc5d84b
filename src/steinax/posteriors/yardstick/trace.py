"""A sampler's trace on the yardstick (issue 50): the squared biases of its running estimates against the reference
moments after every step, beside what the step cost.

The yardstick (Robnik, Cohn-Gordon & Seljak, MAMS, arXiv 2503.01707): the squared bias of an estimate of ``E[x^2]``,
per coordinate, in units of ``Var[x^2]`` (:func:`steinax.metrics.posterior.bias_of_estimates`), averaged over
coordinates and for the worst one; a run has reached a fixed accuracy once it falls below 0.01 and stays there
(:func:`steinax.metrics.posterior.cost_to_threshold`). **Decided here**, for many chains (or particles):

* **pooled**: the estimate is the mean over every chain and every kept step so far, which is what a user of many
  chains answers (the ``"x_*"`` and ``"x2_*"`` rows). Exact independent draws give about ``1 / (chains x steps)``.
* **per chain**: each chain's own running estimate, its squared bias averaged over chains (``"chain_x2_*"``): the
  expected squared bias of one chain, which is what the published single-chain figures report (the MAMS paper's
  "gradient evaluations to b^2 < 0.01" for one chain). Its cost is the gradient evaluations per chain.
* **costs**: gradient evaluations summed over chains (``gradient_evaluations``), and sequential gradient steps (the
  most any chain took at each step, summed: what bounds wall time when the chains run in parallel on one device);
  tuning's are reported apart (``tuning``). Wall time: the sampling program's run time, spread over the steps in
  proportion to their sequential gradient steps; compilation apart.
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from steinax.metrics.posterior import (
    BIAS_THRESHOLD,
    bias_of_estimates,
    cost_to_threshold,
)

__all__ = ["BIASES", "PerChain", "Trace", "trace_chains", "trace_from_draws"]

BIASES = ("x_mean", "x_max", "x2_mean", "x2_max", "chain_x2_mean", "chain_x2_max")
"""The trace's squared biases (module docstring), each ``[steps]``."""


class PerChain(eqx.Module):
    """Each chain's own trace, for the published single-chain statistic (:meth:`Trace.published_cost`).

    Attributes:
        worst: ``[T, chains]`` each chain's squared bias of ``E[x^2]`` in its worst coordinate (its own running
            estimate).
        gradient_evaluations: ``[T, chains]`` each chain's cumulative gradient evaluations, after tuning.
    """

    worst: np.ndarray
    gradient_evaluations: np.ndarray


class Trace(eqx.Module):
    """One sampler's run on the yardstick.

    Attributes:
        sampler: its name.
        chains: chains (or particles) run.
        biases: ``{name: [T]}`` for every name in :data:`BIASES` (NaN where a sampler has no such estimate).
        gradient_evaluations: ``[T]`` cumulative, all chains, after tuning.
        sequential_steps: ``[T]`` cumulative sequential gradient steps after tuning.
        seconds: ``[T]`` cumulative run time after tuning (compilation excluded).
        tuning: ``{"gradient_evaluations", "sequential_steps", "seconds"}`` spent before the trace starts (warm-up,
            adaptation, a warm start).
        compile_seconds: compilation, all programs.
        info: what the sampler reports of itself (step size, acceptance, divergences).
        unmeasured: the names of :data:`BIASES` the sampler has no estimate for (their traces NaN), declared by the
            sampler: their cost is NaN ("not measured"). A bias that is NaN because the run went non-finite is not
            in it, and costs ``inf`` ("not reached").
    """

    sampler: str = eqx.field(static=True)
    chains: int = eqx.field(static=True)
    biases: dict
    gradient_evaluations: np.ndarray
    sequential_steps: np.ndarray
    seconds: np.ndarray
    tuning: dict = eqx.field(static=True)
    compile_seconds: float = eqx.field(static=True)
    info: dict = eqx.field(static=True, default_factory=dict)
    unmeasured: tuple = eqx.field(static=True, default=())
    per_chain: PerChain | None = None

    def published_cost(self, threshold: float = BIAS_THRESHOLD) -> float:
        """The published single-chain statistic (the MAMS paper's, as its benchmark code computes it): for each chain,
        the gradient evaluations (its own, tuning apart) until its own worst coordinate's squared bias stays below
        ``threshold``; the median over chains (``inf`` where over half never reach it). NaN without a per-chain
        record. Ours (:meth:`cost` of ``"chain_x2_max"``) instead averages each coordinate's squared bias over the
        chains first and then takes the worst coordinate: a different, smaller-variance statistic."""
        if self.per_chain is None:
            return float("nan")
        worst, grads = np.asarray(self.per_chain.worst), np.asarray(self.per_chain.gradient_evaluations, np.float64)
        return float(np.median([cost_to_threshold(grads[:, c], worst[:, c], threshold) for c in range(worst.shape[1])]))

    def cost(self, bias: str = "x2_max", of: str = "gradient_evaluations", tuning: bool = True,
             threshold: float = BIAS_THRESHOLD) -> float:
        """The cost at which ``biases[bias]`` first stays below ``threshold`` (``inf`` if never within the trace;
        NaN where the sampler declares no such estimate, :attr:`unmeasured`): ``of`` one of
        ``"gradient_evaluations"``, ``"sequential_steps"``, ``"seconds"``, with tuning's added (``tuning=True``) or
        not. For a ``"chain_*"`` bias the gradient evaluations are per chain."""
        if bias not in BIASES:
            raise ValueError(f"`bias` must be one of {BIASES}; received {bias!r}")
        if of not in ("gradient_evaluations", "sequential_steps", "seconds"):
            raise ValueError(f"`of` must be 'gradient_evaluations', 'sequential_steps' or 'seconds'; received {of!r}")
        if bias in self.unmeasured:
            return float("nan")
        costs = np.asarray(getattr(self, of), np.float64) + (float(self.tuning[of]) if tuning else 0.0)
        if bias.startswith("chain_") and of == "gradient_evaluations":
            costs = costs / self.chains
        return cost_to_threshold(costs, self.biases[bias], threshold)


def trace_chains(step, states, rng_key, moments: dict, steps: int, position=lambda s: s.position,
                 gradients=lambda info: info.num_integration_steps):
    """Run ``steps`` transitions of every chain (``step(key, state) -> (state, info)``, one chain; vmapped here) in
    one compiled scan, the running sums of ``x`` and ``x^2`` per chain carried, and the biases of :data:`BIASES`
    computed after every transition against ``moments`` (:func:`steinax.metrics.posterior.reference_moments`).

    Returns ``(states, biases {name: [steps]}, gradient evaluations [steps] (all chains), sequential steps [steps]
    (the most any chain took), compile seconds, run seconds, the first transition (1-based) after which some chain's
    position is not finite, or None, the :class:`PerChain` record)``; ``gradients(info)`` is a transition's gradient
    evaluations per chain.
    """
    moments = {k: jnp.asarray(v, jnp.result_type(float)) for k, v in moments.items()}
    rows = {k: v[None] for k, v in moments.items()}  # for [chains, d] estimates
    chains = jax.tree_util.tree_leaves(states)[0].shape[0]

    def run(states, key):
        x0 = position(states)

        def body(carry, key):
            states, s1, s2, k = carry
            states, info = jax.vmap(step)(jax.random.split(key, chains), states)
            x = position(states)
            s1, s2, k = s1 + x, s2 + x * x, k + 1
            pooled = bias_of_estimates(s1.sum(0) / (k * chains), s2.sum(0) / (k * chains), moments)
            each = bias_of_estimates(s1 / k, s2 / k, rows)["x2"]  # [chains, d]
            per_chain = each.mean(0)
            g = jnp.broadcast_to(jnp.asarray(gradients(info), x.dtype), (chains,))
            out = (pooled["x"].mean(), pooled["x"].max(), pooled["x2"].mean(), pooled["x2"].max(), per_chain.mean(),
                   per_chain.max(), g.sum(), g.max(), jnp.all(jnp.isfinite(x)), each.max(1), g)
            return (states, s1, s2, k), out

        zeros = jnp.zeros_like(x0)
        (states, _, _, _), out = jax.lax.scan(body, (states, zeros, zeros, jnp.zeros((), x0.dtype)),
                                              jax.random.split(key, steps))
        return states, out

    compiled, compile_s = timed_compile(run, states, rng_key)
    (states, out), run_s = timed_run(compiled, states, rng_key)
    out = [np.asarray(o, np.float64) for o in out]
    bad = np.flatnonzero(out[8] == 0)
    nonfinite = int(bad[0]) + 1 if bad.size else None
    each = PerChain(worst=out[9], gradient_evaluations=np.cumsum(out[10], axis=0))
    return states, dict(zip(BIASES, out[:6])), np.cumsum(out[6]), np.cumsum(out[7]), compile_s, run_s, nonfinite, each


def trace_from_draws(draws, gradients, moments: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    """The biases of :data:`BIASES` after every step of stored chains ``draws`` ``[chains, T, d]`` (a sampler run
    outside a steinax scan, such as NumPyro's), with ``gradients`` ``[chains, T]`` each transition's gradient
    evaluations: ``(biases {name: [T]}, cumulative gradient evaluations [T], cumulative sequential steps [T])``, as
    :func:`trace_chains` computes them inside its loop; and the :class:`PerChain` record."""
    x = np.asarray(draws, np.float64)
    g = np.asarray(gradients, np.float64)
    chains, steps, _ = x.shape
    k = np.arange(1, steps + 1)[:, None]
    s1, s2 = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)  # [chains, T, d]
    pooled = bias_of_estimates(s1.sum(0) / (k * chains), s2.sum(0) / (k * chains), moments)
    each = bias_of_estimates(s1 / k[None], s2 / k[None], {key: v[None, None] for key, v in moments.items()})["x2"]
    per_chain = each.mean(0)
    values = (pooled["x"].mean(1), pooled["x"].max(1), pooled["x2"].mean(1), pooled["x2"].max(1),
              per_chain.mean(1), per_chain.max(1))
    record = PerChain(worst=np.swapaxes(each.max(2), 0, 1), gradient_evaluations=np.cumsum(g, axis=1).T)
    return dict(zip(BIASES, values)), np.cumsum(g.sum(0)), np.cumsum(g.max(0)), record


def timed_compile(fn, *args):
    """``(compiled fn, compile seconds)``: ``fn`` jitted and compiled ahead of time for ``args``."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def timed_run(compiled, *args):
    """``(outputs, seconds)`` of a compiled call, to completion."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return out, time.perf_counter() - t0
