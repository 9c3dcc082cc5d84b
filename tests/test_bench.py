"""`steinax bench`: tables, resuming after an interruption, clear errors (issue 9, item 4)."""

import csv

import numpy as np
import pytest

from steinax.interfaces import bench, cli


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # ~28 s; CI also runs `steinax bench bnn --quick` itself
def test_quick_bench_writes_tables_and_skips_done_jobs(tmp_path, capsys, monkeypatch):
    out = tmp_path / "b"
    calls = []
    real = bench._one_job
    monkeypatch.setattr(bench, "_one_job", lambda *a: calls.append(a[3:5]) or real(*a))
    assert cli.main(["bench", "blr", "--datasets", "pima", "--methods", "svgd", "--seeds", "2", "--quick",
                     "--out", str(out), "--no-progress"]) == 0
    rows = _rows(out / "results.csv")
    assert [(r["method"], r["seed"]) for r in rows] == [("svgd", "0"), ("svgd", "1")]
    assert all(0.5 < float(r["accuracy"]) <= 1.0 and float(r["loglik"]) < 0 for r in rows)
    summary = _rows(out / "summary.csv")
    assert summary[0]["dataset"] == "pima" and summary[0]["seeds"] == "2"
    assert "| pima | svgd | 2 |" in (out / "summary.md").read_text()
    # a rerun skips what is done; more seeds run only the new ones
    calls.clear()
    assert cli.main(["bench", "blr", "--datasets", "pima", "--methods", "svgd", "--seeds", "3", "--quick",
                     "--out", str(out), "--no-progress"]) == 0
    assert calls == [("svgd", 2)]
    assert "1 to run, 2 already" in capsys.readouterr().out


@pytest.mark.slow  # ~23 s; runs in CI's slow pass (the default suite must stay under 10 minutes)
def test_interrupted_bench_keeps_finished_jobs(tmp_path, monkeypatch):
    out = tmp_path / "b"
    real = bench._one_job
    state = {"n": 0}

    def flaky(*args):
        state["n"] += 1
        if state["n"] == 2:
            raise KeyboardInterrupt  # the user stops the run during the second job
        return real(*args)

    monkeypatch.setattr(bench, "_one_job", flaky)
    with pytest.raises(KeyboardInterrupt):
        bench.run_bench("blr", ["pima"], ["svgd"], 3, str(out), quick=True, progress=False)
    assert len(_rows(out / "results.csv")) == 1  # the first job was written before the interruption
    monkeypatch.setattr(bench, "_one_job", real)
    bench.run_bench("blr", ["pima"], ["svgd"], 3, str(out), quick=True, progress=False)
    assert sorted(r["seed"] for r in _rows(out / "results.csv")) == ["0", "1", "2"]


def test_bad_input(tmp_path, capsys):
    base = ["bench", "blr", "--quick", "--out", str(tmp_path / "b"), "--no-progress"]
    for extra, message in [(["--methods", "svgd,hmc"], "unknown method 'hmc'; available: ['svgd', 'mk_svgd', 'cc_svgd', 'matrix_avg', 'matrix_mix', 'map', 'sgld', 'psgld', 'nuts']"),
                           (["--datasets", "covtype"], "unknown dataset 'covtype'; available:"),
                           (["--datasets", "boston"], "dataset 'boston' is regression, not for task 'blr'"),
                           (["--seeds", "0"], "`seeds` must be a positive integer")]:
        assert cli.main(base + extra) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "b").exists()  # nothing written


@pytest.mark.slow  # ~40-50 s; runs in CI's slow pass
def test_baselines_and_liu_dev_set_options(tmp_path, capsys):
    """SGLD, pSGLD and NUTS rows next to SVGD; the dev-set options change the settings key (so they never mix
    with plain runs) and give finite metrics."""
    out = tmp_path / "b"
    assert cli.main(["bench", "bnn", "--datasets", "boston", "--methods", "svgd,sgld,psgld,nuts", "--seeds", "1",
                     "--quick", "--out", str(out), "--no-progress", "--dev-noise", "--b0", "0.01"]) == 0
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert [r["method"] for r in rows] == ["svgd", "sgld", "psgld", "nuts"]
    base = "n5-T20-B50-lr0.001-f0.9-b00.01-dev0.1+noise"
    assert [r["settings"] for r in rows] == [base, base + "-eps1e-05-keep2", base + "-eps0.001-keep2", base + "-nuts20"]
    assert "Method-specific settings: sgld: " + base + "-eps1e-05-keep2" in capsys.readouterr().out
    assert all(np.isfinite(float(r["rmse"])) and np.isfinite(float(r["loglik"])) for r in rows)


