"""Sample-quality diagnostics for any sampler's output (MCMC draws, particles).

:func:`sample_quality` takes samples as an array (``[n, d]``, ``[n]`` or
``[chains, draws, d]``) or an ArviZ ``DataTree`` / xarray ``Dataset``
(posterior variables flattened and concatenated in ``var_names`` order, chains
and draws stacked), computes the scores of a log-density at every sample, and
returns the squared discrepancy (:func:`steinax.ksd` or
:func:`steinax.stein.kcc_sd`) and, on request, the wild-bootstrap test
(:func:`steinax.stein.gof_test`).

For a NumPyro model (``steinax.targets.from_numpyro``) with named draws (a
DataTree such as ``arviz_base.from_numpyro(mcmc)``, or a dict ``site -> [n, ...]``)
the constrained draws are mapped to the model's **unconstrained** space with
NumPyro's bijections and the discrepancy is measured there, against the
potential NumPyro samples (Jacobians included): that is the density the draws
of NUTS/HMC target. Sites missing from the draws, or of the wrong shape, are
named in the error.
:func:`load_samples` reads ``.npy``, ``.csv`` and NetCDF files for the CLI.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from steinax._validation import check_particles
from steinax.kernels.base import IMQ, AbstractKernel
from steinax.stein.gof import DISCREPANCIES, gof_test
from steinax.stein.kcc_sd import kcc_sd
from steinax.stein.ksd import ksd
from steinax.targets.base import as_target

__all__ = ["as_sample_array", "load_samples", "sample_quality"]


def as_sample_array(samples, var_names=None) -> np.ndarray:
    """``[n, d]`` float array from an array or an ArviZ DataTree / xarray Dataset of posterior draws."""
    if _is_tree(samples):
        sites = _site_dict(samples)
        names = list(sites) if var_names is None else list(var_names)
        missing = [v for v in names if v not in sites]
        if missing:
            raise ValueError(f"`var_names` {missing} are not variables of the samples; available: {list(sites)}")
        return np.concatenate([sites[v].astype(float).reshape(sites[v].shape[0], -1) for v in names], axis=1)
    arr = np.asarray(samples)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"`samples` must be numeric; received dtype {arr.dtype}")
    arr = arr.astype(float)
    if arr.ndim == 1:
        return arr[:, None]
    if arr.ndim == 3:
        return arr.reshape(-1, arr.shape[-1])
    if arr.ndim != 2:
        raise ValueError(f"`samples` must be [n], [n, d] or [chains, draws, d]; received shape {arr.shape}")
    return arr


def _is_tree(samples) -> bool:
    """An xarray Dataset or (ArviZ) DataTree, as opposed to an array."""
    return hasattr(samples, "data_vars") or hasattr(samples, "children")


def _site_dict(samples) -> dict:
    """``site -> [n, ...]`` from a dict or the posterior of a DataTree / Dataset (chains and draws stacked)."""
    if isinstance(samples, dict):
        return {k: np.asarray(v) for k, v in samples.items()}
    ds = samples
    if hasattr(samples, "children") and "posterior" in samples.children:
        ds = samples["posterior"].to_dataset()
    elif not hasattr(samples, "data_vars"):
        ds = samples.to_dataset()
    out = {}
    for name in ds.data_vars:
        arr = np.asarray(ds[name].values)
        if {"chain", "draw"} <= set(ds[name].dims):
            arr = arr.reshape((-1,) + arr.shape[2:])
        out[name] = arr
    return out


def load_samples(path: str, var_names=None) -> np.ndarray:
    """Read samples from ``.npy``, ``.csv`` (numeric, optional header row) or NetCDF (``.nc``, an ArviZ file)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"samples file not found: {path!r}")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npy":
            data = np.load(path, allow_pickle=False)
        elif ext == ".csv":
            with open(path) as f:
                first = f.readline()
            skip = 0 if _is_numeric_row(first) else 1
            data = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
        elif ext in (".nc", ".netcdf", ".h5"):
            import xarray as xr

            data = xr.open_datatree(path, engine="h5netcdf")  # ArviZ's DataTree files (needs h5netcdf)
        else:
            raise ValueError(f"unsupported samples file type {ext!r} for {path!r}; expected .npy, .csv or .nc")
    except ImportError as exc:
        raise ValueError(f"reading {path!r} needs the `arviz` extra (pip install 'steinax[arviz]'): {exc}") from exc
    except (ValueError, OSError) as exc:
        if "unsupported samples file type" in str(exc):
            raise
        raise ValueError(f"could not parse samples file {path!r}: {exc}") from exc
    return as_sample_array(data, var_names)


