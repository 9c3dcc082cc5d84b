"""Command line: ``steinax demo`` and ``steinax ksd``.

Thin by design: it parses arguments, calls library functions, prints and plots.
The library never imports this module.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _demo_targets():
    import jax.numpy as jnp

    from steinax.targets import DoubleBanana, Gaussian, Sine, star

    return {
        # MK-SVGD paper eq. 22 (read as a covariance)
        "gaussian": (Gaussian(jnp.array([-0.6871, 0.8010]), jnp.array([[0.2260, 0.1652], [0.1652, 0.6779]])), (-3, 2, -2.5, 3.5)),
        "star": (star(), (-3.5, 3.5, -3.5, 3.5)),
        "double_banana": (DoubleBanana(), (-2.0, 2.0, -1.0, 3.0)),
        "sine": (Sine(), (-3.5, 3.5, -2.0, 2.0)),
    }


def _demo_methods():
    import steinax

    return {
        "svgd": steinax.svgd(),
        "mk_svgd": steinax.mk_svgd(),
        "cc_svgd": steinax.cc_svgd(),
        "matrix_avg": steinax.matrix_svgd("hessian", "average"),
        "matrix_mix": steinax.matrix_svgd("hessian", "mixture"),
        "svn": steinax.svn("hessian"),
    }


def _demo_posterior(name: str, seed: int) -> dict:
    """``steinax.sample`` with its defaults on one real-data posterior of the suite, in float64: each stage's draws
    scored against the posterior's NUTS reference (:func:`steinax.posteriors.sampling.sample_rows`). Returns
    ``{"result", "reference", "rows"}`` for the figure."""
    import warnings

    import jax

    from steinax.posteriors import get
    from steinax.posteriors.sampling import sample_rows

    with jax.enable_x64(True):
        post = get(name)
        print(f"steinax demo: steinax.sample(target, rng_key=key({seed}), num_particles=100) on '{name}' "
              f"({post.dim} parameters, data in raw units, float64), each stage's draws against the posterior's "
              "long-run NUTS reference; error = worst |mean error| over coordinates in reference sds; sd ratio = "
              "median (min) over coordinates of draws' sd / reference sd; cumulative gradient evaluations and seconds "
              "(compilation included)")
        kept = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = sample_rows(name, seed, keep=kept)
    header = f"{'stage':<12} {'grad evals':>11} {'wall s':>8} {'error':>8} {'sd ratio':>16}"
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r['sd_ratio_median']:.2f} ({r['sd_ratio_min']:.2f})"
        print(f"{r['method'].split(':')[1]:<12} {r['gradient_evaluations']:>11,} {r['wall_s']:>8.1f} "
              f"{r['mean_error_max']:>8.3f} {ratio:>16}")
    last = rows[-1]
    print(f"ok: {last['ok']}; {last['message']}")
    for w in {str(w.message) for w in caught if "steinax.sample" in str(w.message)}:
        print(f"warning: {w}")
    return {**kept, "rows": rows, "name": name}


def _plot_stages(fig, shown: dict) -> None:
    """``steinax.sample``'s stages on the demo's posterior (:func:`_demo_posterior`), one panel each: the draws each
    stage handed on, over the reference draws, in the two coordinates the reference correlates most."""
    import numpy as np

    res, ref, rows = shown["result"], shown["reference"], shown["rows"]
    draws = {**res.stage_draws, "sample": res.draws}
    stages = [s for s in ("warm_start", "particles", "sample") if s in draws]
    corr = np.corrcoef(ref.draws, rowvar=False)
    np.fill_diagonal(corr, 0.0)
    i, j = np.unravel_index(np.argmax(np.abs(np.nan_to_num(corr))), corr.shape)
    axes = fig.subplots(1, len(stages), squeeze=False)[0]
    by_stage = {r["method"].split(":")[1]: r for r in rows}
    for ax, stage in zip(axes, stages):
        x = np.asarray(draws[stage], np.float64)
        x = x[:: max(1, x.shape[0] // 2000)]
        ax.scatter(ref.draws[:, i], ref.draws[:, j], s=3, c="0.75", label="reference (NUTS)")
        ax.scatter(x[:, i], x[:, j], s=4, c="tab:blue", alpha=0.6, label=stage.replace("_", " "))
        r = by_stage.get(stage, {})
        ax.set_title(f"{stage.replace('_', ' ')}: {r.get('gradient_evaluations', 0):,} grads\n"
                     f"worst error {r.get('mean_error_max', float('nan')):.2f} sd", fontsize=9)
        ax.set_xlabel(f"coordinate {i}")
        ax.set_ylabel(f"coordinate {j}")
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"steinax.sample on {shown['name']} (ok={res.ok}): each stage's draws against the reference",
                 fontsize=10)


def demo(args) -> int:
    import warnings

    import jax

    import steinax
    from steinax.metrics import mmd2

    posterior = args.posterior if args.posterior is not None else ("none" if args.quick else "mtcars_regression")
    if posterior != "none":
        from steinax.posteriors import NAMES

        if posterior not in NAMES:
            print(f"steinax demo: error: `--posterior` must be 'none' or one of {', '.join(NAMES)}; received "
                  f"{posterior!r}", file=sys.stderr)
            return 2
    if args.out:  # refused before any run, not after all of them
        from steinax.interfaces.plot import check_figure_path

        check_figure_path(args.out, "--out")
    n = args.particles or (50 if args.quick else 100)
    # the library's recipe (README, Getting started): no step size, no step count, Adam until the particles settle;
    # --steps (or --quick: 300) fixes the length, --lr gives AdaGrad with momentum at that rate (the papers' optimizer)
    steps = args.steps or (300 if args.quick else None)
    optimizer = None if args.lr is None else steinax.adagrad_momentum(args.lr)
    targets = _demo_targets()
    methods = _demo_methods()
    if args.methods:
        names = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in names if m not in methods]
        if unknown or not names:
            print(f"steinax demo: error: `--methods` must name some of {', '.join(methods)}; received {args.methods!r}",
                  file=sys.stderr)
            return 2
        methods = {m: methods[m] for m in names}
    _guard_outputs(args, [])  # before the runs: a figure that cannot be written fails now
    shown = None
    if posterior != "none":
        shown = _demo_posterior(posterior, args.seed)
        print()
    key = jax.random.key(args.seed)
    length = "until settled (steps=None: at most 20000)" if steps is None else f"{steps} steps"
    rule = "Adam 0.05 (each method's default)" if optimizer is None else f"AdaGrad-momentum (Liu & Wang) lr {args.lr}"
    print(
        f"steinax demo: {n} particles from N(0, I), {length}, {rule}; "
        f"SVGD: RBF with Liu's median bandwidth; MK-SVGD: 10 RBF kernels h=2^-4..2^5, eq. 21 weights; "
        f"CC-SVGD: per-coordinate median; matrix SVGD (average, mixture) and SVN: exact Hessian, eigenvalue floor 1e-2, "
        f"median bandwidth in the preconditioner's metric; KSD = squared V-statistic, IMQ(c=1, beta=-1/2); "
        f"MMD^2 = V-statistic, RBF h=1, against 1000 exact samples; 'x exact' = MMD^2 over that of {n} exact draws "
        f"(mean of 5 sets): 1 is as good as exact sampling, comparable across targets; 'settled': the run's own check "
        f"(result.converged; a row marked with a letter did not settle, the reason below the table)"
    )
    header = (f"{'target':<14} {'method':<10} {'steps':>6} {'wall s':>8} {'final KSD':>11} {'MMD^2':>10} "
              f"{'x exact':>8} {'settled':>8}")
    print(header)
    print("-" * len(header))
    results, notes = {}, []
    for t_i, (name, (target, _)) in enumerate(targets.items()):
        x0 = jax.random.normal(jax.random.fold_in(key, t_i), (n, 2))
        exact = target.sample(jax.random.fold_in(key, 100 + t_i), 1000)
        # what a perfect sampler scores: n exact draws against the same reference (5 sets)
        floor = sum(float(mmd2(target.sample(jax.random.fold_in(key, 300 + 10 * t_i + r), n), exact, 1.0))
                    for r in range(5)) / 5
        for m_name, method in methods.items():
            with warnings.catch_warnings(record=True) as caught:  # each run's warnings go to its row, not the log
                warnings.simplefilter("always")
                res = steinax.run(method, target, x0, steps=steps, optimizer=optimizer,
                                  rng_key=jax.random.fold_in(key, 200 + t_i), progress=args.progress)
            mmd = float(mmd2(res.particles, exact, 1.0))
            results[(name, m_name)] = res, mmd / floor
            settled = {True: "yes", False: "no", None: "-"}[res.converged]
            if caught:
                notes.append((name, m_name, sorted({str(w.message) for w in caught})))
                settled += f" ({chr(ord('a') + len(notes) - 1)})"
            used = int(res.state.step)
            print(
                f"{name:<14} {m_name:<10} {used:>6} {res.wall_time:>8.2f} {float(res.trace.ksd[-1]):>11.4g} {mmd:>10.4g} "
                f"{mmd / floor:>8.2f} {settled:>8}",
                flush=True,
            )
    for i, (name, m_name, messages) in enumerate(notes):
        print(f"({chr(ord('a') + i)}) {name}, {m_name}: " + " | ".join(messages))
    if notes:
        print("A row that did not settle is not a converged approximation: check it with "
              "steinax.diagnostics.sample_quality(..., spread=True) (docs: 'Is my posterior right?').")
    if args.out:
        from steinax.interfaces.plot import _pyplot, plot_particles, save_figure

        import textwrap

        plt = _pyplot()
        top = 3.8 if shown is not None else 0.0
        whole = plt.figure(figsize=(4.2 * len(targets), 3.6 * len(methods) + top), layout="constrained")
        if shown is not None:  # steinax.sample's stages on the posterior above the particle methods on the toys
            upper, lower = whole.subfigures(2, 1, height_ratios=[top, 3.6 * len(methods)])
            _plot_stages(upper, shown)
        else:
            lower = whole
        axes = lower.subplots(len(methods), len(targets), squeeze=False)
        fig = lower
        for col, (name, (target, extent)) in enumerate(targets.items()):
            for row, m_name in enumerate(methods):
                res, ratio = results[(name, m_name)]
                plot_particles(res.particles, target, extent=extent, ax=axes[row, col],
                               title=f"{name}: {m_name}\nMMD² {ratio:.1f}× that of {n} exact draws")
        title = (f"Particle methods: {n} particles from N(0, I), {length}; filled contours = target density; "
                 f"MMD² to 1000 exact draws over that of {n} exact draws (1: as close as exact sampling, below 1: "
                 "closer)")  # wrapped to the figure's width: a title on one line was cut at both edges
        fig.suptitle(textwrap.fill(title, width=int(22 * len(targets))), fontsize=10)
        save_figure(whole, args.out)
        print(f"figure written to {args.out}")
    return 0


def _import_target(spec: str):
    """``module:attribute`` or ``path/to/file.py:attribute``: **imports, so runs, the user's code**.

    * Nothing is written beside the user's files: bytecode caching is off while importing
      (no ``__pycache__`` folder next to ``file.py``).
    * ``module:attribute`` finds ``module`` on ``sys.path`` first and in the current folder
      after it; ``file.py:attribute`` can import the modules beside ``file.py``, also after
      ``sys.path``. Appending, not prepending, means a stray ``xarray.py`` in the current
      folder cannot shadow a library steinax needs.
    * A module that calls ``sys.exit`` (or raises anything) while being imported is an
      error naming the module, not a silent exit.
    """
    import importlib
    import importlib.util

    if ":" not in spec:
        raise ValueError(f"`--target` must be 'module:function' or 'file.py:function'; received {spec!r}")
    module_name, attr = spec.rsplit(":", 1)
    if module_name.endswith(".py") and not os.path.isfile(module_name):
        raise FileNotFoundError(f"`--target` file not found: {module_name!r}")
    folder = os.path.dirname(os.path.abspath(module_name)) if module_name.endswith(".py") else os.getcwd()
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        if module_name.endswith(".py"):
            loaded = importlib.util.spec_from_file_location("_steinax_target", module_name)
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except SystemExit as exc:
        raise ValueError(f"`--target` {spec!r}: importing {module_name!r} called sys.exit({exc.code!r}); "
                         "expected a module that defines the log-density and returns") from None
    except Exception as exc:  # the user's module failed to import: say which and why, in one line
        raise ValueError(f"`--target` {spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.dont_write_bytecode = dont_write
    if not hasattr(module, attr):
        raise ValueError(f"`--target` {spec!r}: {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def _seed(text: str) -> int:
    """``--seed``: an integer in [0, 2**63) (what ``jax.random.key`` takes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63); received {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**63); received {text}")
    return value


