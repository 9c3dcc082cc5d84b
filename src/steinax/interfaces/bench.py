"""Benchmark tables: particle methods x datasets x seeds on the papers' models (``steinax bench``).

Methods: ``svgd``, ``mk_svgd``, ``cc_svgd``, matrix SVGD in average and mixture mode
(``matrix_avg``, ``matrix_mix``: :func:`steinax.matrix_svgd` with the task's curvature,
``PRECONDITIONER``), and the baselines ``map`` (an ensemble of
independent MAP fits, :func:`steinax.map_ascent`, same optimizer and steps), ``sgld``
(BlackJAX) and ``psgld`` (one chain per particle, same steps and minibatches;
:func:`steinax.baselines.mcmc.sgld`) and ``nuts`` (NumPyro, 2 chains on the full-data posterior:
the reference on small problems; :func:`steinax.baselines.mcmc.nuts`).

Tasks:

* ``"bnn"``: BNN regression (:class:`steinax.models.BNNRegression`, Liu & Wang's
  13-50-1 network) on the regression datasets; metrics test RMSE and log-likelihood.
  Liu & Wang's settings: 20 particles, minibatch 100, AdaGrad-momentum 1e-3,
  2000 steps, random 90/10 splits.
* ``"blr"``: Bayesian logistic regression (:class:`steinax.models.LogisticRegression`,
  Gamma hyperprior) on the binary datasets; metrics test accuracy and log-likelihood.
  Liu & Wang's settings: 100 particles from their code's initialisation, minibatch 100,
  AdaGrad-momentum 0.05, 80/20 splits (their 6000 steps; 2000 by default here, see ``DEFAULTS``).

Every finished (dataset, method, seed) job is appended to ``results.csv`` in the
output folder at once (the whole file rewritten atomically), so an interrupted
run loses at most the job in progress, and a rerun with the same settings skips
what is done. ``summary.csv`` and ``summary.md`` hold mean +- standard error
over seeds per dataset and method, with the wall time.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from steinax import datasets
from steinax._io import append_row, atomic_write_csv, atomic_write_text, check_output, read_rows
from steinax.particles.loop.progress import progress_bar

__all__ = ["TASKS", "METHODS", "BenchSettings", "run_bench", "summarise"]

TASKS = ("bnn", "blr")


def _methods():
    import steinax

    return {"svgd": steinax.svgd, "mk_svgd": steinax.mk_svgd, "cc_svgd": steinax.cc_svgd, "map": steinax.map_ascent}


METHODS = ("svgd", "mk_svgd", "cc_svgd", "matrix_avg", "matrix_mix", "map", "sgld", "psgld", "nuts")
PRECONDITIONER = {"bnn": "kfac", "blr": "fisher"}
"""The curvature of ``matrix_avg`` / ``matrix_mix`` per task: KFAC on the BNN's dense layers (the
matrix-SVGD paper's BNN experiments), the minibatch Fisher for logistic regression (its sec. 4.2)."""


