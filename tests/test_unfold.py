"""Deep-unfolded SVGD (steinax.unfold): gradients, the Chebyshev schedule, training semantics, files, errors.

Tolerances: float64 with ``tolerance(float64)`` for exact identities; the
finite-difference check uses a central difference with step 1e-5, whose
truncation error is O(1e-10) relative (stated where used).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import steinax
from steinax import unfold
from steinax.kernels import RBF
from steinax.targets import Gaussian, gmm_1d
from conftest import tolerance


def _gmm_problem(n=20, m=30, dtype=jnp.float64):
    target = gmm_1d()
    reference = target.sample(jax.random.key(1), 200).astype(dtype)

    def problem(key):
        k1, k2 = jax.random.split(key)
        x0 = jax.random.normal(k1, (n, 1), dtype) - 2.0
        idx = jax.random.choice(k2, reference.shape[0], (m,), replace=False)
        return unfold.Problem(x0, data=reference[idx])

    return target, problem


def test_unrolled_gradient_equals_finite_differences(key):
    """d loss / d steps through T = 4 unrolled SVGD steps (fixed bandwidth, so the loss is smooth) against
    central differences with step 1e-5 (truncation O(1e-10) relative; rtol 1e-6 leaves room for the
    rounding of a difference of two O(1) losses in float64, ~1e-16 / 1e-5)."""
    with jax.enable_x64(True):
        target, problem = _gmm_problem()
        prob = problem(key)
        method = steinax.svgd(RBF(1.5))
        loss = unfold.mmd_loss()

        @jax.jit  # one compilation for the gradient's forward pass and the eight differences
        def f(steps):
            return loss(unfold.unroll(steps, method, target, prob.particles, key), prob)

        steps = jnp.array([0.8, 1.3, 0.5, 2.0])
        grad = jax.grad(f)(steps)
        eps = 1e-5
        fd = np.array([(f(steps.at[i].add(eps)) - f(steps.at[i].add(-eps))) / (2 * eps) for i in range(4)])
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
        assert np.all(np.abs(fd) > 1e-4)  # the check is not vacuous: every step matters
        # checkpointing changes memory, not the gradient
        g_nockpt = jax.grad(lambda s: loss(unfold.unroll(s, method, target, prob.particles, key, remat=False),
                                           prob))(steps)
        np.testing.assert_allclose(grad, g_nockpt, **tolerance(jnp.float64))


def test_chebyshev_steps_equal_eq_11():
    with jax.enable_x64(True):
        for alpha, beta, T in [(0.3, 1.0, 10), (200.0, 500.0, 10), (50.0, 50.0, 15), (1.0, 0.0, 1), (-0.7, 2.0, 3)]:
            lam1, lamn = alpha**2, alpha**2 + beta**2
            expected = [
                1.0 / ((lamn + lam1) / 2 + (lamn - lam1) / 2 * np.cos((2 * (T - t) - 1) * np.pi / (2 * T)))
                for t in range(T)
            ]
            got = unfold.chebyshev_steps(alpha, beta, T)
            np.testing.assert_allclose(got, expected, **tolerance(jnp.float64))
            # reverse order of eq. 7: the first step is the largest, all within [1/lambda_n, 1/lambda_1]
            forward = [1.0 / ((lamn + lam1) / 2 + (lamn - lam1) / 2 * np.cos((2 * t + 1) * np.pi / (2 * T)))
                       for t in range(T)]
            np.testing.assert_allclose(got, forward[::-1], **tolerance(jnp.float64))
            assert np.all(np.asarray(got) <= 1 / lam1 * (1 + 1e-12)) and np.all(np.asarray(got) >= 1 / lamn * (1 - 1e-12))
            assert np.all(np.diff(np.asarray(got)) <= 0)
        # differentiable in alpha and beta
        g = jax.grad(lambda a: unfold.chebyshev_steps(a, 1.0, 5).sum())(0.5)
        assert np.isfinite(g) and g < 0


def test_learning_rate_zero_leaves_the_schedule_unchanged(key):
    target, problem = _gmm_problem(dtype=jnp.float32)
    init = jnp.array([0.5, 1.0, 1.5], jnp.float32)
    s = unfold.train_dusvgd(problem, unfold.mmd_loss(), 3, target=target, epochs=2, batch_size=2,
                            optimizer=optax.adam(0.0), init=init, rng_key=key)
    np.testing.assert_array_equal(s.steps, init)
    c = unfold.train_chebyshev(problem, unfold.mmd_loss(), 3, target=target, epochs=2, batch_size=2,
                               optimizer=optax.adam(0.0), alpha=0.4, beta=1.2, rng_key=key)
    assert float(c.alpha) == np.float32(0.4) and float(c.beta) == np.float32(1.2)
    np.testing.assert_array_equal(c.steps, unfold.chebyshev_steps(np.float32(0.4), np.float32(1.2), 3))


def test_incremental_training_follows_algorithm_2(key):
    """Stage t' trains eps^(0..t'-1) on the loss at x^(t'): after stage 1 only eps^(0) has moved."""
    target, problem = _gmm_problem(dtype=jnp.float32)
    init = jnp.full((3,), 0.3, jnp.float32)
    s1 = unfold.train_dusvgd(problem, unfold.mmd_loss(), 3, target=target, epochs=3, batch_size=2, init=init,
                             rng_key=key, optimizer=optax.sgd(0.5))
    assert s1.log.stages.tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert s1.log.losses.shape == (9,) and s1.log.seconds > 0
    assert s1.kind == "dusvgd" and np.all(np.asarray(s1.steps) != 0.3)
    # one stage only, by a non-incremental run of T = 1 on the same problems: the first step alone moves
    s_one = unfold.train_dusvgd(problem, unfold.mmd_loss(), 1, target=target, epochs=3, batch_size=2,
                                init=init[:1], rng_key=key, optimizer=optax.sgd(0.5))
    assert float(s_one.steps[0]) != 0.3
    # training on the loss at x^(1) does not touch eps^(1), eps^(2): gradient exactly zero
    _, prob = target, problem(key)
    g = jax.grad(lambda st: unfold.mmd_loss()(unfold.unroll(st, steinax.svgd(), target, prob.particles, key,
                                                            num_steps=1), prob))(init)
    assert float(g[0]) != 0.0 and float(g[1]) == 0.0 and float(g[2]) == 0.0


@pytest.mark.slow  # ~13 s: two trainings; run by CI's slow-test step
def test_training_lowers_the_loss(key):
    """From a too-small step, DUSVGD and C-DUSVGD lower the unrolled loss on held-out problems (fixed seeds):
    particles from N(-2, 1) towards N(1, 1) in T = 4 steps."""
    target = Gaussian(jnp.array([1.0]), jnp.eye(1))
    reference = target.sample(jax.random.key(1), 200)

    def problem(k):
        k1, k2 = jax.random.split(k)
        idx = jax.random.choice(k2, 200, (30,), replace=False)
        return unfold.Problem(jax.random.normal(k1, (20, 1)) - 2.0, data=reference[idx])

    loss = unfold.mmd_loss()
    held_out = jax.vmap(problem)(jax.random.split(jax.random.key(99), 16))

    def mean_loss(steps):
        return float(jnp.mean(jax.vmap(lambda p: loss(unfold.unroll(steps, steinax.svgd(), target, p.particles, key),
                                                      p))(held_out)))

    init = jnp.full((4,), 0.05, jnp.float32)
    s = unfold.train_dusvgd(problem, loss, 4, target=target, epochs=5, batch_size=4, init=init,
                            optimizer=optax.adam(0.1), rng_key=key)
    assert mean_loss(s.steps) < 0.5 * mean_loss(init)
    c = unfold.train_chebyshev(problem, loss, 4, target=target, epochs=10, batch_size=4, alpha=4.0, beta=1.0,
                               optimizer=optax.adam(0.2), rng_key=key)
    assert mean_loss(c.steps) < 0.8 * mean_loss(unfold.chebyshev_steps(4.0, 1.0, 4))  # 2 parameters, 10 updates


def test_periodic_reuse_and_run(key):
    """eps^(t) = eps^(t mod T); steinax.run with optax.sgd(schedule) is the paper's x + eps^(t) phi(x), and
    equals unroll() over 2T + 1 steps."""
    steps = jnp.array([0.3, 0.1, 0.2])
    sched = unfold.Schedule(steps)
    assert [float(sched(t)) for t in range(7)] == [float(steps[t % 3]) for t in range(7)]
    target = Gaussian(jnp.array([1.0, -1.0]), jnp.eye(2))
    x0 = jax.random.normal(key, (15, 2)) * 2.0
    res = steinax.run(steinax.svgd(), target, x0, steps=7, optimizer=optax.sgd(sched), rng_key=key, progress=False)
    x = x0
    for t in range(7):
        scores = jax.vmap(jax.grad(target.logdensity))(x)
        x = x + steps[t % 3] * steinax.svgd_direction(x, scores)
    np.testing.assert_allclose(res.particles, x, **tolerance(jnp.float32, 10.0))  # 7 steps of O(n) sums
    np.testing.assert_allclose(unfold.unroll(steps, steinax.svgd(), target, x0, key, num_steps=7), x,
                               **tolerance(jnp.float32, 10.0))


@pytest.mark.parametrize("x64", [False, pytest.param(True, marks=pytest.mark.slow)])  # x64: ~18 s, slow pass
def test_saved_and_loaded_schedule_is_identical(tmp_path, key, x64):
    with jax.enable_x64(x64):
        target, problem = _gmm_problem(dtype=jnp.float64 if x64 else jnp.float32)
        trained = unfold.train_dusvgd(problem, unfold.mmd_loss(), 2, target=target, epochs=2, batch_size=2,
                                      rng_key=key, init=jnp.array([1.0 / 3.0, 2.0 / 7.0]))
        cheb = unfold.train_chebyshev(problem, unfold.mmd_loss(), 3, target=target, epochs=2, batch_size=2,
                                      rng_key=key)
        for s in (trained, cheb, unfold.Schedule.constant(0.5, 4)):
            path = tmp_path / f"{s.kind}.json"
            s.save(path)
            back = unfold.load_schedule(path)
            assert back.kind == s.kind and back.steps.dtype == s.steps.dtype
            np.testing.assert_array_equal(back.steps, s.steps)
            for name in ("alpha", "beta"):
                a, b = getattr(s, name), getattr(back, name)
                assert (a is None) == (b is None)
                if a is not None:
                    np.testing.assert_array_equal(a, b)
            if s.log is not None:
                np.testing.assert_array_equal(back.log.losses, s.log.losses)
                np.testing.assert_array_equal(back.log.stages, s.log.stages)
                assert back.log.seconds == s.log.seconds and back.log.settings == s.log.settings
            assert [float(back(t)) for t in range(9)] == [float(s(t)) for t in range(9)]
        assert not list(tmp_path.glob("*.tmp*"))  # atomic write leaves no temporary file


@pytest.mark.slow  # ~15 s: two trainings with MK-SVGD and CC-SVGD; run by CI's slow-test step
def test_any_differentiable_method_can_be_unfolded(key):
    target, problem = _gmm_problem(dtype=jnp.float32)
    for method in (steinax.mk_svgd(), steinax.cc_svgd()):
        s = unfold.train_dusvgd(problem, unfold.mmd_loss(), 2, method=method, target=target, epochs=2, batch_size=2,
                                rng_key=key, init=0.5)
        assert np.all(np.isfinite(np.asarray(s.steps))) and np.any(np.asarray(s.steps) != 0.5)


def test_stacked_problems_and_data_losses(key):
    """A Problem stacked along a leading axis is sampled in minibatches; the cross-entropy and MSE losses equal
    hand computations."""
    from steinax.models import LogisticRegression

    model = LogisticRegression(3)
    X = jax.random.normal(key, (40, 3))
    y = (X[:, 0] > 0).astype(jnp.float32)
    theta = jax.random.normal(jax.random.fold_in(key, 1), (5, model.dim))
    prob = unfold.Problem(theta, data=(X, y))
    p = np.mean(1 / (1 + np.exp(-np.einsum("nk,ik->in", X, np.asarray(theta)[:, :3]))), axis=0)
    ce = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(unfold.cross_entropy_loss(model.logits)(theta, prob), ce, **tolerance(jnp.float32, 10.0))
    pred = lambda t, X: X @ t[:3]  # noqa: E731
    mse = np.mean((np.mean(np.einsum("nk,ik->in", X, np.asarray(theta)[:, :3]), axis=0) - y) ** 2)
    np.testing.assert_allclose(unfold.mse_loss(pred)(theta, prob), mse, **tolerance(jnp.float32, 10.0))

    target = model.target(X, y, None)
    stacked = unfold.Problem(model.init_particles(key, 4 * 6).reshape(4, 6, model.dim), data=(
        jnp.broadcast_to(X, (4,) + X.shape), jnp.broadcast_to(y, (4,) + y.shape)))
    s = unfold.train_dusvgd(stacked, unfold.cross_entropy_loss(model.logits), 2, target=target, epochs=2,
                            batch_size=3, init=1e-3, rng_key=key)
    assert np.all(np.isfinite(np.asarray(s.steps)))
    with pytest.raises(ValueError, match="exceeds the number of stacked problems"):
        unfold.train_dusvgd(stacked, unfold.cross_entropy_loss(model.logits), 2, target=target, batch_size=5)


def test_checkpointed_backprop_memory_is_bounded():
    """With checkpointing, the compiled backward pass stores O(n d) per unrolled step (the particles at step
    boundaries), not the O(n^2) kernel matrices: from T = 10 to T = 40 the temporary memory grows by less than
    30 kernel matrices, and by less than without checkpointing."""
    target = gmm_1d()
    n = 256
    x0 = jax.random.normal(jax.random.key(0), (n, 1))
    ref = target.sample(jax.random.key(1), 64)

    def temp_bytes(T, checkpoint):
        f = jax.grad(lambda s: unfold.mmd_loss()(unfold.unroll(s, steinax.svgd(), target, x0, jax.random.key(2),
                                                               remat=checkpoint), unfold.Problem(x0, data=ref)))
        return jax.jit(f).lower(jnp.ones(T)).compile().memory_analysis().temp_size_in_bytes

    kernel_matrix = n * n * 4
    grow_ckpt = temp_bytes(40, True) - temp_bytes(10, True)
    grow_plain = temp_bytes(40, False) - temp_bytes(10, False)
    assert grow_ckpt < 30 * kernel_matrix
    assert grow_ckpt < grow_plain


def test_training_resumes_after_interruption(tmp_path, monkeypatch, key):
    """A training interrupted after a save and called again with the same arguments returns, bit for bit, the
    schedule and losses of an uninterrupted call (DUSVGD over 2 stages of 3 epochs; C-DUSVGD over 5 epochs, the
    same loop with other parameters); a finished file returns its schedule without training; a call with other
    settings refuses the file."""
    import steinax.runtime.checkpoint as ckpt

    target, problem = _gmm_problem(n=10, m=20, dtype=jnp.float32)
    loss = unfold.mmd_loss()
    common = dict(target=target, batch_size=2, optimizer=optax.adam(0.05), rng_key=key)
    real_save = ckpt.save_checkpoint
    for train, kw in [(unfold.train_dusvgd, dict(epochs=3, init=0.3)), (unfold.train_chebyshev, dict(epochs=5))]:
        plain = train(problem, loss, 2, **common, **kw)
        path = tmp_path / f"{train.__name__}.npz"
        saves = []

        def save_then_stop(*args, **kwargs):
            real_save(*args, **kwargs)
            saves.append(args[2]["epochs_done"])
            raise KeyboardInterrupt  # the session is stopped right after its first save

        monkeypatch.setattr(ckpt, "save_checkpoint", save_then_stop)
        with pytest.raises(KeyboardInterrupt):
            train(problem, loss, 2, **common, **kw, checkpoint=path, checkpoint_every=2)
        monkeypatch.setattr(ckpt, "save_checkpoint", real_save)
        assert saves == [2] and ckpt.read_meta(path)["epochs_done"] == 2
        resumed = train(problem, loss, 2, **common, **kw, checkpoint=path, checkpoint_every=2)
        np.testing.assert_array_equal(resumed.steps, plain.steps)
        np.testing.assert_array_equal(resumed.log.losses, plain.log.losses)
        np.testing.assert_array_equal(resumed.log.stages, plain.log.stages)
        assert plain.log.losses.size == (6 if train is unfold.train_dusvgd else 5)
        initial = jnp.full(2, 0.3) if train is unfold.train_dusvgd else unfold.chebyshev_steps(0.3, 1.0, 2)
        assert not np.allclose(plain.steps, initial)  # the training moved the steps: the equality is not vacuous
    # a finished file: returned without an update (a save would mean training ran again)
    monkeypatch.setattr(ckpt, "save_checkpoint", lambda *a, **k: pytest.fail("a finished training saved again"))
    again = unfold.train_chebyshev(problem, loss, 2, **common, epochs=5, checkpoint=path)
    monkeypatch.setattr(ckpt, "save_checkpoint", real_save)
    np.testing.assert_array_equal(again.steps, plain.steps)
    with pytest.raises(ckpt.CheckpointMismatchError, match="epochs"):
        unfold.train_chebyshev(problem, loss, 2, **common, epochs=6, checkpoint=path)
    with pytest.raises(TypeError, match="remat"):
        unfold.train_dusvgd(problem, loss, 2, target=target, checkpoint=False)
    with pytest.raises(ValueError, match="checkpoint_every"):
        unfold.train_dusvgd(problem, loss, 2, target=target, checkpoint=tmp_path / "x.npz", checkpoint_every=0)


def test_bad_input(tmp_path, key):
    target, problem = _gmm_problem(dtype=jnp.float32)
    for T in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match="`T` must be an integer >= 1"):
            unfold.chebyshev_steps(1.0, 1.0, T)
        with pytest.raises(ValueError, match="`T` must be an integer >= 1"):
            unfold.train_dusvgd(problem, unfold.mmd_loss(), T, target=target)
    with pytest.raises(ValueError, match=r"`steps` must be finite; step\(s\) \[1\]"):
        unfold.Schedule(jnp.array([0.1, jnp.nan]))
    with pytest.raises(ValueError, match="`init` must be finite"):
        unfold.train_dusvgd(problem, unfold.mmd_loss(), 2, target=target, init=jnp.inf)
    with pytest.raises(ValueError, match=r"`init` must be a scalar or have shape \(2,\)"):
        unfold.train_dusvgd(problem, unfold.mmd_loss(), 2, target=target, init=jnp.ones(3))
    with pytest.raises(ValueError, match=r"`loss` must return a scalar; it returned \(20,\)"):
        unfold.train_dusvgd(problem, lambda x, p: x[:, 0], 2, target=target)
    with pytest.raises(ValueError, match="no target"):
        unfold.train_dusvgd(problem, unfold.mmd_loss(), 2)
    with pytest.raises(FloatingPointError, match="non-finite at stage t' = 1, epoch 1"):
        unfold.train_dusvgd(problem, lambda x, p: jnp.sum(x) * jnp.inf, 2, target=target, rng_key=key)
    # a run that diverges part-way keeps the last finite schedule: here the steps overflow at some epoch
    with pytest.raises(unfold.TrainingDivergedError) as err:
        unfold.train_dusvgd(problem, lambda x, p: -1e30 * jnp.sum(x) ** 2, 2, target=target, rng_key=key,
                            optimizer=optax.sgd(1e10), init=0.1, epochs=3)
    last = err.value.schedule
    assert last.kind == "dusvgd" and np.all(np.isfinite(np.asarray(last.steps)))
    assert len(last.log.losses) == len(last.log.stages)
    # files of another format
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "something.else", "steps": [1.0]}))
    with pytest.raises(ValueError, match="not a steinax schedule file: expected format 'steinax.unfold.Schedule'"):
        unfold.load_schedule(other)
    npz = tmp_path / "run.npz"
    np.savez(npz, a=np.ones(3))
    with pytest.raises(ValueError, match="could not parse it as JSON"):
        unfold.load_schedule(npz)
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    with pytest.raises(ValueError, match="found None"):
        unfold.load_schedule(listing)


