"""The tracer's output formats: JSON, Perfetto protobuf and Nsight-schema SQLite, on both paths.

One recording with every kind of thing (nested push/pop in two domains, a category name, colours,
int/float/NaN/infinite payloads, a start/end range ended on another thread, marks, an unmatched
pop, a range left open) is converted by the NumPy path and by the pure-Python path (what PyPy
runs) into each format; the traces must say the same, and each format is read back independently:
the JSON strictly (no NaN/Infinity constants), the ``.pftrace`` with Perfetto's own message
classes, the SQLite file with an ``nsys stats``-style NVTX summary query.
"""
from __future__ import annotations

import io
import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing

import pytest
from support.hardening import opted_in_slow  # noqa: F401  (a fixture)
from support.nvtx_client import client_lib  # noqa: F401  (a fixture: tests/c/nvtx_client.c built)
from support.paths import SOURCE
from support.trace_check import record_in_chunks, sqlite_rows, validate_chrome_trace

from nvtx_cffi import recorder
from nvtx_cffi._fixedwidth import fixed_rows
from nvtx_cffi._trace import columns
from nvtx_cffi._trace.convert import convert
from nvtx_cffi._fixedwidth import fixed_rows
from nvtx_cffi._trace.stats import StatsCollector
from nvtx_cffi._trace.writers import format_for, open_writer

np = pytest.importorskip("numpy") if sys.implementation.name == "cpython" else None

SCENARIO = """
    import os, threading
    import nvtx_cffi as nvtx

    print("ids", os.getpid(), threading.get_native_id(), flush=True)
    for i in range(NESTED):                     # enough records to span chunks and batches
        nvtx.push_range("level0", color="red")
        nvtx.push_range("level1")
        nvtx.pop_range(); nvtx.pop_range()
    nvtx.push_range("outer", color="red", category="io")
    with nvtx.annotate("inner", domain="D", payload=7):
        nvtx.mark("m", payload=2.5, domain="D")
    nvtx.mark("nan", payload=float("nan"))
    nvtx.mark("inf", payload=float("inf"))
    nvtx.mark("-inf", payload=-float("inf"))
    rid = nvtx.start_range("async", color="blue", payload=-3)

    def work():
        with nvtx.annotate("work", payload=-5):
            pass
        nvtx.end_range(rid)

    t = threading.Thread(target=work, name="worker"); t.start(); t.join()
    nvtx.pop_range()
    nvtx.pop_range()          # nothing open: unmatched
    nvtx.push_range("open")   # left open: unterminated
"""

NESTED = 3000


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("formats")
    raw, stdout = record_in_chunks(tmp, SCENARIO.replace("NESTED", str(NESTED)))
    pid, tid = (int(x) for x in stdout.split()[1:3])
    return tmp, raw, pid, tid


def _convert(recording, name, numpy, monkeypatch=None):
    tmp, raw, pid, _tid = recording
    out = str(tmp / f"{'np' if numpy else 'py'}-{name}")
    stats = StatsCollector()
    timeline = convert(raw, out, stats=stats, numpy=numpy, root_pid=pid, root_name="python scenario.py")
    return out, timeline, stats.rows()


def _strict_json(path):
    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    with open(path, encoding="utf-8") as f:
        return json.loads(f.read(), parse_constant=reject)