def _bandwidth(value: str | None):
    """``--bandwidth``: a median rule's name or a positive number."""
    from steinax.kernels.bandwidth import BANDWIDTH_RULES

    if value is None:
        return "liu"
    if value in BANDWIDTH_RULES:
        return value
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"`--bandwidth` must be a positive number or one of {BANDWIDTH_RULES}; received {value!r}") from None


def ksd_command(args) -> int:
    import jax

    from steinax.diagnostics import load_samples, sample_quality
    from steinax.kernels import RBF

    if args.aggregated and args.single_kernel:
        raise ValueError("`--aggregated` and `--single-kernel` exclude each other; give one")
    # IMQ(1, -1/2) is sample_quality's default kernel; passing None leaves the test's choice to it (KSDAgg)
    if args.kernel == "imq" and args.bandwidth is not None:
        raise ValueError(f"`--bandwidth` ({args.bandwidth}) applies to --kernel rbf; the IMQ kernel has no bandwidth "
                         "(the test aggregates over its own scales)")
    kernel = None if args.kernel == "imq" else RBF(_bandwidth(args.bandwidth))
    target = _import_target(args.target)
    samples = load_samples(args.samples, args.var_names if args.samples.lower().endswith(".csv") else None)
    _say_size(samples, args)
    res = sample_quality(samples, target, kernel=kernel, kind=args.kind, estimator=args.estimator, test=not args.no_test,
                         rng_key=jax.random.key(args.seed), n_bootstrap=args.bootstrap, level=args.level,
                         block_size=args.block_size, var_names=None if args.samples.lower().endswith(".csv") else args.var_names,
                         bootstrap=args.wild_bootstrap, block_length=_block_length(args.block_length), spread=args.spread,
                         method=args.method,
                         aggregated=True if args.aggregated else (False if args.single_kernel else None))
    print(f"samples: {args.samples}; target: {args.target}; kernel: {args.kernel}")
    print(res.summary())
    return 0


