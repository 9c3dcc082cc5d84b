"""Posteriors with ground truth: a suite to tell whether a sampler got the posterior right.

Thirty-three posteriors of distinct kinds: fourteen (hierarchical, regression, sparse, time series,
item response, GP latent, funnel, banana, a separated mixture, an ill-conditioned
Gaussian; :data:`FIRST_FOURTEEN`) and eleven on real data in their own units, written as users
write them (:data:`REAL_DATA_NAMES`, :mod:`steinax.posteriors.real_data`), and eight hard ones, centred
hierarchies and latent GPs with hyperparameters on real data (:data:`HARD_NAMES`, :mod:`steinax.posteriors.hard`), each with reference
moments and reference draws in its unconstrained space. References come from long NUTS runs made by ``experiments/posteriors/make_references.py``
(R-hat, ESS and divergences stored beside them) or from closed forms and exact draws.

    >>> import steinax.posteriors as sp
    >>> post = sp.get("banana")
    >>> post.dim, post.reference().sd.round(2).tolist()
    (2, [10.0, 4.36])

:func:`steinax.posteriors.evaluate` runs one method on one posterior and returns the
metrics of :mod:`steinax.metrics.posterior`; ``steinax bench posteriors`` runs the table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from steinax.posteriors import closed_form
from steinax.posteriors.hard import HARD
from steinax.posteriors.real_data import REAL_DATA

__all__ = ["Posterior", "Reference", "NAMES", "FIRST_FOURTEEN", "REAL_DATA_NAMES", "HARD_NAMES", "get",
           "reference_path"]


@dataclasses.dataclass(frozen=True)
class Reference:
    """Ground truth in the target's (unconstrained) space.

    Attributes:
        mean, sd: ``[d]`` per-coordinate posterior mean and standard deviation.
        draws: ``[m, d]`` reference draws (thinned NUTS draws, or exact ones).
        meta: how they were made: ``source`` ("nuts" or "closed form"), and for NUTS the chains,
            draws, warm-up, max R-hat, min bulk ESS, divergences, seconds, and the cross-check
            against the inference gym's ground truth where it has the model.
    """

    mean: np.ndarray
    sd: np.ndarray
    draws: np.ndarray
    meta: dict


@dataclasses.dataclass(frozen=True)
class Posterior:
    """One posterior of the suite: a steinax target, its kind and its reference.

    ``exact`` draws i.i.d. samples when the posterior has them (closed forms), else ``None``.
    """

    name: str
    kind: str
    target: object
    exact: Callable | None = None

    @property
    def dim(self) -> int:
        return int(self.target.dim)

    def init(self, rng_key: jax.Array, n: int) -> jax.Array:
        """``[n, d]`` initial particles ``N(0, I)`` in the unconstrained space (the suite's setting)."""
        return jax.random.normal(rng_key, (n, self.dim), jax.numpy.result_type(float))

    def reference(self) -> Reference:
        return _reference(self.name)


def reference_path(name: str) -> str:
    """The stored reference of ``name`` (``.npz``, with a JSON ``meta`` entry)."""
    return os.path.join(os.path.dirname(__file__), "references", f"{name}.npz")


CLOSED_FORM = {
    "neals_funnel": ("funnel", closed_form.funnel),
    "banana": ("banana", closed_form.banana),
    "separated_mixture": ("multimodal", closed_form.separated_mixture),
    "ill_conditioned_gaussian": ("ill-conditioned Gaussian", closed_form.ill_conditioned_gaussian),
}
NUMPYRO_KINDS = {
    "eight_schools_centered": "hierarchical (centred)",
    "eight_schools_noncentered": "hierarchical (non-centred)",
    "varying_intercept": "hierarchical regression",
    "german_logistic": "logistic regression",
    "german_probit": "probit regression",
    "german_sparse_logistic": "sparse regression",
    "stochastic_volatility": "time series",
    "brownian_motion": "time series, missing data",
    "item_response_theory": "item response (high-dimensional)",
    "gp_classification": "GP latent",
}
FIRST_FOURTEEN = tuple(NUMPYRO_KINDS) + tuple(CLOSED_FORM)
"""The suite as it stood before issue 49 (mostly standardised or synthetic data)."""
REAL_DATA_NAMES = tuple(REAL_DATA)
"""Real-data posteriors written as users write them (:mod:`steinax.posteriors.real_data`, issue 49)."""
HARD_NAMES = tuple(HARD)
"""Hard real-data posteriors: centred hierarchies and latent GPs (:mod:`steinax.posteriors.hard`, issue 57)."""
NUMPYRO_KINDS.update({name: kind for name, (_, _, kind) in (REAL_DATA | HARD).items()})
NAMES = FIRST_FOURTEEN + REAL_DATA_NAMES + HARD_NAMES


def get(name: str) -> Posterior:
    """The suite's posterior ``name`` (one of :data:`NAMES`), built in JAX's current default float dtype.

    Built once per (name, dtype): a target made in float32 is not handed to a float64 run (inside
    ``jax.enable_x64(True)``), whose samplers would then mix the two precisions.
    """
    return _get(name, jnp.dtype(jnp.result_type(float)).name)


@functools.lru_cache(maxsize=None)
def _get(name: str, dtype: str) -> Posterior:
    del dtype  # the cache key: the model's arrays are made in the current default float dtype
    if name in CLOSED_FORM:
        kind, make = CLOSED_FORM[name]
        target = make()
        return Posterior(name, kind, target, exact=target.sample)
    if name in NUMPYRO_KINDS:
        from steinax.posteriors.models import MODELS, data_for
        from steinax.targets.numpyro_adapter import from_numpyro

        return Posterior(name, NUMPYRO_KINDS[name], from_numpyro(MODELS[name][0], **data_for(name)))
    raise ValueError(f"`name` must be one of the suite's posteriors {list(NAMES)}; received {name!r}")


@functools.lru_cache(maxsize=None)
def _reference(name: str) -> Reference:
    if name in CLOSED_FORM:
        post = get(name)
        mean, sd = closed_form.moments(post.target)
        draws = np.asarray(post.exact(jax.random.key(20261124), 2000), np.float64)
        return Reference(mean, sd, draws, {"source": "closed form", "draws": "2000 exact i.i.d. draws (seed 20261124)"})
    path = reference_path(name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no reference for {name!r} at {path}; make it with "
                                f"`python experiments/posteriors/make_references.py --posteriors {name}`")
    with np.load(path) as f:
        return Reference(f["mean"], f["sd"], f["draws"], json.loads(str(f["meta"])))