def _paths():
    return [True, False] if columns.HAVE_NUMPY else [False]


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of a few hundred events, so that open ranges are carried from batch to batch."""
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)


def test_json_is_strict_and_the_same_on_both_paths(recording, small_batches):
    docs = {}
    for numpy in _paths():
        out, timeline, rows = _convert(recording, "t.json", numpy)
        docs[numpy] = validate_chrome_trace(_strict_json(out))
    doc = docs[_paths()[0]]
    if len(docs) == 2:
        assert sorted(json.dumps(e, sort_keys=True) for e in docs[True]["traceEvents"]) == sorted(
            json.dumps(e, sort_keys=True) for e in docs[False]["traceEvents"])
        assert docs[True]["otherData"] == docs[False]["otherData"]
    events = doc["traceEvents"]
    payloads = {e["name"]: e["args"].get("payload") for e in events if e["ph"] in "iXb"}
    assert (payloads["nan"], payloads["inf"], payloads["-inf"]) == ("NaN", "Infinity", "-Infinity")
    assert (payloads["m"], payloads["inner"], payloads["work"], payloads["async"]) == (2.5, 7, -5, -3)
    x = [e for e in events if e["ph"] == "X"]
    assert sum(e["name"] == "level0" for e in x) == NESTED and sum(e["name"] == "level1" for e in x) == NESTED
    (outer,) = [e for e in x if e["name"] == "outer"]
    assert outer["args"] == {"category": "io", "color": f"#{0xFF0000:06x}"} and outer["cat"] == "nvtx,io"
    (opened,) = [e for e in x if e["name"] == "open"]
    assert opened["args"]["unterminated"] is True
    other = doc["otherData"]
    assert (other["unmatched_pops"], other["unterminated_ranges"], other["unmatched_ends"]) == (1, 1, 0)
    assert other["events_recorded"] == 4 * NESTED + 14


def test_pftrace_reads_back_with_perfettos_classes_as_the_json_says(recording, small_batches):
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    _tmp, _raw, pid, tid = recording
    json_out, _, _ = _convert(recording, "ref.json", _paths()[0])
    doc = _strict_json(json_out)
    t0 = doc["otherData"]["t0_ns"]
    expected = sorted((e["name"], e["tid"], round(e["ts"] * 1000) + t0, round((e["ts"] + e["dur"]) * 1000) + t0,
                       e["args"].get("domain"))
                      for e in doc["traceEvents"] if e["ph"] == "X")
    views = {}
    for numpy in _paths():
        out, timeline, _ = _convert(recording, "t.pftrace", numpy)
        p = read_pftrace(out)
        got = sorted((s["name"], p.thread_of(s["track"])[1], s["start"], s["end"],
                      p.tracks[s["track"]][1] if s["track"] in p.tracks else None)
                     for s in p.slices if s["track"] not in p.tracks or p.tracks[s["track"]][1] == "D")
        assert got == expected
        views[numpy] = p
        # bytes per event: the 2 * NESTED small ranges dominate
        assert os.path.getsize(out) / (timeline.event_count) < 20
    p = views[_paths()[0]]
    names = {(v[0], v[1]): v[2] for v in p.threads.values()}
    assert names[(pid, tid)] == "MainThread" and "worker" in names.values()
    assert {v[1] for v in p.processes.values()} == {f"python scenario.py ({pid})"}
    # nesting: level1 inside level0 on the thread track
    depth = {s["name"]: s["depth"] for s in p.slices}
    assert (depth["level0"], depth["level1"], depth["outer"], depth["inner"]) == (0, 1, 0, 0)
    (outer,) = [s for s in p.slices if s["name"] == "outer"]
    assert outer["args"]["color"] == "#ff0000" and outer["categories"] == ["io"]
    (opened,) = [s for s in p.slices if s["name"] == "open"]
    assert opened["args"]["unterminated"] is True
    (asyncs,) = [s for s in p.slices if s["name"] == "async"]
    assert asyncs["args"]["payload"] == -3 and p.tracks[asyncs["track"]][1] == "async"
    marks = {m["name"]: m["args"].get("payload") for m in p.instants}
    assert marks["m"] == 2.5 and math.isnan(marks["nan"]) and marks["-inf"] == -math.inf
    if len(views) == 2:
        a, b = views[True], views[False]
        key = lambda s: (s["name"], s["start"], s["end"], s["depth"], json.dumps(s["args"], default=str))
        assert sorted(map(key, a.slices)) == sorted(map(key, b.slices))
        assert sorted((m["name"], m["ts"]) for m in a.instants) == sorted((m["name"], m["ts"]) for m in b.instants)


#: What ``nsys stats --report nvtx_sum`` computes per range name (its SQL, reduced to the NVTX table).
NSYS_NVTX_SUM = """
    SELECT coalesce(sid.value, e.text) AS name, count(*) AS count, sum(e.end - e.start) AS total,
           avg(e.end - e.start) AS avg, min(e.end - e.start) AS min, max(e.end - e.start) AS max,
           CASE e.eventType WHEN 59 THEN 'PushPop' ELSE 'StartEnd' END AS style
    FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS sid ON e.textId = sid.id
    WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL
    GROUP BY name, style ORDER BY total DESC
