"""Figures for particle runs and samples (needs the ``plot`` extra: matplotlib).

* :func:`plot_particles`: particles over the filled density contours of a 2-D
  target, with axis labels, a colour bar and a legend.
* :func:`plot_trace`: the run's trace against the step: the squared KSD (log
  scale), the direction norm, and every scalar the method records (SVGD's
  bandwidth, MK-SVGD's kernel weights).
* :func:`plot_marginals`: 1-D histograms of each coordinate of the samples
  against the target's marginals (from exact target samples, or the density
  integrated on a grid for 2-D targets).

Every function draws on axes it is given (or makes a figure) and returns the
figure; saving is the caller's (``steinax.interfaces.plot.save_figure`` writes atomically).
"""

from __future__ import annotations

import os

import numpy as np

from steinax._io import atomic_write

__all__ = ["plot_particles", "plot_trace", "plot_marginals", "save_figure", "density_grid"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError("steinax.interfaces.plot needs matplotlib: pip install matplotlib (the steinax `plot` extra)") from exc
    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg") and not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.name == "nt")


def check_figure_path(path, name: str = "path") -> None:
    """Refuse, naming ``name``, a figure path whose extension matplotlib cannot write (before any work: a demo that
    refused ``fig.xyz`` after every run lost them)."""
    from matplotlib.figure import Figure

    fmt = str(path).rsplit(".", 1)[-1].lower() if "." in os.path.basename(str(path)) else "png"
    supported = Figure().canvas.get_supported_filetypes()
    if fmt not in supported:
        raise ValueError(f"`{name}` {str(path)!r}: matplotlib cannot write .{fmt} figures; expected one of "
                         f"{', '.join('.' + k for k in sorted(supported))}")


def save_figure(fig, path: str, dpi: int = 110) -> None:
    """Save ``fig`` to ``path`` atomically (temporary file, then rename; mode as ``open`` gives)."""
    fmt = str(path).rsplit(".", 1)[-1].lower() if "." in str(path) else "png"
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format=fmt))


def density_grid(logdensity, extent, resolution: int = 200):
    """``(gx, gy, density)`` of ``exp(logdensity)`` on a ``resolution``² grid over ``extent = (x0, x1, y0, y1)``.

    The density is normalised to integrate to one over the grid (unnormalised
    log-densities are fine).
    """
    import jax
    import jax.numpy as jnp

    x_lo, x_hi, y_lo, y_hi = extent
    gx, gy = np.meshgrid(np.linspace(x_lo, x_hi, resolution), np.linspace(y_lo, y_hi, resolution))
    grid = jnp.asarray(np.stack([gx.ravel(), gy.ravel()], axis=1), jnp.float32)
    logd = np.asarray(jax.vmap(logdensity)(grid), np.float64).reshape(gx.shape)
    dens = np.exp(logd - np.max(logd))
    cell = (x_hi - x_lo) / (resolution - 1) * (y_hi - y_lo) / (resolution - 1)
    return gx, gy, dens / (dens.sum() * cell)


def _logdensity_of(target):
    if target is None:
        return None
    return target.logdensity if hasattr(target, "logdensity") else target


def _extent_of(particles, margin=0.15):
    lo, hi = particles.min(axis=0), particles.max(axis=0)
    pad = margin * np.maximum(hi - lo, 1e-6)
    return (lo[0] - pad[0], hi[0] + pad[0], lo[1] - pad[1], hi[1] + pad[1])


