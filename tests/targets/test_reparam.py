"""Learned centredness (``steinax.targets.reparam``): the reparameterised model's log-density is the original's after
the change of variables, ``log p_new(u) = log p(G(u)) + log |det dG/du|`` with the determinant from ``jax.jacfwd``
(float64: a 10 x 10 determinant and a few exponentials, rounding about 1e-13 relative), at learned, centred,
non-centred and mixed centredness; the sites found are the hierarchical ones; bad input is named."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("numpyro")

from steinax.posteriors.models import MODELS, data_for  # noqa: E402
from steinax.targets.reparam import hierarchical_sites, learn_centredness, reparameterise  # noqa: E402


def _model(name):
    return MODELS[name][0], data_for(name)


def test_the_sites_found_are_the_hierarchical_ones():
    assert hierarchical_sites(*_model("eight_schools_centered")[:1], **_model("eight_schools_centered")[1]) == (
        "school_effects",)
    model, data = _model("varying_intercept")
    assert hierarchical_sites(model, **data) == ("a",)
    model, data = _model("eight_schools_noncentered")  # its standard normals depend on nothing
    assert hierarchical_sites(model, **data) == ()


@pytest.mark.parametrize("centred", [pytest.param("learned", marks=pytest.mark.slow),  # an SVI fit (about 20 s)
                                     0.0, 1.0, "mixed"])
def test_log_density_is_the_original_after_the_change_of_variables(centred):
    model, data = _model("eight_schools_centered")
    with jax.enable_x64(True):
        if centred == "learned":
            c, info = learn_centredness(model, steps=200, **data)
            assert info["evaluations"] == 800 and np.all((c["school_effects"] >= 0) & (c["school_effects"] <= 1))
        elif centred == "mixed":
            c = {"school_effects": jnp.linspace(0.0, 1.0, 8)}
        else:
            c = centred
        r = reparameterise(model, centred=c, **data)
        u = 1.5 * jax.random.normal(jax.random.key(1), (5, r.target.dim), jnp.float64)

        def pulled_back(v):
            return r.original.logdensity(r.to_original(v)) + jnp.linalg.slogdet(jax.jacfwd(r.to_original)(v))[1]

        want = jax.jit(jax.vmap(pulled_back))(u)
        got = jax.jit(jax.vmap(r.target.logdensity))(u)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11)
        # c = 1 is the model as written: the same coordinates
        if centred == 1.0:
            np.testing.assert_allclose(r.draws_to_original(u), u, rtol=1e-12, atol=1e-12)


def test_bad_centredness_is_named():
    model, data = _model("eight_schools_centered")
    with pytest.raises(ValueError, match=r"`centred\['school_effects'\]` must lie in \[0, 1\]"):
        reparameterise(model, centred={"school_effects": 1.5}, **data)
    with pytest.raises(TypeError, match="`centred` must be"):
        reparameterise(model, centred="yes", **data)
    with pytest.raises(ValueError, match="`steps` must be a positive integer"):
        learn_centredness(model, steps=0, **data)