"""


def test_sqlite_answers_an_nsys_stats_query_with_the_summary_numbers(recording, small_batches):
    _tmp, _raw, pid, tid = recording
    results = {}
    for numpy in _paths():
        out, timeline, rows = _convert(recording, "t.sqlite", numpy)
        db = sqlite3.connect(out)
        summary = {(name, style): (count, total, mn, mx) for name, count, total, _avg, mn, mx, style
                   in db.execute(NSYS_NVTX_SUM)}
        expected = {(r.name, r.style): (r.count, r.total_ns, r.min_ns, r.max_ns) for r in rows}
        assert summary == expected
        assert summary[("level0", "PushPop")][0] == NESTED
        types = dict(db.execute("SELECT eventType, count(*) FROM NVTX_EVENTS GROUP BY eventType"))
        assert types[59] == 2 * NESTED + 4 and types[60] == 1 and types[34] == 4 and types[75] == 1
        assert types[33] == 1 and types[39] >= 2
        (domain,) = db.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 75").fetchone()
        assert domain == "D"
        assert db.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 33").fetchone() == ("io",)
        threads = dict(db.execute("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"))
        assert threads[pid << 24 | tid] == "MainThread" and "worker" in threads.values()
        payloads = dict(db.execute("SELECT text, coalesce(int64Value, doubleValue) FROM NVTX_EVENTS "
                                   "WHERE eventType IN (34, 59, 60) AND text IN ('inner', 'm', 'work', 'async', 'nan')"))
        assert payloads == {"inner": 7, "m": 2.5, "work": -5, "async": -3, "nan": None}
        (start_end,) = db.execute("SELECT globalTid, endGlobalTid, color FROM NVTX_EVENTS WHERE eventType = 60")
        assert start_end[0] == pid << 24 | tid and start_end[1] != start_end[0]
        assert db.execute("SELECT end FROM NVTX_EVENTS WHERE text = 'open'").fetchone() == (None,)
        results[numpy] = sorted(db.execute("SELECT * FROM NVTX_EVENTS").fetchall(), key=repr)
        db.close()
    if len(results) == 2:
        assert results[True] == results[False]


def test_pandas_reads_the_sqlite_like_an_nsys_export(recording):
    pd = pytest.importorskip("pandas")
    out, _, _ = _convert(recording, "pd.sqlite", _paths()[0])
    with closing(sqlite3.connect(out)) as db:
        df = pd.read_sql("SELECT text, start, end FROM NVTX_EVENTS WHERE eventType = 59", db)
    assert (df[df.text == "level0"].end - df[df.text == "level0"].start > 0).all()
    assert len(df[df.text == "level1"]) == NESTED


def test_fixed_width_rows_are_the_same_bytes_with_and_without_numpy():
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    cols = [[0, 7, 123456789, 10], [0, 5, 999, 1], [3, 2, 1, 0]]
    parts = [',\n{"a":', ".", ',"b":', "}"]
    a = fixed_rows(parts, [np.asarray(c) for c in cols], zero_pad=(1,), use_numpy=True)
    b = fixed_rows(parts, cols, zero_pad=(1,), use_numpy=False)
    assert a == b
    assert json.loads("[" + a.decode()[1:] + "]") == [{"a": 0.0, "b": 3}, {"a": 7.005, "b": 2},
                                                       {"a": 123456789.999, "b": 1}, {"a": 10.001, "b": 0}]


def test_text_rows_print_numbers_and_texts_as_python_does():
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi import _fixedwidth as fixedwidth

    ints = np.array([-2**63, -1, 0, 9, 10, 99, 100, 12345678901, 2**63 - 1], dtype=np.int64)
    n = len(ints)
    mode = np.arange(n) % 3  # nothing, signed, unsigned
    rows = fixedwidth.TextRows(n, fixedwidth._native())
    rows.literal("a=")
    rows.integer(ints)
    rows.literal(" .")
    rows.frac(np.arange(n) * 124 % 1000)
    rows.literal(" x")
    rows.hex(ints)
    rows.literal(" ")
    rows.number(ints, mode)
    names = [b"", b"\xc3\xa9t\xc3\xa9", b"x" * 300] * 3
    rows.text(np.frombuffer(b"".join(names), dtype=np.uint8), np.cumsum([0] + [len(t) for t in names])[:-1],
              np.array([len(t) for t in names]))
    rows.literal(";\n")
    expected = b"".join(b"a=%d .%03d x%x %s%s;\n" % (v, f, v % 2**64, b"" if m == 0 else b"%d" % (v if m == 1 else v % 2**64), t)
                        for v, f, m, t in zip(ints.tolist(), (np.arange(n) * 124 % 1000).tolist(), mode.tolist(), names))
    assert bytes(rows.build()) == expected


def test_text_rows_print_microseconds_as_pythons_float_repr_does():
    """A counter sample's JSON "ts" is repr((t - t0) / 1000.0); TextRows.micros spells it from the integer."""
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi import _fixedwidth as fixedwidth

    rng = np.random.default_rng(7)
    edges = [0, 1, -1, 10, 100, 120, 999, 1000, 1001, 1010, 1100, -1500, -999, 2**50 - 1, -(2**50 - 1)]
    ns = np.concatenate([np.array(edges, dtype=np.int64), rng.integers(-2**50 + 1, 2**50, 2000),
                         rng.integers(-10**7, 10**7, 2000)])
    rows = fixedwidth.TextRows(len(ns), fixedwidth._native())
    rows.literal("[")
    rows.micros(ns)
    rows.literal("]\n")
    assert bytes(rows.build()).decode().splitlines() == [f"[{v / 1000.0!r}]" for v in ns.tolist()]


def test_the_readers_times_in_bulk_are_its_times_one_by_one():
    """Counter samples read as columns (blocks(samples=True)) get the time the Blob of the same record
    gets: _Defs.to_ns_many gives to_ns's integers, or says which it cannot."""
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from types import SimpleNamespace

    rng = np.random.default_rng(3)
    for clock in (recorder._CLOCK_TSC, 0):
        d = recorder._Defs()
        d.header = SimpleNamespace(clock=clock, start_ns=10**12 + 7)
        d.cal_x = [0, 1000, 1000, 5000, 2**21, 2**40]
        d.cal_y = [0, 476, 476, 2381, 998_000, 523_000_000_000]
        d.slope = 0.4761904485676244
        ticks = np.concatenate([rng.integers(0, 2**41, 3000), rng.integers(0, 6000, 3000)]).astype(np.uint64)
        ticks = np.concatenate([ticks, np.array(d.cal_x + [2**52 - 1, 2**52, 2**63, 2**64 - 1], dtype=np.uint64)])
        ns, exact = d.to_ns_many(np, ticks)
        assert exact[:6000].mean() > 0.5 and not exact[-2:].any()
        assert ns[exact].tolist() == [d.to_ns(t) for t in ticks[exact].tolist()]