def _timed_demo(args) -> int:
    t0 = time.perf_counter()
    code = demo(args)
    print(f"total {time.perf_counter() - t0:.1f} s")
    return code


def _target_file(spec: str) -> str | None:
    """The file ``--target`` names (``file.py:f``) or the module's source file (``module:f``), if any:
    an input an output must not overwrite. Found without importing the module."""
    import importlib.util

    module_name = spec.rsplit(":", 1)[0] if ":" in spec else spec
    if module_name.endswith(".py"):
        return module_name
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    return getattr(found, "origin", None) if found is not None else None


def _guard_outputs(args, inputs) -> None:
    """Every output path of a command, checked before any work: none is an input or another output, each
    can be written (``steinax._io.check_output``)."""
    from steinax._io import _same_file, check_output

    outputs = [(flag, path) for flag, path in (("--out", getattr(args, "out", None)),
                                               ("--draws", getattr(args, "draws", None))) if path]
    for i, (flag, path) in enumerate(outputs):
        check_output(path, inputs, name=flag)
        for other_flag, other in outputs[:i]:
            if _same_file(path, other):
                raise ValueError(f"`{flag}` and `{other_flag}` name the same file {path!r}; expected two paths")


def _say_size(samples, args) -> None:
    """One progress line on stderr for a large file (over 10^6 values): its size and which computation follows, so a
    long job is not silent."""
    import numpy as np

    from steinax.diagnostics.quality import NYSTROM_ABOVE, _is_tree

    if _is_tree(samples):
        return
    shape = np.shape(samples)
    if int(np.prod(shape)) <= 10**6:
        return
    n = int(np.prod(shape[:-1])) if len(shape) > 1 else int(shape[0])
    auto = "the Nystrom KSD (linear in n)" if n > NYSTROM_ABOVE else "the exact KSD"
    method = {"auto": auto, "exact": "the exact KSD", "nystrom": "the Nystrom KSD (linear in n)"}[args.method]
    print(f"steinax {args.command}: read {args.samples}: {n:,} draws, shape {tuple(shape)}; computing {method}"
          f"{' and its test' if not args.no_test else ''} ...", file=sys.stderr, flush=True)


