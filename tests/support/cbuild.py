"""Building a shared library of the tests' C sources (tools, hooks, backends): one compiler line."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import build_script

__all__ = ["c_library"]


def c_library(directory: Path, name: str, sources, extra=()) -> str:
    """``lib<name>.so`` in ``directory``, built from ``sources`` with warnings as errors, NVTX's
    headers on the include path and hidden visibility (the sources export what NVTX or the test
    looks up by name); ``extra``: more compiler arguments (include folders, libraries). Skips the
    test without a C compiler. Returns the library's path."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    out = Path(directory) / f"lib{name}.so"
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
           "-I", build_script().nvtx_include_dir(), *map(str, sources), "-o", str(out), *extra]
    subprocess.run(cmd, check=True)
    return str(out)
