"""Every ```python block of the README and the docs runs (one namespace per page, in order, in a temp folder).

Blocks are executed as written except that ``steps=N`` above 300 is cut to 300 and NUTS runs
are shortened, to keep the suite fast; what is printed is not compared.
"""

import glob
import os
import re

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PAGES = ["README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
)
PAGES = [p for p in PAGES if "```python" in open(os.path.join(ROOT, p)).read()]


def _blocks(page):
    text = open(os.path.join(ROOT, page)).read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def _shorten(code):
    code = re.sub(r"steps=(\d+)", lambda m: f"steps={min(int(m.group(1)), 300)}", code)
    return code.replace("num_warmup=300, num_samples=300", "num_warmup=150, num_samples=150")


def test_pages_with_code_are_found():
    assert "README.md" in PAGES and os.path.join("docs", "getting-started.md") in PAGES
    assert sum(len(_blocks(p)) for p in PAGES) >= 10


# the GP page trains several GPs (~45 s), the getting-started page runs every method (~30 s) and the posteriors
# page a run until settled and both collapse checks (~30 s): CI's slow
# pass runs them, keeping the default suite under 10 minutes
_SLOW_PAGES = {os.path.join("docs", "methods", "gp.md"), os.path.join("docs", "getting-started.md"),
               os.path.join("docs", "posteriors.md"), os.path.join("docs", "tools", "control-variates.md")}


# pages whose code needs an optional extra that may not build everywhere (goodpoints compiles Cython)
_NEEDS = {os.path.join("docs", "tools", "compression.md"): "goodpoints.jax.dtc"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p in _SLOW_PAGES else p for p in PAGES])
def test_docs_snippets_run(page, tmp_path, monkeypatch):
    if page in _NEEDS:
        pytest.importorskip(_NEEDS[page], reason=f"{page} uses an optional extra")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for i, code in enumerate(_blocks(page)):
        exec(compile(_shorten(code), f"{page}[block {i}]", "exec"), namespace)


def _modules_with_examples():
    import pkgutil

    import steinax

    names = []
    for info in pkgutil.walk_packages(steinax.__path__, "steinax."):
        if info.name == "steinax.interfaces.cli":
            continue
        path = os.path.join(ROOT, "src", *info.name.split(".")) + ("/__init__.py" if info.ispkg else ".py")
        if os.path.exists(path) and ">>>" in open(path).read():
            names.append(info.name)
    return names


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples_run(module):
    """The ``>>>`` examples of the docstrings (rendered in the API reference) run and print what they say."""
    import doctest
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0 and result.failed == 0, result