def thin_command(args) -> int:
    """``steinax thin``: Stein thinning of a samples file; the picks' indices to ``--out``, the draws to ``--draws``."""
    import numpy as np

    from steinax._io import atomic_write_csv
    from steinax.diagnostics import load_samples, stein_thinning

    _guard_outputs(args, [args.samples, _target_file(args.target)])
    csv_input = args.samples.lower().endswith(".csv")
    if args.draws:
        _draws_format(args.draws, args.samples)
    target = _import_target(args.target)
    samples = load_samples(args.samples, args.var_names if csv_input else None)
    pre = args.preconditioner
    try:
        pre = float(pre)
    except ValueError:
        pass
    res = stein_thinning(samples, target, args.m, preconditioner=pre, standardize=not args.no_standardize,
                         var_names=None if csv_input else args.var_names)
    print(f"samples: {args.samples}; target: {args.target}")
    print(res.summary())
    if args.out:
        c, d = res.chain_draw()
        atomic_write_csv(args.out, [
            {"pick": t, "index": int(i), "chain": int(ci), "draw": int(di), "ksd_squared": float(k)}
            for t, (i, ci, di, k) in enumerate(zip(np.asarray(res.indices), c, d, np.asarray(res.ksd)))])
        print(f"picks written to {args.out} (index: row of the draws laid chain after chain)")
    if args.draws:
        _write_draws(args.draws, samples, res, None if csv_input else args.var_names)
        print(f"the {res.indices.shape[0]} thinned draws written to {args.draws}")
    return 0


_DRAW_FORMATS = (".npy", ".csv", ".nc")


