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
           "computation_fingerprint"]

FORMAT = "steinax-checkpoint/1"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class CheckpointMismatchError(ValueError):
    """A checkpoint was written by a different computation (method, target shape, optimizer, key, ...)."""


def _structure(tree) -> str:
    return _ADDRESS.sub("", str(jax.tree_util.tree_structure(tree)))


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
            h.update(_ADDRESS.sub("", repr(leaf)).encode())
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