def test_pftrace_numpy_and_python_encoders_write_the_same_bytes(recording):
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi._trace.model import Timeline
    from nvtx_cffi._trace.pairing import pair_batches
    from nvtx_cffi._trace.pftrace import PerfettoWriter

    _tmp, raw, _pid, _tid = recording
    source = columns.open_recording(raw, numpy=True)
    outs = []
    for force_python in (False, True):
        buf = io.BytesIO()
        w = PerfettoWriter(buf, source.start_ns, compress=False)  # the encoders' packets themselves
        if force_python:
            w._encode_numpy = lambda pb, seq, rows: w._encode_python(pb, seq, rows.tolist())
        for pb in pair_batches(source, Timeline()):
            w.batch(pb)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] and len(outs[0]) > 30 * NESTED


def test_pftrace_packets_are_zlib_compressed_in_lots_that_inflate_to_the_plain_packets(recording, monkeypatch):
    """What Perfetto's tokenizer needs of ``compressed_packets``: zlib data inflating to whole
    ``TracePacket`` fields (tag 0x0a) and nothing else; together the same packets as without
    compression, smaller; a lot ends only at a batch's end."""
    zlib = pytest.importorskip("zlib")
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    from nvtx_cffi._trace import pftrace
    from nvtx_cffi._trace.model import Timeline
    from nvtx_cffi._trace.pairing import pair_batches

    _tmp, raw, _pid, _tid = recording
    monkeypatch.setattr(pftrace, "COMPRESS_CHUNK", 4096)  # several lots from this small recording
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)
    outs, lots = {}, []
    for compress in (False, True):
        source = columns.open_recording(raw, numpy=columns.HAVE_NUMPY)
        buf = io.BytesIO()
        w = pftrace.PerfettoWriter(buf, source.start_ns, compress=compress)
        timeline = Timeline()
        for batch in pair_batches(source, timeline):
            w.batch(batch)
            if compress:
                lots.append(len(buf.getvalue()))
        w.finish(timeline)
        outs[compress] = buf.getvalue()
    plain, packed = outs[False], outs[True]
    outer = pb.Trace.FromString(packed).packet
    assert len(outer) > 2 and all(p.ListFields()[0][0].name == "compressed_packets" and len(p.ListFields()) == 1
                                  for p in outer)
    inflated = [zlib.decompress(p.compressed_packets) for p in outer]
    assert all(chunk[0] == 0x0A for chunk in inflated)
    assert b"".join(inflated) == plain
    assert sum(len(c) for c in inflated[:-1]) >= 4096 * (len(outer) - 1)
    assert len(packed) * 3 < len(plain)
    # at most one lot per batch, written as it ends (sizes taken after each batch), and the rest at finish
    grew = sum(after > before for before, after in zip([0] + lots, lots))
    assert len(outer) == grew + (len(packed) > lots[-1])


def test_the_c_helpers_write_what_the_numpy_paths_write(recording, small_batches, monkeypatch):
    """c/shim/trace_decode.c (block decoding, stack pairing, Perfetto packets, JSON rows) against NumPy alone."""
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi import _fixedwidth as fixedwidth
    from nvtx_cffi._trace import pairing, pftrace

    assert recorder._native_decoder() is not None and pairing._native() is not None
    assert pftrace._native_encoder() is not None and fixedwidth._native() is not None
    tmp, raw, _pid, _tid = recording
    outs = {}
    for native in (True, False):
        if not native:
            for module in (recorder, pairing, pftrace, fixedwidth):
                monkeypatch.setattr(module, "_NATIVE", [None])
        blocks = [b.events.tobytes() for b in recorder.blocks(raw, max_events=700)]
        files = []
        for ending in ("json", "pftrace", "sqlite"):
            out = str(tmp / f"native-{native}.{ending}")
            convert(raw, out)
            if ending == "sqlite":
                files.append(sqlite_rows(out))
            else:
                with open(out, "rb") as f:
                    files.append(f.read())
        outs[native] = (blocks, files)
    assert outs[True] == outs[False]