@dataclass(frozen=True)
class BenchSettings:
    """The settings of one task's runs (part of every result row; a rerun skips rows with equal settings).

    ``b0``: the Gamma rate of the model's precision priors. ``dev_fraction`` / ``dev_noise``: Liu &
    Wang's development set (the last 10% of the training split, at most 500 rows, held out) and their
    post-hoc re-estimate of the BNN noise precision on it (:meth:`BNNRegression.reestimate_noise`).
    ``bandwidth``: a fixed RBF bandwidth ``h`` in ``exp(-|x - y|^2 / h)`` for SVGD and CC-SVGD
    (``None``: the median rules). ``sgld_step``, ``psgld_step``: the SG-MCMC step sizes
    (chosen on splits the tables do not use: experiments/bnn/sgld_step_grid.py); the chains (one per
    particle) keep ``keep`` evenly thinned draws of their second half; NUTS runs 2 chains of
    ``nuts_samples`` draws after as many warm-up steps, on the full-data posterior.
    ``mixture_learning_rate``: ``matrix_mix``'s step size when it differs (the authors' BNN code: 1e-3
    for the mixture, 5e-3 for the others).
    """

    particles: int
    steps: int
    batch_size: int
    learning_rate: float
    train_fraction: float
    b0: float | None = None
    dev_fraction: float = 0.0
    dev_noise: bool = False
    bandwidth: float | None = None
    sgld_step: float = 1e-5
    psgld_step: float = 1e-3
    keep: int = 10
    nuts_samples: int = 500
    hidden: tuple[int, ...] = (50,)
    bias: bool = True
    noise_variance: float | None = None
    prior_variance: float | None = None
    optimizer: str = "adagrad_momentum"
    mixture_learning_rate: float | None = None

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}; received {self.optimizer!r}")
        if self.dev_noise and not self.dev_fraction:
            raise ValueError("`dev_noise` needs a development set: set `dev_fraction` > 0 (Liu & Wang: 0.1)")

    def key(self, method: str | None = None) -> str:
        """The settings as a short string; with ``method``, also the settings only that method uses."""
        parts = [f"n{self.particles}-T{self.steps}-B{self.batch_size}-lr{self.learning_rate:g}-f{self.train_fraction:g}"]
        if self.optimizer != "adagrad_momentum":
            parts.append(self.optimizer)
        if self.hidden != (50,) or not self.bias:
            parts.append("net" + "x".join(map(str, self.hidden)) + ("" if self.bias else "nobias"))
        if self.noise_variance is not None:
            parts.append(f"v{self.noise_variance:g}")
        if self.prior_variance is not None:
            parts.append(f"pv{self.prior_variance:g}")
        if self.b0 is not None:
            parts.append(f"b0{self.b0:g}")
        if self.dev_fraction:
            parts.append(f"dev{self.dev_fraction:g}{'+noise' if self.dev_noise else ''}")
        if self.bandwidth is not None and method in ("svgd", "cc_svgd"):
            parts.append(f"h{self.bandwidth:g}")
        if method in ("sgld", "psgld"):
            parts.append(f"eps{self.sgld_step if method == 'sgld' else self.psgld_step:g}-keep{self.keep}")
        if method == "nuts":
            parts.append(f"nuts{self.nuts_samples}")
        if method == "matrix_mix" and self.mixture_learning_rate is not None:
            parts.append(f"mixlr{self.mixture_learning_rate:g}")
        return "-".join(parts)


OPTIMIZERS = ("adagrad_momentum", "rmsprop")

DEFAULTS = {
    "bnn": BenchSettings(particles=20, steps=2000, batch_size=100, learning_rate=1e-3, train_fraction=0.9,
                         sgld_step=3e-5, psgld_step=3e-3),
    "blr": BenchSettings(particles=100, steps=2000, batch_size=100, learning_rate=0.05, train_fraction=0.8,
                         sgld_step=3e-3, psgld_step=3e-3),
}
QUICK = {
    "bnn": BenchSettings(particles=5, steps=20, batch_size=50, learning_rate=1e-3, train_fraction=0.9, keep=2,
                         nuts_samples=20),
    "blr": BenchSettings(particles=10, steps=200, batch_size=50, learning_rate=0.05, train_fraction=0.8, keep=2,
                         nuts_samples=20),
}
PRESETS = {
    "bnn": {
        "liu": {},
        "dusvgd": {"b0": 0.01, "particles": 100},
        "matrix_svgd": {"hidden": (50, 50), "bias": False, "noise_variance": 0.5, "prior_variance": 1.0,
                        "particles": 10, "learning_rate": 5e-3, "optimizer": "rmsprop", "mixture_learning_rate": 1e-3},
    },
    "blr": {"liu": {}},  # DUSVGD's BLR prior, Gamma(1, 0.01), is LogisticRegression's default
}
"""Each paper's own BNN setting (ALGORITHMS.md): ``liu`` (Liu & Wang; also MK-SVGD's and KCC-SD's
network), ``dusvgd`` (Gamma(1, 0.01) priors, 100 particles), ``matrix_svgd`` (its code's
[p, 50, 50, 1] ReLU network without biases, noise variance 0.5 and N(0, 1) prior fixed,
10 particles, RMSProp(decay 0.95) 5e-3, 1e-3 for ``matrix_mix``). KCC-SD's fixed bandwidth is ``--bandwidth``."""