def _draws_format(path: str, samples_path: str) -> str:
    """``--draws``' format from its suffix; NetCDF only from a NetCDF input (it keeps the input's variables)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in _DRAW_FORMATS:
        raise ValueError(f"`--draws` must end in one of {_DRAW_FORMATS}; received {path!r}")
    if ext == ".nc" and os.path.splitext(samples_path)[1].lower() not in (".nc", ".netcdf", ".h5"):
        raise ValueError(f"`--draws` {path!r}: NetCDF output needs a NetCDF input (its variables); received "
                         f"{samples_path!r}. Expected a .npy or .csv path")
    return ext


def _write_draws(path: str, samples, res, var_names) -> None:
    """The picked draws, in the input's own coordinates (constrained for a model's named draws), atomically.

    ``.npy``: ``[m, d]``; ``.csv``: a header (``x0, x1, ...``, or the variables' names) and ``m`` rows;
    ``.nc``: an ArviZ DataTree whose posterior is the picks as one chain (source chain and draw as coordinates)."""
    import numpy as np

    from steinax._io import atomic_write, atomic_write_csv
    from steinax.diagnostics.quality import _is_tree, as_sample_array

    ext = os.path.splitext(path)[1].lower()
    if ext == ".nc":
        import xarray as xr

        picked = res.to_datatree(samples, group="thinned")["thinned"]
        atomic_write(path, lambda tmp: xr.DataTree.from_dict({"posterior": picked.to_dataset()}).to_netcdf(
            tmp, engine="h5netcdf"))
        return
    rows = as_sample_array(samples, var_names)[np.asarray(res.indices)]
    if ext == ".npy":
        def write(tmp):
            with open(tmp, "wb") as f:
                np.save(f, rows)

        atomic_write(path, write)
        return
    names = _column_names(samples, var_names, rows.shape[1]) if _is_tree(samples) else [
        f"x{j}" for j in range(rows.shape[1])]
    atomic_write_csv(path, [dict(zip(names, map(float, r))) for r in rows], names)


def _column_names(tree, var_names, d: int) -> list[str]:
    """``name`` or ``name[i,j]`` per flattened column of a DataTree's posterior variables (the reader's order)."""
    import numpy as np

    from steinax.diagnostics.quality import _site_dict

    sites, _ = _site_dict(tree)
    names = []
    for v in (list(sites) if var_names is None else list(var_names)):
        shape = np.shape(sites[v])[1:]
        names += [v] if not shape else [f"{v}[{','.join(map(str, i))}]" for i in np.ndindex(*shape)]
    return names if len(names) == d else [f"x{j}" for j in range(d)]


def _block_length(value: str):
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"`--block-length` must be an integer >= 2 or 'auto'; received {value!r}") from None


def bench_command(args) -> int:
    from steinax.interfaces.bench import run_bench

    if args.task == "posteriors":
        return _posteriors_command(args)
    methods = args.methods or "svgd,mk_svgd,cc_svgd"
    seeds = 10 if args.seeds is None else args.seeds
    datasets = args.datasets or ("boston,concrete" if args.task == "bnn" else "pima,wisconsin")

    import dataclasses

    from steinax.interfaces.bench import DEFAULTS, PRESETS, QUICK

    if args.preset not in PRESETS[args.task]:
        raise ValueError(f"unknown preset {args.preset!r} for {args.task}; available: {sorted(PRESETS[args.task])}")
    changes = dict(PRESETS[args.task][args.preset]) if not args.quick else {
        k: v for k, v in PRESETS[args.task][args.preset].items() if k not in ("particles", "steps")}
    changes |= {field: getattr(args, field) for field in ("particles", "steps", "batch_size", "learning_rate", "b0",
                                                         "dev_fraction", "bandwidth", "sgld_step", "psgld_step")
               if getattr(args, field) is not None}
    if args.dev_noise:
        changes["dev_noise"] = True
        changes.setdefault("dev_fraction", 0.1)
    if args.bandwidth is not None:
        unused = [m for m in _names(methods) if m not in ("svgd", "cc_svgd")]
        if unused:
            raise ValueError(f"`--bandwidth` applies to svgd and cc_svgd; methods {unused} would ignore it (run them "
                             "apart)")
    settings = dataclasses.replace((QUICK if args.quick else DEFAULTS)[args.task], **changes)
    run_bench(args.task, _names(datasets), _names(methods), seeds, args.out, settings=settings,
              progress=not args.no_progress)
    return 0


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _posteriors_command(args) -> int:
    """``steinax bench posteriors``: the suite's table (``--quick``: 1 seed, 1000 steps, a few posteriors), or with
    ``--yardstick`` the samplers' yardstick."""
    from steinax.posteriors import NAMES
    from steinax.posteriors.suite import METHODS, SuiteSettings, run_suite

    quick = args.quick
    names = _names(args.datasets) if args.datasets else (
        ["eight_schools_noncentered", "german_logistic", "banana", "ill_conditioned_gaussian"] if quick else list(NAMES))
    if args.yardstick:
        return _yardstick_command(args, names)
    methods = _names(args.methods) if args.methods else list(METHODS)
    from steinax.posteriors import get

    for m in methods:
        if m not in METHODS:
            raise ValueError(f"`--methods`: {m!r} is not one of {list(METHODS)}")
    for name in names:
        get(name)  # an unknown name is refused before any run
    settings = SuiteSettings(particles=args.particles or 100, steps=args.steps or (1000 if quick else 3000))
    seeds = args.seeds if args.seeds is not None else (1 if quick else 5)
    print(f"posterior suite: {len(names)} posteriors x {len(methods)} methods x {seeds} seeds; {settings.tag()}", flush=True)
    run_suite(names, methods, seeds, args.out, settings)
    with open(os.path.join(args.out, "summary.md")) as f:
        print(f.read())
    return 0


