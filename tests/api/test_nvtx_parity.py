"""Behaviours compared with nvtx 0.2.16 itself: the same program runs under NVIDIA's ``nvtx`` and
under nvtx-cffi (C accelerator and pure Python), and records or raises the same.

When attributes take a payload's values, lone surrogates in counter texts, the exception of a
``semantics`` of the wrong type, and ``enabled()`` before the first annotation.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from nvtx_cffi import recorder
from nvtx_cffi.ext_records import ExtDecoder, parse_counter

HAVE_NVTX = importlib.util.find_spec("nvtx") is not None
#: (library, NVTX_CFFI_PURE_PYTHON): nvtx-cffi with the accelerator, and its pure-Python path.
MODES = [("nvtx_cffi", "0"), ("nvtx_cffi", "1")]
needs_nvtx = pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")

PRELUDE = """
import json, os, sys
if sys.argv[1] == "nvtx":
    import nvtx
else:
    import nvtx_cffi as nvtx
"""


def run(code: str, library: str, pure: str, directory, *, tool: bool = True):
    """(last stdout line as JSON, recorded events) of ``code`` run as ``library`` in a fresh
    interpreter; ``tool``: the recorder is named in its environment from the start (else the
    program names it in ``RECORDER`` and may set it itself)."""
    directory.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_DISABLE", "NVTX_INJECTION64_PATH")}
    env.update(recorder.environment(directory))
    env["NVTX_CFFI_PURE_PYTHON"] = pure
    if not tool:
        env["RECORDER"] = env.pop("NVTX_INJECTION64_PATH")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code), library], env=env,
                          capture_output=True, text=True, timeout=120, cwd=str(directory))
    assert proc.returncode == 0, proc.stderr
    events = recorder.read(directory).events if any(directory.iterdir()) else []
    return json.loads(proc.stdout.strip().splitlines()[-1]), events


def marks_and_payloads(events) -> list:
    decoder = ExtDecoder()
    out = []
    for e in events:
        decoder.feed(e)
        if e.kind in ("mark", "push"):
            value, truncated = decoder.payload_of(e)
            assert not truncated
            out.append([e.kind, e.message, value])
    return out


# --------------------------------------------------------------------------- payload values

TAKEN = """
import numpy as np
d = nvtx.get_domain("taken")
arr = np.array([1, 2, 3], dtype=np.int32)
lst = [1.5, 2.5]
base = np.arange(6, dtype=np.int16)
strided = base[::2]  # not contiguous
zero_d = np.array(1.5)  # 0-d: nvtx's attributes point at the array itself
a_arr = d.get_event_attributes(message="arr", payload=arr)
a_lst = d.get_event_attributes(message="lst", payload=lst)
a_strided = d.get_event_attributes(message="strided", payload=strided)
a_zero_d = d.get_event_attributes(message="zero_d", payload=zero_d)
a_set = d.get_event_attributes(message="set")
later = np.array([10, 20], dtype=np.int64)
a_set.payload = later
a_renamed = d.get_event_attributes(message="before rename", payload=[5, 6])
a_again = d.get_event_attributes(message="again", payload=arr)
# every object given changes after the attributes were made
arr[:] = 7
lst[0] = 9.5
lst.append(3.5)
base[:] = 99
zero_d[()] = 4.5
later[:] = -1
d.set_event_attributes(a_renamed, message="renamed")  # the payload is not given again: kept as taken
d.set_event_attributes(a_again, payload=arr)  # given again: taken now
d.mark(a_arr)
d.push_range(a_lst); d.pop_range()
d.mark(a_strided)
d.mark(a_zero_d)
d.mark(a_set)
d.mark(a_renamed)
d.mark(a_again)
arr[:] = 8  # and again: the attributes keep what they took
d.mark(a_arr)
d.mark(a_again)
print(json.dumps({"same objects": [a_arr.payload is arr, a_lst.payload is lst, a_set.payload is later]}))
"""

TAKEN_EXPECTED = [
    ["mark", "arr", [1, 2, 3]],
    ["push", "lst", [1.5, 2.5]],
    ["mark", "strided", [0, 2, 4]],
    ["mark", "zero_d", 4.5],
    ["mark", "set", [10, 20]],
    ["mark", "renamed", [5, 6]],
    ["mark", "again", [7, 7, 7]],
    ["mark", "arr", [1, 2, 3]],
    ["mark", "again", [7, 7, 7]],
]


@pytest.mark.parametrize(("library", "pure"), MODES)
def test_event_attributes_take_the_payload_values_when_made(library, pure, tmp_path):
    """get_event_attributes (and setting a payload) takes an array's or a list's values then, as
    nvtx copies them: changing the array or list afterwards changes no event. A 0-d array stays
    the array given (nvtx points at it), so its later value is sent."""
    pytest.importorskip("numpy")
    out, events = run(TAKEN, library, pure, tmp_path)
    assert out == {"same objects": [True, True, True]}  # .payload is still the object given
    assert marks_and_payloads(events) == TAKEN_EXPECTED


@needs_nvtx
def test_nvtx_takes_the_payload_values_alike(tmp_path):
    pytest.importorskip("numpy")
    out, events = run(TAKEN, "nvtx", "0", tmp_path)
    assert out == {"same objects": [True, True, True]}
    assert marks_and_payloads(events) == TAKEN_EXPECTED


# --------------------------------------------------------------------------- counter texts

ATTEMPTS = """
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = None
    except Exception as exc:
        out[name] = {"unicode": isinstance(exc, UnicodeEncodeError), "attribute": isinstance(exc, AttributeError),
                     "type": isinstance(exc, TypeError), "message": str(exc)}
