"""Targets: what a particle method samples from.

A target is anything with a batched, keyed score. The interface
(:class:`AbstractTarget`) is small and every method only calls
:meth:`AbstractTarget.evaluate`, once per step, for all particles at once:

``evaluate(rng_key, particles) -> (logdensities or None, scores)``

Targets may also provide, for methods that need them (matrix-valued kernels,
Stein variational Newton, KFAC, Stein GPs):

* :meth:`hessian` (default: ``jax.hessian`` of the log-density),
* :meth:`gauss_newton` and :meth:`fisher` (defined by models that have a
  likelihood with that structure; otherwise a clear ``NotImplementedError``),
* :meth:`per_example_loglik` (minibatch models),
* :meth:`curvature` (the one entry point the particle methods use: a named
  curvature, batched over the particles, once per step),
* :meth:`postprocess` (map particles to the user's space, e.g. NumPyro's
  constrained space).

A plain Python function ``logdensity(x)`` of one ``[d]`` point is a target
(:func:`as_target` wraps it).
"""

from __future__ import annotations

import abc
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from steinax._linalg import lapack_calls
from steinax._platform import on_cpu_else

CURVATURES = ("hessian", "gauss_newton", "fisher", "kfac")
MINIBATCH_SAMPLING = ("auto", "without_replacement", "with_replacement")
AUTO_WITHOUT_REPLACEMENT_MAX = 20_000

__all__ = ["CURVATURES", "AbstractTarget", "LogDensityTarget", "ScoreTarget", "MinibatchTarget", "draw_minibatch", "as_target",
           "logdensities", "hessian_at",
           "check_target", "evaluate", "curvature", "evaluate_checked"]


class AbstractTarget(eqx.Module):
    """A target density ``p`` on ``R^d`` (see the module docstring)."""

    @abc.abstractmethod
    def evaluate(self, rng_key: jax.Array, particles: jax.Array) -> tuple[jax.Array | None, jax.Array]:
        """Log-densities ``[n]`` (or ``None`` when unavailable) and scores ``[n, d]``.

        Called once per step with all particles; a stochastic target draws one
        minibatch from ``rng_key`` and uses it for every particle.
        """

    def logdensity(self, x: jax.Array) -> jax.Array:
        """Unnormalised ``log p(x)`` at one ``[d]`` point."""
        raise NotImplementedError(f"{type(self).__name__} does not provide a log-density, only scores")

    def score(self, x: jax.Array) -> jax.Array:
        """``nabla log p(x)`` at one ``[d]`` point."""
        return jax.grad(self.logdensity)(x)

    def hessian(self, x: jax.Array) -> jax.Array:
        """``nabla^2 log p(x)`` (``[d, d]``) at one point."""
        return jax.hessian(self.logdensity)(x)

    def gauss_newton(self, x: jax.Array) -> jax.Array:
        """A positive semi-definite Gauss-Newton approximation of ``-nabla^2 log p(x)``."""
        raise NotImplementedError(
            f"{type(self).__name__} has no Gauss-Newton structure; define `gauss_newton` on the target"
        )

    def fisher(self, rng_key: jax.Array, x: jax.Array) -> jax.Array:
        """The (empirical) Fisher information at one point."""
        raise NotImplementedError(f"{type(self).__name__} has no per-example likelihood to form a Fisher matrix")

    def per_example_loglik(self, x: jax.Array, batch) -> jax.Array:
        """Per-example log-likelihoods of ``batch`` at one point."""
        raise NotImplementedError(f"{type(self).__name__} has no per-example log-likelihood")

    def kfac(self, rng_key: jax.Array, particles: jax.Array):
        """Kronecker-factored Fisher blocks of every particle (models with dense layers; see ``BNNRegression``)."""
        others = [f"'{c}'" for c in self.available_curvatures() if c != "kfac"]
        raise NotImplementedError(
            f"{type(self).__name__} has no layered structure for a Kronecker-factored (KFAC) Fisher; "
            f"this target provides preconditioner={' or '.join(others)}"
        )

    def available_curvatures(self) -> tuple[str, ...]:
        """The curvatures this target provides (``"hessian"`` always; the others where a subclass defines them)."""
        return ("hessian",) + tuple(c for c in ("gauss_newton", "fisher", "kfac")
                                    if getattr(type(self), c) is not getattr(AbstractTarget, c))

    def curvature(self, name: str, rng_key: jax.Array, particles: jax.Array):
        """The curvature ``name`` at every particle, as a positive (semi-)definite quantity.

        The one hook through which particle methods ask a target for more than
        scores (:meth:`steinax.particles.AbstractParticleMethod.step` calls it
        once per step, with the key of that step's scores, so a minibatch target
        uses the same minibatch for both):

        * ``"hessian"``: ``-nabla^2 log p(x_i)`` (``[n, d, d]``, may be indefinite),
        * ``"gauss_newton"``: :meth:`gauss_newton` (``[n, d, d]``),
        * ``"fisher"``: :meth:`fisher` (``[n, d, d]``),
        * ``"kfac"``: :meth:`kfac` (a model-specific pytree of factors).
        """
        if name == "hessian":
            return -jax.vmap(self.hessian)(particles)
        if name == "gauss_newton":
            return jax.vmap(self.gauss_newton)(particles)
        if name == "fisher":
            return jax.vmap(self.fisher, in_axes=(None, 0))(rng_key, particles)
        if name == "kfac":
            return self.kfac(rng_key, particles)
        raise ValueError(f"`name` must be one of {CURVATURES}; received {name!r}")

    def postprocess(self, particles: jax.Array):
        """Map ``[n, d]`` particles to the user's space (identity by default)."""
        return particles


