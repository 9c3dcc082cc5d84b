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

import jax
import jax.numpy as jnp


def serial_batch(fn, *matrices):
    """``fn`` applied to ``[..., m, m]`` arrays one matrix at a time (leading axes are the batch).

    ``fn`` maps single ``[m, m]`` matrices (and any matching extra arguments) to a
    pytree of arrays; the result has the batch axes put back in front.
    """
    batch = matrices[0].shape[:-2]
    if not batch:
        return fn(*matrices)
    flat = [x.reshape((-1,) + x.shape[len(batch):]) for x in matrices]
    out = jax.lax.map(lambda xs: fn(*xs), tuple(flat))
    return jax.tree.map(lambda y: y.reshape(batch + y.shape[1:]), out)


def eigh(matrix):
    """``(eigenvalues, eigenvectors)`` of symmetric ``[..., m, m]``: :func:`jax.numpy.linalg.eigh`, serially."""
    return serial_batch(jnp.linalg.eigh, matrix)


def cholesky(matrix):
    """Lower Cholesky factor of ``[..., m, m]``: :func:`jax.numpy.linalg.cholesky`, serially."""
    return serial_batch(jnp.linalg.cholesky, matrix)
