"""Load an experiment script (``experiments/<path>``) as a module, so a test can run its cases and its rule: the
experiment is where the numbers are printed beside their settings, the test is where CI checks them."""

import importlib.util
import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments")


def load(path: str):
    """The module of ``experiments/<path>`` (e.g. ``"trust/interrupts.py"``), executed once per call."""
    spec = importlib.util.spec_from_file_location("_experiment_" + path.replace("/", "_")[:-3], os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
