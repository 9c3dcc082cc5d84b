"""A strongly nonlinear flowjax bijection for the transport's tests (shared by ``tests/targets/test_flow.py`` and
``tests/pipeline/test_transport.py``)."""

import jax
import jax.numpy as jnp


def random_flow(d=4, seed=0, dtype=jnp.float32):
    """A spline coupling flow on ``R^d`` with every weight perturbed (flowjax starts some layers at zero: near the
    identity, a weak test), in ``dtype``."""
    from flowjax.bijections import RationalQuadraticSpline
    from flowjax.distributions import Normal
    from flowjax.flows import coupling_flow

    flow = coupling_flow(jax.random.key(seed), base_dist=Normal(jnp.zeros(d)),
                         transformer=RationalQuadraticSpline(knots=6, interval=3.0), flow_layers=3, nn_width=8)
    leaves, tree = jax.tree.flatten(flow)
    keys = jax.random.split(jax.random.key(seed + 1), len(leaves))
    leaves = [(leaf + 0.3 * jax.random.normal(k, leaf.shape, leaf.dtype)).astype(dtype)
              if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.floating) else leaf
              for leaf, k in zip(leaves, keys)]
    return jax.tree.unflatten(tree, leaves)
