"""What a type checker makes of documented nvtx-cffi code (the package ships py.typed): mypy --strict
on a program that uses the API as the documentation does must pass, and a decorated function keeps its type.

nvtx 0.2.16 ships no type information, so code that passed mypy with it must not start failing when
it switches to nvtx-cffi."""
from __future__ import annotations

import textwrap

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the test extras for CPython 3.11-3.13")
pytest.importorskip("numpy")

PROGRAM = '''
import numpy as np
import nvtx_cffi as nvtx

d = nvtx.get_domain("lib")
a = d.get_event_attributes(message="x", color="red", category=1)
d.push_range(a)
d.pop_range()
d.mark(a)
d.push_range(message="k", color=0xFF00FF00, payload=3)
d.pop_range()
rid: int = d.start_range(a)
d.end_range(rid)
d.mark(message=d.get_registered_string("r"), payload=2.5)
nvtx.push_range(d.get_registered_string("x"), domain="lib")
nvtx.pop_range(domain="lib")
nvtx.mark(b"bytes", color=(1.0, 0.5, 0.0), category="io")
nvtx.mark("x", color=np.int64(3), category=np.int32(2), payload=np.arange(3))
nvtx.end_range(nvtx.start_range("s", payload=[1, 2]))


@nvtx.annotate("f", color="blue", domain="lib", category=b"c")
def f(x: int) -> str:
    return str(x)


@nvtx.annotate()
async def g(n: int) -> int:
    async with nvtx.annotate("inner", payload=n):
        return n


reveal_type(f)
reveal_type(g)
s: str = f(1)
with nvtx.annotate("w", payload=3) as w:
    reveal_type(w)
counter = d.get_counter("bytes", int, semantics=nvtx.CounterSemantics(unit="B"))
counter.sample(5)
ts: int = d.get_timestamp()
p = nvtx.Profile()
p.enable()
p.disable()
r: "nvtx.RangeId | None" = nvtx.start_range("r")
nvtx.end_range(r)
kind: nvtx.EntryKind = nvtx.EntryKind.MARK
tools: list[str] = [nvtx.null_tool_path(), nvtx.recorder_path()]
'''


def test_documented_code_passes_mypy_strict(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(PROGRAM))
    stdout, stderr, status = mypy_api.run(["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
                                           str(program)])
    notes = [line.split(": ", 2)[-1] for line in stdout.splitlines() if ": note: " in line]
    errors = [line for line in stdout.splitlines() if ": error: " in line]
    assert errors == [] and status == 0, stdout + stderr
    # (before: "Domain" has no attribute "push_range", RegisteredString/bytes messages and NumPy
    # colours refused, and every decorated function Any)
    notes = [note.replace("builtins.", "").replace("typing.", "") for note in notes]  # (mypy versions differ)
    assert notes == ['Revealed type is "def (x: int) -> str"',
                     'Revealed type is "def (n: int) -> Coroutine[Any, Any, int]"',
                     'Revealed type is "nvtx_cffi._annotate.annotate"']
