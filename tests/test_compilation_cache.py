"""JAX's persistent compilation cache, opt-in (issue 58): ``steinax.enable_compilation_cache`` writes compiled programs
to the folder and a new process loads them; ``STEINAX_COMPILATION_CACHE`` turns it on at import; bad settings are
named."""

import os
import subprocess
import sys

import pytest

import steinax
from steinax.runtime.compilation_cache import ENV, cache_size, default_cache_dir

PROGRAM = """
import os, sys, time, jax, jax.numpy as jnp
import steinax
from steinax.runtime.compilation_cache import cache_size
steinax.enable_compilation_cache(sys.argv[1], min_compile_seconds=0.0)
f = jax.jit(lambda x: jnp.sum(jnp.sin(x) ** 2) + jnp.linalg.norm(jnp.cumsum(x)))
f(jnp.ones(37)).block_until_ready()
print(cache_size(sys.argv[1]))
"""


def _run(code, *args, env=None):
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    return out.stdout.strip().splitlines()


def test_programs_are_written_and_a_second_process_finds_them(tmp_path):
    folder = str(tmp_path / "cache")
    first = int(_run(PROGRAM, folder)[-1])
    assert first > 0 and os.listdir(folder)  # the program was written
    second = int(_run(PROGRAM, folder)[-1])
    assert second == first  # loaded, not compiled and written again


def test_the_environment_variable_enables_it_at_import(tmp_path):
    folder = str(tmp_path / "env-cache")
    code = "import jax, steinax; print(jax.config.jax_compilation_cache_dir)"
    assert _run(code, env={ENV: folder})[-1] == folder
    assert _run(code, env={ENV: ""})[-1] in ("None", "")


def test_defaults_and_bad_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == os.path.join(str(tmp_path), "steinax", "jax")
    assert cache_size(tmp_path / "missing") == 0
    with pytest.raises(ValueError, match="min_compile_seconds"):
        steinax.enable_compilation_cache(tmp_path, min_compile_seconds=-1.0)
