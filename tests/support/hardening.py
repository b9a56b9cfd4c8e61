"""Shared by the hardening tests (test_hypothesis, test_stress, test_fork, test_memory).

NVTX loads its tool once per process, at nvtx_cffi's import, so a test that needs the recorder in
its own process either finds it already attached (the session was started with
``recorder.environment``) or runs its body in a fresh child that is: :func:`run_child` for a
script, :func:`run_pytest_child` for a test of this suite.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

import nvtx_cffi
from nvtx_cffi import recorder
from support.paths import TESTS

__all__ = ["attached_here", "child_env", "opted_in_slow", "run_child", "run_pytest_child"]


def attached_here() -> bool:
    """Is this process recorded (recorder loaded as NVTX tool, writing a file)?"""
    # (tool_attached() first: it makes NVTX's first call, which loads the recorder; enabled() does not)
    return nvtx_cffi.tool_attached() and nvtx_cffi.enabled() and recorder.loaded() and recorder.current_file() is not None


def child_env(directory: Path, extra: Optional[Dict[str, str]] = None, *, max_bytes: Optional[int] = None
              ) -> Dict[str, str]:
    """This environment plus the recorder's (writing to ``directory``), minus NVTX_DISABLE."""
    env = {**os.environ, **recorder.environment(directory, max_bytes=max_bytes), **(extra or {})}
    env.pop("NVTX_DISABLE", None)
    return env


def run_child(code: str, directory: Path, *, timeout: float = 300, extra_env: Optional[Dict[str, str]] = None,
              max_bytes: Optional[int] = None, executable: str = sys.executable) -> dict:
    """Run ``code`` in a recorded Python child; return its last stdout line parsed as JSON.

    The child's exit status must be 0 (its stderr is the assertion message otherwise).
    """
    proc = subprocess.run([executable, "-c", textwrap.dedent(code)], env=child_env(directory, extra_env,
                          max_bytes=max_bytes), capture_output=True, text=True, timeout=timeout, cwd=TESTS)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def run_pytest_child(nodeid: str, directory: Path, *, timeout: float = 600, extra_env: Optional[Dict[str, str]] = None,
                     args: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run one test (``folder/file.py::name``, from tests/) in a recorded pytest child; return the result."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-o", "addopts=", *args, nodeid]
    return subprocess.run(cmd, env=child_env(directory, extra_env), capture_output=True, text=True,
                          timeout=timeout, cwd=TESTS)


@pytest.fixture
def opted_in_slow(request) -> None:
    """Skip unless the run selected slow tests (``-m slow``): full-size runs are opt-in."""
    if "slow" not in (request.config.getoption("markexpr") or "") or "not slow" in request.config.getoption("markexpr"):
        pytest.skip("full-size run: opt in with -m slow")
