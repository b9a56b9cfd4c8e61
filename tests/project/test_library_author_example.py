"""examples/library_author (docs/library-authors.md): what it records, its stand-in, its own budget gate."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_python
from support.paths import SOURCE

EXAMPLE = SOURCE / "examples" / "library_author"
if not EXAMPLE.is_dir():  # (an sdist carries examples/; a bare tests/ folder does not)
    pytest.skip("examples/library_author is not here", allow_module_level=True)

RECORDED = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from nvtx_cffi import recorder
with recorder.capture() as got:
    import mylib  # (its decorators name the categories)
    total = mylib.pipeline(100, rounds=3)
names = {(e.domain, e.category): e.name for e in got if e.kind == "category"}
ranges = [(e.message, e.domain, names.get((e.domain, e.category)), e.color) for e in got if e.kind == "push"]
print(json.dumps({"total": total, "ranges": ranges, "kinds": sorted(set(e.kind for e in got))}))
"""


def test_the_example_library_records_its_ranges_in_its_domain_with_categories():
    code = RECORDED.replace("sys.argv[1]", repr(str(EXAMPLE)))
    out = json.loads(run_python(code).stdout.strip().splitlines()[-1])
    blue, green = 0x0000FF, 0x008000
    assert out["ranges"] == (
        [["mylib.load", "mylib", "io", blue]]
        + [item for r in range(3) for item in ([f"round {r}", "mylib", "compute", blue],
                                               ["mylib.transform", "mylib", "compute", green])])
    assert out["total"] == sum(i * i % 97 * 8 for i in range(100))


def test_the_stand_in_runs_the_same_library_without_nvtx_cffi():
    code = f"""
import sys
sys.modules["nvtx_cffi"] = None  # not installed on this platform
sys.path.insert(0, {str(EXAMPLE)!r})
import mylib
print(mylib.pipeline(100, rounds=3), type(mylib._nvtx.nvtx).__name__)
"""
    out = run_python(code).stdout.split()
    assert out == [str(sum(i * i % 97 * 8 for i in range(100))), "SimpleNamespace"]


def test_the_example_library_s_own_budget_gate_passes_and_fails_as_budgeted(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR", "NVTX_DISABLE")}
    env["PYTHONPATH"] = str(EXAMPLE)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "--rootdir", str(tmp_path), str(EXAMPLE / "tests")]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    # the same gate with a budget no annotation meets fails, with the table: measured against a plain
    # twin that does no work (len), so the overhead is the whole call (~6 us on 100 rows), far above
    # any timing noise (against __wrapped__, a noisy sample of the plain twin could hide one range)
    strict = tmp_path / "test_strict.py"
    gate = (EXAMPLE / "tests" / "test_overhead_budget.py").read_text()
    assert '"25%", modes=["none", "null"],' in gate
    strict.write_text(gate.replace('"25%", modes=["none", "null"],', '"0ns", modes=["recorder"], plain="builtins:len",'))
    proc = subprocess.run(cmd[:-1] + [str(strict)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "AssertionError" in proc.stdout and "recorder" in proc.stdout and "1 failed" in proc.stdout
