"""Checkpoints: pytrees written atomically to one ``.npz`` file, no pickle.

Used by :func:`steinax.run` (``checkpoint=``, ``checkpoint_every=``) and meant
for every long computation of the library (the later unfolding trainer and GP
fits save their state through the same two functions).

**Schema** (``format = "steinax-checkpoint/1"``), every entry a NumPy array
readable with ``np.load(path, allow_pickle=False)``:

================================  ==================================================
``format``                        the schema name and version (a string)
``meta``                          a JSON string: what produced the checkpoint (the
                                  fingerprint compared on resume) and progress
                                  (e.g. ``{"kind": "run", "step": 120, ...}``)
``<name>/treedef``                the structure of pytree ``<name>`` (its string form,
                                  memory addresses removed), compared on load
``<name>/<i>``                    leaf ``i`` of pytree ``<name>`` in flattening order;
                                  PRNG keys are stored as their key data
``<name>/<i>/key_impl``           present when leaf ``i`` was a typed PRNG key: its implementation
================================  ==================================================

:func:`steinax.run` stores the pytrees ``state`` (particles, optimizer state,
method state, step), ``trace`` (step, KSD, direction norm and the method's
diagnostics recorded so far) and ``rng_key``.

Files are written with :func:`steinax._io.atomic_write` (temporary file, fsync,
rename): a run killed at any moment leaves the previous complete checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import jax
import numpy as np

from steinax._io import atomic_write

__all__ = ["CheckpointMismatchError", "FORMAT", "save_checkpoint", "load_checkpoint", "read_meta", "fingerprint_tree",
           "computation_fingerprint", "optimizer_signature", "update_from", "compare_behaviour", "PROBE_COUNTS",
           "OPTIMIZER_LABELS"]

FORMAT = "steinax-checkpoint/1"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class CheckpointMismatchError(ValueError):
    """A checkpoint was written by a different computation (method, target shape, optimizer, key, ...)."""


def without_addresses(text: str) -> str:
    """``text`` without ``" at 0x..."`` memory addresses (a repr or tree structure comparable across processes)."""
    return _ADDRESS.sub("", text)


def _structure(tree) -> str:
    return without_addresses(str(jax.tree_util.tree_structure(tree)))


def _is_key(leaf) -> bool:
    return hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def fingerprint_tree(tree) -> str:
    """A short hash of a pytree's structure (static fields included) and of its array leaves' bytes.

    Two equal method objects (e.g. ``svgd(RBF(1.0))`` twice) give the same fingerprint;
    a different class, configuration or parameter value gives another. A leaf that is
    not an array (a plain log-density function) enters by its ``repr`` without the memory
    address, so the same function gives the same fingerprint in a new process (a resumed
    run); two functions are told apart by name only.
    """
    h = hashlib.sha256(_structure(tree).encode())
    for leaf in jax.tree_util.tree_leaves(tree):
        if _is_key(leaf):
            leaf = jax.random.key_data(leaf)
        if hasattr(leaf, "shape"):
            arr = np.asarray(leaf)
            h.update(f"{arr.shape}{arr.dtype}".encode())
            h.update(np.ascontiguousarray(arr).tobytes())
        else:
            h.update(without_addresses(repr(leaf)).encode())
    return h.hexdigest()[:16]


def computation_fingerprint(method, target, opt_state, rng_key) -> dict:
    """The fingerprint entries every resumable loop shares (:func:`steinax.run`, the unfolding trainers):
    the method and target as pytrees, the optimizer state's structure (its values zeroed: they change as
    the loop runs), the PRNG key and the x64 mode. Each caller adds what is its own."""
    import jax.numpy as jnp

    return {
        "method_fingerprint": fingerprint_tree(method),
        "target_fingerprint": fingerprint_tree(target),
        "optimizer_state": fingerprint_tree(jax.tree_util.tree_map(jnp.zeros_like, opt_state)),
        "rng_key": fingerprint_tree(rng_key),
        "x64_mode": bool(jax.config.jax_enable_x64),
    }


PROBE_COUNTS = (0, 1, 2, 3, 10, 30, 100, 300, 1000, 3000, 10**4, 3 * 10**4, 10**5, 10**6)
"""Step counts at which :func:`optimizer_signature` asks an optimizer for its update."""


def _at_count(opt_state, count):
    """``opt_state`` with every integer scalar leaf (optax's step counters) set to ``count``."""
    import jax.numpy as jnp

    return jax.tree_util.tree_map(
        lambda a: jnp.full_like(a, count) if hasattr(a, "dtype") and jnp.ndim(a) == 0 and
        jnp.issubdtype(a.dtype, jnp.integer) else a, opt_state)


def _probe_gradient(params):
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda p: jnp.cos(p) - 0.5, params)