def test_every_file_the_docs_link_is_tracked_by_git():
    """A link that resolves only in a working tree (an ignored figure) breaks `mkdocs --strict` in CI."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    missing = []
    for page in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True):
        if os.path.relpath(page, ROOT).startswith(os.path.join("docs", "generated")):
            continue  # the gallery, written with its figures by every docs build (mkdocs-gallery)
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", open(page).read()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(page), target)), ROOT)
            if path.startswith(os.path.join("docs", "generated") + os.sep):
                continue  # a gallery page: the docs build writes it (the test failed after any local build)
            if os.path.exists(os.path.join(ROOT, path)) and os.path.isfile(os.path.join(ROOT, path)) and path not in tracked:
                missing.append(f"{os.path.relpath(page, ROOT)} -> {path}")
    assert not missing, f"linked from the docs but not committed (check .gitignore): {missing}"


def _check_site():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_site", os.path.join(ROOT, "docs", "check_site.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MATHS_PAGE = """<html><head>{scripts}</head><body><p><span class="arithmatex">\\(x^2 + \\frac{{1}}{{2}}\\)</span></p>
<img src="{image}"></body></html>"""


def _tiny_site(root, scripts, image):
    import shutil

    shutil.copytree(os.path.join(ROOT, "docs", "javascripts"), os.path.join(root, "javascripts"))
    open(os.path.join(root, "figure.png"), "wb").write(b"\x89PNG\r\n")
    os.makedirs(os.path.join(root, "page"))
    with open(os.path.join(root, "page", "index.html"), "w") as f:
        f.write(_MATHS_PAGE.format(scripts=scripts, image=image))


_SCRIPTS = ('<script src="../javascripts/mathjax.js"></script>'
            '<script src="../javascripts/vendor/mathjax/tex-chtml.js"></script>')


def test_site_check_finds_broken_images_and_external_resources(tmp_path):
    """The static half of docs/check_site.py (no browser): a missing image and a CDN script are failures."""
    check = _check_site()
    _tiny_site(str(tmp_path), '<script src="https://cdn.example.org/mathjax.js"></script>', "../missing.png")
    failures, spans = check.static_failures(str(tmp_path), os.path.join("page", "index.html"))
    assert spans == 1
    assert any("broken image ../missing.png" in f for f in failures)
    assert any("external resource https://cdn.example.org" in f for f in failures)
    _tiny_site(str(tmp_path / "good"), _SCRIPTS, "../figure.png")
    assert check.static_failures(str(tmp_path / "good"), os.path.join("page", "index.html")) == ([], 1)


@pytest.mark.slow
def test_site_check_renders_maths_in_a_headless_browser(tmp_path):
    """The browser half: the vendored MathJax renders a page's maths; a page without it is reported."""
    import shutil

    if shutil.which("chromium") is None:
        pytest.skip("no chromium (Debian: apt-get install chromium); .ci/run installs it")
    check = _check_site()
    _tiny_site(str(tmp_path / "good"), _SCRIPTS, "../figure.png")
    _tiny_site(str(tmp_path / "bad"), "", "../figure.png")
    assert check.main([str(tmp_path / "good")]) == 0
    assert check.main([str(tmp_path / "bad")]) == 1
    server, base = check._serve(str(tmp_path / "bad"))
    try:
        assert check.rendered_failures("chromium", base + "page/index.html", "page", 1) == [
            "page: 0 of 1 maths spans rendered by MathJax"]
    finally:
        server.shutdown()


def test_module_docstrings_that_docstrings_cite_are_reachable():
    """A public function whose docstring cites its "module docstring" lives in a module that ``help()`` can reach:
    no package attribute of the module's name shadows it (``steinax.mk_svgd`` once hid ``particles/mk_svgd.py``)."""
    import inspect
    import pydoc
    import types

    import steinax

    packages = [steinax] + [getattr(steinax, p) for p in ("stein", "diagnostics", "particles", "kernels", "targets")]
    cited = {}
    for pkg in packages:
        for name in pkg.__all__:
            obj = getattr(pkg, name)
            if "module docstring" in (inspect.getdoc(obj) or "") and getattr(obj, "__module__", None):
                cited[f"{pkg.__name__}.{name}"] = obj.__module__
    assert "steinax.mk_svgd" in cited and len(cited) > 10
    shadowed = {k: m for k, m in cited.items() if not isinstance(pydoc.locate(m), types.ModuleType)}
    assert not shadowed, shadowed


def _check_api():
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_api", os.path.join(ROOT, "docs", "check_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_an_api_entry():
    """docs/check_api.py: every name in the public packages' ``__all__`` has a ``:::`` entry in the docs."""
    check = _check_api()
    names = check.public_names()
    assert len(names) > 200 and "steinax.run" in names and "steinax.targets.from_pymc" in names
    assert check.undocumented(names, check.docs_text()) == []


def test_api_check_fails_on_an_undocumented_public_name(monkeypatch):
    """Adding a public name without an entry makes the check fail, naming it."""
    import steinax

    check = _check_api()

    def shiny_new_tool(x):
        """A public function nobody documented."""
        return x

    shiny_new_tool.__module__ = "steinax"
    monkeypatch.setattr(steinax, "shiny_new_tool", shiny_new_tool, raising=False)
    monkeypatch.setattr(steinax, "__all__", [*steinax.__all__, "shiny_new_tool"])
    assert check.undocumented(check.public_names(), check.docs_text()) == ["steinax.shiny_new_tool"]
    assert check.main() == 1
