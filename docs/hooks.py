"""mkdocs hooks: four CPU devices for the gallery's examples (set before any example imports JAX), and a clean exit.

An example that imports TensorFlow Probability sets up absl's logging while mkdocs-gallery has replaced
``sys.stdout`` by its own tee; at interpreter exit absl closed that stream, which has no ``close``, and printed
a traceback after a successful build. The hook points absl's handler back at ``sys.stderr`` once the build ends.
"""

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")


def on_post_build(config, **kwargs):
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None:
        handler = absl_logging.get_absl_handler().python_handler
        handler.stream = sys.stderr  # a stream absl never closes
