"""The reparameterisation stage in ``steinax.sample`` (issue 57): on a centred hierarchy it learns a centredness,
runs every stage in those coordinates, and hands back draws in the model's own coordinates (right against the
reference), with its cost in the ledger; ``reparam=False`` and targets it cannot read skip it; bad settings are
refused before any work."""

import warnings

import jax
import numpy as np
import pytest

import steinax
import steinax.posteriors as sp
from steinax.pipeline import HMCCorrection, LearnedCentredness

pytest.importorskip("numpyro")
pytest.importorskip("blackjax")


@pytest.mark.slow  # one sample call on eight schools (about 40 s): CI's slow pass
def test_sample_reparameterises_a_centred_hierarchy_and_maps_back():
    with jax.enable_x64(True), warnings.catch_warnings():
        # was: the correction's superchains and divergence places were NumPy arrays in SampleResult's static `stages`
        warnings.filterwarnings("error", message="A JAX array is being set as static")
        post = sp.get("eight_schools_centered")
        res = steinax.sample(post.target, rng_key=jax.random.key(0), num_particles=16, progress=False,
                             corrector=HMCCorrection(max_steps=400),
                             reparam=LearnedCentredness(steps=300))
        again = post.target.postprocess(res.draws)["school_effects"]  # the model's own map, in float64
    learnt = res.stages["reparam"]
    assert learnt["sites"] == ("school_effects",) and res.gradient_evaluations["reparam"] == 300 * 4
    assert len(learnt["centred"]["school_effects"]) == 8
    ref = post.reference()
    # the draws are in the model's own coordinates: right against its reference (400 x 16 draws, ESS >= 400: a mean
    # off by more than 0.25 sd is a 5-MCSE event)
    err = np.max(np.abs(res.draws.mean(0) - ref.mean) / ref.sd)
    assert err < 0.25, (err, res.message)
    np.testing.assert_allclose(np.asarray(res.samples["school_effects"]), np.asarray(again), rtol=1e-10)
    assert res.chains.shape[-1] == post.dim and res.particles.shape == (16, post.dim)
    assert "decentred by a learned centredness" in res.message
    c = res.stages["correction"]  # the rule judged again in the model's own coordinates
    assert ("user_coordinates" in c) == (c["stopped"] == "converged")
    if res.ok:
        assert c["user_coordinates"]["passed"] and c["user_coordinates"]["rhat"] <= 1.01
    tree = res.to_datatree(post.target)
    assert "school_effects" in tree.posterior


def test_the_stage_skips_what_it_cannot_read_and_refuses_bad_settings():
    stage = LearnedCentredness()
    assert stage.applies(sp.get("eight_schools_centered").target)
    assert not stage.applies(steinax.targets.Gaussian(np.zeros(2), np.eye(2)))
    for bad in ({"steps": 0}, {"draws": 1.5}, {"learning_rate": -1.0}):
        with pytest.raises(ValueError, match="LearnedCentredness: `"):
            LearnedCentredness(**bad)
    with pytest.raises(TypeError, match="`reparam` must be True, False or a reparam stage"):
        steinax.sample(lambda x: -0.5 * (x**2).sum(), rng_key=jax.random.key(0), num_particles=4, reparam="yes")


@pytest.mark.slow  # a learning and a warm start (about 20 s): CI's slow pass
def test_ctrl_c_after_a_reparameterisation_hands_back_the_models_own_coordinates():
    """Ctrl-C as the warm start ends: ``err.result``'s draws are the latest points the ledger holds, the starting
    points, which went through the learned coordinates and back (was: once a reparameterisation was in place the
    ledger mapped the untouched starting points "back" a second time)."""
    import os
    import signal

    from steinax.pipeline import LaplaceStart, SampleInterrupted

    class PressedAfter(LaplaceStart):
        def apply(self, target, start, rng_key):
            out = super().apply(target, start, rng_key)
            os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, seen by sample's scope between stages
            return out

    with jax.enable_x64(True):
        post = sp.get("eight_schools_centered")
        with pytest.raises(SampleInterrupted) as info:
            steinax.sample(post.target, rng_key=jax.random.key(0), num_particles=32, progress=False,
                           warm_start=PressedAfter(), reparam=LearnedCentredness(steps=300))
    result = info.value.result
    assert info.value.stage == "warm_start" and not result.ok and "reparam" in result.stages
    with jax.enable_x64(True):
        init = post.target.init_particles(jax.random.fold_in(jax.random.key(0), 0), 32)  # sample's own start
    np.testing.assert_allclose(result.draws, np.asarray(init), rtol=1e-10, atol=1e-10)
