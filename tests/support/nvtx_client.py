"""``client_lib``: the C NVTX client of the recorder tests, which the tracer's format tests record too."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import build_script
from support.paths import C_HELPERS, SOURCE

__all__ = ["client_lib"]


@pytest.fixture(scope="session")
def client_lib(tmp_path_factory) -> str:
    """tests/c/nvtx_client.c built as a shared library; its path."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("client") / "libnvtx_test_client.so"
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared",
           "-I", build_script().nvtx_include_dir(), "-I", str(SOURCE / "c" / "shim"),  # c/shim/cuda.h: CUDA handle types
           str(C_HELPERS / "nvtx_client.c"), "-o", str(out), "-ldl"]
    subprocess.run(cmd, check=True)
    return str(out)