def _is_numeric_row(line: str) -> bool:
    try:
        [float(v) for v in line.strip().split(",") if v.strip()]
    except ValueError:
        return False
    return True


def sample_quality(
    samples,
    target,
    *,
    kernel: AbstractKernel | None = None,
    kind: str = "ksd",
    estimator: str = "u",
    test: bool = False,
    rng_key: jax.Array | None = None,
    n_bootstrap: int = 1000,
    level: float = 0.05,
    block_size: int | None = None,
    var_names=None,
    dtype=jnp.float32,
) -> dict:
    """Kernel Stein discrepancy of ``samples`` against ``target`` (and optionally a goodness-of-fit test).

    Args:
        samples: array or DataTree (see :func:`as_sample_array`).
        target: a log-density of one ``[d]`` point, or a steinax target (NumPyro: unconstrained samples).
        kernel: default ``IMQ(1, -1/2)``.
        kind: ``"ksd"`` or ``"kcc_sd"``.
        estimator: ``"u"`` (default here: unbiased, ~0 for exact samples) or ``"v"``.
        test: also run :func:`steinax.stein.gof_test` (needs ``rng_key``).

    Returns:
        ``{"discrepancy", "kind", "estimator", "n", "d"}`` plus, with ``test``,
        ``"statistic", "p_value", "threshold", "reject", "level"``.
    """
    if kind not in DISCREPANCIES:
        raise ValueError(f"`kind` must be one of {DISCREPANCIES}; received {kind!r}")
    tgt = as_target(target)
    if hasattr(tgt, "unconstrain") and (isinstance(samples, dict) or _is_tree(samples)):
        # a NumPyro model and named draws: map the constrained draws to the model's unconstrained space
        x = check_particles(jnp.asarray(tgt.unconstrain(_site_dict(samples)), dtype), "samples")
    else:
        x = check_particles(jnp.asarray(as_sample_array(samples, var_names), dtype), "samples")
    if hasattr(tgt, "dim") and x.shape[1] != tgt.dim:
        raise ValueError(f"`samples` have d = {x.shape[1]} columns but the target has dimension {tgt.dim}")
    try:
        _, scores = tgt.evaluate(jax.random.key(0), x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`target` could not be evaluated at samples of shape {tuple(x.shape)}: {exc}") from exc
    bad = ~jnp.all(jnp.isfinite(scores), axis=1)
    if bool(jnp.any(bad)):
        rows = np.flatnonzero(np.asarray(bad))[:5].tolist()
        raise ValueError(f"the target's score is not finite at sample rows {rows} (first five shown)")
    kernel = IMQ() if kernel is None else kernel
    out = {"kind": kind, "estimator": estimator, "n": int(x.shape[0]), "d": int(x.shape[1])}
    if not test:
        fn = ksd if kind == "ksd" else kcc_sd
        return {"discrepancy": float(fn(x, scores, kernel, estimator, block_size=block_size)), **out}
    if rng_key is None:
        raise ValueError("`test=True` needs `rng_key` (a jax.random.key) for the bootstrap")
    # the test computes the discrepancy on the way: one pass over the Stein kernel matrix
    res = gof_test(x, scores, kernel, rng_key=rng_key, kind=kind, estimator=estimator,
                   level=level, n_bootstrap=n_bootstrap, block_size=block_size)
    return {"discrepancy": float(res.discrepancy), **out, "statistic": float(res.statistic),
            "p_value": float(res.p_value), "threshold": float(res.threshold), "reject": bool(res.reject), "level": level}