class LogDensityTarget(AbstractTarget):
    """A target given by a differentiable ``logdensity_fn(x)`` of one ``[d]`` point."""

    logdensity_fn: Callable = eqx.field(static=True)

    def logdensity(self, x):
        return self.logdensity_fn(x)

    def evaluate(self, rng_key, particles):
        del rng_key
        return jax.vmap(jax.value_and_grad(self.logdensity_fn))(particles)


class ScoreTarget(AbstractTarget):
    """A target given only by its score, optionally stochastic.

    Args:
        score_fn: ``score_fn(x)`` or, with ``stochastic=True``,
            ``score_fn(rng_key, x)`` for one ``[d]`` point. A stochastic score
            receives the same key for every particle of a step, so particles
            share one minibatch per step.
    """

    score_fn: Callable = eqx.field(static=True)
    stochastic: bool = eqx.field(static=True, default=False)

    def score(self, x):
        if self.stochastic:
            raise NotImplementedError("a stochastic ScoreTarget needs a key: use `evaluate`")
        return self.score_fn(x)

    def evaluate(self, rng_key, particles):
        if self.stochastic:
            return None, jax.vmap(self.score_fn, in_axes=(None, 0))(rng_key, particles)
        return None, jax.vmap(self.score_fn)(particles)


@eqx.filter_jit
def logdensities(target: AbstractTarget, particles: jax.Array) -> jax.Array:
    """``log p`` at every row of ``particles`` (``[n, d]`` to ``[n]``), compiled (once per target and shape).

    For one-off evaluations outside a compiled loop: an eager ``jax.vmap`` of a NumPyro model's log-density
    dispatches operation by operation (measured 4 s for 100 points of an 8-parameter regression, against 1 s
    compiled), and an eager ``jax.hessian`` 8.5 s against 1.6 s (:func:`hessian_at`).
    """
    return jax.vmap(target.logdensity)(particles)


@eqx.filter_jit
def hessian_at(target: AbstractTarget, x: jax.Array) -> jax.Array:
    """``nabla^2 log p(x)`` at one ``[d]`` point, compiled (see :func:`logdensities`)."""
    return target.hessian(x)


def draw_minibatch(rng_key, data, batch_size: int | None, sampling: str = "auto"):
    """``(batch, N / B)``: one minibatch of the pytree ``data`` (leading axis ``N``) and the factor of eq. 10.

    ``batch_size=None`` (or ``>= N``) returns all data and 1. Sampling as
    :class:`MinibatchTarget` (``"auto"``: without replacement up to 20,000
    rows, with replacement above); both are unbiased for sums over the data.
    """
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    if batch_size is None or batch_size >= n:
        return data, 1.0
    replace = sampling == "with_replacement" or (sampling == "auto" and n > AUTO_WITHOUT_REPLACEMENT_MAX)
    if replace:
        idx = jax.random.randint(rng_key, (batch_size,), 0, n)
    else:
        idx = jax.random.choice(rng_key, n, (batch_size,), replace=False)
    return jax.tree_util.tree_map(lambda a: a[idx], data), n / batch_size


