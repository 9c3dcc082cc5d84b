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
:func:`load_samples` reads ``.npy``, ``.csv`` and NetCDF files for the CLI and
returns what :func:`sample_quality` takes, so a file and the same draws in
memory give the same answer.

**Chains.** Samples shaped as chains (a ``[chains, draws, d]`` array, a
DataTree's ``chain``/``draw`` dimensions, a CSV with a ``chain`` column) are
autocorrelated MCMC output: ``bootstrap="auto"`` then runs the wild bootstrap
for dependent data (:func:`steinax.stein.gof_test`), and the result says which
bootstrap ran. ``[n, d]`` arrays, and DataTrees of steinax particles
(:meth:`steinax.RunResult.to_datatree`), are taken as independent draws.
"""

from __future__ import annotations

import dataclasses

import os

import jax
import jax.numpy as jnp
import numpy as np

import csv

import equinox as eqx

from steinax._memory import MemoryBudgetError
from steinax._validation import as_float_input, check_particles
from steinax.diagnostics.modes import ModeCheck, mode_check
from steinax.diagnostics.relaxation import RelaxationCheck, relaxation_check
from steinax.diagnostics.spread import SpreadCheck, spread_check
from steinax.kernels.base import IMQ, AbstractKernel, as_kernel
from steinax.stein.gof import BOOTSTRAPS, DISCREPANCIES, GofResult, gof_test
from steinax.stein.complete_conditional import kcc_sd
from steinax.stein.ksd import ksd
from steinax.stein.ksdagg import AggregatedTest
from steinax.targets.base import as_target, evaluate_checked

EXACT_MAX = 500_000
"""``method='exact'`` is refused above this many draws (1.25e11 Stein-kernel pairs: the discrepancy alone takes
about an hour on two CPU cores, its test B times more)."""

__all__ = ["EXACT_MAX", "NYSTROM_ABOVE", "SampleQuality", "as_sample_array", "draws_and_scores", "load_samples", "sample_quality"]

NYSTROM_ABOVE = 50_000
"""``method="auto"`` measures more samples than this with the Nyström KSD (the exact statistic's ``n^2`` pairs
take minutes on two CPU cores at ``n = 50,000`` with a test; the Nyström pass takes seconds)."""

# CSV columns that index draws rather than hold a coordinate (pandas' unnamed
# index, R's write.csv, ArviZ's data frames); "chain" also splits the chains.
# Columns ending in "__" are Stan's sampler diagnostics (lp__, accept_stat__, ...).
_INDEX_COLUMNS = ("", "index", "unnamed: 0", "draw", "iteration", "iter", "sample", "chain")


class SampleQuality(eqx.Module):
    """What :func:`sample_quality` returns.

    Attributes:
        discrepancy: the squared discrepancy (KSD or KCC-SD, U- or V-statistic).
        kind: ``"ksd"`` or ``"kcc_sd"``.
        estimator: ``"u"`` or ``"v"``.
        n, d: number of samples and their dimension (after flattening chains and sites).
        chains: the number of chains the samples came in (1 for an ``[n, d]`` array).
        test: the test that ran when one was asked for, else ``None``: the aggregated test
            (:class:`~steinax.stein.AggregatedTest`, the default) or the single-kernel one
            (:class:`~steinax.stein.GofResult`). Both have ``reject``, ``p_value``, ``level``,
            ``bootstrap``, ``block_length`` and ``untestable``.
        spread, relaxation: the collapse checks (:class:`~steinax.diagnostics.SpreadCheck`,
            :class:`~steinax.diagnostics.RelaxationCheck`) when ``spread=True``, else ``None``.
        modes: the missing-mode check (:class:`~steinax.diagnostics.ModeCheck`) when ``spread=True``.
        method: ``"exact"`` (every pair of samples) or ``"nystrom"`` (the Nyström KSD,
            :mod:`steinax.stein.nystrom`, V-statistic, linear in ``n``).
        null_sd: for the exact U-statistic KSD, its standard deviation for exact independent draws of this size
            (:func:`null_sd`): the unit in which ``discrepancy`` reads; else ``None``.
    """

    discrepancy: float
    kind: str = eqx.field(static=True)
    estimator: str = eqx.field(static=True)
    n: int = eqx.field(static=True)
    d: int = eqx.field(static=True)
    chains: int = eqx.field(static=True)
    test: GofResult | AggregatedTest | None = None
    spread: SpreadCheck | None = None
    relaxation: RelaxationCheck | None = None
    modes: ModeCheck | None = None
    method: str = eqx.field(static=True, default="exact")
    null_sd: float | None = eqx.field(static=True, default=None)

    @property
    def p_value(self) -> float | None:
        return None if self.test is None else float(self.test.p_value)

    @property
    def reject(self) -> bool | None:
        """The test's decision; ``None`` without a test and when the test is untestable (no decision)."""
        return None if self.test is None or self.test.reject is None else bool(self.test.reject)

    @property
    def collapsed(self) -> bool | None:
        """Either collapse check's flag, or the relaxation check could not decide (``None`` without ``spread=True``).

        An untestable relaxation check counts: particles where MALA cannot move are not certified.
        """
        if self.spread is None:
            return None
        return bool(self.spread.collapsed or self.relaxation.collapsed or self.relaxation.untestable is not None)

    @property
    def flagged(self) -> bool | None:
        """:attr:`collapsed` or a missing / under-populated mode (``None`` without ``spread=True``): do not trust these samples."""
        if self.spread is None:
            return None
        return bool(self.collapsed or self.modes.mismatch)

    def summary(self) -> str:
        """A few lines for a terminal (the CLI prints this): the test's verdict and p-value first, then the
        discrepancy, in the units of what exact draws of this size give where that is known (:attr:`null_sd`)."""
        name = self.kind.upper().replace("_", "-") + (" (Nyström)" if self.method == "nystrom" else "")
        lines = []
        t = self.test
        if isinstance(t, AggregatedTest):
            lines.append(t.summary())
        elif t is not None:
            boot = "i.i.d. Rademacher" if t.bootstrap == "iid" else f"dependent (block length {t.block_length})"
            if t.untestable is not None:
                lines.append(f"wild-bootstrap test, {boot}, B = {t.n_bootstrap}: UNTESTABLE, no decision: {t.untestable}")
            else:
                verdict = "REJECT" if bool(t.reject) else "do not reject"
                lines.append(
                    f"{verdict} H0: samples ~ target at level {t.level}, p-value {float(t.p_value):.4g} (wild-bootstrap "
                    f"test, {boot}, B = {t.n_bootstrap}: statistic {float(t.statistic):.6g}, threshold "
                    f"{float(t.threshold):.6g})")
        line = f"{name} (squared, {self.estimator.upper()}-statistic): {self.discrepancy:.6g}"
        if self.null_sd:
            line += (f" = {self.discrepancy / self.null_sd:.2f} sds of what exact independent draws of this size give "
                     "(about 0 +- 1)")
        lines.append(line + f"   (n = {self.n}, d = {self.d}, chains = {self.chains})")
        if self.spread is not None:
            lines += [self.spread.summary(), self.relaxation.summary(), self.modes.summary()]
        if self.estimator == "u" and not self.null_sd:
            lines.append("(U-statistic: unbiased, about 0 for exact samples, may be negative; a run's trace "
                         "(steinax.run) records the V-statistic, which adds the diagonal and is larger)")
        return "\n".join(lines)


def _collapse_checks(target, x, scores, samples, chains, block_length, rng_key) -> dict:
    """``spread``, ``relaxation`` and ``modes`` for :func:`sample_quality` (sign flips in blocks for chain output)."""
    from steinax.stein.gof import resolve_block_length

    blocks = resolve_block_length(block_length, x, chains) if _is_chains(samples, chains) else 1
    key = jax.random.key(0) if rng_key is None else jax.random.fold_in(rng_key, 7)
    return {"spread": spread_check(x, scores), "relaxation": relaxation_check(target, x, rng_key=key, block_length=blocks),
            "modes": mode_check(target, x, rng_key=jax.random.fold_in(key, 1))}


def draws_and_scores(samples, target, *, scores=None, var_names=None, dtype=None):
    """``(x [n, d], scores [n, d], chains)`` from any accepted form of ``samples`` (the one reader of every tool).

    ``samples``: an array (``[n, d]``, ``[n]``, ``[chains, draws, d]``), an ArviZ DataTree / xarray
    Dataset, or a dict ``site -> [n, ...]``. With a NumPyro target and named draws the draws are
    mapped to the model's unconstrained space (module docstring). ``scores``: the draws' scores when
    the caller has them (same layout as ``samples`` as an array; ``target`` may then be ``None``);
    otherwise the target is evaluated once at every draw. ``dtype``: default float64 when
    ``jax_enable_x64`` is on, else float32.

    Raises:
        ValueError: malformed samples or scores, a dimension that does not match the target's, or a
            score that is not finite (rows named).
    """
    dtype = jnp.result_type(float) if dtype is None else dtype
    if target is None and scores is None:
        raise ValueError("`target`: received None without `scores`; pass a log-density or steinax target, or the "
                         "draws' scores")
    tgt = None if target is None else as_target(target)
    if tgt is not None and hasattr(tgt, "unconstrain") and (isinstance(samples, dict) or _is_tree(samples)):
        # a NumPyro model and named draws: map the constrained draws to the model's unconstrained space
        sites, chains = _site_dict(samples)
        if var_names is not None:
            sites = {k: v for k, v in sites.items() if k in set(var_names)}
        x = check_particles(jnp.asarray(tgt.unconstrain(sites), dtype), "samples")
    else:
        arr, chains = _as_sample_array(samples, var_names)
        x = check_particles(jnp.asarray(arr, dtype), "samples")
    dim = getattr(tgt, "dim", None)
    if isinstance(dim, int) and x.shape[1] != dim:
        raise ValueError(f"`samples` have d = {x.shape[1]} columns but the target has dimension {dim}")
    logd = None
    if scores is None:
        logd, scores = evaluate_checked(tgt, jax.random.key(0), x)
    else:
        scores = jnp.asarray(_as_sample_array(scores)[0], dtype)
        if scores.shape != x.shape:
            raise ValueError(f"`scores` must have the samples' shape {tuple(x.shape)} (as [n, d]); received "
                             f"{tuple(scores.shape)}")
    bad = ~np.asarray(_finite_rows(scores))
    what = "score"
    if logd is not None:  # a NaN log-density can hide behind a finite score (the gradient of jnp.where is 0 there)
        bad_logd = ~np.isfinite(np.asarray(logd))
        what = "log-density or score" if bad_logd.any() else what
        bad = bad | bad_logd
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(f"the target's {what} is not finite at {rows.size} sample row(s) {rows[:5].tolist()} (first "
                         "five shown); draws outside the target's support, or a model that fails there")
    return x, scores, chains


@jax.jit
def _finite_rows(a):
    """``[n]`` whether each row is finite: one compiled pass (three eager ops cost ~0.5 s of compilation)."""
    return jnp.all(jnp.isfinite(a), axis=1)


def as_sample_array(samples, var_names=None) -> np.ndarray:
    """``[n, d]`` float array from an array or an ArviZ DataTree / xarray Dataset of posterior draws."""
    return _as_sample_array(samples, var_names)[0]


def _as_sample_array(samples, var_names=None) -> tuple[np.ndarray, int]:
    """``([n, d] array, chains)``; chains are laid one after the other (chain-major)."""
    if _is_tree(samples) or isinstance(samples, dict):
        sites, chains = _site_dict(samples)
        names = list(sites) if var_names is None else list(var_names)
        missing = [v for v in names if v not in sites]
        if missing:
            raise ValueError(f"`var_names` {missing} are not variables of the samples; available: {list(sites)}")
        if not names:
            raise ValueError("`samples` hold no posterior variables")
        discrete = [v for v in names if np.asarray(sites[v]).dtype.kind in "iub"]
        if discrete:
            raise ValueError(
                f"posterior variables {discrete} are integer or boolean (discrete); a Stein discrepancy needs "
                f"continuous coordinates with a score. Pass `var_names` without them (continuous: "
                f"{[v for v in names if v not in discrete]})")
        return np.concatenate([_numeric(sites[v], v).reshape(sites[v].shape[0], -1) for v in names], axis=1), chains
    arr = _numeric(samples, "samples")
    if arr.ndim == 1:
        return arr[:, None], 1
    if arr.ndim == 3:
        return arr.reshape(-1, arr.shape[-1]), arr.shape[0]
    if arr.ndim != 2:
        raise ValueError(f"`samples` must be [n], [n, d] or [chains, draws, d]; received shape {arr.shape}")
    return arr, 1


def _numeric(values, name) -> np.ndarray:
    return as_float_input(values, name)


def _posterior(tree):
    """The ``posterior`` group of a DataTree (the tree itself for a Dataset or a tree without one)."""
    return tree["posterior"] if hasattr(tree, "children") and "posterior" in tree.children else tree


def posterior_of_tree(tree, n: int, what: str):
    """``(posterior Dataset, chains, draws)`` of an ArviZ DataTree whose posterior holds the ``n`` draws a tool
    read (the one check of every ``to_datatree``: the tree must be the one the draws came from)."""
    if not _is_tree(tree) or not hasattr(tree, "children"):
        raise TypeError(f"`tree` must be an ArviZ DataTree; received {type(tree).__name__}")
    post = _posterior(tree)
    post = post.to_dataset() if hasattr(post, "to_dataset") else post
    chains, draws = int(post.sizes["chain"]), int(post.sizes["draw"])
    if chains * draws != n:
        raise ValueError(f"`tree` has {chains} x {draws} draws; {what} {n}")
    return post, chains, draws


def _is_chains(samples, chains: int) -> bool:
    """Chain-shaped (autocorrelated) input: several chains, a 3-D array, or a DataTree of MCMC draws.

    A DataTree written by :meth:`steinax.RunResult.to_datatree` (attribute ``steinax_particles``)
    holds exchangeable particles, not a chain.
    """
    if _is_tree(samples):
        return not getattr(_posterior(samples), "attrs", {}).get("steinax_particles", 0)
    return chains > 1 or (not isinstance(samples, dict) and np.ndim(samples) == 3)


def _is_tree(samples) -> bool:
    """An xarray Dataset or (ArviZ) DataTree, as opposed to an array."""
    return hasattr(samples, "data_vars") or hasattr(samples, "children")


def _site_dict(samples) -> tuple[dict, int]:
    """``(site -> [n, ...], chains)`` from a dict or the posterior of a DataTree / Dataset (chains stacked)."""
    if isinstance(samples, dict):
        return {k: np.asarray(v) for k, v in samples.items()}, 1
    ds = _posterior(samples)
    ds = ds if hasattr(ds, "data_vars") and not hasattr(ds, "children") else ds.to_dataset()
    out, chains = {}, 1
    for name in ds.data_vars:
        da = ds[name]
        if {"chain", "draw"} <= set(da.dims):
            da = da.transpose("chain", "draw", ...)
            chains = int(da.sizes["chain"])
            arr = np.asarray(da.values)
            arr = arr.reshape((-1,) + arr.shape[2:])
        else:
            arr = np.asarray(da.values)
        out[name] = arr
    return out, chains


def load_samples(path: str, var_names=None):
    """Read samples from a file; return what :func:`sample_quality` takes.

    * ``.npy``: the array (``[n, d]``, ``[n]`` or ``[chains, draws, d]``); no pickles.
    * ``.csv``: numbers separated by commas, an optional header row. Index columns are
      dropped (an empty header name as pandas and R write it, ``index``, ``draw``,
      ``iteration``, ``sample``; Stan's ``*__`` diagnostics; without a header, a first
      column that is exactly ``0..n-1`` or ``1..n``). A ``chain`` column splits the rows
      into chains (``[chains, draws, d]``). ``var_names`` selects columns by header name.
    * ``.nc`` / ``.netcdf`` / ``.h5``: an ArviZ DataTree file (needs ``h5netcdf``), returned
      as the DataTree so named sites keep their names (NumPyro models map them to their
      unconstrained space); ``var_names`` is applied by :func:`sample_quality`.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"samples file not found: {path!r}")
    if os.path.isdir(path):
        raise ValueError(f"samples path {path!r} is a folder; expected a .npy, .csv or .nc file")
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".npy", ".csv", ".nc", ".netcdf", ".h5"):
        raise ValueError(f"unsupported samples file type {ext!r} for {path!r}; expected .npy, .csv or .nc")
    try:
        if ext == ".npy":
            if var_names is not None:
                raise ValueError("`var_names` apply to .csv files with a header and to NetCDF files, not to .npy arrays")
            _check_npy_length(path)
            data = np.load(path, allow_pickle=False, mmap_mode="r")  # the header first: refuse what cannot fit
            _check_fits(path, data.shape)
            return np.asarray(data)
        if ext == ".csv":
            return _read_csv(path, var_names)
        import xarray as xr

        return xr.open_datatree(path, engine="h5netcdf").load()  # ArviZ's DataTree files
    except ImportError as exc:
        raise ValueError(f"reading {path!r} needs the `arviz` extra (pip install arviz-base h5netcdf): {exc}") from exc
    except MemoryBudgetError:
        raise  # already names the file and the estimate
    except ValueError as exc:
        raise ValueError(f"could not use samples file {path!r}: {exc}") from exc
    except (OSError, EOFError, KeyError) as exc:
        raise ValueError(f"could not use samples file {path!r}: {type(exc).__name__}: {exc}") from exc


# a computation holds about this many float32 copies of the [n, d] samples (samples, scores, the compute
# copies, the test's blocks); a file needing more than the memory available is refused before it is read
_COPIES = 8


def _check_npy_length(path: str) -> None:
    """Refuse a truncated ``.npy`` file, saying what its header declares and what the file holds (NumPy's own
    message is "mmap length is greater than file size")."""
    from numpy.lib import format as npy

    with open(path, "rb") as f:
        try:
            version = npy.read_magic(f)
        except ValueError:
            return  # not an .npy file: np.load says so
        reader = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
        if reader is None:
            return
        shape, _, dtype = reader(f)
        start = f.tell()
    count = int(np.prod(shape))
    need, have = count * dtype.itemsize, os.path.getsize(path) - start
    if have < need:
        raise ValueError(f"truncated: the header declares {count} values of {dtype} (shape {shape}, {need} bytes), "
                         f"the file holds {have} bytes after its header")


def _check_fits(path: str, shape) -> None:
    """Refuse, from its header and before reading it, a samples file whose checking would not fit the memory budget
    (:func:`steinax._memory.require_memory`)."""
    from steinax._memory import require_memory

    values = int(np.prod(shape)) if len(shape) else 1
    require_memory(_COPIES * 4 * values, argument="samples", received=path,
                   what=f"checking its {values:,} values (shape {tuple(shape)}: the draws, their scores and the "
                        "computation's copies)",
                   hint="Thin or subsample the draws first, or use steinax.stein.block_ksd (linear time) on a "
                        "memory-mapped array in Python.")


def _read_csv(path: str, var_names=None) -> np.ndarray:
    _check_fits(path, (os.path.getsize(path) // 2,))  # at least two bytes per value ("1,")
    with open(path, newline="", encoding="utf-8-sig") as f:  # -sig: a byte-order mark is not part of the header
        rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    if not rows:
        raise ValueError("the file holds no rows")
    header = None if _is_numeric_row(rows[0]) and not _is_positional_header(rows) else [c.strip() for c in rows[0]]
    body = rows[1:] if header is not None else rows
    if not body:
        raise ValueError("the file holds a header but no samples")
    width = len(header) if header is not None else len(body[0])
    for i, r in enumerate(body):
        if len(r) != width:
            raise ValueError(f"row {i + (2 if header else 1)} has {len(r)} fields, expected {width}")
    try:
        data = np.array([[float(c) for c in r] for r in body], dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"a field is not a number ({exc})") from exc
    keep = list(range(width))
    chain_col = None
    if header is not None:
        lowered = [h.lower() for h in header]
        if "chain" in lowered:
            chain_col = lowered.index("chain")
        if var_names is not None:
            missing = [v for v in var_names if v not in header]
            if missing:
                raise ValueError(f"`var_names` {missing} are not columns of the file; columns: {header}")
            keep = [header.index(v) for v in var_names]
        else:
            keep = [j for j, h in enumerate(lowered) if h not in _INDEX_COLUMNS and not h.endswith("__")]
    else:
        if var_names is not None:
            raise ValueError("`var_names` need a header row naming the columns; the file has none")
        first = data[:, 0]
        n = data.shape[0]
        if width > 1 and n >= 3 and (np.array_equal(first, np.arange(n)) or np.array_equal(first, np.arange(1, n + 1))):
            keep = keep[1:]
    if not keep:
        raise ValueError(f"no sample column left after dropping index columns; columns: {header}")
    x = data[:, keep]
    if chain_col is None:
        return x
    labels = data[:, chain_col]
    values, counts = np.unique(labels, return_counts=True)
    if len(set(counts.tolist())) != 1:
        raise ValueError(f"the chains of the 'chain' column have different lengths {counts.tolist()}; expected equal chains")
    return np.stack([x[labels == v] for v in values])


def _is_positional_header(rows) -> bool:
    """A header of column positions, as pandas writes a frame without names (``to_csv(index=False)``):
    the first row is exactly ``0,1,...,w-1`` (integers as text) and a later row holds a non-integer value."""
    first = [c.strip() for c in rows[0]]
    if len(first) < 1 or first != [str(j) for j in range(len(first))]:
        return False
    for r in rows[1:]:
        for c in r:
            try:
                if float(c) != int(float(c)):
                    return True
            except (ValueError, OverflowError):
                return False
    return False


def _is_numeric_row(row) -> bool:
    try:
        [float(v) for v in row if v.strip()]
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
    dtype=None,
    bootstrap: str = "auto",
    block_length: int | str = "auto",
    spread: bool = False,
    method: str = "auto",
    aggregated: bool | None = None,
) -> SampleQuality:
    """Kernel Stein discrepancy of ``samples`` against ``target`` (and optionally a goodness-of-fit test).

    Args:
        samples: an array (``[n, d]``, ``[n]``, ``[chains, draws, d]``), an ArviZ DataTree /
            xarray Dataset, or a dict ``site -> [n, ...]`` (see :func:`as_sample_array`).
        target: a log-density of one ``[d]`` point, or a steinax target. With a NumPyro target
            (:func:`steinax.targets.from_numpyro`) named draws (DataTree, dict) are mapped to the
            model's unconstrained space; an array is taken as already unconstrained.
        kernel: default ``IMQ(1, -1/2)``.
        kind: ``"ksd"`` or ``"kcc_sd"``.
        estimator: ``"u"`` (default here: unbiased, ~0 for exact samples) or ``"v"``.
        test: also run a goodness-of-fit test (needs ``rng_key``): the aggregated test
            :func:`steinax.stein.ksdagg_test` by default, else :func:`steinax.stein.gof_test` (see ``aggregated``).
        n_bootstrap: the test's bootstrap draws in all: ``B`` for the single-kernel test,
            ``B1 = B2 = B / 2`` for the aggregated one (the default 1000 gives its own default, 500 + 500).
        var_names: posterior variables to use, in order (DataTrees and dicts; not needed for NumPyro targets).
        dtype: the compute dtype; default float64 when ``jax_enable_x64`` is on, else float32.
        bootstrap: ``"auto"`` (dependent for chain-shaped input, i.i.d. otherwise),
            ``"iid"`` or ``"dependent"``.
        block_length: the dependent bootstrap's block length (an integer >= 2 or ``"auto"``).
        spread: also run the two collapse checks that need no ground truth,
            :func:`~steinax.diagnostics.spread_check` (the samples' scores) and
            :func:`~steinax.diagnostics.relaxation_check` (MALA moves on the target; for chain-shaped
            input its sign flips act on blocks of ``block_length``), and the missing-mode check
            :func:`~steinax.diagnostics.mode_check` (on at most 500 evenly thinned samples). ``SampleQuality.collapsed`` is the collapse checks' flag,
            ``SampleQuality.flagged`` adds a mode mismatch; calibrated on the posterior suite (docs:
            "Is my posterior right?").
        method: ``"auto"`` (default: ``"exact"`` up to :data:`NYSTROM_ABOVE` samples, ``"nystrom"``
            beyond, for ``kind="ksd"``), ``"exact"`` (every pair: ``O(n^2)`` time) or ``"nystrom"``
            (:func:`steinax.stein.nystrom_ksd_test`: the Nyström KSD, a V-statistic, and its test, linear
            in ``n``; ``estimator`` and ``block_size`` do not apply).
        aggregated: which test ``test=True`` runs. ``None`` (default): the aggregated test over ten
            IMQ bandwidths (:func:`steinax.stein.ksdagg_test`: no bandwidth to choose) for the exact KSD
            when no ``kernel`` is given, the single-kernel :func:`steinax.stein.gof_test` otherwise (a
            kernel given is a bandwidth chosen; KCC-SD and the Nyström path have no aggregated test).
            ``True`` forces the aggregated test (``kernel`` then only sets the reported discrepancy);
            ``False`` the single-kernel one. Default since KSDAgg's power was at least the single test's
            within 2 Monte Carlo standard errors on every calibration alternative at the same level
            (docs: "The aggregated KSD test").

    Returns:
        A :class:`SampleQuality`.

    Raises:
        ValueError: malformed samples, a target that cannot be evaluated or whose score is
            not finite at some samples (rows named).
        FloatingPointError: the discrepancy overflows the compute dtype (the message says why).
    """
    choice = _Discrepancy(kind=kind, estimator=estimator, method=method, aggregated=aggregated,
                          block_size=block_size).checked()
    testing = _TestOptions(run=bool(test), rng_key=rng_key, n_bootstrap=n_bootstrap, level=level, bootstrap=bootstrap,
                           block_length=block_length).checked()
    tgt = as_target(target)
    x, scores, chains = draws_and_scores(samples, tgt, var_names=var_names, dtype=dtype)
    choice = choice.resolved(int(x.shape[0]), default_kernel=kernel is None)
    kernel = as_kernel(kernel, IMQ())
    meta = dict(kind=choice.kind, estimator=choice.estimator, n=int(x.shape[0]), d=int(x.shape[1]), chains=int(chains),
                method=choice.method)
    if spread:
        meta.update(_collapse_checks(tgt, x, scores, samples, chains, block_length, rng_key))
    if testing.bootstrap == "auto":
        testing = dataclasses.replace(testing, bootstrap="dependent" if _is_chains(samples, chains) else "iid")
    measured = _measure(x, scores, kernel, int(chains), choice, testing)
    if choice.kind == "ksd" and choice.estimator == "u" and choice.method == "exact":
        meta["null_sd"] = null_sd(x, scores, kernel)
    return SampleQuality(**measured, **meta)


NULL_SD_POINTS = 1000
"""At most this many draws (evenly spaced) estimate :func:`null_sd`'s mean squared Stein kernel."""


def null_sd(x, scores, kernel) -> float:
    """The U-statistic KSD²'s standard deviation for ``n`` exact independent draws: ``sqrt(2 E[u_p(X, X')^2] /
    (n (n - 1)))``, the variance of a degenerate U-statistic (Serfling 1980, sec. 5.2.1; its mean is 0 under
    ``H0``), with ``E[u_p^2]`` the mean of the squared Stein kernel (:func:`~steinax.stein.ksd.stein_kernel_matrix`)
    over the off-diagonal pairs of at most :data:`NULL_SD_POINTS` evenly spaced draws. ``KSD² / null_sd`` then reads
    as "so many sds of what exact draws of this size give": about ``N(0, 1)`` for exact independent draws; chains'
    autocorrelation widens the spread (the test's dependent bootstrap accounts for it, this scale does not)."""
    from steinax.stein.ksd import stein_kernel_matrix

    n = int(x.shape[0])
    pick = np.unique(np.linspace(0, n - 1, min(n, NULL_SD_POINTS)).astype(int))
    xs, ss = jnp.asarray(x)[pick], jnp.asarray(scores)[pick]
    resolved = kernel.resolve(xs) if hasattr(kernel, "resolve") else kernel
    h = np.asarray(stein_kernel_matrix(xs, ss, xs, ss, resolved), np.float64)
    m = h.shape[0]
    mean_sq = (np.sum(h**2) - np.sum(np.diag(h) ** 2)) / max(m * (m - 1), 1)
    return float(np.sqrt(2.0 * mean_sq / (n * (n - 1))))


@dataclasses.dataclass(frozen=True)
class _Discrepancy:
    """Which discrepancy :func:`sample_quality` computes (its arguments of the same names), checked, then resolved
    for ``n`` draws: ``method`` (exact up to :data:`NYSTROM_ABOVE`, refused above :data:`EXACT_MAX`), the test
    (aggregated by default for the exact KSD with the default kernel), the estimator (the Nyström KSD is a
    V-statistic)."""

    kind: str
    estimator: str
    method: str
    aggregated: bool | None
    block_size: int | None

    def checked(self) -> "_Discrepancy":
        if self.kind not in DISCREPANCIES:
            raise ValueError(f"`kind` must be one of {DISCREPANCIES}; received {self.kind!r}")
        if self.aggregated not in (None, True, False):
            raise ValueError(f"`aggregated` must be None (automatic), True or False; received {self.aggregated!r}")
        if self.method not in ("auto", "exact", "nystrom"):
            raise ValueError(f"`method` must be 'auto', 'exact' or 'nystrom'; received {self.method!r}")
        if self.method == "nystrom" and self.kind != "ksd":
            raise ValueError(f"`method='nystrom'` needs kind='ksd'; received kind={self.kind!r}")
        return self

    def resolved(self, n: int, default_kernel: bool) -> "_Discrepancy":
        method = self.method
        if method == "auto":
            method = "nystrom" if self.kind == "ksd" and n > NYSTROM_ABOVE else "exact"
        if method == "exact" and n > EXACT_MAX:
            raise ValueError(f"`method`='exact' on n = {n:,} draws: the exact {self.kind.upper()} sums n^2 / 2 = "
                             f"{n * n / 2:.2g} Stein-kernel pairs (and its test B times as many products), hours to "
                             f"days; refused above n = {EXACT_MAX:,}. Use method='nystrom' (linear in n: what 'auto' "
                             f"picks above {NYSTROM_ABOVE:,}) or thin the draws first")
        aggregated = self.aggregated
        if aggregated is None:
            aggregated = default_kernel and self.kind == "ksd" and method == "exact"
        elif aggregated and method == "nystrom":
            raise ValueError("`aggregated=True` needs the exact KSD; received method='nystrom' (set method='exact')")
        estimator = "v" if method == "nystrom" else self.estimator
        return dataclasses.replace(self, method=method, aggregated=aggregated, estimator=estimator)


@dataclasses.dataclass(frozen=True)
class _TestOptions:
    """Whether and how :func:`sample_quality` tests (``test`` and the bootstrap's arguments of the same names)."""

    run: bool
    rng_key: object
    n_bootstrap: int
    level: float
    bootstrap: str
    block_length: object

    def checked(self) -> "_TestOptions":
        if self.bootstrap not in BOOTSTRAPS + ("auto",):
            raise ValueError(f"`bootstrap` must be one of {BOOTSTRAPS + ('auto',)}; received {self.bootstrap!r}")
        if self.run and self.rng_key is None:
            raise ValueError("`test=True` needs `rng_key` (a jax.random.key) for the bootstrap")
        return self


def _measure(x, scores, kernel, chains: int, choice: _Discrepancy, testing: _TestOptions) -> dict:
    """``{"discrepancy", "test"}``: the Nyström KSD and its test, the exact discrepancy alone, the aggregated test
    beside the discrepancy, or the single-kernel test, which computes the discrepancy on the way (one pass)."""
    t = testing
    if choice.method == "nystrom":
        from steinax.stein.nystrom import nystrom_ksd_test

        res = nystrom_ksd_test(x, scores, kernel, rng_key=t.rng_key if t.run else jax.random.key(0), level=t.level,
                               n_bootstrap=t.n_bootstrap if t.run else 1, bootstrap=t.bootstrap,
                               block_length=t.block_length, chains=chains)
        return {"discrepancy": float(res.discrepancy), "test": res if t.run else None}
    if not t.run:
        fn = ksd if choice.kind == "ksd" else kcc_sd
        return {"discrepancy": float(fn(x, scores, kernel, choice.estimator, block_size=choice.block_size)),
                "test": None}
    if choice.aggregated:
        if choice.kind != "ksd":
            raise ValueError(f"`aggregated=True` needs kind='ksd'; received kind={choice.kind!r}")
        from steinax.stein.ksdagg import ksdagg_test

        n_boot = t.n_bootstrap
        if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
            raise ValueError(f"`n_bootstrap` must be an integer >= 2 for the aggregated test; received {n_boot!r}")
        half = int(n_boot) // 2  # the same total number of bootstrap draws as the single test: B1 = B2 = B / 2
        agg = ksdagg_test(x, scores, rng_key=t.rng_key, level=t.level, n_bootstrap=(half, half), bootstrap=t.bootstrap,
                          block_length=t.block_length, chains=chains, block_size=choice.block_size)
        return {"discrepancy": float(ksd(x, scores, kernel, choice.estimator, block_size=choice.block_size)),
                "test": agg}
    res = gof_test(x, scores, kernel, rng_key=t.rng_key, kind=choice.kind, estimator=choice.estimator, level=t.level,
                   n_bootstrap=t.n_bootstrap, block_size=choice.block_size, bootstrap=t.bootstrap,
                   block_length=t.block_length, chains=chains)
    return {"discrepancy": float(res.discrepancy), "test": res}
