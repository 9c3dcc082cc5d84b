"""Interfaces: the command line (:mod:`steinax.interfaces.cli`, the ``steinax`` command), the benchmark tables
(:mod:`steinax.interfaces.bench`, ``steinax bench``) and the figures (:mod:`steinax.interfaces.plot`). Thin layers
over the library; the library never imports them. ``steinax.cli``, ``steinax.bench`` and ``steinax.plot`` are aliases.
"""
