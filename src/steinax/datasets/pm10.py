"""The rural PM10 data (R spacetime's ``air``) of the Stein GP air-quality experiment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from steinax.datasets.sources import _SPACETIME_DIRS, _debian_path, _rdata, _require


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
