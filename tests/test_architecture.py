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
