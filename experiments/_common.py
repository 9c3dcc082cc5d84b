"""Helpers shared by the experiment scripts: atomic CSV and figure writing, a settings banner."""

from __future__ import annotations

import csv

from steinax._io import atomic_write_csv


def write_csv_atomically(path: str, rows: list[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` atomically (:func:`steinax._io.atomic_write_csv`)."""
    atomic_write_csv(path, rows)


def read_csv(path: str) -> list[dict]:
    """Rows of a CSV written by :func:`write_csv_atomically` (values as strings)."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def save_figure(fig, path: str) -> None:
    from steinax.plot import save_figure as save

    save(fig, path)


def banner(title: str, settings: dict) -> None:
    print(f"== {title}")
    for k, v in settings.items():
        print(f"   {k}: {v}")


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (the scripts only save figures)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