d.get_counter("fine", int).sample(3)  # a counter after those: registered and sampled
print(json.dumps(out))
"""

SURROGATES = """
import numpy as np
d = nvtx.get_domain("counter-texts")
calls = {
    "name": lambda: d.get_counter("c\\ud800", int),
    "description": lambda: d.get_counter("c", int, description="d\\udfff"),
    "scope": lambda: d.get_counter("c", float, scope="/s\\ud800"),
    "field name": lambda: d.get_counter("g", np.dtype([("f\\ud800", np.int64), ("ok", np.float64)])),
    "unit": lambda: nvtx.CounterSemantics(unit="u\\ud800"),
}
""" + ATTEMPTS

SEMANTICS = """
d = nvtx.get_domain("counter-semantics")
calls = {
    "int": lambda: d.get_counter("c", int, semantics=5),
    "str": lambda: d.get_counter("c", int, semantics="abc"),
    "object": lambda: d.get_counter("c", int, semantics=object()),
}
""" + ATTEMPTS


def _counter_names(events) -> list:
    """The names of the counters registered with the tool."""
    return [parse_counter(e.target, e.domain, e.data).name for e in events
            if e.kind == "blob" and e.name == "counter_group"]


@pytest.mark.parametrize(("library", "pure"), MODES)
def test_counter_texts_with_lone_surrogates_raise_unicode_encode_error(library, pure, tmp_path):
    """A lone surrogate in a counter's name, description, scope, counter-group field name or unit
    is nvtx's UnicodeEncodeError, naming the argument: nothing invalid is sent to the tool."""
    pytest.importorskip("numpy")
    out, events = run(SURROGATES, library, pure, tmp_path)
    assert all(out[name] is not None and out[name]["unicode"] for name in out), out
    for name in ("name", "description", "scope"):
        assert out[name]["message"].startswith(f"{name} is not valid Unicode"), out[name]
    assert out["field name"]["message"].startswith("dtype field name 'f\\ud800' is not valid Unicode")
    assert _counter_names(events) == ["fine"]  # only the good counter reached the tool


@pytest.mark.parametrize(("library", "pure"), MODES)
def test_a_semantics_of_the_wrong_type_raises_attribute_error_as_nvtx(library, pure, tmp_path):
    """nvtx reads the fields of what it is given (AttributeError); the error here is also a
    TypeError and names the argument."""
    out, events = run(SEMANTICS, library, pure, tmp_path)
    for name, got in out.items():
        assert got is not None and got["attribute"] and got["type"], name
        assert got["message"].startswith("semantics must be a CounterSemantics or None, not "), got
    assert _counter_names(events) == ["fine"]


@needs_nvtx
def test_nvtx_raises_those_exception_types(tmp_path):
    pytest.importorskip("numpy")
    out, events = run(SURROGATES, "nvtx", "0", tmp_path / "texts")
    assert all(out[name] is not None and out[name]["unicode"] for name in out), out
    assert _counter_names(events) == ["fine"]
    out, events = run(SEMANTICS, "nvtx", "0", tmp_path / "semantics")
    assert all(got is not None and got["attribute"] for got in out.values()), out
    assert _counter_names(events) == ["fine"]


# --------------------------------------------------------------------------- enabled()

ENABLED_FIRST = """
before = nvtx.enabled()  # no tool named yet
os.environ["NVTX_INJECTION64_PATH"] = os.environ["RECORDER"]
named = nvtx.enabled()
nvtx.mark("x")  # the first annotation: NVTX loads the tool named now
print(json.dumps({"enabled": [before, named, nvtx.enabled()]}))
"""


@pytest.mark.parametrize(("library", "pure"), MODES)
def test_enabled_before_a_tool_is_named_does_not_decide(library, pure, tmp_path):
    """enabled() makes no NVTX call: a tool named after it is loaded at the first annotation, as
    with nvtx. Before that annotation it answers whether a tool is named (nvtx: NVTX_DISABLE only)."""
    out, events = run(ENABLED_FIRST, library, pure, tmp_path, tool=False)
    assert [(e.kind, e.message) for e in events if e.kind == "mark"] == [("mark", "x")]
    assert out == {"enabled": [False, True, True]}


@needs_nvtx
def test_nvtx_records_a_mark_after_enabled_and_a_tool_named(tmp_path):
    out, events = run(ENABLED_FIRST, "nvtx", "0", tmp_path, tool=False)
    assert [(e.kind, e.message) for e in events if e.kind == "mark"] == [("mark", "x")]
    assert out == {"enabled": [True, True, True]}  # nvtx's: NVTX_DISABLE is not set


ENABLED_STATES = """
from nvtx_cffi import _state, recorder
os.environ["NVTX_INJECTION64_PATH"] = os.environ["RECORDER"]
os.environ["NVTX_DISABLE"] = "1"
disabled = nvtx.enabled()
os.environ["NVTX_DISABLE"] = "0"
os.environ["NVTX_INJECTION64_PATH"] = "/nonexistent/libtool.so"
named = nvtx.enabled()  # named, not loaded yet: true until the first annotation finds nothing
undecided = [_state.decided(), recorder.loaded()]
nvtx.mark("x")
print(json.dumps({"enabled": [disabled, named, nvtx.enabled()], "undecided": undecided,
                  "attached": nvtx.tool_attached()}))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_enabled_before_the_first_annotation_reads_the_environment_only(pure, tmp_path):
    out, _ = run(ENABLED_STATES, "nvtx_cffi", pure, tmp_path, tool=False)
    assert out == {"enabled": [False, True, False], "undecided": [False, False], "attached": False}
