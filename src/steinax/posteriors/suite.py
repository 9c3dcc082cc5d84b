"""The posterior suite's table: methods and peers x posteriors x seeds (``steinax bench posteriors``).

Every run starts from ``N(0, I)`` in the unconstrained space (particle methods; NUTS and VI
start as their libraries do) and is scored by :func:`steinax.metrics.posterior.posterior_errors`
against the posterior's reference, with the squared KSD (IMQ, U-statistic; the same for every row), the spread check
and the relaxation check, the wall time (compilation included) and the
score evaluations. Rows are appended to ``results.csv`` as they finish (resumable: a
rerun skips done rows). A run is not stopped at ``cap`` seconds: one that took longer is marked
``capped`` in its row; a particle run that goes non-finite is kept as a row with status
``diverged at step T`` (its last finite particles scored), never dropped.

Methods (:data:`METHODS`): ``svgd`` and ``mk_svgd`` with the README's optimizer
(AdaGrad-momentum 0.05), ``cc_svgd``, ``map`` (an ensemble of MAP fits), ``annealed_svgd``,
``sliced_svgd`` (SGD 0.1 in its whitened coordinates, each step clipped to 1), and the
peers of :mod:`steinax.posteriors.peers`: ``nuts`` (NumPyro, 4 chains, with its minimum bulk
ESS and the wall time extrapolated to an ESS of 1000), ``vi`` (full-rank Gaussian VI),
``numpyro_svgd``, ``numpyro_asvgd``, ``blackjax_svgd`` and ``pathfinder`` (BlackJAX).
Each run is also checked by both collapse diagnostics (:func:`~steinax.diagnostics.spread_check`,
:func:`~steinax.diagnostics.relaxation_check`) and the missing-mode check
(:func:`~steinax.diagnostics.mode_check`); ``flagged`` is any one's flag.
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from steinax._io import atomic_write_text
from steinax.posteriors.peers import PEERS, nuts_seconds_to_ess

__all__ = ["METHODS", "SuiteSettings", "evaluate", "particle_method", "run_suite"]

STEINAX_METHODS = ("svgd", "mk_svgd", "cc_svgd", "map", "annealed_svgd", "sliced_svgd")
METHODS = STEINAX_METHODS + tuple(PEERS)


@dataclasses.dataclass(frozen=True)
class SuiteSettings:
    particles: int = 100
    steps: int = 3000
    nuts_warmup: int = 500
    nuts_samples: int = 500
    cap: float = 600.0

    def tag(self) -> str:
        return f"n={self.particles},steps={self.steps},nuts={self.nuts_warmup}+{self.nuts_samples}"


def particle_method(name: str, steps: int):
    """``(method, optimizer)`` of steinax method ``name`` (one of :data:`STEINAX_METHODS`) as the suite runs it."""
    import steinax

    readme = steinax.adagrad_momentum(0.05)
    sliced = steinax.sliced_svgd()
    return {
        "svgd": (steinax.svgd(), readme),
        "mk_svgd": (steinax.mk_svgd(), readme),
        "cc_svgd": (steinax.cc_svgd(), readme),
        "map": (steinax.map_ascent(), readme),
        "annealed_svgd": (steinax.annealed_svgd(anneal_steps=steps // 2), readme),
        "sliced_svgd": (sliced, sliced.default_optimizer()),  # its own default: SGD 0.1, each step clipped to 1
    }[name]


def evaluate(method: str, name: str, seed: int = 0, settings: SuiteSettings = SuiteSettings(),
             particles_dir: str | None = None) -> dict:
    """Run ``method`` (one of :data:`METHODS`) on posterior ``name`` and return its metrics row.

    With ``particles_dir``, the final particles (or draws) are also written there as
    ``{name}__{method}__{seed}.npy`` (atomically), so a row can be scored again without rerunning.
    """
    import steinax
    from steinax.posteriors import get

    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; received {method!r}")
    post = get(name)
    post.reference()  # a missing reference fails here, before the run
    key = jax.random.key(seed)
    n = settings.particles
    t0 = time.perf_counter()
    status, info = "ok", {}
    if method in PEERS:
        x, evals, info = PEERS[method](post, key, settings)
    else:
        m, opt = particle_method(method, settings.steps)
        try:
            res = steinax.run(m, post.target, post.init(key, n), steps=settings.steps, optimizer=opt,
                              rng_key=jax.random.fold_in(key, 1), progress=False)
        except steinax.NonFiniteError as err:  # reported as a row, with the last finite particles
            res, status = err.result, f"diverged at step {err.step}"
        x = np.asarray(res.particles)
        evals = n * settings.steps
    wall = time.perf_counter() - t0
    if particles_dir is not None:
        _save_particles(os.path.join(particles_dir, f"{name}__{method}__{seed}.npy"), x)
    row = {"posterior": name, "d": post.dim, "method": method, "seed": seed, "settings": settings.tag(),
           "status": "capped" if wall > settings.cap else status, "wall_s": round(wall, 2), "score_evals": evals}
    row.update(score_particles(post, x, jax.random.fold_in(key, 2)))
    if "min_ess_bulk" in info:  # NUTS: its ESS, and the wall time it would need for an ESS of 1000 (extrapolated)
        row["nuts_min_ess"] = info["min_ess_bulk"]
        row["nuts_s_to_ess1000"] = round(nuts_seconds_to_ess(wall, info["min_ess_bulk"], settings.nuts_warmup,
                                                              settings.nuts_samples), 1)
    return row


NAN_SCORES = {k: np.nan for k in ("ksd", "spread_T", "spread_cross", "relax_growth", "relax_p", "relax_acceptance",
                                   "relax_p_contraction", "overdispersed", "modes_found", "mode_p", "mode_mismatch",
                                   "mean_error_max", "mean_error_median", "sd_ratio_median", "sd_ratio_min", "sinkhorn")}


def score_particles(post, x, rng_key) -> dict:
    """The row's scores of particles (or draws) ``x`` on posterior ``post``: errors against the reference, the
    squared KSD (IMQ(1, -1/2), U-statistic: 0 for exact draws, the same for every row), both collapse
    checks and the missing-mode check (on at most 500 evenly thinned rows); ``flagged`` is any check's flag or an
    untestable relaxation check. Over-dispersion (the relaxation check's contraction) is its own column. Non-finite particles or
    scores give a ``status`` that says so, NaN scores and ``flagged``, never an exception."""
    from steinax import stein
    from steinax.diagnostics import relaxation_check, spread_check
    from steinax.kernels import IMQ
    from steinax.metrics.posterior import posterior_errors
    from steinax.targets.base import evaluate as evaluate_target

    xs = jnp.asarray(x, jnp.result_type(float))
    _, scores = evaluate_target(post.target, jax.random.key(0), xs)
    bad = ~(np.all(np.isfinite(np.asarray(x)), axis=1) & np.all(np.isfinite(np.asarray(scores)), axis=1))
    if bad.any():  # a peer that diverged without raising
        return {**NAN_SCORES, "status": f"non-finite output ({int(bad.sum())} of {bad.size} rows)", "flagged": True}
    check = spread_check(xs, scores)
    relax = relaxation_check(post.target, xs, rng_key=rng_key)
    modes = mode_scores(post, xs, rng_key)
    return {"ksd": float(stein.ksd(xs, scores, IMQ(), "u")), "spread_T": check.median_ratio, "spread_cross": check.cross,
            "relax_growth": relax.growth, "relax_p": relax.p_value, "relax_acceptance": relax.acceptance,
            "relax_p_contraction": relax.p_value_contraction, "overdispersed": relax.overdispersed, **modes,
            "flagged": check.collapsed or relax.collapsed or relax.untestable is not None or modes["mode_mismatch"],
            **posterior_errors(x, post.reference())}


def mode_scores(post, xs, rng_key) -> dict:
    """The row's missing-mode columns (:func:`~steinax.diagnostics.mode_check` on at most 500 evenly thinned rows)."""
    from steinax.diagnostics import mode_check

    modes = mode_check(post.target, xs, rng_key=jax.random.fold_in(rng_key, 1))
    return {"modes_found": int(modes.shares.shape[0]), "mode_p": modes.p_value, "mode_mismatch": modes.mismatch}


RESCORE_COLUMNS = ("all", "modes", "errors")


def rescore(out_dir: str, settings: SuiteSettings = SuiteSettings(), log=print, only_unscored: bool = False,
            columns: str = "all", posteriors=None) -> list[dict]:
    """Score rows of ``out_dir/results.csv`` again from their saved particles (after a change to the checks or a reference).

    The runs are not repeated: wall time, score evaluations and NUTS's ESS are kept. ``columns``: ``"all"``
    (every score), ``"modes"`` (the missing-mode columns, for rows that lack them) or ``"errors"`` (the
    columns measured against the reference: mean errors, sd ratios, Sinkhorn; after a reference changes).
    ``posteriors``: the names to rescore (default all). Rows whose particles were not saved are left as
    they are; with ``only_unscored``, so are rows that already have every score column (rows written
    before a column was added are the ones rescored). Rewrites ``results.csv`` (atomically) and ``summary.md``.
    """
    from steinax._io import atomic_write_csv, locked, read_rows
    from steinax.metrics.posterior import posterior_errors
    from steinax.posteriors import get

    if columns not in RESCORE_COLUMNS:
        raise ValueError(f"`columns` must be one of {RESCORE_COLUMNS}; received {columns!r}")
    path = os.path.join(out_dir, "results.csv")
    with locked(path):
        rows = read_rows(path)
        for r in rows:
            f = os.path.join(out_dir, "particles", f"{r['posterior']}__{r['method']}__{r['seed']}.npy")
            if (not os.path.exists(f) or (posteriors is not None and r["posterior"] not in posteriors)
                    or (only_unscored and all(str(r.get(k, "")) != "" for k in NAN_SCORES))):
                continue
            key = jax.random.fold_in(jax.random.key(int(r["seed"])), 2)
            if columns == "errors":
                if not r["status"].startswith("non-finite"):
                    r.update(posterior_errors(np.load(f), get(r["posterior"]).reference()))
                    log(f"{r['posterior']:26s} {r['method']:14s} max mean error {r['mean_error_max']:.3f} sd, "
                        f"sd ratio {r['sd_ratio_median']:.3f}")
                continue
            if columns == "modes":
                if str(r.get("mode_p", "")) not in ("", "nan") or r["status"].startswith("non-finite"):
                    continue
                new = mode_scores(get(r["posterior"]), jnp.asarray(np.load(f), jnp.result_type(float)), key)
                new["flagged"] = str(r["flagged"]) == "True" or new["mode_mismatch"]
                r.update(new)
                log(f"{r['posterior']:26s} {r['method']:14s} modes {new['modes_found']} p {new['mode_p']:.3g} "
                    f"flagged {r['flagged']}")
                continue
            new = score_particles(get(r["posterior"]), np.load(f), key)
            if "status" not in new and r["status"].startswith("non-finite"):
                new["status"] = "ok"
            r.update(new)
            log(f"{r['posterior']:26s} {r['method']:14s} flagged {r['flagged']}")
        atomic_write_csv(path, rows, FIELDS + ("task", "dataset"))
    done = [r for r in rows if r["settings"] == settings.tag()]
    atomic_write_text(os.path.join(out_dir, "summary.md"), summary_markdown(done, settings))
    return rows


def _save_particles(path: str, x) -> None:
    from steinax._io import atomic_write

    def write(tmp):
        with open(tmp, "wb") as f:  # a file object: np.save would append ".npy" to a bare name
            np.save(f, np.asarray(x, np.float32))

    atomic_write(path, write)


ROW_KEY = ("task", "dataset", "method", "seed", "settings")
"""A results row is kept once per these fields (the file's rows carry task "posteriors" and the posterior as dataset)."""
FIELDS = ("posterior", "d", "method", "seed", "settings", "status", "wall_s", "score_evals", "mean_error_max",
          "mean_error_median", "sd_ratio_median", "sd_ratio_min", "sinkhorn", "ksd", "spread_T", "spread_cross", "relax_growth", "relax_p", "flagged", "relax_acceptance",
          "nuts_min_ess", "nuts_s_to_ess1000", "relax_p_contraction", "overdispersed", "modes_found", "mode_p",
          "mode_mismatch")


def run_suite(names, methods, seeds, out_dir, settings: SuiteSettings = SuiteSettings(), log=print) -> list[dict]:
    """Every (posterior, method, seed) not yet in ``out_dir/results.csv``; then ``summary.md``. Returns all rows."""
    from steinax._io import append_row, check_output, read_rows

    path = os.path.join(out_dir, "results.csv")
    check_output(path, name="out_dir")  # before any run: a folder that cannot be written fails now
    done = {(r["posterior"], r["method"], str(r["seed"]), r["settings"]) for r in read_rows(path)}
    for name in names:
        for method in methods:
            for seed in range(seeds):
                if (name, method, str(seed), settings.tag()) in done:
                    continue
                row = evaluate(method, name, seed, settings, particles_dir=os.path.join(out_dir, "particles"))
                append_row(path, {**row, "task": "posteriors", "dataset": name}, FIELDS + ("task", "dataset"), ROW_KEY)
                log(f"{name:26s} {method:14s} seed {seed}: max mean err {row['mean_error_max']:.2f} sd, "
                    f"sd ratio {row['sd_ratio_median']:.2f} (min {row['sd_ratio_min']:.2f}), "
                    f"flagged {row['flagged']}, {row['wall_s']:.1f}s")
    rows = [r for r in read_rows(path) if r["settings"] == settings.tag()]
    atomic_write_text(os.path.join(out_dir, "summary.md"), summary_markdown(rows, settings))
    return rows


def summary_markdown(rows, settings: SuiteSettings) -> str:
    """Mean over seeds per (posterior, method): worst mean error; median sd ratio; flagged fraction; wall time."""
    import collections

    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["posterior"], r["method"])].append(r)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = [f"Setting: {settings.tag()}; from N(0, I) in the unconstrained space; cells: worst |mean error| (sds); "
             "median sd ratio; flagged by any no-ground-truth check (collapse or missing mode; of seeds); wall s. Mean over seeds; 'non-finite': the "
             "method returned NaN/inf particles; 'diverged': a steinax run stopped at a non-finite step.", "",
             "| posterior | d | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for name in dict.fromkeys(r["posterior"] for r in rows):
        cells = []
        for m in methods:
            g = groups.get((name, m), [])
            if not g:
                cells.append("")
                continue
            f = lambda k: np.mean([float(r[k]) for r in g])  # noqa: E731
            flags = sum(str(r["flagged"]) == "True" for r in g)
            capped = " capped" if any(r["status"] == "capped" for r in g) else ""
            capped += " diverged" if any(r["status"].startswith("diverged") for r in g) else ""
            if any(r["status"].startswith("non-finite") for r in g):
                cells.append(f"non-finite; {flags}/{len(g)}; {f('wall_s'):.0f}")
                continue
            cells.append(f"{f('mean_error_max'):.2f}; {f('sd_ratio_median'):.2f}; {flags}/{len(g)}; {f('wall_s'):.0f}{capped}")
        d = next(r["d"] for r in rows if r["posterior"] == name)
        lines.append(f"| {name} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