@pytest.mark.parametrize("ending", ["json", "pftrace", "sqlite"])
def test_progress_counts_what_is_written_and_ends_at_the_finish(recording, small_batches, ending):
    tmp, raw, _pid, _tid = recording
    calls = []

    def progress(done, total):
        calls.append((done, total))

    out = str(tmp / f"progress.{ending}")
    convert(raw, out, progress=progress)
    total = calls[-1][1]
    # (the Event API behind the pure-Python path notes its position every 16 MB and at each file's end)
    assert total > 0 and calls[-1] == (total, total) and len(calls) > (3 if columns.HAVE_NUMPY else 1)
    assert all(done < total for done, _ in calls[:-1])  # 100% only once the trace is finished
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_a_failing_writer_stops_the_reader_thread_and_a_failing_reader_raises_here(recording, small_batches,
                                                                                   monkeypatch):
    import threading

    from nvtx_cffi._trace import pairing
    from nvtx_cffi._trace.convert import open_source, run

    tmp, raw, _pid, _tid = recording
    source = open_source(raw)
    writer = open_writer("json", str(tmp / "fails.json"), source)
    seen = []

    def batch(pb):
        seen.append(pb)
        if len(seen) == 3:
            raise OSError("disk full")

    writer.batch = batch
    with pytest.raises(OSError, match="disk full"):
        run(source, [writer])
    real_pair = pairing._pair_async
    calls = []

    def failing_pair(*args):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("bad batch")
        return real_pair(*args)

    monkeypatch.setattr(pairing, "_pair_async", failing_pair)
    with pytest.raises(RuntimeError, match="bad batch"):
        convert(raw, str(tmp / "fails2.json"))
    assert not [t for t in threading.enumerate() if t.name == "nvtx-cffi-trace-reader"]


def test_the_c_stack_pairing_is_the_numpy_pairing_on_random_batches(monkeypatch):
    if not columns.HAVE_NUMPY:
        pytest.skip("NumPy path only")
    from nvtx_cffi._trace import pairing

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        b = columns.RecordBatch(1, True, {0: None, 1: "a", 2: "b"}, {0: None}, {})
        b.kind = rng.choice(np.array([1, 2, 1, 2, 5, 3], np.uint8), n)
        b.tid = rng.integers(1, 4, n).astype(np.uint32)
        b.domain = rng.integers(0, 2, n).astype(np.uint32)
        b.time = np.sort(rng.integers(0, 10**9, n)).astype(np.int64)
        b.text = rng.integers(0, 3, n).astype(np.uint32)
        b.color = rng.integers(0, 5, n).astype(np.uint32)
        b.has_color = rng.integers(0, 2, n).astype(np.uint8)
        b.category = rng.integers(0, 3, n).astype(np.uint32)
        b.ptype = np.zeros(n, np.uint8)
        b.payload = rng.integers(0, 9, n).astype(np.uint64)
        b.arg = np.zeros(n, np.uint64)
        opened = [(int(rng.integers(1, 4)), int(rng.integers(0, 2)), int(rng.integers(0, 100)), "x", 0, 0, 0, 0, 0, k)
                  for k in range(int(rng.integers(0, 4)))]
        results = []
        for native in (True, False):
            monkeypatch.setattr(pairing, "_NATIVE", [] if native else [None])
            strings = pairing._Strings(b.strings)
            ranges, skip, still_open = pairing._pair_numpy(b, list(opened), strings)
            results.append(([np.asarray(getattr(ranges, f)).tolist() for f in pairing.RANGE_FIELDS], skip.tolist(),
                            still_open, strings._extra))
        assert results[0] == results[1]


def test_counter_samples_in_every_format(tmp_path):
    from types import SimpleNamespace

    from nvtx_cffi._trace.model import Timeline

    tl = Timeline()
    tl.process_names[5] = "p"
    recording = SimpleNamespace(start_ns=1000, end_ns=2500)
    for fmt, name in (("json", "c.json"), ("pftrace", "c.pftrace"), ("sqlite", "c.sqlite")):
        w = open_writer(fmt, str(tmp_path / name), recording)
        w.counter(5, "bytes in flight", "bytes", 1500, 42.0)
        w.counter(5, "bytes in flight", "bytes", 2500, float("nan"))
        w.finish(tl)
        w.close()
    doc = _strict_json(tmp_path / "c.json")
    assert [(e["ph"], e["ts"], e["args"]) for e in doc["traceEvents"] if e["ph"] == "C"] == [
        ("C", 0.5, {"bytes": 42.0}), ("C", 1.5, {"bytes": "NaN"})]
    if pytest.importorskip("perfetto") and pytest.importorskip("google.protobuf"):
        from support.pftrace_check import read_pftrace

        p = read_pftrace(str(tmp_path / "c.pftrace"))
        (track,) = p.counter_tracks
        assert p.tracks[track][1] == "bytes in flight" and p.counter_tracks[track] == "bytes"
        assert p.counters[0] == (track, 1500, 42.0) and math.isnan(p.counters[1][2])
    with closing(sqlite3.connect(tmp_path / "c.sqlite")) as db:
        assert db.execute("SELECT timestamp, name, value FROM NVTX_CFFI_COUNTERS").fetchall() == [
            (500, "bytes in flight", 42.0), (1500, "bytes in flight", None)]


def test_output_name_picks_the_format_and_unknown_endings_are_refused(tmp_path):
    assert [format_for(n) for n in ("a.json", "a.trace.json", "a.pftrace", "a.perfetto-trace", "a.sqlite",
                                    "a.db")] == ["json", "json", "pftrace", "pftrace", "sqlite", "sqlite"]
    script = tmp_path / "s.py"
    script.write_text("import nvtx_cffi as nvtx\nwith nvtx.annotate('x'):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))}
    bad = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(tmp_path / "t.txt"), str(script)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "end the name with one of .json, .pftrace" in bad.stderr
    for name in ("t.pftrace", "t.sqlite"):
        ok = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "--stats", "-o", str(tmp_path / name),
                             str(script)], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert "1 range(s)" in ok.stdout and f"wrote {name}" in ok.stderr


