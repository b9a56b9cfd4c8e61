"""Attach the recorder to the test process before anything imports nvtx_cffi.

NVTX loads its tool once, at its first call (nvtx_cffi makes that call at the first annotation, not at
import, but a test module may annotate at import time). So the environment is set here, at conftest
import, with the path that ``nvtx_cffi.recorder_path()`` gives (importing nvtx_cffi makes no NVTX call).
Tests then assert the events the recorder saw, via ``recorder.capture()``; scenarios that need a
fresh process (no tool, another environment) run in subprocesses with ``run_python``.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

# A message is prepared at its second call in the tests (and their children), so that what a
# prepared call records is tested without 31 calls first; tests/speedups/test_prepare_at.py and the
# call-stream tests run at the default (nvtx_cffi/_domain.py PREPARE_AT). Read at import: first.
os.environ["NVTX_CFFI_PREPARE_AT"] = "2"

from nvtx_cffi import recorder_path  # noqa: E402

RECORDER_LIBRARY = recorder_path()
SESSION_RECORD_DIR = tempfile.mkdtemp(prefix="nvtx-cffi-tests-")

os.environ.pop("NVTX_DISABLE", None)
os.environ["NVTX_INJECTION64_PATH"] = RECORDER_LIBRARY
os.environ["NVTX_CFFI_RECORD_DIR"] = SESSION_RECORD_DIR


def pytest_unconfigure(config):
    """The session's record files go with it (each run left ~0.5 MB in /tmp), unless
    NVTX_CFFI_KEEP_TEST_RECORDS=1 asks to keep them for a look."""
    if os.environ.get("NVTX_CFFI_KEEP_TEST_RECORDS", "").strip().lower() in {"1", "true", "yes", "on"}:
        print(f"\nnvtx-cffi test records kept in {SESSION_RECORD_DIR}")
        return
    import shutil
    shutil.rmtree(SESSION_RECORD_DIR, ignore_errors=True)  # (this process's file stays mapped: fine)


def build_script():
    """The repository's build_ffi.py as a module (its build decisions, the NVTX include folder)."""
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("_build_ffi_for_tests", Path(__file__).resolve().parent.parent / "build_ffi.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def setup_script() -> dict:
    """The names setup.py defines (its C source lists, relative to the repository), without setup()."""
    import runpy
    from pathlib import Path
    saved = sys.path[:]  # setup.py puts the repository first on it, to import build_ffi
    try:
        return runpy.run_path(str(Path(__file__).resolve().parent.parent / "setup.py"), run_name="_setup_for_tests")
    finally:
        sys.path[:] = saved


def run_python(code: str, env: dict | None = None, *, remove=(), timeout: float = 120, check: bool = True):
    """Run ``code`` in a fresh interpreter with this environment plus ``env``, minus ``remove``."""
    child_env = {k: v for k, v in os.environ.items() if k not in remove}
    child_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=child_env, capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def events():
    """Record what the test body emits: ``with events as recorded: ...`` is spelled ``capture``."""
    from nvtx_cffi import recorder

    return recorder.capture


def ranges(recorded, kind: str = "push"):
    """Only the events of one kind."""
    return [e for e in recorded if e.kind == kind]