MAX_YARDSTICK_CHAINS = 65536
"""The most chains ``--yardstick`` runs at once (the peers hold every chain's state and trace in memory)."""


def _yardstick_command(args, names) -> int:
    """``steinax bench posteriors --yardstick``: :func:`steinax.posteriors.yardstick.bench.run_table` in this process
    (``experiments/posteriors/yardstick.py`` runs the same jobs each in a fresh process, with a time cap)."""
    from steinax.posteriors import get
    from steinax.posteriors.yardstick.bench import SAMPLERS, run_table

    samplers = _names(args.methods) if args.methods else list(SAMPLERS)
    for s in samplers:
        if s not in SAMPLERS:
            raise ValueError(f"`--methods`: {s!r} is not one of the yardstick's samplers {list(SAMPLERS)}")
    try:
        chains = [int(c) for c in _names(args.chains or ("16" if args.quick else "256,1024"))]
    except ValueError:
        raise ValueError(f"`--chains` must be comma-separated integers; received {args.chains!r}") from None
    if not chains or any(c < 2 or c > MAX_YARDSTICK_CHAINS for c in chains):
        raise ValueError(f"`--chains` must be integers from 2 to {MAX_YARDSTICK_CHAINS}; received {args.chains!r}")
    for option, values in (("--chains", chains), ("--methods", samplers), ("--datasets", names)):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"`{option}` names {repeated} more than once (each would run twice); received "
                             f"{','.join(map(str, values))}")
    for name in names:
        get(name)  # an unknown name is refused before any run
    steps = args.steps if args.steps is not None else (20 if args.quick else 200)
    if steps < 1:
        raise ValueError(f"`--steps` must be a positive integer (the MCMC peers' transitions); received {steps}")
    warmup = 30 if args.quick else 1000
    seeds = args.seeds if args.seeds is not None else 1
    if seeds < 1:
        raise ValueError(f"`--seeds` must be a positive integer; received {seeds}")
    print(f"yardstick: {len(names)} posteriors x {len(samplers)} samplers x chains {chains} x {seeds} seeds; "
          f"MCMC peers {warmup} adaptation steps then {steps} transitions", flush=True)
    print(run_table(names, samplers, chains, seeds, args.out, steps=steps, warmup=warmup))
    return 0


_TARGET_HELP = ("module:name or file.py:name: a log-density of one [d] point, or a steinax target such as a "
                "model wrapped in the module (`target = steinax.targets.from_numpyro(model, data)`, from_pymc, "
                "from_tfp); the module is imported, so its code RUNS (only name files you trust)")


def _precision(float64: bool):
    """JAX's 64-bit mode for the command's duration when ``--float64`` is given, else no change."""
    import contextlib

    import jax

    return jax.enable_x64(True) if float64 else contextlib.nullcontext()


