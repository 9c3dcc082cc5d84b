"""The architecture as a contract (pyproject.toml, ``[tool.importlinter]``; docs/design.md, "Layout"): no import circle
among the siblings of any package, and the layers from the interfaces down to the infrastructure, checked by
import-linter on every test run; and the contract bites: a circle added to a copy of the package breaks it, named."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "pyproject.toml")


def _lint(pythonpath=None):
    lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([lint, "--no-cache", CONFIG], capture_output=True, text=True, env=env, timeout=300)


def test_contracts_are_kept():
    out = _lint()
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "2 kept, 0 broken" in out.stdout


def test_an_added_circle_breaks_the_contract(tmp_path):
    import steinax

    copy = tmp_path / "steinax"
    shutil.copytree(os.path.dirname(steinax.__file__), copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "particles" / "loop" / "options.py", "a") as fh:  # fixed.py imports options.py: now both ways
        fh.write("\nfrom steinax.particles.loop import fixed  # noqa: E402  (the circle under test)\n")
    out = _lint(str(tmp_path))
    assert out.returncode != 0
    assert "No import circles among the siblings of any package BROKEN" in out.stdout, out.stdout[-3000:]
    assert "steinax.particles.loop" in out.stdout and ("fixed" in out.stdout and "options" in out.stdout)


def test_old_module_paths_are_the_moved_modules():
    """Every moved module keeps its old import path (``steinax._aliases``): ``import``, ``from ... import`` and
    attribute access all give the module at its new place, the same object."""
    import importlib

    import steinax
    from steinax._aliases import ALIASES

    for old, new in ALIASES.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
        parent, name = old.rsplit(".", 1)
        if old != "steinax.particles.run":  # that name is the function run: importing the old path must not rebind it
            assert getattr(importlib.import_module(parent), name) is importlib.import_module(new), old
    assert callable(steinax.particles.run) and steinax.particles.run is steinax.run
    from steinax.checkpoint import save_checkpoint
    from steinax.runtime.checkpoint import save_checkpoint as moved

    assert save_checkpoint is moved and steinax.mcmc.nuts is importlib.import_module("steinax.baselines.mcmc").nuts
