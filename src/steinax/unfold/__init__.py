"""Deep-unfolded SVGD (Kawamura & Takabe 2024): step-size schedules learned by backpropagation.

SVGD's update ``x^{(t+1)} = x^{(t)} + eps^{(t)} phi(x^{(t)})`` (paper eq. 1/8) is
unrolled for ``T`` iterations and the step sizes are trained by gradient
descent on a loss of the final particles, over minibatches of training
problems (initial particle sets, data). The learned schedule is reused
periodically, ``eps^{(t)} = eps^{(t mod T)}`` for ``t >= T``.

* **DUSVGD** (:func:`train_dusvgd`): ``T`` free step sizes shared by all
  particles, trained incrementally (the paper's Algorithm 2: for
  ``t' = 1 ... T``, ``E`` epochs, each one minibatch and one optimizer update
  of ``eps^{(0..t'-1)}`` on the loss at ``x^{(t')}``).
* **C-DUSVGD** (:func:`train_chebyshev`): the Chebyshev schedule of eq. 11 with
  ``lambda_1 = alpha^2``, ``lambda_n = alpha^2 + beta^2`` (eq. 9-10); ``alpha``
  and ``beta`` are trained on the loss at ``x^{(T)}`` (no incremental training).

Both return a :class:`Schedule`: an optax schedule (``optax.sgd(schedule)`` in
:func:`steinax.run` gives the paper's plain update), saved to and loaded from a
JSON file (:meth:`Schedule.save`, :func:`load_schedule`).

The unrolled loop (:func:`unroll`) is the method's own
:meth:`~steinax.particles.AbstractParticleMethod.step` with ``optax.sgd`` driven
by the trainable steps, inside ``lax.scan``: any steinax particle method whose
direction is differentiable can be unfolded. With ``remat=True`` (the
default) the scan body is rematerialised in the backward pass, so memory is
O(T n d) for the particles at step boundaries plus one step's O(n^2) working
set, instead of O(T n^2).

Training resumes after an interruption: with ``checkpoint="path.npz"`` the
trainers write their state (parameters, optimizer state, PRNG key, losses so
far, stage and epoch) every ``checkpoint_every`` epochs and at the end, through
:mod:`steinax.runtime.checkpoint` (atomic writes), and a later call with the same
arguments continues from it, giving the schedule an uninterrupted call gives.
Ctrl-C (the run loop's interrupt service, :mod:`steinax.particles.loop.interrupt`) stops training at the
next epoch boundary, writes the finished epochs to the checkpoint and raises ``KeyboardInterrupt``; the
progress bar is the run loop's too (:mod:`steinax.particles.loop.progress`).
``checkpoint`` is a path as in :func:`steinax.run`; the rematerialisation flag
that held this name before is ``remat``.

Decisions (docs/design.md): the trainable steps are used as the step sizes
directly (``eps^{(t)} = gamma_t``, no positivity transform, as the paper's
"trainable step sizes"); the kernel bandwidth of a median-rule kernel is a
constant in the backward pass (steinax's convention: its gradient is stopped);
one Adam state runs through all stages of the incremental training (parameters
not yet unrolled get zero gradient and so no update).
"""


from steinax.unfold.losses import cross_entropy_loss, mmd_loss, mse_loss
from steinax.unfold.schedule import FORMAT, Schedule, TrainingDivergedError, TrainingLog, chebyshev_steps, load_schedule
from steinax.unfold.train import train_chebyshev, train_dusvgd
from steinax.unfold.unroll import Problem, trajectory, unroll

__all__ = ["FORMAT", "Schedule", "TrainingLog", "Problem", "chebyshev_steps", "trajectory", "unroll", "train_dusvgd",
           "train_chebyshev", "mmd_loss", "cross_entropy_loss", "mse_loss", "load_schedule", "TrainingDivergedError"]
