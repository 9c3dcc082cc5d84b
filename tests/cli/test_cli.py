import pytest
import os
import stat

from steinax._io import default_file_mode

from steinax.interfaces.cli import main


@pytest.mark.slow  # ~40-50 s; runs in CI's slow pass
def test_demo_writes_figure_and_table(tmp_path, capsys):
    out = tmp_path / "demo.png"
    assert main(["demo", "--quick", "--particles", "12", "--steps", "20", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for name in ("gaussian", "star", "double_banana", "sine"):
        assert name in text
    assert "final KSD" in text and "MMD^2" in text and "x exact" in text and "settled" in text
    # the comparable number: MMD^2 over that of n exact draws, positive and finite on every row
    ratios = [float(line.split()[6]) for line in text.splitlines() if line.split()[:1] and line.split()[0] in
              ("gaussian", "star", "double_banana", "sine")]
    assert len(ratios) == 24 and all(0 < r < float("inf") for r in ratios)
    for name in ("svgd", "mk_svgd", "cc_svgd", "matrix_avg", "matrix_mix", "svn"):
        assert f" {name} " in text
    assert out.stat().st_size > 10_000
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    assert stat.S_IMODE(out.stat().st_mode) == default_file_mode()  # was 0600 (tempfile.mkstemp's mode)


@pytest.mark.slow  # ~17 s; CI also runs `steinax demo --quick` itself
def test_demo_methods_option(tmp_path, capsys):
    assert main(["demo", "--quick", "--particles", "8", "--steps", "5", "--methods", "svgd,svn", "--out", ""]) == 0
    text = capsys.readouterr().out
    assert " svn " in text and " mk_svgd " not in text
    assert main(["demo", "--methods", "svgd,newton", "--out", ""]) == 2
    assert "`--methods` must name some of" in capsys.readouterr().err


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert main([]) == 2


@pytest.mark.slow  # ~30 s
def test_demo_puts_each_runs_warnings_in_its_row_not_the_log(tmp_path, capsys, recwarn):
    """Was: the demo ended with 15 ConvergenceWarnings from its own fixed-length runs and its table did not say which
    rows they belonged to. Now each run's warnings are caught and named under the table, keyed by the row's letter."""
    assert main(["demo", "--quick", "--particles", "12", "--steps", "150", "--methods", "svgd", "--out", ""]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.split()[:1] and line.split()[0] in
            ("gaussian", "star", "double_banana", "sine")]
    marked = [line for line in rows if "(" in line]
    assert len(recwarn) == 0 and len(marked) == 4  # 150 steps settle nowhere: every row marked, nothing in the log
    for i, line in enumerate(marked):  # every marked row has its reason below the table
        letter = chr(ord("a") + i)
        assert f"({letter})" in line and f"({letter}) {line.split()[0]}, svgd:" in text