def optimizer_signature(optimizer, params):
    """How ``optimizer`` behaves, for every resumable loop (:func:`steinax.run`, the unfolding trainers,
    :func:`steinax.sampling_algorithm`): its update of the fixed gradient ``cos(params) - 0.5`` from a fresh
    state whose step counters read each of :data:`PROBE_COUNTS` (stacked on a leading axis). Another learning
    rate, or a schedule that differs at any of those steps, gives another signature; optax keeps its
    hyperparameters in closures, so no hash can see them, but behaviour can. Traceable."""
    import jax.numpy as jnp

    gradient, fresh = _probe_gradient(params), optimizer.init(params)
    updates = [optimizer.update(gradient, _at_count(fresh, c), params)[0] for c in PROBE_COUNTS]
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *updates)


def update_from(optimizer, params, opt_state):
    """``optimizer``'s update of the probe gradient from ``opt_state`` itself: stored with a checkpoint and
    recomputed from the loaded state on resume, it checks the optimizer at the very step a loop resumes at."""
    return optimizer.update(_probe_gradient(params), opt_state, params)[0]


OPTIMIZER_LABELS = {"update": "the optimizer's update at steps 0 to 10^6 (its learning rate or schedule)",
                    "resume_update": "the optimizer's update at the step resumed from (its schedule there)"}


BEHAVIOUR_ULPS = 16
"""The same code on the same inputs agrees to rounding: behaviour compared within this many ulps of the dtype,
relative to the largest magnitude (at least 1) (:func:`compare_behaviour`, and the init/step pair's origin check)."""


def compare_behaviour(stored: dict, now: dict, labels: dict) -> list[str]:
    """The entries of ``labels`` (name -> what it measures) whose arrays differ between ``stored`` and ``now``
    by more than rounding (:data:`BEHAVIOUR_ULPS`), as sentences; missing entries are skipped."""
    import jax.numpy as jnp

    diffs = []
    for name, label in labels.items():
        if stored.get(name) is None or now.get(name) is None:
            continue
        a_leaves, b_leaves = jax.tree_util.tree_leaves(stored[name]), jax.tree_util.tree_leaves(now[name])
        for a, b in zip(a_leaves, b_leaves):
            eps = float(jnp.finfo(jnp.result_type(b)).eps) if jnp.issubdtype(jnp.result_type(b), jnp.floating) else 0
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            scale = max(1.0, float(np.nanmax(np.abs(a), initial=0.0)))
            tol = BEHAVIOUR_ULPS * eps
            if a.shape != b.shape or not np.allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True):
                gap = (f"max |difference| {float(np.nanmax(np.abs(a - b)))}" if a.shape == b.shape
                       else f"shape {a.shape} vs {b.shape}")
                diffs.append(f"{label} differs ({gap})")
                break
        else:
            if len(a_leaves) != len(b_leaves):
                diffs.append(f"{label} differs (another structure)")
    return diffs


def save_checkpoint(path: str | os.PathLike, trees: dict, meta: dict) -> None:
    """Write ``trees`` (name -> pytree of arrays) and ``meta`` (JSON-serialisable) to ``path`` atomically."""
    arrays = {"format": np.array(FORMAT), "meta": np.array(json.dumps(meta, sort_keys=True))}
    for name, tree in trees.items():
        leaves, _ = jax.tree_util.tree_flatten(tree)
        arrays[f"{name}/treedef"] = np.array(_structure(tree))
        for i, leaf in enumerate(leaves):
            if _is_key(leaf):
                arrays[f"{name}/{i}/key_impl"] = np.array(str(jax.random.key_impl(leaf)))
                leaf = jax.random.key_data(leaf)
            arrays[f"{name}/{i}"] = np.asarray(leaf)

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    atomic_write(path, write)


