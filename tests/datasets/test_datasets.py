"""Offline datasets: shapes, label conventions, clear errors (issue 9, item 1)."""

import numpy as np
import pytest

from steinax import datasets


@pytest.mark.parametrize("name", sorted(datasets.available()))
def test_every_dataset_loads_with_its_stated_shape(name):
    info = datasets.available()[name]
    try:
        X, y = datasets.load(name)
    except datasets.DatasetNotFoundError as exc:
        assert "install" in str(exc)  # the error says how to get it
        pytest.skip(f"{name}: optional package not installed here")
    assert X.shape == (info.rows, info.features) and y.shape == (info.rows,)
    assert X.dtype == np.float64 and np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    if info.task == "binary":
        assert set(np.unique(y).tolist()) == {0.0, 1.0}
        assert 0.05 < y.mean() < 0.95


def test_known_values():
    """Spot checks against the published tables (first rows of the R data sets)."""
    X, y = datasets.load("concrete")
    np.testing.assert_allclose(X[0], [540.0, 0.0, 0.0, 162.0, 2.5, 1040.0, 676.0, 28.0])
    assert y[0] == pytest.approx(79.99)
    X, y = datasets.load("pima")  # MASS::Pima.tr row 1: 5 86 68 28 30.2 0.364 24 No
    np.testing.assert_allclose(X[0], [5, 86, 68, 28, 30.2, 0.364, 24])
    assert y[0] == 0.0 and int(y.sum()) == 68 + 109  # diabetic women in Pima.tr + Pima.te


def test_known_values_of_the_gp_regression_sets():
    """First rows of ISLR::Auto, MASS::cpus, vcd::SpaceShuttle and mlbench's Servo (when installed)."""
    X, y = datasets.load("autompg")
    np.testing.assert_allclose(X[0], [8, 307, 130, 3504, 12, 70, 1])
    assert y[0] == 18.0
    X, y = datasets.load("machine")
    np.testing.assert_allclose(X[0], [125, 256, 6000, 256, 16, 128])
    assert y[0] == 198.0
    X, y = datasets.load("challenger")
    np.testing.assert_allclose(X[0], [1, 66, 50])
    assert y[:3].tolist() == [0.0, 1.0, 0.0] and y.sum() == 9.0  # STS-2 had one O-ring in distress
    assert X[:, 0].tolist() == list(range(1, 24))  # 23 flights, temporal order
    try:
        X, y = datasets.load("servo")
    except datasets.DatasetNotFoundError:
        pytest.skip("servo: Debian r-cran-mlbench not installed here")
    np.testing.assert_allclose(X[0], [4, 4, 5, 4])  # motor E, screw E, pgain 5, vgain 4
    assert y[0] == 4.0


def _load_or_skip(name):
    try:
        return datasets.load(name)
    except datasets.DatasetNotFoundError as exc:
        assert "install" in str(exc)
        pytest.skip(f"{name}: optional package not installed here")


def test_known_values_of_the_gp_classification_sets():
    """Class counts and first rows as the UCI documentation states them."""
    X, y = _load_or_skip("spectf")
    assert int(y.sum()) == 212 and X[0, :3].tolist() == [59, 52, 70]  # 212 abnormal of 267; SPECTF.train row 1
    X, y = _load_or_skip("hepatitis")
    assert int(y.sum()) == 32 and X[0, :2].tolist() == [30, 2]  # 32 deaths; row 1: age 30, male
    raw = np.genfromtxt(datasets.sources._imbd_path("hepatitis", "hepatitis.data.txt"), delimiter=",", missing_values="?")
    assert np.isnan(raw[0, 18]) and X[0, 17] == np.nanmedian(raw[:, 18])  # row 1's missing protime: the median
    X, y = _load_or_skip("haberman")
    assert int(y.sum()) == 81 and [30, 64, 1] in X.tolist()  # 81 deaths within 5 years; UCI's row 1 (KEEL's order)
    X, y = _load_or_skip("breast_cancer")
    assert int(y.sum()) == 85  # 85 recurrences of 286
    # row 1: '40-49','premeno','15-19','0-2','yes','3','right','left_up','no' (ranks; quadrant one-hot)
    np.testing.assert_array_equal(X[0], [3, 2, 3, 0, 1, 2, 1, 1, 0, 0, 0, 0, 0])


def test_pm10_network():
    try:
        air = datasets.load_pm10()
    except datasets.DatasetNotFoundError as exc:
        assert "r-cran-spacetime" in str(exc)
        pytest.skip("PM10: Debian r-cran-spacetime not installed here")
    assert air.values.shape == (70, 4383) and int(np.isfinite(air.values).sum()) == 149_151
    assert str(air.dates[0]) == "1998-01-01" and str(air.dates[-1]) == "2009-12-31"
    assert air.stations[0] == "DESH001" and len(set(air.stations)) == 70
    lon, lat = air.lonlat.T  # inside Germany's bounding box (the file's bbox)
    assert np.all((5.8 < lon) & (lon < 15.1) & (47.2 < lat) & (lat < 55.1))
    assert max(len(r) for r in air.outline) > 500 and all(r.shape[1] == 2 for r in air.outline)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"unknown dataset 'covtype'; available: \['autompg', 'boston', 'breast_cancer', 'challenger'"):
        datasets.load("covtype")
    with pytest.raises(ValueError, match=r"binary labels in \{0, 1\} or \{-1, 1\}; received values \[0, 1, 2\]"):
        datasets.check_binary_labels(np.array([0, 1, 2, 1]))
    np.testing.assert_array_equal(datasets.check_binary_labels(np.array([-1, 1, 1])), [0.0, 1.0, 1.0])
    X = np.ones((10, 2))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"`X` must be finite; received NaN or inf in rows \[3\]"):
        datasets.train_test_split(X, np.zeros(10))


def test_classification_split_keeps_labels():
    X, y = np.random.default_rng(0).normal(size=(50, 3)), np.arange(50) % 2
    split = datasets.train_test_split(X, y, 0.8, seed=1, standardize_y=False)
    assert set(np.unique(split.y_train).tolist()) == {0.0, 1.0} and (split.y_mean, split.y_std) == (0.0, 1.0)
    np.testing.assert_allclose(split.X_train.mean(0), 0.0, atol=1e-12)


def test_dev_set_is_the_end_of_the_training_split_and_statistics_exclude_it():
    """Liu & Wang's dev set: the last 10% of the training rows (at most dev_max), standardised with the
    statistics of the remaining training rows; the test rows are those of the split without a dev set."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 3)) * 5 + 2, rng.normal(size=100) * 3 + 1
    plain = datasets.train_test_split(X, y, 0.9, seed=4)
    dev = datasets.train_test_split(X, y, 0.9, seed=4, dev_fraction=0.1)
    assert plain.X_dev is None and dev.X_train.shape == (81, 3) and dev.X_dev.shape == (9, 3)
    perm = np.random.default_rng(4).permutation(100)
    tr, dv = perm[:81], perm[81:90]
    np.testing.assert_allclose(dev.x_mean, X[tr].mean(0))
    np.testing.assert_allclose(dev.y_dev, (y[dv] - y[tr].mean()) / y[tr].std())
    np.testing.assert_allclose(dev.X_test * dev.x_std + dev.x_mean, plain.X_test * plain.x_std + plain.x_mean)
    assert datasets.train_test_split(X, y, 0.9, dev_fraction=0.5, dev_max=7).X_dev.shape == (7, 3)
    with pytest.raises(ValueError, match=r"`dev_fraction` must be in \[0, 1\); received 1.5"):
        datasets.train_test_split(X, y, 0.9, dev_fraction=1.5)