FIELDS = ("task", "dataset", "method", "seed", "settings", "rmse", "loglik", "accuracy", "wall_time")
ROW_KEY = ("task", "dataset", "method", "seed", "settings")
"""A results row is kept once per these fields."""


def _check(task, names, methods, seeds):
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    want = "regression" if task == "bnn" else "binary"
    info = datasets.available()
    for name in names:
        if name not in info:
            raise ValueError(f"unknown dataset {name!r}; available: {sorted(info)}")
        if info[name].task != want:
            fitting = sorted(k for k, v in info.items() if v.task == want)
            raise ValueError(f"dataset {name!r} is {info[name].task}, not for task {task!r}; use one of {fitting}")
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; available: {list(METHODS)}")
    for label, given in (("methods", methods), ("datasets", names)):
        repeated = sorted({x for x in given if list(given).count(x) > 1})
        if repeated:
            raise ValueError(f"`{label}` names {repeated} more than once ({list(given)}); expected each at most once "
                             "(a repeat would run the same jobs twice and count them as extra seeds)")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"`seeds` must be a positive integer; received {seeds!r}")


def _model_and_data(task, X, y, seed, s: BenchSettings):
    """The split, the model, its minibatch target and initial particles of one job."""
    from steinax.models import BNNRegression, LogisticRegression

    regression = task == "bnn"
    split = datasets.train_test_split(X, y, s.train_fraction, seed=seed, standardize_y=regression,
                                      dev_fraction=s.dev_fraction)
    X_tr, y_tr = jnp.asarray(split.X_train, jnp.float32), jnp.asarray(split.y_train, jnp.float32)
    X_te, y_te = jnp.asarray(split.X_test, jnp.float32), jnp.asarray(split.y_test, jnp.float32)
    key = jax.random.key(seed)
    prior = {} if s.b0 is None else {"b0": s.b0}
    if regression:
        model = BNNRegression(X.shape[1], tuple(s.hidden), bias=s.bias, noise_variance=s.noise_variance,
                              prior_variance=s.prior_variance, **prior)
        x0 = model.init_particles(key, s.particles, X_tr, y_tr)
    else:
        X_tr, X_te = (jnp.concatenate([a, jnp.ones((a.shape[0], 1), a.dtype)], axis=1) for a in (X_tr, X_te))
        model = LogisticRegression(X_tr.shape[1], **prior)
        x0 = model.init_particles(key, s.particles, scheme="liu")  # the authors' code: alpha ~ Gamma(1, scale 0.01)
    target = model.target(X_tr, y_tr, batch_size=min(s.batch_size, X_tr.shape[0]))
    return split, model, target, x0, (X_te, y_te)