class MinibatchTarget(AbstractTarget):
    """A Bayesian model ``log p(x) = log prior(x) + sum_i loglik(x, data_i)`` with minibatch scores.

    Each step draws ``batch_size`` indices (one draw per step, shared by all
    particles) and uses the unbiased estimate

    .. math:: \\hat s(x) = \\nabla \\log p_0(x) + \\frac{N}{B} \\sum_{i \\in B} \\nabla \\log p(y_i | x).

    Args:
        logprior_fn: ``logprior_fn(x)`` of one ``[d]`` point.
        loglik_fn: ``loglik_fn(x, example)`` for one example (a pytree slice of ``data``).
        data: a pytree of arrays with a common leading axis of length ``N``.
        batch_size: ``B``; ``None`` uses all data (exact scores).
        sampling: ``"without_replacement"`` (a random permutation: O(N) per step),
            ``"with_replacement"`` (O(B) per step, memory independent of N; also unbiased,
            variance larger by a factor of about ``1 + B/N``), or ``"auto"`` (default):
            without replacement while ``N <= 20,000``, with replacement above (a
            permutation of 200,000 indices costs ~120 ms per step on a CPU).
    """

    logprior_fn: Callable = eqx.field(static=True)
    loglik_fn: Callable = eqx.field(static=True)
    data: object
    batch_size: int | None = eqx.field(static=True, default=None)
    sampling: str = eqx.field(static=True, default="auto")

    def __check_init__(self):
        if self.sampling not in MINIBATCH_SAMPLING:
            raise ValueError(f"`sampling` must be one of {MINIBATCH_SAMPLING}; received {self.sampling!r}")
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or not hasattr(self.batch_size, "__index__")
                                            or self.batch_size < 1):
            raise ValueError(f"`batch_size` must be None or a positive integer; received {self.batch_size!r}")

    @property
    def num_data(self) -> int:
        return jax.tree_util.tree_leaves(self.data)[0].shape[0]

    def per_example_loglik(self, x, batch):
        return jax.vmap(self.loglik_fn, in_axes=(None, 0))(x, batch)

    def _batch(self, rng_key):
        return draw_minibatch(rng_key, self.data, self.batch_size, self.sampling)

    def _logdensity_on(self, x, batch, factor):
        return self.logprior_fn(x) + factor * jnp.sum(self.per_example_loglik(x, batch))

    def logdensity(self, x):
        return self._logdensity_on(x, self.data, 1.0)

    def evaluate(self, rng_key, particles):
        batch, factor = self._batch(rng_key)
        return jax.vmap(jax.value_and_grad(self._logdensity_on), in_axes=(0, None, None))(particles, batch, factor)

    def fisher(self, rng_key, x):
        """Empirical Fisher of the posterior over a minibatch (``[d, d]``).

        ``N * Cov_B[nabla log p(y_i | x)] - nabla^2 log p_0(x)``: the
        likelihood's part estimated from the per-example score gradients of the
        minibatch ``rng_key`` draws (the same one :meth:`evaluate` uses with that
        key), plus the prior's curvature by autodiff (``I / sigma^2`` for a
        Gaussian prior). The authors' matrix-SVGD code uses the batch covariance
        without the factor ``N`` and without the prior; the factor only rescales
        the preconditioner, which their AdaGrad/RMSProp steps absorb.
        """
        batch, _ = self._batch(rng_key)
        g = jax.vmap(jax.grad(self.loglik_fn), in_axes=(None, 0))(x, batch)
        g = g - jnp.mean(g, axis=0, keepdims=True)
        return self.num_data * (g.T @ g) / g.shape[0] - jax.hessian(self.logprior_fn)(x)

    def hessian(self, x):
        """``nabla^2 log p(x)`` on all the data."""
        return jax.hessian(self.logdensity)(x)

    def curvature(self, name, rng_key, particles):
        """As :meth:`AbstractTarget.curvature`; ``"hessian"`` uses the step's minibatch (scaled by ``N / B``)."""
        if name == "hessian":
            batch, factor = self._batch(rng_key)
            hess = jax.hessian(self._logdensity_on)
            return -jax.vmap(hess, in_axes=(0, None, None))(particles, batch, factor)
        return super().curvature(name, rng_key, particles)


