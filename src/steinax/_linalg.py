"""Batched dense linear algebra that is safe inside compiled loops on XLA:CPU.

jaxlib 0.10's CPU LAPACK kernels (Cholesky, ``eigh``, ...) split a batch of
matrices across XLA's intra-op thread pool and block until the pieces finish
(``jax::ParallelBatchMap``). When the thunk executor runs several such calls
at once, for example the Kronecker factors of a network's layers, each
occupies a pool thread and waits for pieces queued behind the others: on a
pool of two threads the process stalls with every thread idle (seen in the
KFAC mixture of matrix SVGD; jaxlib 0.11 removes the parallel path). The
helpers below hand LAPACK one matrix at a time (``lax.map`` over the batch),
so no call waits on the pool. A batch of ``d x d`` matrices costs the same
``O(batch d^3)`` either way.
"""

from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp

from steinax._platform import on_cpu_else


def single_threaded_lapack() -> None:
    """Ask for one OpenBLAS thread in the LAPACK that JAX calls on CPU, unless the user chose a number.

    jaxlib's CPU decompositions and triangular solves call SciPy's OpenBLAS from XLA's
    own intra-op threads. A threaded OpenBLAS then starts its own spinning workers on the
    same cores: with other work on the machine (a second process, pytest-xdist, a
    background run) a solve that takes milliseconds was seen to take over ten minutes
    (a 2-core machine, a GP classification run beside another job). XLA already runs
    independent operations in parallel, so one thread per call loses little.

    OpenBLAS reads ``OPENBLAS_NUM_THREADS`` when it is loaded, and JAX loads SciPy's copy at
    its first CPU decomposition; so this sets the variable (if unset) when steinax is
    imported. It does not reach a copy already loaded (a decomposition run before
    ``import steinax``); set ``OPENBLAS_NUM_THREADS=1`` in the environment for that case.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


single_threaded_lapack()  # at import: steinax imports this module first


def serial_batch(fn, *matrices):
    """``fn`` applied to ``[..., m, m]`` arrays one matrix at a time (leading axes are the batch).

    ``fn`` maps single ``[m, m]`` matrices (and any matching extra arguments) to a
    pytree of arrays; the result has the batch axes put back in front. Serial in programs
    lowered for the CPU only; batched (``vmap``) on accelerators, where batched
    factorisations are the fast path (:mod:`steinax._platform`).
    """
    batch = matrices[0].shape[:-2]
    if not batch:
        return fn(*matrices)
    flat = [x.reshape((-1,) + x.shape[len(batch):]) for x in matrices]
    out = per_particle(lambda xs: fn(*xs), tuple(flat))
    return jax.tree.map(lambda y: y.reshape(batch + y.shape[1:]), out)


def per_particle(fn, particles):
    """``fn`` on each row of ``particles`` (a pytree of arrays as ``fn``'s result, stacked): one row at a time
    (``lax.map``) in programs lowered for the CPU, so every LAPACK call inside holds one matrix, and batched
    (``vmap``) on accelerators."""
    return on_cpu_else(lambda x: jax.lax.map(fn, x), jax.vmap(fn), particles)


def eigh(matrix):
    """``(eigenvalues, eigenvectors)`` of symmetric ``[..., m, m]``: :func:`jax.numpy.linalg.eigh`, serially."""
    return serial_batch(jnp.linalg.eigh, matrix)


def cholesky(matrix):
    """Lower Cholesky factor of ``[..., m, m]``: :func:`jax.numpy.linalg.cholesky`, serially."""
    return serial_batch(jnp.linalg.cholesky, matrix)


# LAPACK-backed primitives whose jaxlib 0.10 CPU kernels split a batch over XLA's intra-op pool and block
# on it (``jax::ParallelBatchMap``); the trailing rank is the one matrix (for ``tridiagonal_solve``'s first
# operand, vector) of one call, the leading axes are the batch
_LAPACK_RANK = {name: 2 for name in ("cholesky", "triangular_solve", "lu", "qr", "geqrf", "geqp3", "householder_product",
                                     "eigh", "eig", "svd", "schur", "hessenberg", "tridiagonal")} | {"tridiagonal_solve": 1}


def lapack_calls(fn, *args, batched_only: bool = False) -> list[tuple[str, tuple[int, ...]]]:
    """``(primitive, operand shape)`` of every LAPACK call in ``fn(*args)`` (with ``batched_only``, only those
    holding a batch of more than one matrix: the calls that can stall, see the module docstring).

    Traces ``fn`` only (``jax.make_jaxpr``; no computation), sub-programs (``jit``, ``scan``,
    ``cond``, custom derivatives) included. ``args`` may be arrays or ``jax.ShapeDtypeStruct``.
    Of a per-platform choice (:func:`jax.lax.platform_dependent`) only the CPU's branch is
    read: the question is what runs on XLA:CPU.
    """
    import jax.extend

    found = []

    def walk(jx):
        for eqn in jx.eqns:
            rank = _LAPACK_RANK.get(eqn.primitive.name)
            if rank is not None and eqn.invars:
                shape = tuple(getattr(eqn.invars[0].aval, "shape", ()))
                if not batched_only or math.prod(shape[: len(shape) - rank]) > 1:
                    found.append((eqn.primitive.name, shape))
            platforms = eqn.params.get("branches_platforms") if eqn.primitive.name == "cond" else None
            if platforms:
                cpu = [i for i, p in enumerate(platforms) if p is not None and "cpu" in p]
                default = [i for i, p in enumerate(platforms) if p is None]
                for i in (cpu or default)[:1]:
                    walk(eqn.params["branches"][i].jaxpr)
                continue
            for sub in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found
