"""mkdocs hooks: four CPU devices for the gallery's examples (set before any example imports JAX)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
