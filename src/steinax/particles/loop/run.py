"""The run loop's entry point: ``run`` picks a stopping rule and hands it the run's options.

The loop's parts (``steinax.particles.loop``): the compiled segment (:mod:`~steinax.particles.loop.segment`), the
stopping rules (:mod:`~steinax.particles.loop.stopping`: a fixed length, :mod:`~steinax.particles.loop.fixed`; until
settled, :mod:`~steinax.particles.loop.until_settled`, with the rule in :mod:`~steinax.particles.loop.settle`), and the
run services: checkpoints (:mod:`~steinax.particles.loop.checkpointing`), progress
(:mod:`~steinax.particles.loop.progress`) and Ctrl-C (:mod:`~steinax.particles.loop.interrupt`). What a run does:

``run(method, target, particles, steps=..., optimizer=..., rng_key=...)``

* Step ``t`` (1-based) uses the key ``fold_in(rng_key, t - 1)``, so a run is
  deterministic for a given key and a resumed run (``initial_state=``)
  reproduces an uninterrupted one exactly.
* Every ``trace_every`` steps (default: every 20th step or rarer, so the trace
  costs about a twentieth of the run; and at steps 0 and ``steps``) the trace
  records the squared V-statistic KSD of the particles (of at most
  ``diagnostic_points`` = 2000 evenly strided ones) with a fixed diagnostic kernel
  (IMQ, ``c = 1``, ``beta = -1/2``, the same for every method so traces
  compare across methods), plus the last step's direction norm and the
  method's diagnostics (e.g. the bandwidth). The diagnostic costs one extra
  score evaluation per trace point.
* A step whose log-densities, scores, direction or new particles are not
  finite stops the run: later steps leave the state unchanged, and
  :class:`NonFiniteError` reports the step and carries the result of the last
  finite step.
* Progress (``tqdm``) is reported from inside the compiled loop with an
  ordered ``jax.debug.callback`` at each trace point.
* The compiled loop is cached: a second run with the same method, target and
  optimizer objects and the same step counts does not recompile.
"""

from __future__ import annotations

import os

import jax
import optax

from steinax.kernels.base import AbstractKernel
from steinax.particles.base import AbstractParticleMethod, ParticleState
from steinax.particles.loop.interrupt import interrupt_scope
from steinax.particles.loop.options import RunOptions
from steinax.particles.loop.result import NonFiniteError, RunInterrupted, RunResult, Trace
from steinax.particles.loop.settle import DivergenceWarning
from steinax.particles.loop.stopping import StoppingRule, as_stopping_rule

__all__ = ["run", "RunResult", "Trace", "NonFiniteError", "RunInterrupted", "DivergenceWarning", "StoppingRule"]


