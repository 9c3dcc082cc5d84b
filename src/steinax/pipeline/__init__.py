"""The sampling pipeline around the particle loop (issue 49): stages that chain a warm start, the particles in
whitened coordinates, the checks and a correction (the stage protocol: :mod:`steinax.particles.loop.stages`).

* :mod:`steinax.pipeline.reparam`: a NumPyro model's hierarchical sites decentred by a learned centredness, before
  every other stage;
* :mod:`steinax.pipeline.warm_start`: Pathfinder (BlackJAX) from the target's own starting points: particles in the
  typical set and an affine map for the next stages;
* :mod:`steinax.pipeline.laplace`: every optimum L-BFGS finds from starts spread wider than the start's particles,
  and the Laplace normal at each; Pathfinder where none exists;
* :mod:`steinax.pipeline.sizing`: how much of each stage runs, decided from what the earlier ones measured (the
  particle stage skipped where the warm start's normal is a good importance proposal, the tails probed, the
  correction's chains by platform and dimension);
* :mod:`steinax.pipeline.whitened`: a particle method on the target in the coordinates that map whitens;
* :mod:`steinax.pipeline.stragglers`: particles far below the bulk's log-density, named;
* :mod:`steinax.pipeline.transport`: a normalizing flow fitted to the particles and refined against the target, the
  correction's coordinates where it beats the affine map;
* :mod:`steinax.pipeline.correction`: each particle continues as a ChEES-HMC chain, exact in the limit, until nested
  R-hat and ESS say it has converged;
* :mod:`steinax.pipeline.divergences`: where trajectories diverged, and the policy on a few of them;
* :mod:`steinax.pipeline.modes`: separated modes among the chains' draws, and their weights by bridge sampling;
* :mod:`steinax.pipeline.arguments`: :func:`sample`'s one argument check, every stage's settings before any work;
* :mod:`steinax.pipeline.sample`: :func:`sample`, all of it in one call (Ctrl-C: :class:`SampleInterrupted`).
"""

from steinax.pipeline.correction import HMCCorrection
from steinax.pipeline.handoff import choose_start
from steinax.pipeline.laplace import LaplaceStart
from steinax.pipeline.sample import SampleInterrupted, SampleResult, sample
from steinax.pipeline.transport import FlowTransport
from steinax.pipeline.reparam import LearnedCentredness
from steinax.pipeline.stragglers import find_stragglers, straggler_threshold
from steinax.pipeline.warm_start import PathfinderStart
from steinax.pipeline.whitened import WhitenedParticles

__all__ = ["LaplaceStart", "PathfinderStart", "WhitenedParticles", "HMCCorrection", "FlowTransport", "LearnedCentredness", "find_stragglers", "choose_start", "straggler_threshold", "sample",
           "SampleResult", "SampleInterrupted"]
