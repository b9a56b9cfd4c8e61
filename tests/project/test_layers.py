"""The import contract holds: ``lint-imports`` (import-linter) checks the layers that
``pyproject.toml``'s ``[tool.importlinter]`` lists against the package's source, every import
included (at module level, in functions, for type checkers): each module imports only from the
layers below its own, so there is no import cycle.

import-linter is in the test extras for CPython (its graph builder has no PyPy 3.9 wheel); where it
is missing the test is skipped.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from support.paths import SOURCE

pytest.importorskip("importlinter", reason="import-linter is in the test extras for CPython")

LINT_IMPORTS = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def test_the_import_contract_is_kept():
    config = os.path.join(SOURCE, "pyproject.toml")
    if not os.path.exists(config) or "[tool.importlinter]" not in open(config, encoding="utf-8").read():
        pytest.skip("no source tree with its pyproject.toml beside these tests")
    if not os.path.exists(LINT_IMPORTS):
        pytest.skip("lint-imports is not installed beside this interpreter")
    # From the source tree's root: lint-imports puts it first on sys.path and reads its pyproject.toml
    # (--no-cache: nothing written there).
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=SOURCE, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", output)
    assert kept is not None and int(kept.group(1)) >= 1, output