def test_quickstart_pftrace_has_its_ranges(tmp_path):
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    quickstart = str(SOURCE / "examples" / "quickstart.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))}
    out = tmp_path / "q.pftrace"
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(out), quickstart, "--short"],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    p = read_pftrace(str(out))
    slices = sorted((s["name"], s["depth"], s["args"].get("color")) for s in p.slices)
    assert slices == [("f()", 0, "#800080")] + [("loop", 1, "#ff0000")] * 4
    (f,) = [s for s in p.slices if s["name"] == "f()"]
    assert all(f["start"] <= s["start"] <= s["end"] <= f["end"] for s in p.slices)
    assert [v[2] for v in p.threads.values()] == ["MainThread"]


@pytest.mark.slow
def test_a_million_ranges_in_pftrace_read_back_whole(tmp_path, opted_in_slow):
    """1e6 push/pop ranges (as examples/many_ranges.py): every slice read back, <= 15.5 bytes an event."""
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    n = 1_000_000
    raw = tmp_path / "raw"
    env = {**os.environ, **recorder.environment(str(raw))}
    env.pop("NVTX_CFFI_RECORD_MAX_BYTES", None)
    example = str(SOURCE / "examples" / "many_ranges.py")
    subprocess.run([sys.executable, example, str(n)], env=env, check=True, timeout=600)
    out = str(tmp_path / "big.pftrace")
    stats = StatsCollector()
    timeline = convert(str(raw), out, stats=stats)
    p = read_pftrace(out)
    assert len(p.slices) == n and all(s["name"] == "r" and s["end"] >= s["start"] for s in p.slices)
    assert {s["args"]["color"] for s in p.slices} == {"#008000"}
    assert sum(s["end"] - s["start"] for s in p.slices) == stats.rows()[0].total_ns
    assert os.path.getsize(out) / timeline.event_count <= 15.5


EXEC = """
import os, sys
import nvtx_cffi as nvtx
if len(sys.argv) == 1:
    nvtx.push_range("before exec")
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, __file__, "again"])
nvtx.pop_range()   # the new image has nothing open: unmatched, not the end of "before exec"
nvtx.mark("after exec")
"""


def test_an_exec_image_does_not_close_its_predecessors_ranges(tmp_path):
    raw = tmp_path / "raw"
    script = tmp_path / "ex.py"
    script.write_text(EXEC)
    env = {**os.environ, **recorder.environment(str(raw))}
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=60)
    for numpy in _paths():
        out = str(tmp_path / f"ex-{numpy}.json")
        timeline = convert(str(raw), out, numpy=numpy)
        doc = _strict_json(out)
        (before,) = [e for e in doc["traceEvents"] if e.get("name") == "before exec"]
        assert before["args"].get("unterminated") is True, numpy
        assert (timeline.unmatched_pops, timeline.unterminated, timeline.mark_count) == (1, 1, 1)


NO_NUMPY = """
import sys
sys.modules["numpy"] = None  # as on PyPy without NumPy: every 'import numpy' fails
from nvtx_cffi._trace import columns
from nvtx_cffi._trace.convert import convert
from nvtx_cffi._trace.stats import StatsCollector
assert not columns.HAVE_NUMPY
raw, out = sys.argv[1:3]
for name in ("t.json", "t.pftrace", "t.sqlite"):
    stats = StatsCollector()
    convert(raw, out + name, stats=stats, root_pid=int(sys.argv[3]), root_name="python scenario.py")
    print(name, [(r.name, r.count, r.total_ns) for r in stats.rows()])
"""