def _run_method(task, method_name, target, x0, s: BenchSettings, key):
    """Particles (or draws, chains and draws flattened) of one method on one target."""
    import optax

    import steinax
    from steinax.baselines import mcmc
    from steinax.kernels import RBF

    if method_name in ("sgld", "psgld"):
        draws = mcmc.sgld(target, x0, steps=s.steps, step_size=s.sgld_step if method_name == "sgld" else s.psgld_step,
                          rng_key=key, keep=s.keep,
                          preconditioned=method_name == "psgld")
        return draws.reshape(-1, x0.shape[1])
    if method_name == "nuts":
        draws = mcmc.nuts(target, x0[:2], num_warmup=s.nuts_samples, num_samples=s.nuts_samples, rng_key=key)
        return draws.reshape(-1, x0.shape[1])
    lr = s.learning_rate
    if method_name in ("matrix_avg", "matrix_mix"):
        mode = "average" if method_name == "matrix_avg" else "mixture"
        method = steinax.matrix_svgd(PRECONDITIONER[task], mode)
        if mode == "mixture" and s.mixture_learning_rate is not None:
            lr = s.mixture_learning_rate
    else:
        kernel = None if s.bandwidth is None or method_name not in ("svgd", "cc_svgd") else RBF(s.bandwidth)
        method = _methods()[method_name]() if kernel is None else _methods()[method_name](kernel)
    optimizer = (steinax.adagrad_momentum(lr) if s.optimizer == "adagrad_momentum" else optax.rmsprop(lr, decay=0.95))
    res = steinax.run(method, target, x0, steps=s.steps, optimizer=optimizer, rng_key=key, progress=False)
    return res.particles


def _one_job(task, X, y, method_name, seed, s: BenchSettings):
    """Split, build the model's target, run the method, evaluate: one result row (without the keys)."""
    split, model, target, x0, (X_te, y_te) = _model_and_data(task, X, y, seed, s)
    t0 = time.perf_counter()
    particles = jax.block_until_ready(_run_method(task, method_name, target, x0, s, jax.random.fold_in(jax.random.key(seed), 1)))
    wall = time.perf_counter() - t0
    if task == "bnn":
        if s.dev_noise:  # BenchSettings guarantees a development set
            particles = model.reestimate_noise(particles, jnp.asarray(split.X_dev, jnp.float32),
                                               jnp.asarray(split.y_dev, jnp.float32))
        ev = model.evaluate(particles, X_te, y_te, split.y_mean, split.y_std)
    else:
        ev = model.evaluate(particles, X_te, y_te)
    as_float = lambda v: "" if v is None else float(v)  # noqa: E731
    return {"rmse": as_float(ev.rmse), "loglik": as_float(ev.loglik), "accuracy": as_float(ev.accuracy), "wall_time": wall}


def _row_key(r) -> tuple:
    return tuple(str(r[k]) for k in ROW_KEY)


def _append_row(path, row, fields=FIELDS) -> None:
    """Add ``row`` to the results file once (by :data:`ROW_KEY`), under a lock (:func:`steinax._io.append_row`)."""
    append_row(path, row, fields, ROW_KEY)


def run_bench(
    task: str,
    names,
    methods,
    seeds: int,
    out_dir: str,
    *,
    quick: bool = False,
    settings: BenchSettings | None = None,
    progress: bool = True,
) -> list[dict]:
    """Run every (dataset, method, seed) job not yet in ``out_dir/results.csv``; write the summaries.

    Args:
        task: ``"bnn"`` or ``"blr"``.
        names: dataset names (:func:`steinax.datasets.available`), of the task's kind.
        methods: method names from ``METHODS``.
        seeds: seeds ``0 .. seeds - 1`` (each seed is one random split and one run).
        out_dir: where ``results.csv``, ``summary.csv`` and ``summary.md`` go.
        quick: tiny settings for a smoke run (``QUICK``).
        settings: override the task's settings.

    Returns:
        The summary rows.
    """
    names, methods = list(names), list(methods)
    _check(task, names, methods, seeds)
    s = settings or (QUICK if quick else DEFAULTS)[task]
    results_path = os.path.join(out_dir, "results.csv")
    check_output(results_path, name="out_dir")  # before any job: a read-only folder fails now, not after the first
    done = {_row_key(r) for r in read_rows(results_path)}
    jobs = [(d, m, k) for d in names for m in methods for k in range(seeds)
            if (task, d, m, str(k), s.key(m)) not in done]
    print(f"steinax bench {task}: {len(names)} datasets x {len(methods)} methods x {seeds} seeds; settings {s.key()}; "
          f"{len(jobs)} to run, {len(names) * len(methods) * seeds - len(jobs)} already in {results_path}", flush=True)
    loaded = {}
    with progress_bar(progress and len(jobs) > 0, len(jobs), "steinax bench", unit="job") as bar:
        for d, m, k in jobs:
            if d not in loaded:
                loaded[d] = datasets.load(d)
            if (task, d, m, str(k), s.key(m)) in {_row_key(r) for r in read_rows(results_path)}:
                continue  # another process sharing `out_dir` finished it meanwhile
            row = {"task": task, "dataset": d, "method": m, "seed": k, "settings": s.key(m), **_one_job(task, *loaded[d], m, k, s)}
            # every finished job is kept, and rows other processes wrote to the same file meanwhile too
            _append_row(results_path, {f: row[f] for f in FIELDS})
            # each job compiles its own target; without this, hundreds of jobs exhaust the JIT's code memory
            # (observed: "LLVM ERROR: Unable to allocate section memory" after 183 BLR jobs)
            jax.clear_caches()
            bar.update(1, job=f"{d}/{m}/seed {k}")
    rows = read_rows(results_path)  # this process's rows and any another wrote to the same folder
    summary = summarise([r for r in rows if r["task"] == task and r["settings"] == s.key(r["method"])])
    atomic_write_csv(os.path.join(out_dir, "summary.csv"), summary, list(summary[0]) if summary else ["dataset"])
    md = _markdown(task, s, summary)
    atomic_write_text(os.path.join(out_dir, "summary.md"), md)
    print(md)
    return summary


