"""Separated modes among a correction's draws and their weights (:mod:`steinax.pipeline.modes`): the Bhattacharyya
coefficient and bridge sampling against closed forms, the grouping on exact draws of separated and of connected
targets, the weights of chains that split the mass wrongly, and ``steinax.sample`` end to end on a separated mixture.

Tolerances: the statistical checks use fixed seeds and bounds of four of the estimator's own standard errors
(failure rate under 1e-4 each for a normal error); the grouping checks are deterministic given the seed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from steinax.pipeline.modes import bhattacharyya, bridge_log_mass, mode_weights, separated_modes, within_modes
from steinax.posteriors import get
from steinax.targets import GaussianMixture

CENTRES = np.array([[-4.0, 0.0], [4.0, 0.0]])


def _mixture():
    return GaussianMixture(jnp.array([0.3, 0.7]), jnp.asarray(CENTRES), jnp.stack([jnp.eye(2)] * 2))


def _chains_split(share_left: float, chains: int = 128, draws: int = 100, seed: int = 0) -> np.ndarray:
    """Exact draws within each mode of the 0.3/0.7 mixture, from chains that split ``share_left`` / rest."""
    home = (np.arange(chains) >= share_left * chains).astype(int)
    return CENTRES[home][:, None, :] + np.random.default_rng(seed).standard_normal((chains, draws, 2))


def test_bhattacharyya_is_its_closed_form():
    for s in (0.0, 1.0, 8.0):
        assert bhattacharyya(np.zeros(2), np.eye(2), np.array([s, 0.0]), np.eye(2)) == pytest.approx(
            np.exp(-s * s / 8), rel=1e-12)
    # different scales, same mean: exp(-0.5 log(det S / sqrt(det A det B))), S = (A + B) / 2
    a, b = np.eye(3), 4.0 * np.eye(3)
    expected = np.exp(-0.5 * (3 * np.log(2.5) - 0.5 * 3 * np.log(4.0)))
    assert bhattacharyya(np.zeros(3), a, np.zeros(3), b) == pytest.approx(expected, rel=1e-12)


def test_bridge_sampling_recovers_a_gaussian_normaliser():
    rng = np.random.default_rng(1)
    d, sd, sd_q = 4, 3.0, 3.3
    x, y = sd * rng.standard_normal((4000, d)), sd_q * rng.standard_normal((4000, d))
    logp = lambda v: -0.5 * np.sum((v / sd) ** 2, axis=1)  # noqa: E731  (unnormalised: Z = (2 pi)^(d/2) sd^d)
    logq = lambda v: -0.5 * np.sum((v / sd_q) ** 2, axis=1) - d * np.log(sd_q) - 0.5 * d * np.log(2 * np.pi)  # noqa: E731
    log_z, rel = bridge_log_mass(logp(x), logq(x), logp(y), logq(y))
    truth = 0.5 * d * np.log(2 * np.pi) + d * np.log(sd)
    assert 0 < rel < 0.05
    assert abs(log_z - truth) < 4 * rel


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouping_finds_separated_modes_and_only_them(seed):
    key = jax.random.key(seed)
    with jax.enable_x64(True):
        mixture = np.asarray(get("separated_mixture").target.sample(key, 256 * 100)).reshape(256, 100, 2)
        labels = separated_modes(mixture, seed=seed)
        assert labels is not None and labels.max() == 1
        left = labels[mixture[..., 0] < 0]
        assert np.all(left == left[0]) and np.all(labels[mixture[..., 0] > 0] != left[0])  # the modes, draw by draw
        for name in ("banana", "ill_conditioned_gaussian"):  # connected targets: one group
            x = np.asarray(get(name).target.sample(key, 256 * 100))
            assert separated_modes(x.reshape(256, 100, -1), seed=seed) is None, name


def test_chains_that_split_the_mass_wrongly_are_reweighted():
    mix = _mixture()
    chains = _chains_split(0.6)  # 60% of the chains in the mode of weight 0.3
    with jax.enable_x64(True):
        labels = separated_modes(chains)
        logp = jax.jit(jax.vmap(mix.logdensity))
        out = mode_weights(lambda y: logp(jnp.asarray(y)), chains, labels, jax.random.key(0))
    left = int(np.argmin([chains.reshape(-1, 2)[out["labels"].reshape(-1) == g, 0].mean() for g in range(2)]))
    w = out["weights"]
    assert abs(w[left] - 0.3) < 4 * 0.3 * out["relative_error"][left] + 1e-3
    status = within_modes(chains, labels, 1.01, 400.0)
    assert status["converged"] and sorted(status["resident"]) == [51, 77]
    weights = (w / out["draws"])[out["labels"].reshape(-1)]
    mean = weights @ chains.reshape(-1, 2)
    assert abs(mean[0] - (0.3 * -4.0 + 0.7 * 4.0)) < 0.05  # against 4 * 0.6 - 4 * 0.4 = 0.8 unweighted


def test_the_weights_are_right_for_any_partition():
    """A false split of a connected target (the funnel cut where v = -2, refitted: Gaussians of different scales)
    only stratifies: draws that over-represent one region (each of its draws twice) are weighted back
    (v ~ N(0, 3^2): E[v] = 0, E[v^2] = 9; bounds of four standard errors of 10^4 draws)."""
    funnel = get("neals_funnel").target
    with jax.enable_x64(True):
        logp = jax.jit(jax.vmap(funnel.logdensity))
        x = np.asarray(funnel.sample(jax.random.key(3), 10_000))[:, None, :]  # draws as chains of one
        region = np.where(x[..., 0] < -2.0, 0, 1)
        for _ in range(20):  # refit and relabel to the partition's fixed point
            again = mode_weights(lambda y: logp(jnp.asarray(y)), x, region, jax.random.key(4))["labels"]
            if np.array_equal(again, region):
                break
            region = again
        chains = np.concatenate([x, x[region[:, 0] == 0]])  # the first region's draws twice: the same fits
        out = mode_weights(lambda y: logp(jnp.asarray(y)), chains,
                           np.concatenate([region, region[region[:, 0] == 0]]), jax.random.key(5))
    assert np.mean(out["labels"][: x.shape[0]] == region) > 0.999  # the same partition (np.cov's n - 1 aside)
    weights = (out["weights"] / out["draws"])[out["labels"].reshape(-1)]
    v = chains[:, 0, 0]
    assert abs(v.mean()) > 0.3  # the bias the weights must remove
    assert abs(weights @ v) < 0.12 and abs(weights @ v**2 - 9.0) < 0.5


@pytest.mark.slow  # about 45 s: steinax.sample in float64 on 256 particles
def test_sample_weighs_separated_modes_right():
    with jax.enable_x64(True):
        post = get("separated_mixture")
        import steinax

        res = steinax.sample(post.target, rng_key=jax.random.key(0), num_particles=256, progress=False)
    c = res.stages["correction"]
    assert res.ok and c["stopped"] == "converged within modes", res.message
    assert sorted(np.round(c["modes"]["weights"], 2).tolist()) == [0.3, 0.7]
    assert abs(res.draws[:, 0].mean() - 1.6) < 0.1  # 0.3 * -4 + 0.7 * 4
    # the chains' own split is not the target's (the warm start seeds each optimum's chains half equally, half by
    # Laplace mass, and the particles move some): only the weights make the answer right
    assert abs(res.chains[..., 0].mean() - 1.6) > 0.2
    assert res.weights.shape == (res.chains.shape[0] * res.chains.shape[1],)
    tree = res.to_datatree()
    assert tree.posterior.attrs["steinax_resampled"] == 1


def test_a_group_of_chains_that_did_not_move_is_grouped_not_an_error():
    """Was: a group whose draws span fewer dimensions than ``d`` (chains stuck, seen in a centred hierarchy's neck on
    varying intercept) made SciPy's normal refuse its singular covariance, and the correction raised LinAlgError."""
    rng = np.random.default_rng(0)
    moving = rng.standard_normal((20, 50, 3))
    stuck = np.broadcast_to(np.array([10.0, 10.0, 10.0]), (20, 50, 3)).copy()
    stuck[..., 0] += 0.1 * rng.standard_normal((20, 50))  # varies in one coordinate only: a rank-1 covariance
    labels = separated_modes(np.concatenate([moving, stuck]))
    assert labels is not None
    assert len(np.unique(labels[:20])) == 1 and len(np.unique(labels[20:])) == 1 and labels[0, 0] != labels[20, 0]