def test_conversion_without_numpy_gives_the_same_trace(recording, tmp_path):
    _tmp, raw, pid, _tid = recording
    proc = subprocess.run([sys.executable, "-c", NO_NUMPY, raw, str(tmp_path / "nonp-"), str(pid)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    reference, _, rows = _convert(recording, "ref-nonp.json", _paths()[0])
    expected = str([(r.name, r.count, r.total_ns) for r in rows])
    assert proc.stdout.splitlines() == [f"{name} {expected}" for name in ("t.json", "t.pftrace", "t.sqlite")]
    a = validate_chrome_trace(_strict_json(reference))
    b = validate_chrome_trace(_strict_json(tmp_path / "nonp-t.json"))
    assert sorted(json.dumps(e, sort_keys=True) for e in a["traceEvents"]) == sorted(
        json.dumps(e, sort_keys=True) for e in b["traceEvents"])
    with closing(sqlite3.connect(tmp_path / "nonp-t.sqlite")) as db:
        assert db.execute(NSYS_NVTX_SUM).fetchone()[:3] == (rows[0].name, rows[0].count, rows[0].total_ns)


@pytest.mark.skipif(np is None, reason="a uint64 counter is a NumPy-dtype counter")
def test_uint64_values_past_sqlites_integers_are_stored_not_raised(tmp_path):
    """A dropped count of 2**64-1 (a corrupt header), a start range id >= 2**63 and a uint64 counter's
    sample past 2**63-1 raised OverflowError in the SQLite writer (the JSON took them)."""
    import struct

    raw = tmp_path / "raw"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))},
           **recorder.environment(raw)}
    code = textwrap.dedent("""
        import nvtx_cffi as nvtx
        nvtx.get_domain("D").get_counter("big", "uint64").sample(2**64 - 1)
        nvtx.end_range(nvtx.start_range("s", color="red"))
    """)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    (path,) = raw.glob("*.nvtxrec")
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 88, 2**64 - 1)  # nvtxrec_file_header.dropped
    # the start's colour word becomes a RANGE_ID_HI word (0x17) with the top bit of the id set
    off = 4096 + 32
    while data[off] != 3:  # the start's head word
        off += 8
    off += 8
    while data[off] != 0x11:
        off += 8
    struct.pack_into("<Q", data, off, 0x17 | (0x80 << 8))
    path.write_bytes(bytes(data))
    (start,) = [e for e in recorder.read(raw).events if e.kind == "start"]
    assert start.range_id >= 1 << 63
    timeline = convert(str(raw), str(tmp_path / "t.sqlite"), "sqlite")
    assert timeline.dropped == 2**64 - 1 and convert(str(raw), str(tmp_path / "t.json"), "json").dropped == 2**64 - 1
    with closing(sqlite3.connect(tmp_path / "t.sqlite")) as db:
        meta = dict(db.execute("SELECT key, value FROM NVTX_CFFI_META"))
        (range_id,) = db.execute("SELECT rangeId FROM NVTX_EVENTS WHERE eventType = 60").fetchone()
        (value,) = db.execute("SELECT value FROM NVTX_CFFI_COUNTERS WHERE name = 'big'").fetchone()
    assert meta["dropped_events"] == 2**63 - 1  # a count: the largest INTEGER, "at least this many"
    assert range_id < 0 and range_id & (2**64 - 1) == start.range_id  # an id: its 64 bits
    assert value == float(2**64 - 1)  # REAL column


def _record(tmp_path, code, name="raw"):
    """A recording of the Python program ``code``: its directory."""
    raw = tmp_path / name
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))},
           **recorder.environment(raw)}
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, check=True, timeout=120)
    return str(raw)


def test_sqlite_names_the_domain_and_category_of_ranges_and_marks_inserted_in_blocks(tmp_path):
    """Rows without payload are inserted in blocks: their domain and category still get their
    eventType 75 and 33 rows, as rows inserted one by one do."""
    raw = _record(tmp_path, """
        import nvtx_cffi as nvtx
        for i in range(1000):
            with nvtx.annotate("x", domain="D", category="io"):
                nvtx.mark("m", domain="E", category="net")
    """)
    for numpy in _paths():
        out = str(tmp_path / f"names-{numpy}.sqlite")
        convert(raw, out, numpy=numpy)
        with closing(sqlite3.connect(out)) as db:
            names = db.execute("SELECT eventType, domainId, category, text FROM NVTX_EVENTS "
                               "WHERE eventType IN (33, 75) ORDER BY eventType, text").fetchall()
            domains = dict(db.execute("SELECT text, domainId FROM NVTX_EVENTS WHERE eventType IN (34, 59)"))
        assert [(t, c, text) for t, _d, c, text in names] == [(33, 1, "io"), (33, 1, "net"), (75, None, "D"),
                                                             (75, None, "E")], numpy
        assert {(text, d) for t, d, _c, text in names if t == 75} == {("D", domains["x"]), ("E", domains["m"])}


#: NVTX payload type (NVTX_PAYLOAD_TYPE_*) -> (name, first value): tests/c/nvtx_client.c client_payloads
#: records N_PAYLOADS ranges and marks from the first value on (the integers wrap round their type)
PAYLOAD_TYPES = {1: ("uint64", -1000), 2: ("int64", -1000), 3: ("double", -1000), 4: ("uint32", -1000),
                 5: ("int32", 2**31 - 1000), 6: ("float", -1000)}
N_PAYLOADS = 2000


def _payload(ptype, i):
    """What client_payloads sent as payload i of type ptype, as a Python number."""
    if ptype == 1:
        return i % 2**64
    if ptype == 2:
        return i
    if ptype == 3:
        return i / 3
    if ptype == 4:
        return i % 2**32
    if ptype == 5:
        return (i + 2**31) % 2**32 - 2**31
    return float(np.float32(i) / np.float32(3))