@pytest.mark.slow  # ~21 s; runs in CI's slow pass
def test_matrix_svgd_rows_use_kfac_and_the_mixture_step(tmp_path):
    """matrix_avg / matrix_mix run the BNN with KFAC; the preset's mixture step size is part of its key only."""
    s = bench.BenchSettings(particles=4, steps=10, batch_size=20, learning_rate=5e-3, train_fraction=0.9,
                            hidden=(6, 6), bias=False, noise_variance=0.5, prior_variance=1.0, optimizer="rmsprop",
                            mixture_learning_rate=1e-3)
    rows = bench.run_bench("bnn", ["boston"], ["matrix_avg", "matrix_mix"], 1, str(tmp_path), settings=s, progress=False)
    assert [r["method"] for r in rows] == ["matrix_avg", "matrix_mix"]
    assert all(np.isfinite(r["rmse_mean"]) for r in rows)
    assert s.key("matrix_mix") == s.key() + "-mixlr0.001" and s.key("matrix_avg") == s.key()
    assert bench.PRESETS["bnn"]["matrix_svgd"]["mixture_learning_rate"] == 1e-3


def test_settings_are_checked_before_any_run():
    with pytest.raises(ValueError, match="`dev_noise` needs a development set"):
        bench.BenchSettings(particles=2, steps=2, batch_size=2, learning_rate=0.1, train_fraction=0.5, dev_noise=True)
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        bench.BenchSettings(particles=2, steps=2, batch_size=2, learning_rate=0.1, train_fraction=0.5, optimizer="sgd")


# ---------------------------------------------------------------- issue 24: shared folders, repeats, Ctrl-C

_FAKE = """
import sys, time
from steinax.interfaces import bench

def fake(task, X, y, method, seed, s):
    time.sleep(0.05)
    return {"rmse": "", "loglik": -0.5, "accuracy": 0.75, "wall_time": 0.05}

bench._one_job = fake
bench.run_bench("blr", ["pima"], [sys.argv[2]], 12, sys.argv[1], quick=True, progress=False)
"""


def test_two_processes_sharing_out_lose_nothing(tmp_path):
    """Was: both exited 0 and one process's finished rows were overwritten by the other's."""
    import subprocess
    import sys

    out = str(tmp_path / "shared")
    procs = [subprocess.Popen([sys.executable, "-c", _FAKE, out, m], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for m in ("svgd", "map")]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]
    rows = _rows(tmp_path / "shared" / "results.csv")
    assert sorted((r["method"], int(r["seed"])) for r in rows) == sorted((m, k) for m in ("svgd", "map") for k in range(12))


def test_repeated_methods_or_datasets_are_refused(tmp_path, capsys):
    for flag, value in (("--methods", "svgd,svgd"), ("--datasets", "pima,pima")):
        code = cli.main(["bench", "blr", "--quick", "--out", str(tmp_path / "b"), "--no-progress", flag, value])
        err = capsys.readouterr().err
        assert code == 2 and "more than once" in err and err.count("\n") == 1, err
    assert not (tmp_path / "b" / "results.csv").exists()


def test_ctrl_c_prints_one_line_and_keeps_rows(tmp_path, capsys, monkeypatch):
    state = {"n": 0}

    def fake(*args):
        state["n"] += 1
        if state["n"] == 2:
            raise KeyboardInterrupt
        return {"rmse": "", "loglik": -0.5, "accuracy": 0.75, "wall_time": 0.01}

    monkeypatch.setattr(bench, "_one_job", fake)
    out = tmp_path / "b"
    code = cli.main(["bench", "blr", "--datasets", "pima", "--methods", "svgd", "--seeds", "3", "--quick",
                     "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 130 and "interrupted; finished jobs are kept in" in err and "Traceback" not in err
    assert len(_rows(out / "results.csv")) == 1
