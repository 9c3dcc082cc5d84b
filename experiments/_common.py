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
    from steinax.interfaces.plot import save_figure as save

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


def barh_figure(path: str, labels, series: dict, xlabel: str, *, colors=None, xscale=None, line=None) -> None:
    """One horizontal bar per label and series (``{legend: values}``; one series: one bar per label, coloured by
    ``colors`` if given), a vertical line at ``line``, written to ``path``: the experiments' per-case figure."""
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(labels) + 1.5))
    y = np.arange(len(labels))
    height = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        offset = (i - (len(series) - 1) / 2) * height
        ax.barh(y + offset, values, height=height, label=name, color=colors if len(series) == 1 else None)
    if line is not None:
        ax.axvline(line, color="k", lw=0.5)
    ax.set_yticks(y, labels, fontsize=7)
    if xscale == "symlog":
        ax.set_xscale("symlog", linthresh=0.01)
    elif xscale is not None:
        ax.set_xscale(xscale)
    ax.set_xlabel(xlabel)
    if len(series) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()  # long case labels: else they are cut at the figure's left edge
    save_figure(fig, path)


def resumable_rows(path: str, setting, int_fields=("split",), float_fields=()) -> list[dict]:
    """The rows of ``path`` (if it exists) run with this ``setting``, typed, for a run to resume from.

    ``setting`` is a string compared with each row's ``setting`` column, or a function of the row's
    ``method`` giving the string (when one method has settings of its own).
    """
    import os

    if not os.path.exists(path):
        return []
    setting_of = setting if callable(setting) else (lambda method: setting)
    rows = [dict(r, **{k: int(r[k]) for k in int_fields}, **{k: float(r[k]) for k in float_fields})
            for r in read_csv(path) if r.get("setting") == setting_of(r.get("method"))]
    if rows:
        print(f"   resuming: {len(rows)} rows already in {path}")
    return rows


def map_estimate(target, x0, steps: int, learning_rate: float = 0.05):
    """Adam on ``-target.logdensity`` from ``x0`` (:func:`steinax.gp.map_estimate`): the MAP that starts
    an MCMC chain, as the Stein-GP paper's HMC baselines do."""
    from steinax.gp import map_estimate as fit

    return fit(target, x0, steps=steps, learning_rate=learning_rate)


def save_npz_atomically(path: str, arrays: dict) -> None:
    """``np.savez`` of ``arrays`` to ``path``, atomically (through an open file, so no suffix is added)."""
    import numpy as np

    from steinax._io import atomic_write

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    atomic_write(path, write)


def run_steingp(target, key, num_particles: int, steps: int, learning_rate: float, method=None, optimizer=None):
    """SteinGP-J as the Stein-GP experiments run it: SVGD (median-rule RBF) with AdaGrad-momentum from
    ``num_particles`` prior draws (key ``fold_in(key, 10 + J)``); ``(particles, seconds)``, the seconds
    counted until the particles are on hand. ``method`` and ``optimizer`` replace SVGD and AdaGrad-momentum
    (the posterior suite's recommended method, for instance)."""
    import time

    import jax

    import steinax

    t0 = time.perf_counter()
    x0 = target.init_particles(jax.random.fold_in(key, 10 + num_particles), num_particles)
    res = steinax.run(method or steinax.svgd(), target, x0, steps=steps,
                      optimizer=optimizer or steinax.adagrad_momentum(learning_rate),
                      rng_key=key, progress=False, trace_every=steps)
    particles = jax.block_until_ready(res.particles)
    return particles, time.perf_counter() - t0
