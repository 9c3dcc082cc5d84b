"""A target in the coordinates of a nonlinear bijection: ``x = F(u)``, so that a sampler run on ``u`` sees the target
pulled back through a transport map (NeuTra: Hoffman et al. 2019, "NeuTra-lizing bad geometry in Hamiltonian Monte
Carlo using neural transport").

.. math::

    \\log q(u) = \\log p(F(u)) + \\log |\\det \\nabla F(u)|, \\qquad \\nabla_u \\log q(u) \\text{ by autodiff}

If ``F`` pushes ``N(0, I)`` to ``p`` exactly, ``q`` is ``N(0, I)``; a sampler leaving ``q`` invariant gives exact
draws of ``p`` mapped by ``F``, whatever ``F`` is, as long as ``F`` is a bijection and its log-determinant is exact.
**Decided here:** ``F`` is any bijection with flowjax's interface (``transform_and_log_det``, ``inverse_and_log_det``
on one ``[d]`` point); flowjax's coupling and autoregressive flows are exact bijections of ``R^d`` with exact
log-determinants (its rational-quadratic splines are the identity outside their interval, so no point is
unreachable). One score per point per step: the gradient of ``log q`` is one backward pass through ``F`` and ``p``.
Checked against ``jax.jacfwd``'s log-determinant (``tests/targets/test_flow.py``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax.targets.base import AbstractTarget, as_target

__all__ = ["FlowTarget"]


class FlowTarget(AbstractTarget):
    """``target`` in the coordinates ``u`` of ``bijection`` (module docstring); ``postprocess`` maps back.

    Attributes:
        target: the target in ``x``.
        bijection: ``x = bijection.transform(u)`` (a flowjax bijection of shape ``(d,)``).
    """

    target: AbstractTarget
    bijection: eqx.Module

    def __init__(self, target, bijection):
        self.target = as_target(target)
        if not (hasattr(bijection, "transform_and_log_det") and hasattr(bijection, "inverse_and_log_det")):
            raise TypeError(f"`bijection` must be a flowjax bijection (transform_and_log_det, inverse_and_log_det); "
                            f"received {type(bijection).__name__}")
        self.bijection = bijection

    @property
    def dim(self) -> int:
        return int(self.bijection.shape[0])

    @property
    def labels(self):
        return getattr(self.target, "labels", None)

    def logdensity(self, u):
        x, log_det = self.bijection.transform_and_log_det(u)
        return self.target.logdensity(x) + log_det

    def score(self, u):
        return jax.grad(self.logdensity)(u)

    def evaluate(self, rng_key, particles):
        del rng_key
        return jax.vmap(jax.value_and_grad(self.logdensity))(particles)

    def forward(self, u):
        """``x`` of ``u`` (``[d]`` or ``[n, d]``), compiled."""
        return _map(self.bijection, jnp.asarray(u), False)

    def inverse(self, x):
        """``u`` of ``x`` (``[d]`` or ``[n, d]``), compiled."""
        return _map(self.bijection, jnp.asarray(x), True)

    def postprocess(self, particles):
        return self.target.postprocess(self.forward(particles))


@eqx.filter_jit
def _map(bijection, a, inverse: bool):
    fn = bijection.inverse if inverse else bijection.transform
    return jax.vmap(fn)(a) if a.ndim == 2 else fn(a)
