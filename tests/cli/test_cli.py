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


@pytest.mark.slow  # ~45 s: one steinax.sample run on mtcars (float64) and the toy table
def test_demo_starts_with_steinax_sample_on_a_real_posterior(capsys):
    assert main(["demo", "--quick", "--posterior", "mtcars_regression", "--particles", "8", "--steps", "5",
                 "--methods", "svgd", "--out", ""]) == 0
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in text.splitlines()
            if line.split()[:1] and line.split()[0] in ("warm_start", "particles", "sample")}
    assert set(rows) == {"warm_start", "particles", "sample"}
    # the answer: within 0.2 reference sds (the goal; ESS >= 400 gives a Monte Carlo sd of a mean <= 0.05)
    assert float(rows["sample"][3]) < 0.2 and "ok: True" in text
    assert text.index("steinax.sample") < text.index("double_banana")  # first, then the toys


def test_demo_names_an_unknown_posterior_before_running_anything(capsys):
    assert main(["demo", "--posterior", "mtcars", "--out", ""]) == 2
    err = capsys.readouterr().err
    assert "`--posterior` must be 'none' or one of" in err and "mtcars_regression" in err and "'mtcars'" in err


def test_bench_yardstick_refuses_bad_arguments_before_any_run(tmp_path, capsys):
    """An unknown sampler, a bad chain count or an unknown posterior is refused, naming the argument, with nothing
    written."""
    out = tmp_path / "y"
    # the unknown name must never become a sampler (this test once named 'mams', then ran it on every posterior)
    assert main(["bench", "posteriors", "--yardstick", "--methods", "no_such_sampler", "--out", str(out)]) == 2
    assert "`--methods`: 'no_such_sampler'" in capsys.readouterr().err
    assert main(["bench", "posteriors", "--yardstick", "--chains", "256,x", "--out", str(out)]) == 2
    assert "`--chains`" in capsys.readouterr().err
    assert main(["bench", "posteriors", "--yardstick", "--datasets", "bananas", "--out", str(out)]) == 2
    assert not out.exists()


@pytest.mark.parametrize("extra, named", [(["--steps", "-1"], "`--steps`"), (["--steps", "0"], "`--steps`"),
                                          (["--chains", "1000000000"], "`--chains`"), (["--seeds", "0"], "`--seeds`"),
                                          (["--seeds", "-2"], "`--seeds`"), (["--chains", "8,8"], "`--chains` names [8]"),
                                          (["--methods", "chees,chees"], "`--methods` names ['chees']")])
def test_bench_yardstick_names_each_bad_option_in_one_line(tmp_path, capsys, extra, named):
    """Issue 56: each of these ran (a raw MLIRError, memory without bound, empty tables with exit 0, 0 read as 20,
    jobs run twice); now exit 2 with one line naming the option, before any run."""
    out = tmp_path / "y"
    argv = ["bench", "posteriors", "--yardstick", "--datasets", "banana", "--methods", "chees", "--chains", "8"]
    assert main(argv + extra + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_results_file_leaves_no_lock_file_behind(tmp_path):
    from steinax._io import append_row, read_rows

    path = str(tmp_path / "results.csv")
    append_row(path, {"a": 1, "b": 2}, ["a", "b"], ["a"])
    append_row(path, {"a": 1, "b": 3}, ["a", "b"], ["a"])  # the same key: kept once
    assert [r["b"] for r in read_rows(path)] == ["2"] and sorted(os.listdir(tmp_path)) == ["results.csv"]


@pytest.mark.slow  # a few compilations
def test_bench_yardstick_quick_run(tmp_path, capsys):
    out = tmp_path / "y"
    assert main(["bench", "posteriors", "--yardstick", "--quick", "--datasets", "banana", "--methods", "chees,meads",
                 "--chains", "8", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| banana | 2 |" in text and "Goal at 8" in text
    assert (out / "results.csv").exists() and (out / "summary.md").exists()