def plot_particles(
    particles,
    target=None,
    *,
    extent=None,
    ax=None,
    title: str | None = None,
    labels=("$x_1$", "$x_2$"),
    colorbar: bool = True,
    initial=None,
):
    """Particles (first two coordinates) over the density contours of a 2-D target.

    Args:
        particles: ``[n, d]`` with ``d >= 2`` (the first two coordinates are drawn).
        target: a log-density of one ``[2]`` point or a steinax target; ``None`` draws the particles alone.
        extent: ``(x0, x1, y0, y1)``; default: the particles' range plus 15%.
        ax: matplotlib axes (default: a new figure).
        initial: optional ``[n, d]`` initial particles, drawn faintly.

    Returns:
        The figure.
    """
    plt = _pyplot()
    p = np.asarray(particles, np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"`particles` must have shape [n, d] with d >= 2; received shape {p.shape}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.4, 3.8))
    fig = ax.figure
    extent = _extent_of(p) if extent is None else extent
    logdensity = _logdensity_of(target)
    if logdensity is not None:
        gx, gy, dens = density_grid(logdensity, extent)
        filled = ax.contourf(gx, gy, dens, levels=15, cmap="Blues")
        if colorbar:
            fig.colorbar(filled, ax=ax, label="target density")
    if initial is not None:
        q = np.asarray(initial)
        ax.scatter(q[:, 0], q[:, 1], s=6, c="0.55", edgecolors="none", label="initial")
    ax.scatter(p[:, 0], p[:, 1], s=8, c="crimson", edgecolors="none", label=f"particles (n = {p.shape[0]})")
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.legend(loc="upper right", fontsize="x-small", framealpha=0.8)
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def plot_trace(result, *, axes=None, label: str | None = None):
    """The trace of a :func:`steinax.run` result against the step.

    One panel for the squared KSD (IMQ diagnostic kernel, log scale), one for
    the direction norm, and one for each entry of the method's diagnostics
    (SVGD's bandwidth; MK-SVGD's kernel weights, drawn together). Pass the
    ``axes`` of an earlier call and a ``label`` to overlay several runs.

    Returns:
        The figure.
    """
    plt = _pyplot()
    trace = result.trace if hasattr(result, "trace") else result
    step = np.asarray(trace.step)
    method = {k: np.asarray(v) for k, v in dict(trace.method).items()}
    panels = ["ksd", "direction_norm"] + sorted(method)
    if axes is None:
        fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.0), squeeze=False)
        axes = axes[0]
    axes = list(np.ravel(axes))
    if len(axes) < len(panels):
        raise ValueError(f"`axes` must hold {len(panels)} axes for this trace; received {len(axes)}")
    fig = axes[0].figure
    for ax, name in zip(axes, panels):
        if name == "ksd":
            values, ylabel = np.asarray(trace.ksd), "squared KSD (IMQ)"
            ax.set_yscale("log")
        elif name == "direction_norm":
            values, ylabel = np.asarray(trace.direction_norm), "RMS direction norm"
        else:
            values, ylabel = method[name], name.replace("_", " ")
        if values.ndim == 1:
            ax.plot(step, values, label=label)
        else:  # one line per component (e.g. kernel weights)
            flat = values.reshape(values.shape[0], -1)
            for j in range(flat.shape[1]):
                ax.plot(step, flat[:, j], lw=1, label=f"{label + ' ' if label else ''}{name}[{j}]")
            if flat.shape[1] <= 12:
                ax.legend(fontsize="xx-small", ncol=2)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
    if label is not None:
        axes[0].legend(fontsize="x-small")
    fig.tight_layout()
    return fig


def plot_marginals(samples, target=None, *, reference=None, extent=None, bins: int = 40, axes=None, names=None):
    """1-D histograms of each coordinate of ``samples`` against the target's marginals.

    The target's marginals come from ``reference`` (exact samples, drawn as a
    line histogram), else from ``target.sample`` when the target has one, else,
    for a 2-D log-density, from the density integrated on a grid.

    Returns:
        The figure.
    """
    plt = _pyplot()
    x = np.asarray(samples, np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"`samples` must have shape [n] or [n, d]; received shape {x.shape}")
    d = x.shape[1]
    names = [f"$x_{{{i + 1}}}$" for i in range(d)] if names is None else list(names)
    if reference is None and target is not None and hasattr(target, "sample"):
        import jax

        reference = target.sample(jax.random.key(0), 20_000)
    ref = None if reference is None else np.asarray(reference, np.float64).reshape(-1, d)
    if axes is None:
        fig, axes = plt.subplots(1, d, figsize=(3.2 * d, 2.8), squeeze=False)
        axes = axes[0]
    axes = list(np.ravel(axes))
    fig = axes[0].figure
    grid_marginals = None
    if ref is None and target is not None and d == 2:
        ext = _extent_of(x, 0.5) if extent is None else extent
        gx, gy, dens = density_grid(_logdensity_of(target), ext)
        dx, dy = gx[0, 1] - gx[0, 0], gy[1, 0] - gy[0, 0]
        grid_marginals = [(gx[0], dens.sum(axis=0) * dy), (gy[:, 0], dens.sum(axis=1) * dx)]
    for i, ax in enumerate(axes[:d]):
        lo = x[:, i].min() if ref is None else min(x[:, i].min(), np.quantile(ref[:, i], 0.001))
        hi = x[:, i].max() if ref is None else max(x[:, i].max(), np.quantile(ref[:, i], 0.999))
        edges = np.linspace(lo, hi, bins + 1)
        ax.hist(x[:, i], bins=edges, density=True, alpha=0.6, color="crimson", label="samples")
        if ref is not None:
            ax.hist(ref[:, i], bins=edges, density=True, histtype="step", color="k", label="target")
        elif grid_marginals is not None:
            ax.plot(*grid_marginals[i], color="k", label="target")
        ax.set_xlabel(names[i])
        ax.set_ylabel("density")
    axes[0].legend(fontsize="x-small")
    fig.tight_layout()
    return fig