@pytest.fixture(scope="module")
def payload_recording(tmp_path_factory, client_lib):
    """Ranges, marks and a start/end range with payloads of each scalar type, from a C client; the odd
    types in domain "D", each in category <type code>."""
    calls = "".join(f"lib.client_payloads({t}, {first}, {N_PAYLOADS}, b'{name}', {b'D' if t % 2 else None!r}, {t}, 0)\n"
                    for t, (name, first) in PAYLOAD_TYPES.items())
    return _record(tmp_path_factory.mktemp("payloads"), f"""
import ctypes
lib = ctypes.CDLL({client_lib!r})
lib.client_payloads.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.c_uint32, ctypes.c_uint32]
""" + calls)


@pytest.mark.skipif(not columns.HAVE_NUMPY, reason="the fast path is NumPy's")
def test_scalar_payloads_read_back_from_each_format_written_on_the_fast_path(payload_recording, tmp_path,
                                                                             monkeypatch):
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    from nvtx_cffi._trace import chrome, pftrace
    from nvtx_cffi._trace import sqlite as sqlite_writer

    def per_row(*_args):
        raise AssertionError("a row with a scalar payload took the row-by-row Python path")

    monkeypatch.setattr(pftrace.PerfettoWriter, "_encode_python", per_row)
    monkeypatch.setattr(chrome.ChromeTraceWriter, "_styles", per_row)  # (the Python rows' heads)
    one_by_one = []
    payload_columns = sqlite_writer._payload_columns
    monkeypatch.setattr(sqlite_writer, "_payload_columns",
                        lambda ptype, raw: one_by_one.append(ptype) or payload_columns(ptype, raw))
    out = {ending: str(tmp_path / f"fast.{ending}") for ending in ("json", "pftrace", "sqlite")}
    for path in out.values():
        convert(payload_recording, path)
    assert sorted(one_by_one) == list(PAYLOAD_TYPES)  # SQLite: the start/end ranges alone, one a type
    expected = {name: [_payload(t, i) for i in range(first, first + N_PAYLOADS)]
                for t, (name, first) in PAYLOAD_TYPES.items()}
    firsts = {name: values[0] for name, values in expected.items()}
    events = sorted(_strict_json(out["json"])["traceEvents"], key=lambda e: e.get("ts", 0))
    p = read_pftrace(out["pftrace"])

    def track_name(s):
        """A domain's track, a start/end range's (their names), or the thread's own (None)."""
        return p.tracks[s["track"]][1] if s["track"] in p.tracks else None

    db = sqlite3.connect(out["sqlite"])
    try:
        for t, (name, _first) in PAYLOAD_TYPES.items():
            domain, category = ("D" if t % 2 else None), str(t)
            for ph in ("X", "i"):
                rows = [e for e in events if e["name"] == name and e["ph"] == ph]
                assert [e["args"]["payload"] for e in rows] == expected[name], (name, ph)
                assert {(e["args"].get("domain"), e["args"]["category"]) for e in rows} == {(domain, category)}
            (b,) = [e for e in events if e["name"] == name and e["ph"] == "b"]
            assert b["args"]["payload"] == firsts[name]
            for items, time in ((p.slices, "start"), (p.instants, "ts")):  # on the thread's or domain's track
                rows = sorted((s for s in items if s["name"] == name and track_name(s) == domain), key=lambda s: s[time])
                assert [s["args"]["payload"] for s in rows] == expected[name], name
                assert {tuple(s["categories"]) for s in rows} == {(category,)}
            (start_end,) = [s for s in p.slices if s["name"] == name and track_name(s) == name]
            assert start_end["args"]["payload"] == firsts[name]
            column = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value", "floatValue")[t - 1]
            for event_type in (59, 34, 60):
                got = db.execute(f"SELECT {column}, category, domainId != 0 FROM NVTX_EVENTS WHERE text = ? AND "
                                 "eventType = ? ORDER BY start", (name, event_type)).fetchall()
                values = [v % 2**64 if t == 1 else v for v, _c, _d in got]
                assert values == (expected[name] if event_type != 60 else [firsts[name]]), (name, event_type)
                assert {(c, d) for _v, c, d in got} == {(t, bool(domain))}
            others = " + ".join(f"({c} IS NOT NULL)" for c in ("uint64Value", "int64Value", "doubleValue",
                                                                "uint32Value", "int32Value", "floatValue"))
            assert db.execute(f"SELECT max({others}) FROM NVTX_EVENTS WHERE text = ?", (name,)).fetchone() == (1,)
    finally:
        db.close()


@pytest.mark.skipif(not columns.HAVE_NUMPY, reason="the fast path is NumPy's")
def test_scalar_payloads_are_the_same_bytes_on_the_fast_and_the_pure_python_paths(payload_recording, tmp_path):
    outs = {}
    for numpy in (True, False):
        for ending in ("json", "pftrace", "sqlite"):
            path = str(tmp_path / f"{numpy}.{ending}")
            convert(payload_recording, path, numpy=numpy)
            if ending == "sqlite":
                with closing(sqlite3.connect(path)) as db:
                    outs[numpy, ending] = list(db.iterdump())
            else:
                with open(path, "rb") as f:
                    outs[numpy, ending] = f.read()
    for ending in ("json", "pftrace", "sqlite"):
        assert outs[True, ending] == outs[False, ending], ending
