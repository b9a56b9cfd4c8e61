"""Binary payloads that decode to lists of numbers (NumPy arrays, structured arrays, lists) in the
tracer: decoded a batch at a time on the NumPy path, their JSON text written at once, into the bytes
each payload decoded and written on its own gives; and the payloads that do not (bytes, strings,
several payloads of one event) as before."""
from __future__ import annotations

import json
import sys

import pytest
from support.trace_check import record_in_chunks, sqlite_rows

from nvtx_cffi import ext_records
from nvtx_cffi._trace import columns, counters
from nvtx_cffi._trace.convert import convert

np = pytest.importorskip("numpy") if sys.implementation.name == "cpython" else None
if np is None:  # (the scenario records with NumPy arrays)
    pytest.skip("NumPy records the scenario", allow_module_level=True)

EVENTS = 400

SCENARIO = """
    import numpy as np
    import nvtx_cffi as nvtx

    pair = np.dtype([("a", np.int32), ("b", np.float64), ("c", np.uint8, (3,))])
    for i in range(EVENTS):
        nvtx.mark("ints", payload=np.arange(i % 20))
        nvtx.mark("floats", payload=np.array([i / 3, np.nan, np.inf, -np.inf, -0.0]))
        nvtx.mark("f32", payload=np.array([i / 7, np.nan], dtype=np.float32))
        nvtx.mark("f16", payload=np.array([i / 7, -np.inf], dtype=np.float16))
        nvtx.mark("u64", payload=np.array([2**64 - 1 - i, i], dtype=np.uint64))
        nvtx.mark("i8", payload=np.array([-128, i % 127], dtype=np.int8))
        nvtx.mark("empty", payload=np.array([], dtype=np.int64))
        nvtx.mark("struct", payload=np.array([(i, i / 2, (1, 2, 3)), (-i, np.nan, (4, 5, 6))], dtype=pair))
        nvtx.mark("list", payload=[i, i + 1, 2.5])
        nvtx.mark("bytes", payload=b"ab" + bytes([i % 256]))
        with nvtx.annotate("range", payload=np.arange(3) * i):
            pass
"""


def _expected(i):
    """The payload of each mark (and the range) of iteration ``i``, as the JSON reads back."""
    f32, f16 = float(np.float32(i / 7)), float(np.float16(i / 7))
    return {"ints": list(range(i % 20)), "floats": [i / 3, "NaN", "Infinity", "-Infinity", -0.0],
            "f32": [f32, "NaN"], "f16": [f16, "-Infinity"], "u64": [2**64 - 1 - i, i], "i8": [-128, i % 127],
            "struct": [{"a": i, "b": i / 2, "c": [1, 2, 3]}, {"a": -i, "b": "NaN", "c": [4, 5, 6]}],
            "list": [float(i), i + 1.0, 2.5], "bytes": (b"ab" + bytes([i % 256])).hex() if i % 256 >= 128
            else "ab" + chr(i % 256), "range": [0, i, 2 * i]}


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("array_payloads")
    raw, _stdout = record_in_chunks(tmp, SCENARIO.replace("EVENTS", str(EVENTS)))
    return tmp, raw


def _convert(recording, name, monkeypatch, numpy=True, one_by_one=False):
    """The files of one conversion (small batches: payloads kept across several), and how many
    payloads were decoded at once."""
    tmp, raw = recording
    at_once = []
    with monkeypatch.context() as m:
        m.setattr(columns, "BATCH_EVENTS", 500)
        if one_by_one:  # every payload decoded on its own, as before
            m.setattr(ext_records.ExtDecoder, "array_layout", lambda self, pid, domain, sid: None)
        add_many = counters.ExtPayloads.add_many

        def counted(self, values):
            at_once.append(len(values))
            return add_many(self, values)

        m.setattr(counters.ExtPayloads, "add_many", counted)
        files = {}
        for ending in ("json", "pftrace", "sqlite"):
            files[ending] = str(tmp / f"{name}.{ending}")
            convert(raw, files[ending], numpy=numpy)
    return files, sum(at_once)


def test_arrays_decode_at_once_into_the_bytes_one_by_one_gives(recording, monkeypatch):
    bulk, decoded_at_once = _convert(recording, "bulk", monkeypatch)
    single, none_at_once = _convert(recording, "single", monkeypatch, one_by_one=True)
    assert decoded_at_once == 3 * (9 * EVENTS - EVENTS // 20)  # (3 files) all but the bytes (and no empty one)
    assert none_at_once == 0
    for ending in ("json", "pftrace"):
        with open(bulk[ending], "rb") as a, open(single[ending], "rb") as b:
            assert a.read() == b.read(), ending
    assert sqlite_rows(bulk["sqlite"]) == sqlite_rows(single["sqlite"])


@pytest.mark.parametrize("numpy", [True, False])
def test_payloads_read_back_from_the_json(recording, monkeypatch, numpy):
    files, _at_once = _convert(recording, f"numpy{numpy}", monkeypatch, numpy=numpy)
    with open(files["json"], encoding="utf-8") as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] != "M" and "payload" in e["args"]]
    got = {}
    for e in events:
        got.setdefault(e["name"], []).append(e["args"]["payload"])
    assert "empty" not in got  # (an empty array: no payload recorded)
    for name in _expected(0):
        assert got[name] == [_expected(i)[name] for i in range(EVENTS) if name != "ints" or i % 20], name


def test_payloads_kept_together_go_with_the_oldest(monkeypatch):
    monkeypatch.setattr(counters, "EXT_PAYLOADS_MAX", 5)
    store = counters.ExtPayloads()
    one = store.add([0.5])
    first = store.add_many([[1, 2], ["NaN", 3.5], [], [-0.0]])
    assert store.get(one) == [0.5]
    assert store.texts([one, first + 3, 99, first, first + 2, first + 1]) == [  # (one's: the writer's to write)
        None, "[-0.0]", None, "[1,2]", "[]", '["NaN",3.5]']
    later = store.add_many([[{"a": 1, "b": [2, 3]}], [{"a": -1, "b": [4, 5]}]])
    assert (store.get(one), store.get(first), store.texts([first])) == (None, None, [None])  # the oldest went
    assert (store.get(first + 1), store.texts([first + 1])) == (["NaN", 3.5], ['["NaN",3.5]'])
    assert store.texts([later + 1, later]) == ['[{"a":-1,"b":[4,5]}]', '[{"a":1,"b":[2,3]}]']
    newest = store.add_many([[k] for k in range(5)])
    assert store.texts([later, later + 1]) == [None, None]
    assert store.texts([newest + k for k in range(5)]) == [f"[{k}]" for k in range(5)]
