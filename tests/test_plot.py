"""steinax.interfaces.plot: panels, labels and atomic saving."""

import os
import stat

import jax
import matplotlib
import numpy as np
import pytest

import steinax
from steinax._io import default_file_mode
from steinax.interfaces.plot import plot_marginals, plot_particles, plot_trace, save_figure

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def mk_result():
    return steinax.run(steinax.mk_svgd(), steinax.targets.DoubleBanana(), jax.random.normal(jax.random.key(0), (30, 2)),
                       steps=20, optimizer=steinax.adagrad_momentum(0.05), rng_key=jax.random.key(1), trace_every=5,
                       progress=False)


def test_trace_has_a_panel_per_diagnostic(mk_result, tmp_path):
    fig = plot_trace(mk_result)
    names = [ax.get_ylabel() for ax in fig.axes]
    assert names[:2] == ["squared KSD (IMQ)", "RMS direction norm"]
    assert "weights" in names  # MK-SVGD's kernel weights, one line per kernel
    weights_ax = fig.axes[names.index("weights")]
    assert len(weights_ax.get_lines()) == 10 and all(ax.get_xlabel() == "step" for ax in fig.axes)
    np.testing.assert_array_equal(weights_ax.get_lines()[0].get_xdata(), np.asarray(mk_result.trace.step))
    fig2 = plot_trace(mk_result, axes=fig.axes, label="again")  # overlay on the same axes
    assert fig2 is fig and len(fig.axes[0].get_lines()) == 2
    save_figure(fig, tmp_path / "trace.png")
    assert stat.S_IMODE(os.stat(tmp_path / "trace.png").st_mode) == default_file_mode()
    with pytest.raises(ValueError, match="`axes` must hold"):
        plot_trace(mk_result, axes=fig.axes[:1])


def test_marginals_against_exact_samples_and_grid():
    target = steinax.targets.DoubleBanana()
    x = np.asarray(target.sample(jax.random.key(2), 500))
    fig = plot_marginals(x, target)  # reference from target.sample
    assert len(fig.axes) == 2 and fig.axes[0].get_legend() is not None
    fig = plot_marginals(x, lambda z: target.logdensity(z))  # a bare log-density: grid-integrated marginals
    line = fig.axes[0].get_lines()[0]
    xs, ys = line.get_xdata(), line.get_ydata()
    assert abs(np.trapezoid(ys, xs) - 1.0) < 0.05  # a density
    with pytest.raises(ValueError, match="`particles` must have shape"):
        plot_particles(np.zeros((5, 1)))
