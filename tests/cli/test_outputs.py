"""Every command that writes refuses, before any work, an output that is one of its inputs or that cannot be
written; the input is kept byte for byte (issue: "the input file a command can overwrite")."""

import os

import numpy as np
import pytest

from steinax.interfaces import cli

TARGET = "import jax.numpy as jnp\ndef logp(v):\n    return -0.5 * jnp.sum(v ** 2)\n"


def _inputs(tmp_path):
    x = np.random.default_rng(0).normal(size=(60, 2))
    np.save(tmp_path / "draws.npy", x)
    np.savetxt(tmp_path / "draws.csv", x, delimiter=",", header="a,b", comments="")
    (tmp_path / "tgt.py").write_text(TARGET)
    return x


@pytest.fixture
def no_work(monkeypatch):
    """Thinning, the demo's runs and the benchmark's jobs fail the test if reached."""
    import steinax
    import steinax.interfaces.bench
    import steinax.diagnostics
    import steinax.posteriors.suite

    def reached(*a, **k):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr(steinax.diagnostics, "stein_thinning", reached)
    monkeypatch.setattr(steinax.diagnostics, "load_samples", reached)
    monkeypatch.setattr(steinax, "run", reached)
    monkeypatch.setattr(steinax.interfaces.bench, "_one_job", reached)
    monkeypatch.setattr(steinax.posteriors.suite, "evaluate", reached)


@pytest.mark.parametrize("victim", ["draws.npy", "draws.csv", "tgt.py", "hardlink", "symlink"])
@pytest.mark.parametrize("flag", ["--out", "--draws"])
def test_thin_refuses_an_input_as_output_and_keeps_it(victim, flag, tmp_path, capsys, no_work):
    _inputs(tmp_path)
    samples = tmp_path / ("draws.csv" if victim == "draws.csv" else "draws.npy")
    if victim == "hardlink":
        os.link(samples, tmp_path / "other.npy")
        out = tmp_path / "other.npy"
    elif victim == "symlink":
        os.symlink(samples, tmp_path / "alias.npy")
        out = tmp_path / "alias.npy"
    else:
        out = tmp_path / victim
    kept = {p: p.read_bytes() for p in (samples, tmp_path / "tgt.py")}
    code = cli.main(["thin", str(samples), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "5", flag, str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"`{flag}`" in err and "is an input of this command" in err, err
    assert {p: p.read_bytes() for p in kept} == kept


def test_thin_refuses_a_module_target_file_and_the_same_path_twice(tmp_path, capsys, monkeypatch, no_work):
    _inputs(tmp_path)
    (tmp_path / "mymodel_outputs_test.py").write_text(TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["thin", str(tmp_path / "draws.npy"), "--target", "mymodel_outputs_test:logp", "-m", "5"]
    assert cli.main(base + ["--out", str(tmp_path / "mymodel_outputs_test.py")]) == 2
    assert "is an input" in capsys.readouterr().err
    assert (tmp_path / "mymodel_outputs_test.py").read_text() == TARGET
    assert cli.main(base + ["--out", str(tmp_path / "p.csv"), "--draws", str(tmp_path / "p.csv")]) == 2
    assert "name the same file" in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()


def test_every_writing_command_refuses_an_unwritable_output_before_work(tmp_path, capsys, no_work):
    _inputs(tmp_path)
    (tmp_path / "a_file").write_text("")
    unwritable = tmp_path / "a_file" / "sub"  # a folder that cannot exist (root ignores read-only modes)
    thin = ["thin", str(tmp_path / "draws.npy"), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "5"]
    for argv in (thin + ["--out", str(unwritable / "p.csv")], thin + ["--draws", str(unwritable / "p.npy")],
                 ["demo", "--quick", "--out", str(unwritable / "demo.png")],
                 ["bench", "blr", "--quick", "--seeds", "1", "--out", str(unwritable)],
                 ["bench", "posteriors", "--quick", "--seeds", "1", "--datasets", "banana", "--out", str(unwritable)]):
        code = cli.main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "cannot write" in err and str(unwritable) in err, (argv, err)
    assert (tmp_path / "a_file").read_text() == ""


@pytest.mark.parametrize("fmt", [".npy", ".csv"])
def test_thin_writes_the_thinned_draws(fmt, tmp_path, capsys):
    x = _inputs(tmp_path)
    out = tmp_path / f"thinned{fmt}"
    assert cli.main(["thin", str(tmp_path / "draws.npy"), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "7",
                     "--out", str(tmp_path / "picks.csv"), "--draws", str(out)]) == 0
    text = capsys.readouterr().out
    assert "thinned draws written" in text and "Not comparable with `steinax ksd`" in text
    idx = np.genfromtxt(tmp_path / "picks.csv", delimiter=",", names=True)["index"].astype(int)
    got = np.load(out) if fmt == ".npy" else np.genfromtxt(out, delimiter=",", skip_header=1)
    np.testing.assert_array_equal(got, x[idx])  # the input's own rows, float64 as read, not the float32 copy


def test_thin_refuses_netcdf_draws_from_an_array(tmp_path, capsys, no_work):
    _inputs(tmp_path)
    code = cli.main(["thin", str(tmp_path / "draws.npy"), "--target", f"{tmp_path / 'tgt.py'}:logp", "-m", "5",
                     "--draws", str(tmp_path / "t.nc")])
    assert code == 2 and "NetCDF output needs a NetCDF input" in capsys.readouterr().err
