"""The samplers' yardstick (issue 50): every sampler's squared bias of ``E[x]`` and ``E[x^2]`` against the reference
as it runs, and the cost at which it falls below 0.01 (:mod:`steinax.posteriors.yardstick.trace`), for steinax
(:mod:`~steinax.posteriors.yardstick.pipeline`) and its peers (:mod:`~steinax.posteriors.yardstick.mcmc`, :mod:`~steinax.posteriors.yardstick.mchmc`,
:mod:`~steinax.posteriors.yardstick.vi`); :mod:`~steinax.posteriors.yardstick.bench` makes the table."""

from steinax.posteriors.yardstick.mchmc import laps, mams
from steinax.posteriors.yardstick.mcmc import chees, meads, numpyro_nuts, nuts
from steinax.posteriors.yardstick.pipeline import steinax_sample
from steinax.posteriors.yardstick.trace import BIASES, Trace, trace_chains, trace_from_draws
from steinax.posteriors.yardstick.vi import pathfinder

__all__ = ["BIASES", "Trace", "chees", "laps", "mams", "meads", "numpyro_nuts", "nuts", "pathfinder", "steinax_sample", "trace_chains",
           "trace_from_draws"]