def _demo_parser(sub) -> None:
    """``steinax demo``: its options."""
    p_demo = sub.add_parser("demo", help="steinax.sample on a real-data posterior against its NUTS reference, then the particle methods on 2-D toy targets; a figure and tables")
    p_demo.add_argument("--quick", action="store_true", help="fewer particles and steps (well under a minute)")
    p_demo.add_argument("--particles", type=int, default=None, help="particles per run (default 100, quick 50)")
    p_demo.add_argument("--steps", type=int, default=None,
                        help="steps per run (default: until the particles settle, the library's recipe; quick 300)")
    p_demo.add_argument("--lr", type=float, default=None,
                        help="AdaGrad-momentum (the papers' optimizer) at this step size instead of each method's "
                             "default (Adam 0.05)")
    p_demo.add_argument("--seed", type=_seed, default=0, help="seed, 0 <= seed < 2**63 (default 0)")
    p_demo.add_argument("--methods", default="",
                        help="comma-separated subset of svgd, mk_svgd, cc_svgd, matrix_avg, matrix_mix, svn (default: all)")
    p_demo.add_argument("--out", default="steinax_demo.png", help="figure path ('' for none); default ./steinax_demo.png")
    p_demo.add_argument("--progress", action="store_true", help="show a progress bar per run")
    p_demo.add_argument("--posterior", default=None,
                        help="first, steinax.sample on this suite posterior against its NUTS reference ('none' to "
                             "skip; default mtcars_regression, with --quick none)")


def _ksd_parser(sub) -> None:
    """``steinax ksd``: its options."""
    p_ksd = sub.add_parser("ksd", help="kernel Stein discrepancy and goodness-of-fit test of samples against a log-density")
    p_ksd.add_argument("samples", help="samples file: .npy ([n, d] or [chains, draws, d]), .csv or ArviZ NetCDF (.nc)")
    p_ksd.add_argument("--target", required=True,
                       help=_TARGET_HELP)
    p_ksd.add_argument("--kind", choices=["ksd", "kcc_sd"], default="ksd",
                       help="ksd: kernel Stein discrepancy; kcc_sd: complete-conditional KSD (default ksd)")
    p_ksd.add_argument("--kernel", choices=["imq", "rbf"], default="imq",
                       help="imq: IMQ(c=1, beta=-1/2); rbf: exp(-|x-y|^2/h) (default imq)")
    p_ksd.add_argument("--bandwidth", default=None,
                       help="RBF bandwidth: a positive number or a median rule (liu, pairs, per_dimension, liu_subsampled); default liu")
    p_ksd.add_argument("--estimator", choices=["u", "v"], default="u",
                       help="u: unbiased U-statistic (about 0 for exact samples); v: V-statistic, as run traces (default u)")
    p_ksd.add_argument("--bootstrap", type=int, default=1000, help="wild-bootstrap draws of the test (default 1000)")
    p_ksd.add_argument("--level", type=float, default=0.05, help="test level in (0, 1) (default 0.05)")
    p_ksd.add_argument("--seed", type=_seed, default=0, help="seed of the bootstrap, 0 <= seed < 2**63 (default 0)")
    p_ksd.add_argument("--block-size", type=int, default=None,
                       help="rows per block of the pairwise sums (default automatic: memory O(block * n))")
    p_ksd.add_argument("--var-names", nargs="+", default=None, help="posterior variables of a NetCDF file, in order")
    p_ksd.add_argument("--no-test", action="store_true", help="print the discrepancy only")
    p_ksd.add_argument("--spread", action="store_true",
                       help="also run the collapse checks (spread_check, relaxation_check: under-dispersed samples) and the "
                            "missing-mode check (mode_check)")
    p_ksd.add_argument("--wild-bootstrap", choices=["auto", "iid", "dependent"], default="auto",
                       help="auto: dependent (autocorrelated chains) for chain-shaped samples, i.i.d. otherwise")
    p_ksd.add_argument("--block-length", default="auto", help="dependent bootstrap block length (integer >= 2 or auto)")
    p_ksd.add_argument("--aggregated", action="store_true",
                       help="the aggregated test over ten IMQ bandwidths (KSDAgg; the default with --kernel imq and "
                            "the exact KSD) even with --kernel rbf")
    p_ksd.add_argument("--single-kernel", action="store_true",
                       help="the single-kernel test of --kernel instead of the aggregated test (the default with "
                            "--kernel rbf)")
    p_ksd.add_argument("--method", choices=["auto", "exact", "nystrom"], default="auto",
                       help="auto: the exact KSD up to 50,000 samples, the Nyström KSD (linear in n) beyond")
    p_ksd.add_argument("--float64", action="store_true", help="compute in float64 (enables JAX's 64-bit mode)")


