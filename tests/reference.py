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
    """The kernels the naive-loop tests run over: fixed RBF, median RBF, per-dimension RBF (d = 3), IMQ (two powers)."""
    from steinax.kernels import IMQ, RBF

    return {
        "rbf": RBF(h),
        "rbf_median": RBF("liu"),
        "rbf_vector": RBF(jnp.array([0.5, 1.0, 2.0], dtype)),
        "imq": IMQ(1.0, -0.5),
        "imq_other": IMQ(0.6, -0.3),
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


def naive_matrix_svgd_direction(x, s, kernel_fn):
    """Eq. 9-10 of the matrix-SVGD paper by a double loop:
    ``phi(x_i) = (1/n) sum_j [K(x_i, x_j) s_j + sum_m d K_{:, m}(x_i, y) / d y_m |_{y = x_j}]``,
    the divergence taken by ``jax.jacfwd`` of ``kernel_fn`` for each pair."""
    x, s = np.asarray(x), np.asarray(s)
    n, d = x.shape
    out = np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            K = np.asarray(kernel_fn(x[i], x[j]))
            jac = np.asarray(jax.jacfwd(lambda y: kernel_fn(jnp.asarray(x[i]), y))(jnp.asarray(x[j])))  # [l, m, p]
            out[i] += K @ s[j] + np.array([sum(jac[l, m, m] for m in range(d)) for l in range(d)])
    return out / n


def naive_svn_direction(x, s, hmats, h, outer="mean"):
    """Stein variational Newton (matrix-SVGD paper eq. 19) by loops: ``A = mean H``,
    ``k_ij = exp(-(x_i - x_j)^T A (x_i - x_j) / h)``, ``g_i = mean_j [k_ij s_j + grad_{x_j} k_ij]``,
    ``H~_i = mean_j H_j k_ij^2 + c sum_j grad k grad k^T``, ``phi_i = H~_i^{-1} g_i``."""
    x, s, hmats = (np.asarray(a, dtype=np.float64) for a in (x, s, hmats))
    n, d = x.shape
    A = hmats.mean(0)
    c = 1.0 / n if outer == "mean" else 1.0
    out = np.zeros((n, d))
    for i in range(n):
        g = np.zeros(d)
        Ht = np.zeros((d, d))
        for j in range(n):
            diff = x[j] - x[i]
            k = np.exp(-diff @ A @ diff / h)
            grad = -2.0 * k * (A @ diff) / h  # d/dx_j exp(-(x_j - x_i)^T A (x_j - x_i) / h)
            g += (k * s[j] + grad) / n
            Ht += hmats[j] * k * k / n + c * np.outer(grad, grad)
        out[i] = np.linalg.solve(Ht, g)
    return out
