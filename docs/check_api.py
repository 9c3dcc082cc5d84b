"""API coverage: every public name of steinax has an entry in the API reference (docs/api.md and the guides).

    python docs/check_api.py

A public name is one in the ``__all__`` of ``steinax`` or of one of its public subpackages and
modules (:data:`PACKAGES`). It is documented when a ``::: path`` directive of a docs page
(mkdocstrings; ``docs/api.md``, or a guide that documents its own module) resolves to the same object, or to the module that defines it (a module directive
renders the module's public members), or to the module whose ``__all__`` lists it. Exit status 1 lists the undocumented names. The docstring
examples of every module are run by ``tests/test_docs.py``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import types

PACKAGES = ("steinax", "steinax.stein", "steinax.diagnostics", "steinax.particles", "steinax.kernels",
            "steinax.targets", "steinax.metrics", "steinax.models", "steinax.gp", "steinax.posteriors",
            "steinax.baselines.mcmc", "steinax.baselines.vi", "steinax.unfold", "steinax.runtime.checkpoint", "steinax.interfaces.plot", "steinax.datasets",
            "steinax.runtime.sharding", "steinax.pipeline", "steinax.particles.optim", "steinax.posteriors.yardstick")
DOCS = os.path.dirname(os.path.abspath(__file__))


def resolve(path: str):
    """The object a dotted ``path`` names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"nothing importable in {path!r}")


def public_names(packages=PACKAGES) -> dict[str, object]:
    """``{"package.name": object}`` for every name in the packages' ``__all__``."""
    out = {}
    for pkg in packages:
        module = importlib.import_module(pkg)
        for name in getattr(module, "__all__", ()):
            out[f"{pkg}.{name}"] = getattr(module, name)
    return out


def undocumented(names: dict[str, object], page_text: str) -> list[str]:
    """The names of ``names`` that no ``:::`` directive of ``page_text`` documents (module docstring)."""
    targets = [resolve(p) for p in re.findall(r"^::: ([\w.]+)", page_text, flags=re.M)]
    module_objs = [t for t in targets if isinstance(t, types.ModuleType)]
    modules = {t.__name__ for t in module_objs}
    ids = {id(t) for t in targets}
    missing = []
    for path, obj in names.items():
        if isinstance(obj, types.ModuleType):  # a subpackage: its own names are checked, or a directive renders it
            if obj.__name__ in modules or obj.__name__ in PACKAGES:
                continue
        elif id(obj) in ids or getattr(obj, "__module__", None) in modules or path.rsplit(".", 1)[0] in modules:
            continue  # the object itself, the module defining it, or the module listing it in `__all__`
        elif any(getattr(m, path.rsplit(".", 1)[1], None) is obj for m in module_objs):
            continue  # a constant of a documented module
        missing.append(path)
    return sorted(missing)


def docs_text(folder: str = DOCS) -> str:
    """Every Markdown page of the docs, concatenated."""
    import glob

    return "\n".join(open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(folder, "**", "*.md"),
                                                                               recursive=True)))


def main() -> int:
    missing = undocumented(public_names(), docs_text())
    print(f"check_api: {len(public_names())} public names; {len(missing)} without an API entry in the docs")
    for path in missing:
        print("  " + path)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
