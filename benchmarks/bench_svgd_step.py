"""Time one SVGD step (steady state, after compilation): steinax vs BlackJAX vs NumPyro einstein.

Target N(0, I_d), plain SGD, each library's default median bandwidth
(steinax: Liu's exact rule; BlackJAX: ``update_median_heuristic``; NumPyro:
``RBFKernel()``). Prints ms/step (median over interleaved rounds: one call of every library per
round) and each peer's time as a multiple of steinax's.

    python benchmarks/bench_svgd_step.py                  # n in {100, 1000, 5000}, d in {2, 100}
    python benchmarks/bench_svgd_step.py --n 1000 --d 100 --repeats 5

Also times steinax's MK-SVGD (10 kernels), CC-SVGD, matrix-SVGD (Hessian preconditioner, average
and mixture modes) and Stein variational Newton steps, as multiples of a steinax SVGD step.
The curvature methods sample a Student-t (nu = 5), whose Hessian depends on x.
Cost models (per step, n particles in d dimensions): SVGD O(n^2 d); matrix SVGD average
O(n^2 d + n d^2 (the Hessians: d HVPs per particle) + d^3); mixture O(n (n^2 d + n d^2 + d^3));
SVN O(n^2 d^2 + n d^3).
Peers that fail (e.g. out of memory at n = 5000) are reported as such.
Needs the ``bench`` extra (blackjax, numpyro).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import steinax


def _time_interleaved(steps, repeats, budget_s):
    """Median ms per call of each ``(fn, state)``, timed in interleaved rounds.

    One call of every library per round, so a slow period of the (shared)
    machine affects all of them alike and the ratios stay meaningful.
    """
    states = {}
    for name, (fn, state) in steps.items():
        state = fn(state)  # compile
        jax.block_until_ready(state)
        states[name] = state
    times = {name: [] for name in steps}
    t_start = time.perf_counter()
    for _ in range(repeats):
        for name, (fn, _) in steps.items():
            t0 = time.perf_counter()
            states[name] = fn(states[name])
            jax.block_until_ready(states[name])
            times[name].append(time.perf_counter() - t0)
        if time.perf_counter() - t_start > budget_s:
            break
    return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


def logdensity(x):
    return -0.5 * jnp.sum(x * x)


def student_logdensity(x, nu=5.0):
    """Multivariate Student-t: its Hessian varies with x (a Gaussian's is a constant XLA can fold away)."""
    return -0.5 * (nu + x.shape[0]) * jnp.log1p(jnp.sum(x * x) / nu)


def _steinax_method_step(method, n, d, lr, logdens=logdensity):
    opt = optax.sgd(lr)
    target = steinax.targets.LogDensityTarget(logdens)
    x0 = jax.random.normal(jax.random.key(0), (n, d))
    state = method.init(x0, opt)
    step = jax.jit(lambda s: method.step(jax.random.key(0), s, target, opt)[0])
    return step, state


def steinax_step(n, d, lr):
    return _steinax_method_step(steinax.svgd(), n, d, lr)


def mk_svgd_step(n, d, lr):
    """MK-SVGD with the paper's 10 RBF kernels (2^-4 ... 2^5), eq. 21 weights."""
    return _steinax_method_step(steinax.mk_svgd(), n, d, lr)


def cc_svgd_step(n, d, lr):
    """CC-SVGD with the per-coordinate median bandwidth."""
    return _steinax_method_step(steinax.cc_svgd(), n, d, lr)


def matrix_average_step(n, d, lr):
    """Matrix SVGD, average mode, exact Hessian (``jax.hessian`` per particle, batched)."""
    return _steinax_method_step(steinax.matrix_svgd("hessian", "average"), n, d, lr, student_logdensity)


def matrix_mixture_step(n, d, lr):
    """Matrix SVGD, mixture mode (anchors at the particles), exact Hessian."""
    return _steinax_method_step(steinax.matrix_svgd("hessian", "mixture"), n, d, lr, student_logdensity)


def svn_step(n, d, lr):
    """Stein variational Newton, exact Hessian."""
    return _steinax_method_step(steinax.svn("hessian"), n, d, lr, student_logdensity)


def blackjax_step(n, d, lr):
    import blackjax
    from blackjax.vi.svgd import rbf_kernel, update_median_heuristic

    svgd = blackjax.svgd(jax.grad(logdensity), optax.sgd(lr), rbf_kernel, update_median_heuristic)
    x0 = jax.random.normal(jax.random.key(0), (n, d))
    state = svgd.init(x0, {"length_scale": 1.0})
    return jax.jit(svgd.step), state


def numpyro_step(n, d, lr):
    import numpyro
    import numpyro.distributions as dist
    from numpyro.contrib.einstein import SVGD, RBFKernel

    def model():
        numpyro.sample("x", dist.Normal(jnp.zeros(d), 1.0).to_event(1))

    svgd = SVGD(model, numpyro.optim.SGD(lr), RBFKernel(), num_stein_particles=n)
    state = svgd.init(jax.random.key(0))
    return jax.jit(lambda s: svgd.update(s)[0]), state


PEERS = {
    "steinax": steinax_step,
    "blackjax": blackjax_step,
    "numpyro": numpyro_step,
    "mk_svgd": mk_svgd_step,
    "cc_svgd": cc_svgd_step,
    "matrix_average": matrix_average_step,
    "matrix_mixture": matrix_mixture_step,
    "svn": svn_step,
}
DEFAULT_PEERS = ["steinax", "blackjax", "numpyro", "mk_svgd", "cc_svgd"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[100, 1000, 5000])
    p.add_argument("--d", type=int, nargs="+", default=[2, 100])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--budget", type=float, default=20.0, help="seconds of timing per library and size")
    p.add_argument("--peers", nargs="+", default=DEFAULT_PEERS, choices=list(PEERS),
                   help="columns: steinax (SVGD), blackjax, numpyro, mk_svgd, cc_svgd, matrix_average, matrix_mixture, svn")
    args = p.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.default_backend()} ({jax.device_count()} device(s)); float32; SGD lr 1e-2")
    print(f"{'n':>6} {'d':>4} " + " ".join(f"{name + ' ms':>14}" for name in args.peers) + "   ratios to steinax")
    for n in args.n:
        for d in args.d:
            steps, ms = {}, {}
            for name in args.peers:
                try:
                    steps[name] = PEERS[name](n, d, 1e-2)
                except Exception as exc:  # noqa: BLE001 - report any failure (OOM) and go on
                    ms[name] = None
                    print(f"  [{name} n={n} d={d}] {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            try:
                ms.update(_time_interleaved(steps, args.repeats, args.budget * len(steps)))
            except Exception as exc:  # noqa: BLE001
                print(f"  [n={n} d={d}] {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                ms.update({name: None for name in steps})
            row = [f"{ms[name]:14.2f}" if ms.get(name) else f"{'failed':>14}" for name in args.peers]
            base = ms.get("steinax")
            ratios = "  ".join(
                f"{k}/steinax={v / base:.1f}x" for k, v in ms.items() if k != "steinax" and v and base
            )
            print(f"{n:>6} {d:>4} " + " ".join(row) + "   " + ratios, flush=True)


if __name__ == "__main__":
    main()