def read_meta(path: str | os.PathLike) -> dict:
    """The ``meta`` dictionary of a checkpoint (raises ``ValueError`` for a file that is not one)."""
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            fmt = str(data["format"]) if "format" in data.files else None
            if fmt != FORMAT:
                raise ValueError(f"{path!r} is not a steinax checkpoint (format {fmt!r}; expected {FORMAT!r})")
            return json.loads(str(data["meta"]))
    except (OSError, EOFError) as exc:
        raise ValueError(f"could not read checkpoint {path!r}: {type(exc).__name__}: {exc}; "
                         "check its permissions, or delete it to start afresh") from exc
    except Exception as exc:
        if isinstance(exc, ValueError) and "steinax checkpoint" in str(exc):
            raise
        raise _damaged(path, exc) from exc


def _damaged(path: str, exc: Exception) -> ValueError:
    """The one error for a file that is there but cannot be read as a checkpoint (a flipped bit, a truncation)."""
    return ValueError(f"checkpoint {path!r} is damaged and cannot be read ({type(exc).__name__}: {exc}); "
                      "delete it to start afresh, or restore a copy")


def check_meta(path, stored: dict, expected: dict) -> None:
    """Raise :class:`CheckpointMismatchError` naming every key of ``expected`` whose stored value differs."""
    diffs = [
        f"{key}: {stored.get(key)!r} in the checkpoint, {value!r} now"
        for key, value in expected.items()
        if stored.get(key) != value
    ]
    if diffs:
        raise CheckpointMismatchError(
            f"checkpoint {os.fspath(path)!r} was written by a different computation and is not resumed ("
            + "; ".join(diffs)
            + "). Use another checkpoint path, or delete the file to start afresh."
        )


def load_checkpoint(path: str | os.PathLike, templates: dict, expected_meta: dict | None = None) -> tuple[dict, dict]:
    """Read the pytrees named in ``templates`` from ``path``, shaped like the templates.

    Args:
        path: a file written by :func:`save_checkpoint`.
        templates: name -> a pytree with the structure, leaf shapes and dtypes to expect;
            ``None`` as a template returns that entry as a list of its leaves (for
            pytrees whose shape changes, like a growing trace).
        expected_meta: keys whose stored values must match (the fingerprint).

    Returns:
        ``(trees, meta)``.

    Raises:
        CheckpointMismatchError: the fingerprint, a structure, a shape or a dtype differs.
        ValueError: the file is not a steinax checkpoint.
    """
    path = os.fspath(path)
    meta = read_meta(path)
    if expected_meta:
        check_meta(path, meta, expected_meta)
    try:
        return _load_trees(path, templates), meta
    except CheckpointMismatchError:
        raise
    except Exception as exc:  # a flipped bit fails a member's CRC: the same error naming the path
        raise _damaged(path, exc) from exc


def _load_trees(path: str, templates: dict) -> dict:
    out = {}
    with np.load(path, allow_pickle=False) as data:
        for name, template in templates.items():
            if f"{name}/treedef" not in data.files:
                raise CheckpointMismatchError(f"checkpoint {path!r} holds no {name!r}")
            count = sum(1 for k in data.files if re.fullmatch(re.escape(name) + r"/\d+", k))
            leaves = []
            for i in range(count):
                leaf = np.asarray(data[f"{name}/{i}"])
                if f"{name}/{i}/key_impl" in data.files:
                    leaf = jax.random.wrap_key_data(leaf, impl=str(data[f"{name}/{i}/key_impl"]))
                leaves.append(leaf)
            if template is None:
                out[name] = leaves
                continue
            stored = str(data[f"{name}/treedef"])
            want_leaves, treedef = jax.tree_util.tree_flatten(template)
            if stored != _structure(template):
                raise CheckpointMismatchError(
                    f"checkpoint {path!r}: {name!r} has structure {stored} there and {_structure(template)} now"
                )
            for i, (got, want) in enumerate(zip(leaves, want_leaves)):
                gs, ws = tuple(np.shape(got)), tuple(np.shape(want))
                gd = got.dtype if not _is_key(got) else "key"
                wd = np.asarray(want).dtype if not _is_key(want) else "key"
                if gs != ws or str(gd) != str(wd):
                    raise CheckpointMismatchError(
                        f"checkpoint {path!r}: leaf {i} of {name!r} is {gd}{list(gs)} there and {wd}{list(ws)} now"
                    )
            out[name] = jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(x) if not _is_key(x) else x for x in leaves])
    return out
