"""Helpers shared by the experiment scripts: atomic CSV and figure writing, a settings banner."""

from __future__ import annotations

import csv
import os
import tempfile


def write_csv_atomically(path: str, rows: list[dict]) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` via a temporary file and ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".csv.tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save_figure(fig, path: str) -> None:
    from steinax.cli import save_figure_atomically

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_figure_atomically(fig, path)


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
