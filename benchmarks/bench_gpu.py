"""Accelerator benchmark (issue 27): SVGD and KSD at the device's limit, against the peers, in one run.

    python benchmarks/bench_gpu.py --out DIR            # every part, sized for one H100/H200 (about 6 minutes)
    python benchmarks/bench_gpu.py --small --out DIR    # the same parts at toy sizes (a CPU smoke test)

Parts, each printed with its setting beside its numbers and written to ``DIR/gpu.csv``:

1. ``matmul``: the device's float32 GEMM throughput (8192^3, best of 10) at ``Precision.HIGHEST`` (IEEE
   float32) and ``DEFAULT`` (TF32 on tensor cores where the GPU has them): the ceilings.
2. ``tiles``: the fused SVGD direction's tile shapes at n = 10^5, d = 100 (the default's choice).
3. ``step``: one SVGD step (direction, score, SGD update) at n = 10^5, d = 100, fixed bandwidth,
   for each engine and precision, against the limit ``6 n^2 d / throughput`` at the same precision
   (an RBF step is three n x n x d products: distances, kernel x scores, kernel x points).
4. ``median``: the exact median rule's cost at the same n, d (blocked, on the device), separately.
5. ``million``: 10 compiled SVGD steps at n = 10^6 (d = 10; d = 100 last, if time is left) with the
   ``liu_subsampled`` rule (Liu's median of 1000 strided particles, log factor of the full n).
6. ``peers``: one SVGD step at n = 10^4 (and 10^3), d = 100, median bandwidth: steinax against BlackJAX
   (``update_median_heuristic``) and NumPyro einstein (``RBFKernel``) on the same device, each capped at
   ``--cap`` seconds; a peer out of memory is reported and retried at smaller n.
7. ``ksd``: the exact KSD (IMQ, V-statistic, the default) of 10^6 draws in d = 10: first call (with
   compilation) and steady state.
8. ``accuracy``: each engine's direction and KSD at n = 4096, d = 100 against a float64 reference
   computed on the device (relative max error).
9. ``grid`` (only when named): SVGD, MK-SVGD, CC-SVGD, matrix SVGD (Hessian, average), SVGD on a GP
   target, BlackJAX, NumPyro, steinax's KSD and coreax's KSD (if installed) at n in {10^3 .. 10^6},
   d in {10, 100, 1000}, each cell capped.

Timings are steady state (compiled first) and ``block_until_ready``-ed; the median of the timed calls.
The issue's measurements run first (step, ksd, peers, million at d = 10); parts that would start past
``--budget`` seconds are reported as skipped. A part that fails is reported and the others go on.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax
from steinax.kernels import RBF, median_bandwidth

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROWS: list[dict] = []
T0 = time.perf_counter()


def emit(part: str, **fields):
    row = {"part": part, **fields}
    ROWS.append(row)
    print(f"[{time.perf_counter() - T0:6.1f}s] {part}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in fields.items()),
          flush=True)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def timed(fn, repeats=5, cap=None):
    """``(first_call_s, median_steady_s)``: the first call compiles; then up to ``repeats`` calls or ``cap`` seconds."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t
    times = []
    start = time.perf_counter()
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
        if cap is not None and time.perf_counter() - start > cap:
            break
    del out
    return first, float(np.median(times))


def matmul(m, precision):
    a = jax.random.normal(jax.random.key(0), (m, m), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (m, m), jnp.float32)
    f = jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))
    jax.block_until_ready(f(a, b))
    best = np.inf
    for _ in range(10):
        t = time.perf_counter()
        jax.block_until_ready(f(a, b))
        best = min(best, time.perf_counter() - t)
    return 2.0 * m**3 / best


def gaussian_target():
    return steinax.targets.LogDensityTarget(lambda x: -0.5 * jnp.sum(x * x))


def svgd_step_fn(method, n, d, lr=1e-2, seed=0):
    target = gaussian_target()
    opt = optax.sgd(lr)
    x0 = jax.random.normal(jax.random.key(seed), (n, d), jnp.float32)
    state = method.init(x0, opt)
    step = jax.jit(lambda s: method.step(jax.random.key(0), s, target, opt)[0])
    return step, state


