"""Shared fixtures: strict rank promotion, fixed keys, dtype-aware tolerances.

``tolerance(dtype, scale)`` is the one tolerance helper of the suite (tests import it
with ``from conftest import tolerance``); tolerances that are statistical (a
standard error, a binomial interval) are written out where used, with their reason.

Tolerances: float32 has a unit roundoff of 6e-8; the quantities compared are
sums of O(n) terms of O(1) size computed in different orders (matrix products
vs loops), so we allow rtol 1e-4 / atol 1e-5 in float32 and 1e-10 / 1e-12 in
float64 (unit roundoff 1.1e-16, same reasoning).
"""

import os
import sys

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # tests/reference.py: naive reference implementations

jax.config.update("jax_numpy_rank_promotion", "raise")


TOL = {
    "float32": dict(rtol=1e-4, atol=1e-5),
    "float64": dict(rtol=1e-10, atol=1e-12),
}


@pytest.fixture
def key():
    return jax.random.key(20261122)


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """Run the test in float32 and in float64 (x64 enabled for the test only)."""
    if request.param == "float64":
        with jax.enable_x64(True):
            yield request.param
    else:
        yield request.param


@pytest.fixture
def tols(dtype):
    """``dict(rtol=..., atol=...)`` for the current ``dtype`` (see the module docstring); = ``tolerance(dtype)``."""
    return tolerance(dtype)


def tolerance(dtype, scale: float = 1.0) -> dict:
    """``dict(rtol=..., atol=...)`` for arrays of ``dtype`` (the one tolerance helper; see the module docstring).

    ``scale`` widens both for quantities that accumulate more rounding than an O(n) sum
    (e.g. eigenvalues of an n x n matrix: ``scale=n``); say why where it is used.
    """
    name = jnp.dtype(dtype).name
    base = TOL[name]
    return {k: v * scale for k, v in base.items()}
