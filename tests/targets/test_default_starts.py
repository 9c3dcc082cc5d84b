"""Default starting points on a model in raw units (issue 59): NumPyro's uniform box on (-2, 2) can miss the
likelihood's support entirely; the rows that do are drawn again around the model's own initial point, and where no
start is finite :func:`steinax.sample` says so and names ``init=``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.targets import from_numpyro
from steinax.targets.base import LogDensityTarget, logdensities

numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions


def negbin(x, y):
    a = numpyro.sample("a", dist.Normal(0.0, 5.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    phi = numpyro.sample("phi", dist.Exponential(1.0))
    numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(a + b * x), phi), obs=y)


X = jnp.linspace(2500.0, 3500.0, 40)  # a predictor in the thousands, as a user's data comes
Y = jnp.asarray(np.random.default_rng(0).poisson(3.0, 40), jnp.float32)


def test_default_starts_are_finite_on_a_model_in_raw_units():
    target = from_numpyro(negbin, X, Y)
    key = jax.random.key(1)
    box = jax.random.uniform(key, (100, target.dim), minval=-2.0, maxval=2.0)  # init_to_uniform's draws alone
    assert np.mean(np.isfinite(np.asarray(logdensities(target, box)))) < 0.2  # the box mostly misses
    x = target.init_particles(key, 100)
    assert np.all(np.isfinite(np.asarray(logdensities(target, x))))
    assert len(np.unique(np.asarray(x), axis=0)) > 90  # spread around the initial point, not 100 copies of it
    kept = np.isfinite(np.asarray(logdensities(target, box)))
    np.testing.assert_array_equal(np.asarray(x)[kept], np.asarray(box)[kept])  # finite draws are left as drawn


class _FarSupport(LogDensityTarget):
    """A log-density whose support is far from N(0, I), with a dimension to draw default starts in."""

    @property
    def dim(self) -> int:
        return 2


def test_no_finite_start_names_init():
    target = _FarSupport(lambda x: jnp.where(jnp.all(x > 50.0), -jnp.sum(x), -jnp.inf))
    with pytest.raises(ValueError, match=r"no finite start: .* default starting points, from N\(0, I\).* `init=`"):
        steinax.sample(target, rng_key=jax.random.key(0), progress=False)
