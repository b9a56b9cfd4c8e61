"""Start/end ranges in the tracer: paired across threads and batches, and written to every format the
same on each path (the C pairing and encoders, NumPy and Python rows without them, the pure-Python
source), values read back from the JSON, the ``.pftrace`` and the SQLite file."""
from __future__ import annotations

import sqlite3
import sys

import pytest
from support.trace_check import record_in_chunks, sqlite_rows

from nvtx_cffi import recorder
from nvtx_cffi._trace import columns
from nvtx_cffi._trace.convert import convert

np = pytest.importorskip("numpy") if sys.implementation.name == "cpython" else None

RANGES = 1500

#: ranges "job {i % 5}" (domain "D" and category 2 every third, red every second), each ended by a
#: second thread, with int and float payloads; an end of an unknown id; the last one left open
SCENARIO = """
    import os, queue, threading
    import nvtx_cffi as nvtx

    print("ids", os.getpid(), flush=True)
    ids = queue.Queue()

    def end_them():
        print("ender", threading.get_native_id(), flush=True)
        for rid in iter(ids.get, None):
            nvtx.end_range(rid)

    ender = threading.Thread(target=end_them)
    ender.start()
    for i in range(RANGES):
        payload = [i, -i, i / 4, None][i % 4]
        kw = {"domain": "D", "category": 2} if i % 3 == 0 else {}
        rid = nvtx.start_range(f"job {i % 5}", color="red" if i % 2 else None, payload=payload, **kw)
        if i < RANGES - 1:
            ids.put(rid)
    ids.put(None)
    ender.join()
    nvtx.end_range(12345)  # no such range: an unmatched end
"""


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("startend")
    raw, stdout = record_in_chunks(tmp, SCENARIO.replace("RANGES", str(RANGES)))
    words = stdout.split()
    return tmp, raw, int(words[1]), int(words[3])


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)


def _expected(i):
    """(name, domain) of range i"""
    return f"job {i % 5}", "D" if i % 3 == 0 else None


def _paths():
    """(name, numpy, C helpers on)"""
    if not columns.HAVE_NUMPY:
        return [("pure", False, False)]
    return [("native", True, True), ("numpy", True, False), ("pure", False, False)]


def _convert_all(recording, monkeypatch):
    from nvtx_cffi import _fixedwidth as fixedwidth
    from nvtx_cffi._trace import pairing, pftrace

    tmp, raw, _pid, _ender = recording
    outs = {}
    for name, numpy, native in _paths():
        with monkeypatch.context() as m:
            if not native:
                for module in (recorder, pairing, pftrace, fixedwidth):
                    m.setattr(module, "_NATIVE", [None])
            files = {}
            for ending in ("json", "pftrace", "sqlite"):
                out = files[ending] = str(tmp / f"{name}.{ending}")
                timeline = convert(raw, out, numpy=numpy)
            outs[name] = files, timeline
    return outs


def test_the_c_pairing_and_encoders_write_what_the_other_paths_write(recording, small_batches, monkeypatch):
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi._trace import pairing, pftrace

    assert pairing._native_keys() is not None and pftrace._async_encoder() is not None
    outs = _convert_all(recording, monkeypatch)
    (native, tl_native), (numpy_only, tl_numpy) = outs["native"], outs["numpy"]
    for ending in ("json", "pftrace"):
        with open(native[ending], "rb") as a, open(numpy_only[ending], "rb") as b:
            assert a.read() == b.read(), ending
    assert sqlite_rows(native["sqlite"]) == sqlite_rows(numpy_only["sqlite"])
    for tl in (tl_native, tl_numpy, outs["pure"][1]):
        assert (tl.unmatched_ends, tl.unterminated, tl.range_count) == (1, 1, RANGES)