def _thin_parser(sub) -> None:
    """``steinax thin``: its options."""
    p_thin = sub.add_parser("thin", help="Stein thinning: the m draws whose empirical measure has the smallest KSD")
    p_thin.add_argument("samples", help="samples file: .npy ([n, d] or [chains, draws, d]), .csv or ArviZ NetCDF (.nc)")
    p_thin.add_argument("--target", required=True,
                        help=_TARGET_HELP)
    p_thin.add_argument("-m", "--m", type=int, required=True, help="how many draws to keep (picks may repeat)")
    p_thin.add_argument("--preconditioner", default="med",
                        help="the kernel's metric: med (default), sclmed, smpcov, id, or a positive number")
    p_thin.add_argument("--no-standardize", action="store_true",
                        help="do not divide coordinates by their mean absolute deviation first")
    p_thin.add_argument("--var-names", nargs="+", default=None, help="posterior variables of a NetCDF file, in order")
    p_thin.add_argument("--out", default=None, help="CSV of the picks: pick, index, chain, draw, squared KSD so far")
    p_thin.add_argument("--draws", default=None,
                        help="the thinned draws themselves: .npy ([m, d]), .csv, or .nc (from a NetCDF input: its "
                             "variables, one chain)")
    p_thin.add_argument("--float64", action="store_true", help="compute in float64")


def _bench_parser(sub) -> None:
    """``steinax bench``: its options."""
    p_bench = sub.add_parser("bench", help="benchmark tables: methods x datasets x seeds (BNN regression, logistic regression)")
    p_bench.add_argument("task", choices=["bnn", "blr", "posteriors"],
                         help="bnn, blr, or posteriors (the ground-truth posterior suite, steinax.posteriors.suite)")
    p_bench.add_argument("--datasets", default=None, help="comma-separated (default: boston,concrete for bnn; pima,wisconsin for blr)")
    p_bench.add_argument("--methods", default=None,
                         help="comma-separated: svgd, mk_svgd, cc_svgd, matrix_avg, matrix_mix (matrix SVGD: KFAC for bnn, Fisher for blr), map, sgld, psgld, nuts")
    p_bench.add_argument("--seeds", type=int, default=None,
                         help="random splits (bnn, blr; default 10) or seeds (posteriors; default 5, 1 with --quick)")
    p_bench.add_argument("--out", default="bench_out", help="folder for results.csv, summary.csv, summary.md")
    p_bench.add_argument("--quick", action="store_true", help="tiny settings (a smoke run)")
    p_bench.add_argument("--no-progress", action="store_true")
    p_bench.add_argument("--preset", default="liu",
                         help="a paper's own setting: liu (default), dusvgd, matrix_svgd (bnn); see steinax.interfaces.bench.PRESETS")
    p_bench.add_argument("--particles", type=int, default=None, help="particles (chains for sgld/psgld)")
    p_bench.add_argument("--steps", type=int, default=None)
    p_bench.add_argument("--batch-size", type=int, default=None)
    p_bench.add_argument("--learning-rate", type=float, default=None, help="AdaGrad-momentum step size")
    p_bench.add_argument("--b0", type=float, default=None, help="Gamma rate of the precision priors")
    p_bench.add_argument("--dev-fraction", type=float, default=None,
                         help="hold out this fraction of the training split (at most 500 rows) as a dev set")
    p_bench.add_argument("--dev-noise", action="store_true",
                         help="BNN: Liu & Wang's re-estimate of the noise precision on the dev set (implies --dev-fraction 0.1)")
    p_bench.add_argument("--bandwidth", type=float, default=None, help="fixed RBF bandwidth for svgd and cc_svgd")
    p_bench.add_argument("--sgld-step", type=float, default=None, help="SGLD step size")
    p_bench.add_argument("--psgld-step", type=float, default=None, help="pSGLD step size")
    p_bench.add_argument("--yardstick", action="store_true",
                         help="posteriors: the samplers' yardstick instead (gradient evaluations, sequential steps and "
                              "seconds to b2(x^2) < 0.01; steinax.posteriors.yardstick); --methods then names samplers "
                              "(steinax.sample, numpyro_nuts, nuts, chees, meads), --steps the MCMC peers' transitions")
    p_bench.add_argument("--chains", default=None, help="--yardstick: comma-separated chain counts (default 256,1024)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="steinax", description="Stein methods in JAX.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    for build in (_demo_parser, _ksd_parser, _thin_parser, _bench_parser):
        build(sub)
    args = parser.parse_args(argv)
    if args.version:
        from steinax import __version__

        print(__version__)
        return 0
    commands = {"demo": _timed_demo, "ksd": ksd_command, "thin": thin_command, "bench": bench_command}
    if args.command in commands:
        try:
            # --float64 is scoped to the command: a caller's precision (main() called in-process) is left as it was
            with _precision(getattr(args, "float64", False)):
                return commands[args.command](args)
        except (ValueError, TypeError, OSError, FloatingPointError, ImportError) as exc:
            # steinax's own errors name the argument: one line, exit 2, no traceback
            print(f"steinax {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            kept = f"; finished jobs are kept in {os.path.join(args.out, 'results.csv')}" if args.command == "bench" else ""
            print(f"\nsteinax {args.command}: interrupted{kept}", file=sys.stderr)
            return 130
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
