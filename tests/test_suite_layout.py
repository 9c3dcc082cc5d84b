"""The suite's own bookkeeping: every id in ``conftest.HEAVY`` names a test that exists, so a renamed test
cannot silently fall back into the default suite (or the list rot)."""

import os
import re

from conftest import HEAVY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_heavy_id_names_an_existing_test():
    missing = []
    for node in sorted(HEAVY):
        path, name = node.split("::")
        func = re.sub(r"\[.*\]$", "", name)
        file = os.path.join(ROOT, path)
        if not os.path.exists(file) or not re.search(rf"^def {re.escape(func)}\(", open(file).read(), re.M):
            missing.append(node)
    assert not missing, f"conftest.HEAVY names tests that do not exist: {missing}"
