"""Run services shared by every loop: checkpoints (:mod:`steinax.runtime.checkpoint`: pytrees to one ``.npz``,
written atomically, fingerprinted), sharding over devices (:mod:`steinax.runtime.sharding`) and JAX's persistent
compilation cache, opt-in (:mod:`steinax.runtime.compilation_cache`).
``steinax.checkpoint`` and ``steinax.sharding`` are aliases."""