@pytest.mark.parametrize("train", [unfold.train_dusvgd, unfold.train_chebyshev])
def test_a_resume_with_another_optimizer_is_refused_by_behaviour(train, tmp_path, key):
    """Was: a checkpoint of Adam(0.05) resumed under Adam(0.5) returned the 0.05 schedule bit for bit, nothing trained
    (optax keeps hyperparameters in closures: the state's structure is the same). Now the optimizer's update at steps
    0 to 10^6 is stored and compared: another learning rate, or a schedule that differs only after step 0, is named;
    so are other initial particles and another loss (the first problem of a fixed batch)."""
    import steinax.runtime.checkpoint as ckpt

    target, problem = _gmm_problem(n=10, m=20, dtype=jnp.float32)
    common = dict(target=target, batch_size=2, rng_key=key, epochs=2)
    path = tmp_path / "train.npz"
    train(problem, unfold.mmd_loss(), 2, **common, optimizer=optax.adam(optax.constant_schedule(0.05)), checkpoint=path)
    later = optax.piecewise_constant_schedule(0.05, {100: 0.1})  # equal to 0.05 until step 100
    for other in (optax.adam(optax.constant_schedule(0.5)), optax.adam(later)):
        with pytest.raises(ckpt.CheckpointMismatchError, match="the optimizer's update at steps 0 to 10"):
            train(problem, unfold.mmd_loss(), 2, **common, optimizer=other, checkpoint=path)
    # other initial particles (x0) or another loss, the same optimizer: refused, named
    def moved(key):  # the same problems with their initial particles shifted
        base = problem(key)
        return unfold.Problem(base.particles + 1.0, data=base.data)

    with pytest.raises(ckpt.CheckpointMismatchError, match="the problems' initial particles"):
        train(moved, unfold.mmd_loss(), 2, **common, optimizer=optax.adam(optax.constant_schedule(0.05)), checkpoint=path)
    with pytest.raises(ckpt.CheckpointMismatchError, match="the loss at those particles"):
        train(problem, unfold.mmd_loss(bandwidth=0.5), 2, **common, optimizer=optax.adam(optax.constant_schedule(0.05)),
              checkpoint=path)
    # the same optimizer, rebuilt: resumed (a finished file returns its schedule)
    train(problem, unfold.mmd_loss(), 2, **common, optimizer=optax.adam(optax.constant_schedule(0.05)), checkpoint=path)
