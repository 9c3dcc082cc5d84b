"""Naive reference implementations (double loops with jax.grad) that the tests compare against."""

import jax
import jax.numpy as jnp
import numpy as np


def naive_svgd_direction(x, s, kernel_fn):
    """Eq. 12 of the MK-SVGD paper as a double loop; ``kernel_fn(a, b)`` any differentiable kernel."""
    k = jax.jit(lambda a, b: kernel_fn(a, b))
    g = jax.jit(lambda a, b: jax.grad(kernel_fn, 0)(a, b))
    n = x.shape[0]
    out = np.zeros(x.shape, np.float64)
    for i in range(n):
        for j in range(n):
            out[i] += np.asarray(k(x[j], x[i]) * s[j] + g(x[j], x[i]), np.float64)
    return out / n


def naive_stein_kernel(kernel_fn):
    """u_p(x, y) = s_x.s_y k + s_x.grad_y k + grad_x k.s_y + tr grad_x grad_y k, from jax.grad."""

    def u(x, y, sx, sy):
        k = kernel_fn(x, y)
        gx = jax.grad(kernel_fn, 0)(x, y)
        gy = jax.grad(kernel_fn, 1)(x, y)
        tr = jnp.trace(jax.jacfwd(jax.grad(kernel_fn, 0), 1)(x, y))
        return sx @ sy * k + sx @ gy + gx @ sy + tr

    return jax.jit(u)


def naive_ksd(x, s, kernel_fn, estimator="v"):
    u = naive_stein_kernel(kernel_fn)
    n = x.shape[0]
    total = 0.0
    for i in range(n):
        for j in range(n):
            if estimator == "u" and i == j:
                continue
            total += float(u(x[i], x[j], s[i], s[j]))
    return total / (n * n if estimator == "v" else n * (n - 1))


def kernel_zoo(name, dtype, h=1.5):
    """The kernels the naive-loop tests run over: fixed RBF, median RBF, per-dimension RBF (d = 3), IMQ."""
    from steinax.kernels import IMQ, RBF

    return {
        "rbf": RBF(h),
        "rbf_median": RBF("liu"),
        "rbf_vector": RBF(jnp.array([0.5, 1.0, 2.0], dtype)),
        "imq": IMQ(1.0, -0.5),
    }[name]


def naive_kcc_sd(x, s, kernel_fns, estimator="v"):
    """KCC-SD^2 as sum_i of double loops of the 1-D Stein kernel of coordinate i (ALGORITHMS.md section B).

    ``kernel_fns[i](a, b)`` is the univariate kernel of coordinate ``i`` on scalars.
    """
    n, d = x.shape
    total = 0.0
    for i in range(d):
        u = naive_stein_kernel(lambda a, b, f=kernel_fns[i]: f(a[0], b[0]))
        for a in range(n):
            for b in range(n):
                if estimator == "u" and a == b:
                    continue
                total += float(u(x[a, i : i + 1], x[b, i : i + 1], s[a, i : i + 1], s[b, i : i + 1]))
    return total / (n * n if estimator == "v" else n * (n - 1))
