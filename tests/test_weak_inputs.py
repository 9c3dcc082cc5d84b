"""Older WEAK cases of issue 56's hostile-user run, each now named or kept: a checkpoint path that is not a path, a
symlinked results file, ``run`` inside ``jit``, options that would be ignored, a figure format refused before the
runs, control variates on too few draws, a truncated ``.npy``."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import steinax
from steinax.interfaces.cli import main


def _logp(x):
    return -0.5 * jnp.sum(x**2)


def test_a_checkpoint_that_is_not_a_path_is_named():
    with pytest.raises(TypeError, match="`checkpoint` must be a file path"):
        steinax.run(steinax.svgd(), _logp, jnp.zeros((5, 2)) + jnp.arange(5.0)[:, None], steps=10,
                    rng_key=jax.random.key(0), checkpoint=123)


def test_run_inside_jit_says_why_not():
    with pytest.raises(TypeError, match="cannot be called inside jax.jit"):
        jax.jit(lambda x: steinax.run(steinax.svgd(), _logp, x, steps=5, rng_key=jax.random.key(0)).particles)(
            jnp.ones((4, 2)))


def test_a_symlinked_file_is_written_through_the_link_dangling_or_not(tmp_path):
    from steinax._io import atomic_write_text

    target, link = tmp_path / "real.txt", tmp_path / "link.txt"
    os.symlink(target, link)  # dangling: real.txt does not exist yet
    atomic_write_text(link, "one")
    assert os.path.islink(link) and target.read_text() == "one"
    atomic_write_text(link, "two")
    assert os.path.islink(link) and target.read_text() == "two"


def test_options_that_would_be_ignored_are_refused(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((50, 2)))
    (tmp_path / "t.py").write_text("import jax.numpy as jnp\ntarget = lambda x: -0.5 * jnp.sum(x ** 2)\n")
    assert main(["ksd", str(tmp_path / "x.npy"), "--target", f"{tmp_path / 't.py'}:target", "--bandwidth", "2"]) == 2
    assert "`--bandwidth` (2) applies to --kernel rbf" in capsys.readouterr().err
    assert main(["bench", "blr", "--methods", "svgd,map", "--bandwidth", "1.0", "--out", str(tmp_path / "b")]) == 2
    assert "`--bandwidth` applies to svgd and cc_svgd; methods ['map']" in capsys.readouterr().err


def test_demo_refuses_a_figure_format_before_any_run(capsys):
    assert main(["demo", "--out", "fig.xyz"]) == 2
    assert "`--out` 'fig.xyz': matplotlib cannot write .xyz figures" in capsys.readouterr().err


@pytest.mark.parametrize("n", [1, 4])
def test_control_variates_on_too_few_draws_name_the_draws(n):
    from steinax.diagnostics import stein_control_variates

    with pytest.raises(ValueError, match=f"`samples`: {n} draws are too few for 5-fold cross-fitting"):
        stein_control_variates(np.random.default_rng(0).standard_normal((n, 2)), _logp, lambda x: x[..., 0])


def test_a_truncated_npy_says_so(tmp_path):
    from steinax.diagnostics import load_samples

    np.save(tmp_path / "x.npy", np.zeros((1000, 3)))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:5000])
    with pytest.raises(ValueError, match=r"truncated: the header declares 3000 values of float64 .* 24000 bytes\), the "
                                         r"file holds \d+ bytes"):
        load_samples(str(tmp_path / "cut.npy"))