def as_target(target) -> AbstractTarget:
    """Return ``target`` as an :class:`AbstractTarget` (a callable becomes a :class:`LogDensityTarget`)."""
    if isinstance(target, AbstractTarget):
        return target
    if callable(target):
        return LogDensityTarget(target)
    raise TypeError(
        "`target` must be a log-density function `logdensity(x)` of one [d] point or a "
        f"steinax.targets.AbstractTarget; received {type(target).__name__}"
    )


def check_target(target: AbstractTarget, rng_key: jax.Array, particles: jax.Array, name: str = "target") -> None:
    """Trace ``target.evaluate`` at ``particles`` (no computation) and raise a clear error if it does not fit.

    Checks that a log-density function returns a scalar for one ``[d]`` point and
    that ``evaluate`` returns ``[n]`` log-densities (or ``None``) and ``[n, d]`` scores.

    Raises:
        ValueError: naming ``name``, what it returned and what was expected.
    """
    n, d = particles.shape
    if isinstance(target, LogDensityTarget):
        try:
            out = jax.eval_shape(target.logdensity_fn, jax.ShapeDtypeStruct((d,), particles.dtype))
        except Exception as exc:
            if _is_probabilistic_model(target.logdensity_fn):
                raise ValueError(
                    f"`{name}` is a probabilistic-programming model (it calls numpyro.sample), not a log-density of one "
                    f"[d] point: wrap it, steinax.targets.from_numpyro(model, *data) (from the shell: a module "
                    "attribute `target = from_numpyro(model, data)`)") from exc
            raise ValueError(
                f"`{name}` could not be evaluated at one point of shape ({d},): {_why(exc)}"
            ) from exc
        if not hasattr(out, "shape") or out.shape != ():
            got = getattr(out, "shape", type(out).__name__)
            raise ValueError(
                f"`{name}` must return a scalar log-density for one point of shape ({d},); it returned shape {got}"
            )
        if not jnp.issubdtype(out.dtype, jnp.floating):
            raise ValueError(f"`{name}` must return a real floating-point log-density; it returned dtype {out.dtype} "
                             "(a score needs a differentiable value: compute it in floats)")
    try:
        logd, scores = jax.eval_shape(target.evaluate, rng_key, particles)
    except Exception as exc:
        raise ValueError(
            f"`{name}` could not be evaluated at particles of shape {(n, d)}: {_why(exc)}"
        ) from exc
    if scores.shape != (n, d):
        raise ValueError(f"`{name}` returned scores of shape {scores.shape} for particles of shape {(n, d)}; expected {(n, d)}")
    if logd is not None and logd.shape != (n,):
        raise ValueError(f"`{name}` returned log-densities of shape {logd.shape} for {n} particles; expected ({n},)")


def _is_probabilistic_model(fn) -> bool:
    """Whether ``fn`` is a NumPyro model function: called under a seed and a trace, with ``None`` for each argument
    it requires (a model that takes its data as arguments, ``eight_schools(y, sigma)``, the docs' own style, then
    samples its observations or fails on them after its first latent site), it records ``sample`` sites (the mistake
    of passing the model where a log-density belongs). False when NumPyro is not imported (a model cannot then be
    one) or when the call fails before recording a site."""
    import inspect
    import sys

    if "numpyro" not in sys.modules:
        return False
    from numpyro import handlers

    try:
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # no signature (a builtin): call it bare
        required = []
    try:
        with handlers.trace() as tr, handlers.seed(rng_seed=0):
            fn(*[None] * len(required))
    except Exception:  # a model needing its data fails; what it recorded before failing still tells
        pass
    return any(site.get("type") == "sample" for site in tr.values())


