"""When a message is prepared: at its PREPARE_AT-th call (default 32), not before.

A message's first calls go with their message (registered once by the shim, nothing prepared), so a
message used a few times never pays a preparation (a string entry, a C slot, a cached call: ~4 us of
Python, which made a message used exactly twice cost 2-5x nvtx's). The rest of the suite runs with
NVTX_CFFI_PREPARE_AT=2 (tests/conftest.py); these tests run at the default and at other settings.
"""
from __future__ import annotations

import json
import sys

import pytest

from conftest import run_python

PURE = ["0", "1"]

COUNTED = r"""
import json, sys
import nvtx_cffi as nvtx
from nvtx_cffi import _annotate, _domain, _ranges, recorder
from nvtx_cffi._native import lib

n = _domain.PREPARE_AT
out = {"prepare_at": n, "default": lib.NVTXCFFI_PREPARE_AT}

def tables():
    return [lib.nvtxcffi_string_count(), lib.nvtxcffi_slot_count()]

d = nvtx.get_domain("counted")
with recorder.capture() as got:
    base = tables()
    for i in range(3):  # messages used exactly twice, in the spellings users write
        for _ in range(2):
            nvtx.mark(f"twice {i}", color="red", category=3, payload=i)
            nvtx.push_range(f"pushed {i}", domain="counted")
            nvtx.pop_range(domain="counted")
            nvtx.end_range(nvtx.start_range(f"started {i}"))
            with nvtx.annotate(f"with {i}", color="green"):
                pass
            d.mark(message=f"keyword {i}", payload=0.5)
    out["twice"] = [a - b for a, b in zip(tables(), base)]
    # one message, counted up to its preparation
    before, prepared, identical = [], [], []
    for k in range(1, n + 1):
        before.append(tables())
        nvtx.mark("counted mark")
        prepared.append("counted mark" in _ranges._blue_slots)
        identical.append(nvtx.annotate("counted with") is nvtx.annotate("counted with"))
    out["prepared"] = prepared
    out["identical"] = identical
    out["grew"] = [b != a for a, b in zip(before, before[1:] + [tables()])]
events = [(e.kind, e.message, e.color, e.category, e.payload, e.domain) for e in got
          if e.kind in ("push", "mark", "start")]
out["events"] = events
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", PURE)
def test_a_message_used_twice_is_never_prepared_and_one_used_often_is_prepared_at_its_32nd_call(pure):
    out = json.loads(run_python(COUNTED, {"NVTX_CFFI_PURE_PYTHON": pure}, remove=("NVTX_CFFI_PREPARE_AT",))
                     .stdout.strip().splitlines()[-1])
    n = out["prepare_at"]
    assert n == out["default"] == 32
    assert out["twice"] == [0, 0]  # no string-table entry, no slot: each text registered with NVTX once
    # the PREPARE_AT-th mark prepares the message (its slot cached); annotate() of a message gives
    # one shared object once annotate() has met it PREPARE_AT times (two calls a round here)
    assert out["prepared"] == [False] * (n - 1) + [True]
    assert out["identical"] == [False] * (n // 2) + [True] * (n // 2)
    assert out["grew"].count(True) == 2  # the tables grow at the two preparations only (mark, annotate)
    events = [tuple(e) for e in out["events"]]
    red, green, blue = 0xFF0000, 0x008000, 0x0000FF
    for i in range(3):
        assert events.count(("mark", f"twice {i}", red, 3, i, None)) == 2
        assert events.count(("push", f"pushed {i}", blue, 0, None, "counted")) == 2
        assert events.count(("start", f"started {i}", blue, 0, None, None)) == 2
        assert events.count(("push", f"with {i}", green, 0, None, None)) == 2
        assert events.count(("mark", f"keyword {i}", blue, 0, 0.5, "counted")) == 2
    assert events.count(("mark", "counted mark", blue, 0, None, None)) == n


SETTING = r"""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import nvtx_cffi as nvtx
    from nvtx_cffi import _domain, _ranges
    for _ in range(4):
        nvtx.mark("four")
print(json.dumps({"prepare_at": _domain.PREPARE_AT, "prepared": "four" in _ranges._blue_slots,
                  "warnings": [str(w.message) for w in caught]}))
"""


@pytest.mark.parametrize("pure", PURE)
@pytest.mark.parametrize("value,expected,prepared", [("4", 4, True), (" 64 ", 64, False), ("2", 2, True),
                                                     ("", 32, False)])
def test_the_setting_is_read_at_import(pure, value, expected, prepared):
    out = json.loads(run_python(SETTING, {"NVTX_CFFI_PURE_PYTHON": pure, "NVTX_CFFI_PREPARE_AT": value})
                     .stdout.strip().splitlines()[-1])
    assert out == {"prepare_at": expected, "prepared": prepared, "warnings": []}


@pytest.mark.parametrize("value", ["1", "65", "0", "-3", "abc", "3.5", "\u0663"])
def test_a_setting_out_of_range_warns_and_keeps_the_default(value):
    out = json.loads(run_python(SETTING, {"NVTX_CFFI_PREPARE_AT": value}).stdout.strip().splitlines()[-1])
    assert out["prepare_at"] == 32 and out["prepared"] is False
    assert out["warnings"] == [f"NVTX_CFFI_PREPARE_AT={value!r} is not an integer from 2 to 64; using 32"]


def test_the_accelerator_takes_only_a_valid_setting():
    accel = pytest.importorskip("nvtx_cffi._accel").accel
    if accel is None or sys.implementation.name != "cpython":
        pytest.skip("no accelerator")
    from nvtx_cffi import _annotate, _domain, _ranges

    args = (_domain.FirstSight, _ranges._first_sight, _annotate._first_sight, _domain._inline_style,
            _annotate._first_sight_attributes, _annotate._pop_default, _annotate._first_sight_reused)
    for bad in (1, 65, "32", None):
        with pytest.raises(TypeError, match="prepare_at"):
            accel.setup_first_sight(*args, bad)
    accel.setup_first_sight(*args, _domain.PREPARE_AT)  # (as the package set it up)