def test_values_read_back_from_each_format(recording, small_batches, monkeypatch):
    import json

    _tmp, _raw, pid, ender = recording
    for name, (files, _tl) in _convert_all(recording, monkeypatch).items():
        with open(files["json"], encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
        begins = [e for e in events if e["ph"] == "b"]
        ends = {e["id2"]["local"]: e for e in events if e["ph"] == "e"}
        assert len(begins) == RANGES, name
        seen = set()
        for e in begins:
            args = e["args"]
            payload = args.get("payload")
            if payload is not None:  # which range it is
                i = round(payload * 4) if isinstance(payload, float) else abs(payload)
                assert (e["name"], args.get("domain")) == _expected(i), name
                if i % 2:
                    assert args["color"] == "#ff0000"
            assert args.get("category") == ("2" if args.get("domain") == "D" else None)
            end = ends[e["id2"]["local"]]
            assert end["ts"] >= e["ts"] and end["pid"] == pid
            if args.get("unterminated"):
                assert end["tid"] == e["tid"]
            else:
                assert end["tid"] == ender != e["tid"]
            seen.add(e["id2"]["local"])
        assert len(seen) == RANGES
        if columns.HAVE_NUMPY and pytest.importorskip("perfetto") and pytest.importorskip("google.protobuf"):
            from support.pftrace_check import read_pftrace

            p = read_pftrace(files["pftrace"])
            jobs = [s for s in p.slices if s["name"].startswith("job ")]
            assert len(jobs) == RANGES
            by_name = sorted((s["name"], s["end"] - s["start"]) for s in jobs)
            assert by_name == sorted((e["name"], round((ends[e["id2"]["local"]]["ts"] - e["ts"]) * 1000))
                                     for e in begins)
        db = sqlite3.connect(files["sqlite"])
        try:
            rows = db.execute("SELECT text, rangeId, globalTid, endGlobalTid, int64Value, doubleValue, end "
                              "FROM NVTX_EVENTS WHERE eventType = 60").fetchall()
        finally:
            db.close()
        assert len(rows) == RANGES
        assert {r[3] for r in rows if r[6] is not None} == {(pid << 24) | ender}
        assert sorted(r[4] for r in rows if r[4] is not None) == sorted(
            [i for i in range(RANGES) if i % 4 == 0] + [-i for i in range(RANGES) if i % 4 == 1])
        assert sorted(r[5] for r in rows if r[5] is not None) == [i / 4 for i in range(RANGES) if i % 4 == 2]


def test_the_c_start_end_pairing_is_the_python_pairing_on_random_batches():
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi._trace import pairing
    from nvtx_cffi._trace.model import Timeline

    native = pairing._native_keys()
    assert native is not None
    rng = np.random.default_rng(11)
    for _ in range(200):
        states = ({}, {}), ({}, {})
        tls = Timeline(), Timeline()
        t0 = 0
        for _batch in range(4):  # what is open or waiting is carried from batch to batch
            n = int(rng.integers(1, 50))
            b = columns.RecordBatch(1, True, ["", "a", "b"], {0: None}, {})
            b.kind = rng.choice(np.array([3, 4, 3, 4, 1], np.uint8), n)
            b.tid = rng.integers(1, 4, n).astype(np.uint32)
            b.domain = rng.integers(0, 2, n).astype(np.uint32)
            b.time = (t0 + rng.integers(-20, 100, n)).astype(np.int64)  # threads interleave: not in order
            t0 += 60
            b.text = rng.integers(0, 3, n).astype(np.uint32)
            b.color = rng.integers(0, 5, n).astype(np.uint32)
            b.has_color = rng.integers(0, 2, n).astype(np.uint8)
            b.category = rng.integers(0, 3, n).astype(np.uint32)
            b.ptype = rng.integers(0, 3, n).astype(np.uint8)
            b.payload = rng.integers(0, 9, n).astype(np.uint64)
            b.arg = rng.choice(np.array([1, 2, 3, 2**64 - 1], np.uint64), n)
            results = []
            for k, pair in enumerate((pairing._pair_async_native, pairing._pair_async_rows)):
                strings = pairing._Strings(b.strings)
                args = (b, states[k], strings, tls[k]) if k else (native, b, states[k], strings, tls[k])
                cols = pair(*args)
                values = cols.lists(*pairing.ASYNC_FIELDS)
                values[pairing.ASYNC_FIELDS.index("text")] = [strings[t] for t in values[5]]  # (ids may differ)
                results.append(values)
            assert results[0] == results[1]
            assert states[0] == states[1] and tls[0].unmatched_ends == tls[1].unmatched_ends
