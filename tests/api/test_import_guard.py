"""Importing nvtx_cffi from the wrong place fails at once, saying why and what to do.

A source checkout ahead of the installed package on ``sys.path`` (Python started in the repository
root) has no compiled module; a compiled module left from other Python files has another version
stamp. Both must be an ``ImportError`` with a message, never a bare ``ModuleNotFoundError`` for a
private module or a half-working package.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import nvtx_cffi

INSTALLED = os.path.dirname(nvtx_cffi.__file__)


def _import_in(cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", "import nvtx_cffi"], cwd=cwd, env=env, capture_output=True, text=True,
    )


def _copy_python_files(dest: str) -> str:
    package = os.path.join(dest, "nvtx_cffi")
    shutil.copytree(INSTALLED, package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return package


def test_source_tree_without_compiled_module_says_what_to_do(tmp_path):
    _copy_python_files(str(tmp_path))
    (tmp_path / "build_ffi.py").write_text("# a source checkout\n")
    proc = _import_in(str(tmp_path))
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: nvtx_cffi is being imported from its source tree"), last
    assert "pip install -e" in last
    assert "ModuleNotFoundError" not in proc.stderr


def test_installed_package_without_compiled_module_says_reinstall(tmp_path):
    _copy_python_files(str(tmp_path))
    proc = _import_in(str(tmp_path))
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: nvtx_cffi's compiled C module is missing"), last
    assert "reinstall" in last


def test_compiled_module_of_another_version_is_refused(tmp_path):
    package = os.path.join(str(tmp_path), "nvtx_cffi")
    shutil.copytree(INSTALLED, package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(os.path.join(package, "_version.py"), "w") as f:
        f.write('__version__ = "999.0"\n')
    proc = _import_in(str(tmp_path))
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"ImportError: nvtx_cffi's compiled C module was built for version {nvtx_cffi.__version__}, "
        "but its Python files are version 999.0"
    ), last


def test_version_stamp_matches_the_package():
    from nvtx_cffi._native import ffi, lib

    assert ffi.string(lib.nvtxcffi_build_version()).decode() == nvtx_cffi.__version__


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info < (3, 14),
                    reason="concurrent.interpreters: CPython 3.14+")
def test_a_subinterpreter_gets_an_import_error_and_the_main_one_goes_on():
    # CFFI's compiled modules are single-phase: an isolated subinterpreter may not load them.
    code = """
from concurrent import interpreters
interp = interpreters.create()
try:
    interp.exec("import nvtx_cffi")
except interpreters.ExecutionFailed as exc:
    print(exc.excinfo.type.__name__, "|", exc.excinfo.msg)
finally:
    interp.close()
import nvtx_cffi
with nvtx_cffi.annotate("main"):
    print("main", type(nvtx_cffi.annotate("main")).__name__)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "ImportError | module _ffi does not support loading in subinterpreters", proc.stdout
    assert lines[1] == "main annotate"