def liu_h(n, d):
    """The fixed bandwidth of the step part: Liu's rule on (at most 20,000) N(0, I) particles, its log factor
    rescaled to ``n`` (the median of squared distances does not depend on ``n``)."""
    x = jax.random.normal(jax.random.key(0), (min(n, 20_000), d), jnp.float32)
    return float(median_bandwidth(x, "liu")) * np.log(min(n, 20_000)) / np.log(n)


def part_matmul(args):
    m = 1024 if args.small else 8192
    tp32 = matmul(m, jax.lax.Precision.HIGHEST)
    tptf = matmul(m, jax.lax.Precision.DEFAULT)
    emit("matmul", size=m, float32_tflops=tp32 / 1e12, default_tflops=tptf / 1e12)
    return tp32, tptf


def part_tiles(args, n, d, h):
    best = None
    for tile in ([(32, 64), (32, 32), (16, 64), (16, 32), (64, 64)] if not args.small else [(32, 64)]):
        from steinax.kernels.fused import fused_direction

        x = jax.random.normal(jax.random.key(0), (n, d), jnp.float32)
        f = jax.jit(lambda x: fused_direction(x, -x, RBF(h), tile=tile, precision="float32"))
        try:
            _, s = timed(lambda: f(x), repeats=3)
        except Exception as exc:  # noqa: BLE001 - report a tile that does not compile and go on
            emit("tiles", n=n, d=d, tile=tile, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
            continue
        emit("tiles", n=n, d=d, tile=f"{tile[0]}x{tile[1]}", direction_ms=1e3 * s)
        best = tile if best is None or s < best[1] else best
    return best


def part_step(args, n, d, h, tp32, tptf):
    flops = 6.0 * n * n * d
    for engine, precision in [("xla", "float32"), ("xla", "default"), ("fused", "float32"), ("fused", "tf32")]:
        method = steinax.svgd(RBF(h), engine=engine, precision=precision)
        try:
            step, state = svgd_step_fn(method, n, d)
            first, s = timed(lambda: step(state), repeats=5, cap=args.cap)
        except Exception as exc:  # noqa: BLE001
            emit("step", n=n, d=d, engine=engine, precision=precision,
                 error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
            continue
        limit32, limittf = flops / tp32, flops / tptf
        emit("step", n=n, d=d, engine=engine, precision=precision, bandwidth=h, step_ms=1e3 * s,
             first_call_s=first, limit_float32_ms=1e3 * limit32, ratio_to_float32_limit=s / limit32,
             limit_tf32_ms=1e3 * limittf, ratio_to_tf32_limit=s / limittf, achieved_tflops=flops / s / 1e12)


def part_median(args, n, d):
    x = jax.random.normal(jax.random.key(0), (n, d), jnp.float32)
    f = jax.jit(lambda x: median_bandwidth(x, "liu"))
    first, s = timed(lambda: f(x), repeats=3, cap=args.cap)
    emit("median", n=n, d=d, rule="liu (exact, blocked, device selection)", median_ms=1e3 * s, first_call_s=first,
         bandwidth=float(f(x)))


def part_million(args, n, dims, tp32):
    for d in dims:
        method = steinax.svgd(RBF("liu_subsampled"))
        target = gaussian_target()
        opt = optax.sgd(1e-2)
        x0 = jax.random.normal(jax.random.key(0), (n, d), jnp.float32)
        state = method.init(x0, opt)

        @jax.jit
        def ten(state):
            def body(s, _):
                return method.step(jax.random.key(0), s, target, opt)[0], None
            return jax.lax.scan(body, state, None, length=10)[0]

        try:
            t = time.perf_counter()
            out = jax.block_until_ready(ten(state))
            total = time.perf_counter() - t
            finite = bool(jnp.all(jnp.isfinite(out.particles)))
            if d > 10 and not args.small:  # ~10 s a step: the first call (compilation included) is the figure
                emit("million", n=n, d=d, rule="liu_subsampled (1000 strided particles)", steps=10,
                     first_call_s=total, step_s_upper_bound=total / 10, finite=finite,
                     fraction_of_float32_limit_lower_bound=(6.0 * n * n * d / tp32) / (total / 10))
                continue
            t = time.perf_counter()
            jax.block_until_ready(ten(out))
            steady = time.perf_counter() - t
        except Exception as exc:  # noqa: BLE001
            emit("million", n=n, d=d, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
            continue
        emit("million", n=n, d=d, rule="liu_subsampled (1000 strided particles)", steps=10,
             first_call_s=total, steady_10_steps_s=steady, step_s=steady / 10, finite=finite,
             fraction_of_float32_limit=(6.0 * n * n * d / tp32) / (steady / 10))


def part_peers(args, sizes, d):
    from bench_svgd_step import blackjax_step, numpyro_step

    def steinax_default(n, d, lr):
        return svgd_step_fn(steinax.svgd(), n, d, lr)

    def steinax_blocked(n, d, lr):  # the median recomputing distances in row blocks, nothing stored
        return svgd_step_fn(steinax.svgd(block_size=n), n, d, lr)

    def steinax_fixed(n, d, lr):  # the direction alone: a fixed bandwidth (the median's cost is the difference)
        return svgd_step_fn(steinax.svgd(RBF(liu_h(n, d))), n, d, lr)

    for name, make in [("steinax", steinax_default), ("steinax-blocked-median", steinax_blocked),
                       ("steinax-fixed-bandwidth", steinax_fixed), ("blackjax", blackjax_step),
                       ("numpyro", numpyro_step)]:
        for n in sizes:
            try:
                step, state = make(n, d, 1e-2)
                first, s = timed(lambda: step(state), repeats=5, cap=args.cap)
                emit("peers", library=name, n=n, d=d, step_ms=1e3 * s, first_call_s=first)
            except Exception as exc:  # noqa: BLE001 - out of memory and the like: reported, next size
                emit("peers", library=name, n=n, d=d, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}")


def part_ksd(args, n, d):
    x = jax.random.normal(jax.random.key(0), (n, d), jnp.float32)
    s = -x
    for engine in ("auto", "xla"):
        f = jax.jit(lambda x, s: steinax.ksd(x, s, engine=engine))
        first, t = timed(lambda: f(x, s), repeats=2 if engine == "auto" else 1, cap=args.cap)
        emit("ksd", n=n, d=d, kernel="IMQ(1, -1/2)", estimator="v", engine=engine, first_call_s=first, steady_s=t,
             value=float(f(x, s)))


def part_accuracy(args, n, d, h):
    from steinax.particles.svgd import svgd_direction

    x = jax.random.normal(jax.random.key(3), (n, d), jnp.float32) + 1.0
    s = -(x - 1.0) + 0.3 * jnp.sin(x)
    with jax.enable_x64(True):
        x64, s64 = np.asarray(x, np.float64), np.asarray(s, np.float64)
        ref = np.asarray(svgd_direction(jnp.asarray(x64), jnp.asarray(s64), RBF(h), engine="xla"))
        ref_ksd = float(steinax.ksd(jnp.asarray(x64), jnp.asarray(s64), engine="xla"))
    for engine, precision in [("xla", "default"), ("xla", "float32"), ("fused", "float32"), ("fused", "tf32")]:
        phi = np.asarray(svgd_direction(x, s, RBF(h), engine=engine, precision=precision), np.float64)
        k = float(steinax.ksd(x, s, engine=engine, precision=precision))
        emit("accuracy", n=n, d=d, engine=engine, precision=precision,
             direction_rel_err=float(np.abs(phi - ref).max() / np.abs(ref).max()),
             ksd_rel_err=abs(k - ref_ksd) / abs(ref_ksd))


def _grid_cell(method_name, n, d):
    """``(step function, state)`` of one grid cell, or ``None`` where the cell is not defined."""
    from bench_svgd_step import blackjax_step, numpyro_step, student_logdensity

    if method_name == "blackjax":
        return blackjax_step(n, d, 1e-2)
    if method_name == "numpyro":
        return numpyro_step(n, d, 1e-2)
    if method_name == "gp":  # SVGD on a GP regression's hyperparameters: N = d data points in 3-D, a Cholesky each
        from steinax.gp import GPRegression

        X = jax.random.normal(jax.random.key(1), (d, 3))
        target = GPRegression(X, jnp.sin(X[:, 0]))
        opt = optax.sgd(1e-3)
        method = steinax.svgd()
        state = method.init(0.1 * jax.random.normal(jax.random.key(0), (n, target.dim)), opt)
        return jax.jit(lambda s: method.step(jax.random.key(0), s, target, opt)[0]), state
    methods = {"svgd": steinax.svgd, "mk_svgd": steinax.mk_svgd, "cc_svgd": steinax.cc_svgd,
               "matrix_average": lambda: steinax.matrix_svgd("hessian", "average")}
    method = methods[method_name]()
    logdens = student_logdensity if method_name == "matrix_average" else (lambda x: -0.5 * jnp.sum(x * x))
    opt = optax.sgd(1e-2)
    target = steinax.targets.LogDensityTarget(logdens)
    state = method.init(jax.random.normal(jax.random.key(0), (n, d), jnp.float32), opt)
    return jax.jit(lambda s: method.step(jax.random.key(0), s, target, opt)[0]), state


GRID_METHODS = ["svgd", "mk_svgd", "cc_svgd", "matrix_average", "gp", "blackjax", "numpyro", "ksd", "coreax_ksd"]


def part_grid(args, tp32=None):
    """The issue's grid: every method and peer at n in {10^3 .. 10^6}, d in {10, 100, 1000}, cheapest cells first
    (n, then d, then method) so that ``--budget`` cuts the largest. A cell whose predicted step (the same
    method's time at the largest smaller n timed, times the ratio of n^2; before any, 6 n^2 d FLOP at 50 TFLOP/s
    times the method's factor) exceeds ``--cell-cap`` seconds, or whose method failed at a smaller n
    in the same d, is skipped and said so; n = 10^6 runs at d = 10 only. SVGD rows also give the fraction of the
    float32 matmul throughput measured in the same run."""
    ns = args.grid_n or ([256, 512] if args.small else [1_000, 10_000, 100_000, 1_000_000])
    ds = args.grid_d or ([10] if args.small else [10, 100, 1000])
    names = args.grid_methods or GRID_METHODS
    measured: dict = {}  # (method, d) -> (n, seconds) of the largest n timed: extrapolates the next cell
    factor = {"svgd": 1, "mk_svgd": 10, "cc_svgd": 2, "matrix_average": 3, "gp": 1, "blackjax": 3, "numpyro": 10,
              "ksd": 1, "coreax_ksd": 40}  # coreax: 37x steinax's KSD at n = 10^4, d = 1000 (run 4)
    failed_at: dict = {}
    for n in ns:
        for d in ds:
            if n >= 1_000_000 and d > 10:
                continue
            for name in names:
                cell = dict(method=name, n=n, d=d)
                if time.perf_counter() - T0 > args.budget:
                    emit("grid", **cell, skipped=f"past the {args.budget:.0f} s budget")
                    continue
                if failed_at.get((name, d)) is not None:
                    emit("grid", **cell, skipped=f"failed at n = {failed_at[(name, d)]}")
                    continue
                if name in ("matrix_average", "gp") and (d > 100 or n > 100_000):
                    emit("grid", **cell, skipped="d^2 Hessians / d x d factorisations per particle")
                    continue
                predicted = 6.0 * n * n * d / 50e12 * factor[name]
                if (name, d) in measured:  # the pair work grows as n^2: the smaller cell's time, scaled
                    n0, s0 = measured[(name, d)]
                    predicted = s0 * (n / n0) ** 2
                if not args.small and predicted > args.cell_cap:
                    emit("grid", **cell, skipped=f"predicted {predicted:.0f} s a step > {args.cell_cap:.0f} s")
                    continue
                try:
                    if name in ("ksd", "coreax_ksd"):
                        x = jax.random.normal(jax.random.key(0), (n, d), jnp.float32)
                        if name == "ksd":
                            f = jax.jit(lambda x: steinax.ksd(x, -x))
                        else:  # coreax 1.0: PCIMQ with length scale 1/sqrt(2) is steinax's IMQ(1, -1/2)
                            from coreax.kernels import PCIMQKernel, SteinKernel

                            stein = SteinKernel(PCIMQKernel(length_scale=2**-0.5), lambda x: -x)
                            f = jax.jit(lambda x: stein.compute_mean(x, x, block_size=min(n, 4096)))
                        first, s = timed(lambda: f(x), repeats=3, cap=args.cap)
                        extra = {"value": float(f(x))}
                    else:
                        step, state = _grid_cell(name, n, d)
                        first, s = timed(lambda: step(state), repeats=3, cap=args.cap)
                        extra = {}
                    if name == "svgd" and tp32:
                        extra["fraction_of_float32_matmul"] = 6.0 * n * n * d / s / tp32
                    emit("grid", **cell, ms=1e3 * s, first_call_s=first, **extra)
                    measured[(name, d)] = (n, s)
                except Exception as exc:  # noqa: BLE001 - out of memory, a missing peer: reported
                    failed_at[(name, d)] = n
                    emit("grid", **cell, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for gpu.csv")
    p.add_argument("--small", action="store_true", help="toy sizes (a smoke test on the CPU)")
    p.add_argument("--cap", type=float, default=60.0, help="seconds of timing per cell")
    p.add_argument("--median-n", type=int, help="median: this n at d = 10 instead of the step's n, d")
    p.add_argument("--grid-methods", nargs="+", choices=GRID_METHODS, help="grid: only these methods")
    p.add_argument("--grid-n", nargs="+", type=int, help="grid: only these n")
    p.add_argument("--grid-d", nargs="+", type=int, help="grid: only these d")
    p.add_argument("--cell-cap", type=float, default=10.0, help="grid: skip cells predicted slower a step")
    p.add_argument("--budget", type=float, default=330.0, help="seconds; optional parts are skipped beyond it")
    p.add_argument("--parts", nargs="+", default=["matmul", "tiles", "step", "median", "million", "peers", "ksd",
                                                   "accuracy"], help="also: grid (the issue's whole grid, ~30 min)")
    args = p.parse_args(argv)
    dev = jax.devices()[0]
    print(f"steinax {os.environ.get('STEINAX_COMMIT', '?')} | jax {jax.__version__} | {dev.platform} "
          f"{getattr(dev, 'device_kind', '')} x{jax.device_count()} | python {platform.python_version()} | "
          f"command: {' '.join(sys.argv)}", flush=True)
    if dev.platform == "gpu" or dev.platform == "cuda":
        try:
            print(subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm",
                                  "--format=csv,noheader"], capture_output=True, text=True).stdout.strip())
        except OSError:
            pass
    small = args.small
    n_step, d_step = (512, 100) if small else (100_000, 100)
    tp32 = tptf = None
    if "matmul" in args.parts:
        tp32, tptf = part_matmul(args)
    h = liu_h(n_step, d_step)
    # the measurements first, then the optional ones (skipped past --budget)
    parts = [
        ("step", lambda: part_step(args, n_step, d_step, h, tp32, tptf) if tp32 else None),
        ("ksd", lambda: part_ksd(args, 1024 if small else 1_000_000, 10)),
        ("peers", lambda: part_peers(args, [256] if small else [10_000], 100)),
        ("million", lambda: part_million(args, 2048 if small else 1_000_000, [10], tp32) if tp32 else None),
        ("median", lambda: part_median(args, args.median_n or n_step, d_step if not args.median_n else 10)),
        ("accuracy", lambda: part_accuracy(args, 256 if small else 4096, 100, h)),
        ("tiles", lambda: part_tiles(args, n_step, d_step, h)),
        ("million", lambda: part_million(args, 2048 if small else 1_000_000, [100], tp32) if tp32 else None),
        ("grid", lambda: part_grid(args, tp32)),
    ]
    try:
        for name, run_part in parts:
            if name not in args.parts:
                continue
            if time.perf_counter() - T0 > args.budget:
                emit(name, skipped=f"past the {args.budget:.0f} s budget")
                continue
            try:
                run_part()
            except Exception as exc:  # noqa: BLE001 - one part failing must not lose the others' rows
                emit(name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    finally:
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            keys = sorted({k for r in ROWS for k in r}, key=lambda k: (k != "part", k))
            tmp = os.path.join(args.out, ".gpu.csv.tmp")
            with open(tmp, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=keys)
                w.writeheader()
                w.writerows(ROWS)
            os.replace(tmp, os.path.join(args.out, "gpu.csv"))
        print(f"total {time.perf_counter() - T0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