def summarise(rows) -> list[dict]:
    """Mean and standard error over seeds of each metric, per dataset and method."""
    out = []
    for d in sorted({r["dataset"] for r in rows}):
        for m in [m for m in METHODS if any(r["dataset"] == d and r["method"] == m for r in rows)]:
            at = [r for r in rows if r["dataset"] == d and r["method"] == m]
            entry = {"dataset": d, "method": m, "seeds": len(at)}
            for metric in ("rmse", "loglik", "accuracy", "wall_time"):
                vals = np.array([float(r[metric]) for r in at if r[metric] not in ("", None)])
                if vals.size:
                    entry[f"{metric}_mean"] = float(vals.mean())
                    entry[f"{metric}_se"] = float(vals.std(ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else float("nan")
            out.append(entry)
    return out


SETTINGS_TAG = ("n particles, T steps, B minibatch size, lr step size, f training fraction; then, where not the "
                "default, the optimizer, the network (net50nobias), the noise (v) and prior (pv) variances, the "
                "precision prior's rate (b0), the dev fraction (dev), a fixed bandwidth (h), the step size and "
                "thinning of SGLD (eps, keep), NUTS draws (nuts) and the mixture's learning rate (mixlr)")


def _markdown(task, s: BenchSettings, summary) -> str:
    metrics = ["rmse", "loglik"] if task == "bnn" else ["accuracy", "loglik"]
    head = "| dataset | method | seeds | " + " | ".join(f"test {m}" for m in metrics) + " | wall s |"
    lines = [f"steinax bench {task} ({s.key()}; mean ± standard error over seeds)", "",
             f"Settings tag: {SETTINGS_TAG}. wall s: one job's sampling time (the method's run, its "
             "compilation included), without the data split, the model's construction and the test evaluation, "
             "which the progress bar's per-job time also counts.", "", head,
             "|" + "---|" * (4 + len(metrics))]
    for e in summary:
        cells = [f"{e.get(f'{m}_mean', float('nan')):.3f} ± {e.get(f'{m}_se', float('nan')):.3f}" for m in metrics]
        lines.append(f"| {e['dataset']} | {e['method']} | {e['seeds']} | " + " | ".join(cells)
                     + f" | {e.get('wall_time_mean', float('nan')):.1f} |")
    extra = [f"{m}: {s.key(m)}" for m in dict.fromkeys(e["method"] for e in summary) if s.key(m) != s.key()]
    if extra:
        lines += ["", "Method-specific settings: " + "; ".join(extra) + "."]
    return "\n".join(lines) + "\n"
