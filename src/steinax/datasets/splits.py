"""The split convention: a random train/test split standardised with the training statistics; binary labels
checked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
