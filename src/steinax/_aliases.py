"""Public aliases of modules that moved: an old import path (``import steinax.particles.converge``) keeps working and
gives the module at its new place (the same object, not a copy), loaded when first imported.

One mechanism for every move: a finder on ``sys.meta_path`` that answers for the names in :data:`ALIASES` only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["ALIASES", "install", "attribute", "register_shadowed"]

ALIASES = {
    # issue 48: the run loop's modules became the package steinax.particles.loop
    "steinax.particles.run": "steinax.particles.loop",
    "steinax.particles.converge": "steinax.particles.loop",
    "steinax.particles.interrupt": "steinax.particles.loop.interrupt",
    # issue 48: single-file modules into folders that name their roles
    "steinax.mcmc": "steinax.baselines.mcmc",
    "steinax.vi": "steinax.baselines.vi",
    "steinax.cli": "steinax.interfaces.cli",
    "steinax.bench": "steinax.interfaces.bench",
    "steinax.plot": "steinax.interfaces.plot",
    "steinax.checkpoint": "steinax.runtime.checkpoint",
    "steinax.sharding": "steinax.runtime.sharding",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):  # the module at its new place is already executed
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in ALIASES:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(ALIASES[fullname]))


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


def attribute(package: str, name: str):
    """``package.name`` for an alias (a package's ``__getattr__``: ``steinax.particles.converge`` without an import
    statement, as before the move); ``AttributeError`` for any other name."""
    alias = f"{package}.{name}"
    if alias in ALIASES:
        return importlib.import_module(alias)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def register_shadowed(package) -> None:
    """For aliases under ``package`` whose name the package binds to something else (``steinax.particles.run`` is the
    function ``run``): put the module in ``sys.modules`` now. A first import through the finder would bind the
    module to that name on the package, replacing the function; found in ``sys.modules``, it binds nothing."""
    import types

    for old, new in ALIASES.items():
        parent, name = old.rsplit(".", 1)
        value = getattr(package, name, None)
        if parent == package.__name__ and value is not None and not isinstance(value, types.ModuleType):
            sys.modules.setdefault(old, importlib.import_module(new))
