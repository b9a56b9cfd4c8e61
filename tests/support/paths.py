"""Where the tests find the files they read or build, whichever folder a test file is in."""
from __future__ import annotations

from pathlib import Path

__all__ = ["C_HELPERS", "SOURCE", "TESTS"]

#: The tests' root folder (``tests/``): where the hardening tests run their children.
TESTS = Path(__file__).resolve().parent.parent
#: The repository, or the unpacked sdist: ``build_ffi.py``, ``setup.py``, ``c/``, ``examples/``.
SOURCE = TESTS.parent
#: The C sources the tests compile: clients, hooks, an injection tool, an NVTXW backend and driver.
C_HELPERS = TESTS / "c"
