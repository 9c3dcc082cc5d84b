"""Run services shared by every loop: checkpoints (:mod:`steinax.runtime.checkpoint`: pytrees to one ``.npz``,
written atomically, fingerprinted) and sharding over devices (:mod:`steinax.runtime.sharding`).
``steinax.checkpoint`` and ``steinax.sharding`` are aliases."""
