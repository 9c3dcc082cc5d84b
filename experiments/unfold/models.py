"""Deep-unfolded SVGD paper, sections IV-B (Fig. 4, logistic regression) and IV-C (Fig. 5, Bayesian NN on Boston).

Setting (paper IV-B/C; ALGORITHMS.md section E), models, splits and initial
particles exactly as ``steinax bench`` builds them (``bench._model_and_data``):

* ``--task blr``: Bayesian logistic regression with a Gamma(1, 0.01) prior on
  the weight precision (LogisticRegression's default), 100 particles from the
  authors' initialisation, 80/20 split, minibatch scores of 100 rows. Covtype
  is not offline; ``fertility`` (254,654 x 7, the bench's Covtype stand-in) is
  the default. T = 10, B = 1. DUSVGD: Adam 1e-7, gamma_t = 2e-5 initially;
  C-DUSVGD: Adam 1e-1, (alpha, beta) = (200, 500). Loss: cross-entropy
  (eq. 21) of the particle-averaged predictive on 2000 random training rows per
  problem. Metric: test accuracy vs iteration.
* ``--task bnn``: the ``dusvgd`` bench preset (one hidden layer of 50 ReLU
  units, Gamma(1, 0.01) priors on both precisions, 100 particles), Boston,
  90/10 split, minibatch scores of 100 rows. T = 15, B = 1. DUSVGD: Adam 1e-6,
  gamma_t = 1e-4; C-DUSVGD: Adam 1.0, (alpha, beta) = (50, 50). Loss: MSE of
  the particle-averaged prediction on 200 random training rows. Metric: test
  RMSE vs iteration (original units).

Each training problem is a fresh set of initial particles (the bench's
initialisation with a new key) and its loss rows; the learned schedules are
reused periodically. The paper's epochs (500/1000 for BLR, 500/500 for the
BNN) are reduced by default (``--du-epochs``, ``--cdu-epochs``) to fit this
machine; the numbers printed say which were used. At the paper's epochs the
DUSVGD training took 28 min (BLR) and 49 min (BNN) on 2 shared cores; the
commands are in docs/reproductions.md. Baselines: RMSProp
(decay 0.9) and a fixed step, each at the best value of a stated grid by the
final test metric on ``--select`` selection splits (seeds disjoint from the
evaluation splits).

    python experiments/unfold/models.py --task blr [--trials 10] [--iterations 500]
    python experiments/unfold/models.py --task bnn [--trials 10] [--iterations 3000]

A long run resumes after an interruption (``--state DIR``, default ``<out>/state_<task>``): the two
trainings save their state there every 10 epochs (``train_dusvgd(checkpoint=...)``), and every test
curve already computed is kept there and not recomputed; a changed setting or schedule gets a new
file (the file names carry the setting). ``--no-resume`` starts afresh.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np
import optax

import steinax
from steinax import datasets, unfold
from steinax.interfaces import bench

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

TASKS = {
    "blr": dict(dataset="fertility", preset={}, T=10, du_lr=1e-7, cdu_lr=1e-1, init=2e-5, alpha=200.0, beta=500.0,
                du_epochs=20, cdu_epochs=100, loss_rows=2000, iterations=500,
                fixed_grid=[3e-6, 1e-5, 3e-5, 1e-4], rmsprop_grid=[1e-3, 3e-3, 1e-2, 3e-2, 1e-1],
                paper="accuracy at 500 iterations (30 trials, Covtype): DU 73.3%, C-DU 73.4%, RMSProp 71.6%, fixed 70.7%"),
    "bnn": dict(dataset="boston", preset=bench.PRESETS["bnn"]["dusvgd"], T=15, du_lr=1e-6, cdu_lr=1.0, init=1e-4,
                alpha=50.0, beta=50.0, du_epochs=20, cdu_epochs=100, loss_rows=200, iterations=3000,
                fixed_grid=[1e-5, 3e-5, 1e-4, 3e-4], rmsprop_grid=[1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
                paper="log10 RMSE at 3000 iterations (10 trials): DU -0.18, C-DU -0.028, RMSProp 0.12, fixed 0.92"),
}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=sorted(TASKS), default="blr")
    p.add_argument("--dataset", default=None)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--select", type=int, default=3)
    p.add_argument("--iterations", type=int, default=None)
    p.add_argument("--particles", type=int, default=100)
    p.add_argument("--du-epochs", type=int, default=None)
    p.add_argument("--cdu-epochs", type=int, default=None)
    p.add_argument("--fixed-grid", type=float, nargs="+", default=None)
    p.add_argument("--rmsprop-grid", type=float, nargs="+", default=None)
    p.add_argument("--test-rows", type=int, default=5000, help="test rows scored at every iteration (BLR)")
    p.add_argument("--out", default="docs/experiments/unfold")
    p.add_argument("--state", default=None, help="resume folder (default <out>/state_<task>)")
    p.add_argument("--no-resume", action="store_true", help="do not save or reuse training states and curves")
    return p.parse_args(argv)


def _tag(*parts) -> str:
    """A short stable name for a setting (file names of the kept state)."""
    import hashlib

    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def main(argv=None):
    args = parse(argv)
    cfg = dict(TASKS[args.task])
    for k in ("dataset", "iterations", "du_epochs", "cdu_epochs", "fixed_grid", "rmsprop_grid"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)
    os.makedirs(args.out, exist_ok=True)
    state = None if args.no_resume else (args.state or os.path.join(args.out, f"state_{args.task}"))
    if state is not None:
        os.makedirs(state, exist_ok=True)
    settings = bench.BenchSettings(**{**bench.DEFAULTS[args.task].__dict__, **cfg["preset"], "particles": args.particles})
    metric = "accuracy" if args.task == "blr" else "rmse"
    banner(f"Deep-unfolded SVGD, {'logistic regression (IV-B, Fig. 4)' if args.task == 'blr' else 'BNN (IV-C, Fig. 5)'}", {
        "dataset": cfg["dataset"], "particles": args.particles, "score minibatch": settings.batch_size,
        "T": cfg["T"], "B": 1,
        "DUSVGD": f"E = {cfg['du_epochs']} per stage (paper 500), Adam {cfg['du_lr']:g}, init {cfg['init']:g}",
        "C-DUSVGD": f"E = {cfg['cdu_epochs']} (paper {'1000' if args.task == 'blr' else '500'}), Adam {cfg['cdu_lr']:g}, "
                    f"(alpha, beta) = ({cfg['alpha']:g}, {cfg['beta']:g})",
        "loss": ("cross-entropy" if args.task == "blr" else "MSE") + f" on {cfg['loss_rows']} random training rows",
        "fixed grid": cfg["fixed_grid"], "RMSProp grid": cfg["rmsprop_grid"],
        "selection": f"{args.select} splits (seeds 100+), final test {metric}",
        "evaluation": f"{args.trials} splits (seeds 0+), {cfg['iterations']} iterations",
        "paper": cfg["paper"],
    })
    X, y = datasets.load(cfg["dataset"])
    method = steinax.svgd()

    def job(seed):
        split, model, target, x0, (X_te, y_te) = bench._model_and_data(args.task, X, y, seed, settings)
        X_tr = target.data[0]
        y_tr = target.data[1]
        if args.task == "blr":
            X_te, y_te = X_te[: args.test_rows], y_te[: args.test_rows]

            def score(x):
                return model.evaluate(x, X_te, y_te).accuracy

            loss = unfold.cross_entropy_loss(model.logits)
        else:
            y_mean, y_std = float(split.y_mean), float(split.y_std)

            def score(x):
                return model.evaluate(x, X_te, y_te, y_mean, y_std).rmse

            loss = unfold.mse_loss(model.predict)

        def init(key):
            if args.task == "blr":
                return model.init_particles(key, args.particles, scheme="liu")
            return model.init_particles(key, args.particles, X_tr, y_tr)

        def problem(key):
            k1, k2 = jax.random.split(key)
            idx = jax.random.choice(k2, X_tr.shape[0], (min(cfg["loss_rows"], X_tr.shape[0]),), replace=False)
            return unfold.Problem(init(k1), data=(X_tr[idx], y_tr[idx]))

        return target, x0, score, loss, problem

    common = (args.task, cfg["dataset"], args.particles, cfg["iterations"], args.test_rows)

    def curve(seed, optimizer, setting):
        """Test metric at iterations 0..I of one split; kept in ``state`` under the setting's tag."""
        path = None if state is None else os.path.join(state, f"curve_{_tag(common, setting, seed)}.npy")
        if path is not None and os.path.exists(path):
            return np.load(path)
        target, x0, score, _, _ = job(seed)
        run = jax.jit(lambda x: unfold.trajectory(method, target, x, optimizer, jax.random.key(seed + 1),
                                                  cfg["iterations"], record=score)[1])
        values = np.concatenate([[float(score(x0))], np.asarray(run(x0))])
        if path is not None:
            from steinax._io import atomic_write

            def write(tmp):
                with open(tmp, "wb") as f:
                    np.save(f, values)

            atomic_write(path, write)
        return values

    # ------------------------------------------------------------------ training on split 0's training data
    target, _, _, loss, problem = job(0)
    def trained(train, setting, **kw):
        """The learned schedule and its training time; a diverged run keeps its last finite schedule (said so)."""
        if state is not None:
            kw.update(checkpoint=os.path.join(state, f"{train.__name__}_{_tag(common, setting, cfg['T'])}.npz"),
                      checkpoint_every=10)
        try:
            schedule = train(problem, loss, cfg["T"], target=target, method=method, batch_size=1, **kw)
        except unfold.TrainingDivergedError as err:
            schedule = err.schedule
            print(f"   note: {err}".split("; lower")[0] + f"; the last finite schedule "
                  f"({len(schedule.log.losses)} epochs) is used")
        return schedule, float(schedule.log.seconds)  # accumulated over resumed calls

    du, du_seconds = trained(unfold.train_dusvgd, ("du", cfg["du_epochs"], cfg["du_lr"], cfg["init"]), epochs=cfg["du_epochs"], optimizer=optax.adam(cfg["du_lr"]),
                             init=cfg["init"], rng_key=jax.random.key(1))
    cdu, cdu_seconds = trained(unfold.train_chebyshev, ("cdu", cfg["cdu_epochs"], cfg["cdu_lr"], cfg["alpha"],
                                                        cfg["beta"]), epochs=cfg["cdu_epochs"], optimizer=optax.adam(cfg["cdu_lr"]),
                               alpha=cfg["alpha"], beta=cfg["beta"], rng_key=jax.random.key(2))
    du.save(os.path.join(args.out, f"{args.task}_dusvgd_schedule.json"))
    cdu.save(os.path.join(args.out, f"{args.task}_cdusvgd_schedule.json"))
    print(f"   DUSVGD trained in {du_seconds:.1f} s: steps {np.asarray(du.steps).tolist()}; "
          f"loss {du.log.losses[0]:.4g} -> {du.log.losses[-1]:.4g}")
    print(f"   C-DUSVGD trained in {cdu_seconds:.1f} s: alpha {float(cdu.alpha):.4g}, beta {float(cdu.beta):.4g}, "
          f"steps {np.asarray(cdu.steps).tolist()}; loss {cdu.log.losses[0]:.4g} -> {cdu.log.losses[-1]:.4g}")

    # ------------------------------------------------------------------ baselines: grid selection
    better = (lambda a, b: a > b) if metric == "accuracy" else (lambda a, b: a < b)

    def select(name, make, grid):
        best, best_value = None, None
        for v in grid:
            finals = [curve(100 + i, make(v), (name, v))[-1] for i in range(args.select)]
            value = float(np.nanmean(finals)) if np.all(np.isfinite(finals)) else (
                -np.inf if metric == "accuracy" else np.inf)
            print(f"   select {name} {v:g}: final test {metric} {value:.4f}")
            if best is None or better(value, best_value):
                best, best_value = v, value
        return best

    fixed_best = select("fixed", lambda v: optax.sgd(v), cfg["fixed_grid"])
    rms_best = select("RMSProp", lambda v: optax.rmsprop(v, decay=0.9), cfg["rmsprop_grid"])
    methods = {
        "dusvgd": ("DUSVGD (learned, periodic)", optax.sgd(du), du_seconds),
        "cdusvgd": ("C-DUSVGD (learned, periodic)", optax.sgd(cdu), cdu_seconds),
        "rmsprop": (f"RMSProp lr {rms_best:g}", optax.rmsprop(rms_best, decay=0.9), 0.0),
        "fixed": (f"fixed step {fixed_best:g}", optax.sgd(fixed_best), 0.0),
    }
    settings_of = {"dusvgd": ("schedule", np.asarray(du.steps).tolist()),
                   "cdusvgd": ("schedule", np.asarray(cdu.steps).tolist()),
                   "rmsprop": ("RMSProp", rms_best), "fixed": ("fixed", fixed_best)}
    results = {name: np.stack([curve(s, opt, settings_of[name]) for s in range(args.trials)])
               for name, (_, opt, _) in methods.items()}

    for name, (label, _, _) in methods.items():  # a run that went wrong says so, with the iteration
        r = results[name]
        bad = ~np.isfinite(r) | ((r > 10 * r[:, :1]) if metric == "rmse" else False)
        hit = [int(np.argmax(b)) for b in bad if b.any()]
        if hit:
            print(f"   note: {label} diverged (test RMSE non-finite or above 10x its start) on {len(hit)} of "
                  f"{r.shape[0]} splits, first at iterations {sorted(hit)}" if metric == "rmse" else
                  f"   note: {label} went non-finite on {len(hit)} of {r.shape[0]} splits, first at iterations "
                  f"{sorted(hit)}")

    checkpoints = sorted({c for c in (10, 50, 100, 500, 1000, 3000, cfg["iterations"]) if c <= cfg["iterations"]})
    print(f"   test {metric}, mean ± se over {args.trials} splits, at iterations {checkpoints}:")
    summary, rows = [], []
    for name, (label, _, seconds) in methods.items():
        r = results[name]
        mean = np.mean(r, axis=0)
        se = np.std(r, axis=0, ddof=1) / np.sqrt(r.shape[0]) if r.shape[0] > 1 else np.zeros_like(mean)
        cells = "  ".join(f"{mean[c]:.4f}±{se[c]:.4f}" for c in checkpoints)
        extra = f"  log10 RMSE@last {np.log10(mean[-1]):.3f}" if metric == "rmse" else ""
        print(f"   {label:<30} {cells}{extra}")
        summary.append({"task": args.task, "dataset": cfg["dataset"], "method": name, "setting": label,
                        "trials": r.shape[0], **{f"{metric}_at_{c}": float(mean[c]) for c in checkpoints},
                        **{f"se_at_{c}": float(se[c]) for c in checkpoints}, "training_seconds": seconds})
        for t in range(r.shape[1]):
            rows.append({"method": name, "iteration": t, "mean": float(mean[t]), "se": float(se[t])})
    write_csv_atomically(os.path.join(args.out, f"{args.task}_summary.csv"), summary)
    write_csv_atomically(os.path.join(args.out, f"{args.task}_curves.csv"), rows)

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, (label, _, _) in methods.items():
        mean = np.mean(results[name], axis=0)
        axes[0].plot(np.arange(mean.shape[0]), mean if metric == "accuracy" else np.log10(mean), label=label)
    axes[0].set_xscale("symlog", linthresh=10)
    axes[0].set(xlabel="iteration", ylabel="test accuracy" if metric == "accuracy" else "log10 test RMSE",
                title=f"{cfg['dataset']}: {args.trials} splits")
    axes[0].legend(fontsize=7)
    axes[1].plot(np.asarray(du.steps), "o-", label="DUSVGD")
    axes[1].plot(np.asarray(cdu.steps), "s-", label="C-DUSVGD")
    axes[1].axhline(fixed_best, color="C3", ls="--", label=f"fixed {fixed_best:g}")
    axes[1].set(xlabel="t (reused periodically)", ylabel="step size", yscale="log", title="learned schedules")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, os.path.join(args.out, f"{args.task}.png"))
    return summary


if __name__ == "__main__":
    main()