# ---------------------------------------------------------------- evaluation that cannot stall XLA:CPU

def _per_particle_if_needed(fn, rng_key, particles):
    """``fn(rng_key, particles)``, one particle at a time on the CPU backend when the batched program holds a
    batched LAPACK call (the jaxlib 0.10 stall, see :func:`evaluate`); as one batched call otherwise."""
    if particles.ndim == 2 and particles.shape[0] > 1:
        spec = (jax.ShapeDtypeStruct(rng_key.shape, rng_key.dtype), jax.ShapeDtypeStruct(particles.shape, particles.dtype))
        if lapack_calls(fn, *spec, batched_only=True):
            def one_at_a_time(key, x):
                out = jax.lax.map(lambda xi: fn(key, xi[None]), x)
                return jax.tree_util.tree_map(lambda a: a[:, 0], out)

            return on_cpu_else(one_at_a_time, fn, rng_key, particles)
    return fn(rng_key, particles)


def evaluate(target: AbstractTarget, rng_key: jax.Array, particles: jax.Array):
    """``target.evaluate(rng_key, particles)``, safe on XLA:CPU for any target: every caller in steinax uses this.

    jaxlib 0.10's CPU LAPACK kernels (Cholesky, triangular solves, ``eigh``, ...) split a
    batch of matrices over XLA's intra-op thread pool and block until the pieces finish.
    A target whose log-density factorises or solves per point (a latent GP prior written
    through ``cholesky`` and ``solve_triangular``, a per-point covariance), evaluated for all
    particles at once by ``vmap``, holds such batched calls; when the executor runs as many
    of them at once as the pool has threads, each waits for pieces queued behind the others
    and the process stalls forever with every thread idle (seen: a 102-D log-Gaussian Cox
    process, 100 particles). So on the CPU backend, when the traced program of
    ``target.evaluate`` holds a batched LAPACK call (:func:`steinax._linalg.lapack_calls`), the
    particles are evaluated one at a time (``lax.map``): every LAPACK call then holds one
    matrix and never waits on the pool. The results are the same values (the same
    operations per particle); a stochastic target gets the same key, so the same minibatch,
    for every particle. The choice is made per platform when the program is lowered
    (:func:`steinax._platform.on_cpu_else`): on accelerators, and for targets without such
    calls, the particles are evaluated batched.
    """
    return _per_particle_if_needed(target.evaluate, rng_key, particles)


evaluate_compiled = eqx.filter_jit(evaluate)
""":func:`evaluate` compiled once per target (the target's functions static, its arrays traced)."""


def curvature(target: AbstractTarget, name: str, rng_key: jax.Array, particles: jax.Array):
    """``target.curvature(name, rng_key, particles)``, safe on XLA:CPU as :func:`evaluate` (not for ``"kfac"``,
    whose factors are not per-particle arrays; steinax's own KFAC factorises serially)."""
    if name == "kfac":
        return target.curvature(name, rng_key, particles)
    return _per_particle_if_needed(lambda key, x: target.curvature(name, key, x), rng_key, particles)


def evaluate_checked(target: AbstractTarget, rng_key: jax.Array, particles: jax.Array, name: str = "target"):
    """``target.evaluate(rng_key, particles)`` after :func:`check_target`, as one compiled program (host callers
    outside a loop: evaluated eagerly, each operation of the log-density and its gradient compiled on its own)."""
    check_target(target, rng_key, particles, name)
    return evaluate_compiled(target, rng_key, particles)


_UNTRACEABLE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
                 jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError)


def _why(exc: Exception) -> str:
    """The error's type and first line, and for JAX's tracer errors what is unsupported and what to write instead."""
    text = f"{type(exc).__name__}: {_first_line(exc)}"
    if isinstance(exc, _UNTRACEABLE):
        text += (" -- the log-density is not JAX-traceable: it turns a traced value into a NumPy array or a Python "
                 "number (np.* on the input, float(), .item()) or branches on one (`if x > 0`). steinax differentiates "
                 "and compiles it with JAX: write it with jax.numpy, and jnp.where or jax.lax.cond for branches")
    return text


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
