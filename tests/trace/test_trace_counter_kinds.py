"""Counter samples that are not one scalar value (float16 counters, counter groups, ``batch_submit``
batches, ``sample_no_value`` samples) in the tracer: decoded in bulk on the compiled path and written
the same on each path (the C encoders, NumPy and Python rows without them, the pure-Python source),
values read back from the JSON, the ``.pftrace`` and the SQLite file."""
from __future__ import annotations

import json
import math
import sqlite3
import sys

import pytest
from support.trace_check import record_in_chunks, sqlite_rows

from nvtx_cffi import recorder
from nvtx_cffi._trace import columns
from nvtx_cffi._trace import convert as convert_module
from nvtx_cffi._trace.convert import convert
from nvtx_cffi._trace.counters import CounterStats

np = pytest.importorskip("numpy") if sys.implementation.name == "cpython" else None
if np is None:  # (the scenario records with NumPy dtypes)
    pytest.skip("NumPy records the scenario", allow_module_level=True)

SAMPLES = 1500

#: a float16 counter (a gap first: UNCHANGED with nothing held; a NaN every 50; batches), a group of
#: two fields (batches, no-value samples of each reason), an int counter sampled by batches alone
SCENARIO = """
    import numpy as np
    import nvtx_cffi as nvtx

    R = nvtx.CounterNoValueReason
    d = nvtx.get_domain("K")
    half = d.get_counter("half", np.float16)
    pair = d.get_counter("pair", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
    depth = d.get_counter("depth", int)
    half.sample_no_value(R.UNCHANGED)
    for i in range(SAMPLES):
        half.sample(float("nan") if i % 50 == 49 else i / 8)
        pair.sample((i, i / 4))
        if i % 10 == 0:
            t = [d.get_timestamp() for _ in range(3)]
            depth.batch_submit([i, i + 1, i + 2], t)
            pair.batch_submit(np.array([(-i, 0.5), (-i - 1, 1.5)], dtype=pair.dtype), t[1:])
            half.batch_submit(np.array([1.5, -2.0], dtype=np.float16), t[1:])
        if i % 7 == 0:
            pair.sample_no_value(R(i % 3))
        with nvtx.annotate("step"):
            pass
"""


def _expected():
    """Each track's values in order (None: a gap; "nan": a NaN), and the pair's no-value reasons."""
    half, depth, a, b, reasons = [None], [], [], [], []
    held = None
    for i in range(SAMPLES):
        half.append("nan" if i % 50 == 49 else i / 8)
        a.append(i)
        b.append(i / 4)
        reasons.append(None)
        held = (i, i / 4)
        if i % 10 == 0:
            depth += [i, i + 1, i + 2]
            a += [-i, -i - 1]
            b += [0.5, 1.5]
            reasons += [None, None]
            half += [1.5, -2.0]
            held = (-i - 1, 1.5)
        if i % 7 == 0:
            reason = i % 3
            if reason == 0:
                held = (0, 0.0)
            value = held if reason == 1 else (None, None) if reason == 2 else (0, 0.0)
            a.append(value[0])
            b.append(value[1])
            reasons.append(("zero", "unchanged", "unavailable")[reason])
    return {"K: half": half, "K: depth": depth, "K: pair.a": a, "K: pair.b": b}, reasons


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("counter_kinds")
    raw, _stdout = record_in_chunks(tmp, SCENARIO.replace("SAMPLES", str(SAMPLES)))
    return tmp, raw


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)


def _paths():
    """(name, numpy, C helpers on)"""
    return [("native", True, True), ("numpy", True, False), ("pure", False, False)]


def _convert_all(recording, monkeypatch):
    """Each path's files, timeline, counter table and what the decoder handed on (type names)."""
    from nvtx_cffi import _fixedwidth as fixedwidth
    from nvtx_cffi._trace import counters, pairing, pftrace

    tmp, raw = recording
    outs = {}
    for name, numpy, native in _paths():
        with monkeypatch.context() as m:
            if not native:
                for module in (recorder, pairing, pftrace, fixedwidth, counters):
                    m.setattr(module, "_NATIVE", [None])
            handed = set()
            hand = convert_module._hand_samples

            def seen(samples, writers, timeline, hand=hand, handed=handed):
                handed.update(type(s).__name__ for s in samples)
                hand(samples, writers, timeline)

            m.setattr(convert_module, "_hand_samples", seen)
            files = {}
            for ending in ("json", "pftrace", "sqlite"):
                out = files[ending] = str(tmp / f"{name}.{ending}")
                table = CounterStats()
                timeline = convert(raw, out, numpy=numpy, counter_stats=table)
            outs[name] = files, timeline, table.format(), handed
    return outs


def test_the_compiled_path_decodes_them_in_bulk_into_what_the_other_paths_write(recording, small_batches,
                                                                              monkeypatch):
    outs = _convert_all(recording, monkeypatch)
    native, numpy_only, pure = outs["native"], outs["numpy"], outs["pure"]
    assert native[3] == {"SampleBlock"}  # no sample one by one
    assert numpy_only[3] == pure[3] == {"CounterSample"}
    for ending in ("json", "pftrace"):
        with open(native[0][ending], "rb") as a, open(numpy_only[0][ending], "rb") as b:
            assert a.read() == b.read(), ending
    counter_rows = [sqlite_rows(out[0]["sqlite"], "NVTX_CFFI_COUNTERS") for out in (native, numpy_only)]
    assert counter_rows[0] == counter_rows[1]
    assert native[2] == numpy_only[2] == pure[2]
    expected, _reasons = _expected()
    samples = 1 + SAMPLES + 2 * len(range(0, SAMPLES, 10)) + len(expected["K: depth"]) + len(expected["K: pair.a"])
    for _files, timeline, _table, _handed in outs.values():
        assert timeline.counter_samples == samples


def _same(got, want):
    return [("nan" if isinstance(v, float) and math.isnan(v) else v) for v in got] == want


def test_values_read_back_from_each_format(recording, small_batches, monkeypatch):
    expected, reasons = _expected()
    for name, (files, _tl, table, _handed) in _convert_all(recording, monkeypatch).items():
        with open(files["json"], encoding="utf-8") as f:
            events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "C"]
        for title, want in expected.items():
            got = [e["args"]["value"] for e in events if e["name"] == title]
            assert [("nan" if v == "NaN" else v) for v in got] == want, (name, title)
            assert all(type(v) is type(w) for v, w in zip(got, want) if w not in (None, "nan")), (name, title)
        if pytest.importorskip("perfetto") and pytest.importorskip("google.protobuf"):
            from support.pftrace_check import read_pftrace

            p = read_pftrace(files["pftrace"])
            for title, want in expected.items():
                (uuid,) = [u for u in p.counter_tracks if p.tracks[u][1] == title]
                assert _same([v for t, _ts, v in p.counters if t == uuid],
                             [float(v) if v != "nan" else v for v in want if v is not None]), (name, title)
        db = sqlite3.connect(files["sqlite"])
        try:
            for title, want in expected.items():
                rows = db.execute("SELECT value, noValue FROM NVTX_CFFI_COUNTERS WHERE domain = 'K' AND name = ? "
                                  "ORDER BY rowid", (title[3:],)).fetchall()
                assert [v for v, _ in rows] == [None if v == "nan" else v for v in want], (name, title)
                if title.startswith("K: pair"):
                    assert [r for _, r in rows] == reasons, (name, title)
        finally:
            db.close()
        assert "Zero  Unchanged  Unavailable  NaN" in table