def run(
    method: AbstractParticleMethod,
    target,
    particles: jax.Array | None = None,
    *,
    steps: int | StoppingRule | None = None,
    optimizer: optax.GradientTransformation | None = None,
    rng_key: jax.Array,
    trace_every: int | None = None,
    diagnostic_kernel: AbstractKernel | None = None,
    diagnostic_block_size: int | None = None,
    diagnostic_points: int | None = 2000,
    initial_state: ParticleState | None = None,
    progress: bool | str = "auto",
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Run a particle method for ``steps`` steps, compiled as one loop.

    Args:
        method: a particle method, e.g. ``steinax.svgd()``.
        target: a log-density function ``logdensity(x)`` of one ``[d]`` point, or
            any :class:`~steinax.targets.AbstractTarget` (minibatch or keyed scores,
            NumPyro models via :func:`steinax.targets.from_numpyro`).
        particles: ``[n, d]`` initial particles (float32 or float64, finite).
        steps: number of steps (``>= 1``); ``None`` runs until the particles settle
            (:func:`steinax.run_until_converged`: segments of 500 steps, at most 20000, the
            stopping rule of :mod:`steinax.particles.loop.settle`; ``result.converged`` says whether
            it held, and a run that ends unconverged warns); or a stopping rule
            (:mod:`steinax.particles.loop.stopping`: ``FixedSteps(n)``, ``UntilSettled(tol, check_every, max_steps)``).
        optimizer: any optax optimizer; it receives ``-phi`` as the gradient
            (``optax.sgd(eps)`` gives ``x + eps * phi``; see also
            :func:`steinax.adagrad_momentum`). Default: the method's ``default_optimizer()``: Adam
            at 0.05 with an injectable learning rate
            (:func:`steinax.particles.optim.default_optimizer`), except sliced SVGD's clipped SGD.
        rng_key: a JAX PRNG key; the run is deterministic given it.
        trace_every: record the trace every this many steps (default ``max(20, steps // 100)``,
            reduced to a divisor of ``checkpoint_every`` when that is given,
            at most ``steps``: a trace point costs about one SVGD step (the IMQ Stein kernel
            and one score evaluation; 4.2 ms against a 4.9 ms step at n = 1000, d = 100 on
            2 CPU cores), so by default the trace takes about 5% of the run).
        diagnostic_kernel: the trace's KSD kernel (default ``IMQ(1, -1/2)``; keep the
            default to compare traces across methods).
        diagnostic_block_size: row-block size for the trace's KSD (default automatic).
        diagnostic_points: the trace's KSD is that of at most this many evenly strided
            particles (rows ``0, s, 2s, ...``; default 2000), so at large ``n`` a trace
            point costs O(2000^2 d), not O(n^2 d); ``None`` uses every particle.
        initial_state: resume from a previous ``result.state`` (or the ``RunResult`` itself); ``particles``, if
            also given, must equal its particles (a different ``x0`` is refused, not ignored).
        progress: ``True``, ``False`` or ``"auto"`` (a bar for runs of >= 1000 steps on a terminal).
        checkpoint: a ``.npz`` path (schema: :mod:`steinax.runtime.checkpoint`). Every
            ``checkpoint_every`` steps the state (particles, optimizer state, method
            state, step), the trace so far and the key are written atomically. If the
            file exists, the run **resumes** from it, bit for bit as if never interrupted;
            a finished run returns its result without computing; a larger ``steps`` extends it (the
            trace keeps the checkpoint's spacing unless ``trace_every`` says otherwise). A checkpoint
            written by a different method, target, initial particles, particle shape, dtype, optimizer
            (its state, and its update at steps 0 to 10^6 and at the step resumed from), key or trace
            spacing is refused (:class:`~steinax.runtime.checkpoint.CheckpointMismatchError`, naming what differs).
        checkpoint_every: steps between checkpoints, a multiple of ``trace_every``
            (default: about a tenth of the run). At most this many steps are lost.

    Returns:
        A :class:`RunResult`.

    Raises:
        NonFiniteError: a step produced NaN/inf; ``err.step`` says which,
            ``err.result`` holds the particles of the last finite step.
        RunInterrupted: Ctrl-C (a ``KeyboardInterrupt``); the loop stops within
            ``INTERRUPT_CHECK_EVERY`` = 100 steps and ``err.result`` holds the particles there.
        CheckpointMismatchError: the checkpoint was written by another run (named differences).

    Warns:
        DivergenceWarning: the trace's KSD is not finite, or the particles' largest coordinate grew
            more than ``DIVERGENCE_FACTOR`` = 1e6 times its start (finite but exploding particles).
        ConvergenceWarning: the particles' means or sds still moved over the run's last 500 steps
            (``result.converged`` is False), the final trace KSD is 5 or more times the run's own
            minimum (the optimizer does not settle), or a run with ``steps=None`` ended unconverged.
    """
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves((particles, rng_key, initial_state))):
        raise TypeError("steinax.run cannot be called inside jax.jit, vmap or grad (`particles`, `rng_key` or "
                        "`initial_state` is a tracer): it is a host loop over compiled segments, with checks, "
                        "checkpoints and Ctrl-C between them, and compiles its own loop. Call it outside; to "
                        "differentiate through steps, use the method's `step` in your own lax.scan")
    options = RunOptions(trace_every=trace_every, diagnostic_kernel=diagnostic_kernel,
                         diagnostic_block_size=diagnostic_block_size, diagnostic_points=diagnostic_points,
                         progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every)
    with interrupt_scope():  # from the first line: a Ctrl-C during the checks or a compilation is the run's too
        return as_stopping_rule(steps).run(method, target, particles, optimizer=optimizer, rng_key=rng_key,
                                           initial_state=initial_state, options=options)
