"""Extended (binary) payloads, and the differential test: the same program under nvtx 0.2.16 and
nvtx-cffi hands the recorder the same schemas, counters, samples and payload bytes."""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import textwrap
from contextlib import closing

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import recorder
from nvtx_cffi.ext_records import ExtDecoder, parse_counter, parse_schema
from support.paths import SOURCE

np = pytest.importorskip("numpy")


def decoded(events, kinds=("push", "start", "mark")):
    decoder = ExtDecoder()
    # Schemas registered before the capture (an earlier test's): every registration in the file.
    for e in recorder.read_file(recorder.current_file()).events:
        if e.kind == "blob" and e.name in ("schema", "counter_group"):
            decoder.feed(e)
    out = []
    for e in events:
        decoder.feed(e)
        if e.kind in kinds:
            out.append((e.kind, e.message, e.payload_type) + decoder.payload_of(e))
    return out


@pytest.mark.parametrize(("payload", "expected"), [
    (np.arange(4), [0, 1, 2, 3]),
    ([1.5, 2.5], [1.5, 2.5]),
    ((1, 2, 3), [1, 2, 3]),
    (range(3), [0, 1, 2]),
    (b"abc", b"abc"),
    (np.arange(10, dtype=np.int16)[::3], [0, 3, 6, 9]),  # not contiguous
    (np.arange(6, dtype=np.uint8).reshape(2, 3), [0, 1, 2, 3, 4, 5]),  # flattened, as nvtx
    (np.array(1.5, dtype=np.float32), 1.5),  # 0-d: the scalar schema, no length
    (np.array([(1, 2.5)], dtype=[("a", "i4"), ("b", "f8")]), [{"a": 1, "b": 2.5}]),
    (["ab", "c"], ["ab", "c"]),
    # NumPy's other C integer types of a size (long long beside long): a list of a uint64-only int
    # makes one, and so does dtype "q"
    ([2**63, 1], [2**63, 1]),
    (np.array([-5, 6], dtype=np.longlong), [-5, 6]),
    (np.array([7], dtype=np.ulonglong), [7]),
    (np.array([1, 2], dtype=np.intc), [1, 2]),
    (np.array([3], dtype="B"), [3]),
])
def test_payload_types(payload, expected):
    with _no_warning():
        with recorder.capture() as got:
            nvtx.mark("m", payload=payload)
    ((kind, message, ptype, value, truncated),) = decoded(got)
    assert (kind, message, ptype, value, truncated) == ("mark", "m", "ext", expected, False)


class _no_warning:
    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *a):
        self._w.__exit__(*a)


def test_ranges_annotate_and_domain_calls_carry_payloads():
    data = [1, 2]
    d = nvtx.get_domain("pl")
    attrs = d.get_event_attributes(message="dm", payload=np.array([7, 8], dtype=np.int32))
    with recorder.capture() as got:
        nvtx.push_range("p", payload=(4, 5))
        nvtx.pop_range()
        rid = nvtx.start_range("s", payload=[0.5])
        nvtx.end_range(rid)
        a = nvtx.annotate("a", payload=data)
        with a:
            pass
        data.append(3)  # a list is read at each entry, as nvtx's annotate does
        with a:
            pass
        d.mark(attrs)
        d.push_range(attrs)
        d.pop_range()

        @nvtx.annotate("f", payload=np.arange(2))
        def f():
            return 1
        assert f() == 1
    got_ = decoded(got)
    assert [(k, m, v) for k, m, _, v, _ in got_] == [
        ("push", "p", [4, 5]), ("start", "s", [0.5]), ("push", "a", [1, 2]), ("push", "a", [1, 2, 3]),
        ("mark", "dm", [7, 8]), ("push", "dm", [7, 8]), ("push", "f", [0, 1])]


def test_str_and_dict_warn_and_send_no_payload():
    for payload in ("text", {"a": 1}):
        with pytest.warns(nvtx._payload.NvtxWarning, match="Unsupported payload type"):
            with recorder.capture() as got:
                nvtx.mark("w", payload=payload)
        ((kind, message, ptype, value, _),) = decoded(got)
        assert (kind, message, ptype, value) == ("mark", "w", None, None)


def test_empty_array_sends_no_payload():
    with recorder.capture() as got:
        nvtx.mark("e", payload=np.array([], dtype=np.int64))
    assert [(k, m, t) for k, m, t, *_ in decoded(got)] == [("mark", "e", None)]


def test_a_dtype_of_more_fields_than_a_schema_holds_raises_instead_of_sending_an_undecodable_payload():
    """The shim's schemas hold at most NVTXCFFI_MAX_SCHEMA_ENTRIES entries; one field more used to
    be registered as schema 0 and the payload sent under it, which no reader can decode."""
    limit = nvtx._native.lib.NVTXCFFI_MAX_SCHEMA_ENTRIES
    too_many = np.dtype([(f"f{i}", np.int8) for i in range(limit + 1)])
    text = f"a NumPy dtype of {limit + 1} fields is not supported in an NVTX payload (at most {limit} fields)"
    with recorder.capture() as got:
        with pytest.raises(ValueError, match=re.escape(text)):
            nvtx.mark("too many", payload=np.ones(1, too_many))
        with pytest.raises(ValueError, match=re.escape(text)):
            nvtx.get_domain("wide").get_counter("too many", too_many)
        nvtx.mark("at the limit", payload=np.ones(1, [(f"f{i}", np.int8) for i in range(limit)]))
    ((kind, message, ptype, value, truncated),) = decoded(got)
    assert (kind, message, ptype, truncated, len(value)) == ("mark", "at the limit", "ext", False, 1)
    # The recorder keeps a schema record within its 64 KiB bound: the fields it holds decode.
    assert list(value[0].items()) == [(f"f{i}", 1) for i in range(len(value[0]))] and len(value[0]) > 1000


def test_schemas_are_registered_once_per_domain_and_dtype():
    with recorder.capture() as got:
        for i in range(5):
            nvtx.mark("once", payload=np.arange(i + 1, dtype=np.int16), domain="schema-once")
    schemas = [e for e in got if e.kind == "blob" and e.name == "schema"]
    assert len(schemas) == 2  # int16 and "array of int16"; none more for 4 further calls
    assert [v for *_, v, _ in decoded(got)] == [list(range(i + 1)) for i in range(5)]


def test_huge_payload_is_cut_in_the_recorder_not_in_nvtx():
    big = np.arange(100_000, dtype=np.int64)  # 800 KB
    with recorder.capture() as got:
        nvtx.mark("big", payload=big)
    ((_, _, _, value, truncated),) = decoded(got)
    assert truncated is True
    assert value == list(range(len(value))) and 0 < len(value) < 100_000


# --------------------------------------------------------------------------- differential

PROGRAM = r"""
import sys, numpy as np
if sys.argv[1] == "nvtx":
    import nvtx
else:
    import nvtx_cffi as nvtx
d = nvtx.get_domain("diff")
c = d.get_counter("bytes", int, semantics=nvtx.CounterSemantics(unit="B", min=0, max=1 << 40,
                  value_type=nvtx.CounterValueType.DELTA, interpolation=nvtx.CounterInterpolation.LINEAR,
                  unit_scale_numerator=1, unit_scale_denominator=1024), description="moved", scope="/a/b")
f = d.get_counter("loss", float, semantics=nvtx.CounterSemantics(min=-1.5, max=2.5),
                  time_domain=nvtx.TimestampType.CPU_CLOCK_GETTIME_MONOTONIC)
g = d.get_counter("mem", nvtx.numpy_dtype([
    ("alloc", nvtx.numpy_dtype(np.int64, counter_semantics=nvtx.CounterSemantics(unit="bytes"))),
    ("util", np.float32),
    ("ts", nvtx.numpy_dtype(np.int64, entry_kind=nvtx.EntryKind.COUNTER_TIMESTAMP))]))
h = d.get_counter("u8", np.uint8, scope="/proc")
c.sample(5); c.sample(-7); f.sample(0.5); h.sample(200)
c.sample_no_value(nvtx.CounterNoValueReason.UNAVAILABLE)
ts = [d.get_timestamp() for _ in range(3)]
c.batch_submit([1, 2, 3], ts)
f.batch_submit(np.array([0.1, 0.2]), ts[:2])
g.sample((10, 0.5, 99))
g.batch_submit(np.array([(1, 0.25, 7), (2, 0.75, 8)], dtype=g.dtype), ts[1:])
for p in (np.arange(4), [1.5, 2.5], (1, 2), range(3), b"xyz", np.arange(12, dtype=np.int16)[::4],
          np.zeros(2, dtype=[("a", "i4"), ("b", "f8"), ("s", "S3")]), np.array(2.0),
          np.array(["ab", "c"]), np.zeros(2, dtype=[("v", "f4", (3,))])):
    nvtx.mark("m", payload=p, domain="diff")
nvtx.push_range("p", payload=np.arange(3, dtype=np.uint32)); nvtx.pop_range()
r = nvtx.start_range("s", payload=[7, 8]); nvtx.end_range(r)
"""


def _record(library: str, tmp_path) -> list:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    out = tmp_path / library
    env = {**os.environ, **recorder.environment(out)}
    env.pop("NVTX_DISABLE", None)
    subprocess.run([sys.executable, str(path), library], env=env, check=True, cwd=str(tmp_path), timeout=120)
    return recorder.read(out).events


def _normalized(events) -> list:
    """The extension records and payload-carrying events, with tool-given ids renumbered by first
    appearance and batch timestamps replaced by their rank (their meaning: the tool's clock, checked
    apart)."""
    ids: dict = {}

    def rid(x):
        return ids.setdefault(x, len(ids)) if x >= 1 << 24 else x

    out = []
    for e in events:
        if e.kind == "blob":
            if e.name == "schema":
                s = parse_schema(e.target, e.data)
                out.append(("schema", e.domain, rid(s.id), s.field_mask, s.type, s.flags, s.static_size,
                            [(x.flags, rid(x.type), x.array_detail, x.offset, x.name, x.description, x.semantics)
                             for x in s.entries]))
            elif e.name == "counter_group":
                c = parse_counter(e.target, e.domain, e.data)
                out.append(("counter", e.domain, rid(c.id), rid(c.schema_id), rid(c.scope_id), c.name,
                            c.description, c.semantics))
            elif e.name == "counter_sample":
                data = bytearray(e.data)
                mode, _, _, item, n = struct.unpack_from("<BBHIQ", data)
                if mode == 4:
                    for i in range(n):
                        struct.pack_into("<q", data, 16 + i * (8 + item), 0)
                out.append(("sample", e.domain, rid(e.target), bytes(data)))
            elif e.name == "payload":
                out.append(("payload", e.domain, rid(e.target), e.data))
            else:
                out.append((e.name, e.domain, rid(e.target), e.data))
        elif e.kind in ("push", "start", "mark"):
            out.append((e.kind, e.domain, e.message, e.payload_type))
    return out


def test_same_records_as_nvtx(tmp_path):
    pytest.importorskip("nvtx")
    theirs = _record("nvtx", tmp_path)
    ours = _record("nvtx_cffi", tmp_path)
    a, b = _normalized(theirs), _normalized(ours)
    assert len(a) > 30
    assert b == a
    # batch timestamps: the tool's clock in both, inside the run
    for events in (theirs, ours):
        decoder = ExtDecoder()
        start, end = events[0].time_ns, events[-1].time_ns
        batched = [s for e in events for s in decoder.feed(e) if s.time_ns != e.time_ns]
        assert len(batched) == 3 + 2 + 2
        assert all(start <= s.time_ns <= end for s in batched)


def test_trace_of_the_counter_example_has_counter_tracks(tmp_path):
    """The counters example of docs/counters.md, traced: a "C" event per sample and field, a counter table in --stats."""
    example = str(SOURCE / "examples" / "counters.py")
    out = tmp_path / "counters.trace.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    png = tmp_path / "counters.png"
    pytest.importorskip("matplotlib")
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "--stats", "-o", str(out), "--png", str(png),
                           example],
                          env=env, capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trace = json.loads(out.read_text())
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert names == {"training: loss", "training: queue depth", "training: memory.allocated",
                     "training: memory.reserved"}
    assert len([e for e in counters if e["name"] == "training: queue depth"]) == 55
    assert {tuple(e["args"]) for e in counters if e["name"] == "training: queue depth"} == {("items",)}
    marks = [e for e in trace["traceEvents"] if e["ph"] == "i" and e["name"] == "gradients"]
    assert len(marks) == 50 and all(len(m["args"]["payload"]) == 4 for m in marks)
    assert "NVTX counter summary: 4 counter track(s)" in proc.stdout
    row = [line for line in proc.stdout.splitlines() if line.endswith("training: queue depth")][0]
    mean = sum([i % 7 for i in range(50)] + [1, 2, 3, 2, 1]) / 55
    assert row.split()[:6] == ["55", "0", "6", f"{mean:.6g}", "1", "items"]


def test_png_collector_draws_a_line_per_counter(tmp_path):
    pytest.importorskip("matplotlib")
    from nvtx_cffi._trace.model import Timeline
    from nvtx_cffi._trace.png import PngCollector, write_png

    collected = PngCollector()
    for i in range(10):
        collected.counter(1, "loss", None, 1000 + i * 100, 1.0 / (i + 1))
        collected.counter(1, "depth", "items", 1000 + i * 100, i % 3)
    for i in range(20):  # bounded: no more tracks than MAX_COUNTER_TRACKS
        collected.counter(2, f"c{i}", None, 1000, 0)
    assert len(collected.counters) == PngCollector.MAX_COUNTER_TRACKS
    timeline = Timeline()
    timeline.threads.add((1, 1))
    timeline.start_ns, timeline.end_ns = 1000, 2000
    path = tmp_path / "t.png"
    write_png(timeline, str(path), collected=collected)
    assert path.stat().st_size > 1000


def test_counters_and_binary_payloads_convert_alike_with_and_without_numpy(tmp_path):
    """The columnar conversion (NumPy blocks) and the Event-API one (PyPy's) decode the same counter
    samples and binary payloads, in every output format."""
    import sqlite3

    from nvtx_cffi._trace.convert import convert
    from nvtx_cffi._trace.counters import CounterStats

    raw = tmp_path / "raw"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    env.update(recorder.environment(str(raw)))
    proc = subprocess.run([sys.executable, str(SOURCE / "examples" / "counters.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = {}
    for use_numpy in (True, False):
        table = CounterStats()
        out = tmp_path / f"t{int(use_numpy)}.json"
        convert(str(raw), str(out), numpy=use_numpy, counter_stats=table)
        events = json.loads(out.read_text())["traceEvents"]
        counters = sorted((e["name"], e["ts"], json.dumps(e["args"])) for e in events if e["ph"] == "C")
        payloads = [e["args"].get("payload") for e in events if e["ph"] == "i" and e["name"] == "gradients"]
        db = tmp_path / f"t{int(use_numpy)}.sqlite"
        convert(str(raw), str(db), numpy=use_numpy)
        with closing(sqlite3.connect(db)) as con:
            rows = con.execute("SELECT name, unit, count(*), sum(value) FROM NVTX_CFFI_COUNTERS GROUP BY name, unit"
                               " ORDER BY name").fetchall()
        seen[use_numpy] = (counters, payloads, table.rows(), rows)
    assert seen[True] == seen[False]
    counters, payloads, table, rows = seen[True]
    assert len(payloads) == 50 and all(isinstance(p, list) and len(p) == 4 for p in payloads)
    assert {r["counter"] for r in table} == {"loss", "queue depth", "memory.allocated", "memory.reserved"}
    assert [r[:3] for r in rows if r[0] == "queue depth"] == [("queue depth", "items", 55)]


def test_the_counter_example_traced_to_pftrace_has_a_perfetto_counter_track_per_counter(tmp_path):
    """docs/counters.md: ``trace -o counters.pftrace examples/counters.py`` opens in Perfetto with counter tracks."""
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    out = tmp_path / "counters.pftrace"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(out),
                           str(SOURCE / "examples" / "counters.py")],
                          env=env, capture_output=True, text=True, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    trace = read_pftrace(str(out))
    names = {trace.tracks[uuid][1]: unit for uuid, unit in trace.counter_tracks.items()}
    assert set(names) == {"training: loss", "training: queue depth", "training: memory.allocated",
                          "training: memory.reserved"}
    assert names["training: queue depth"] == "items"
    by_track = {}
    for track, _ts, value in trace.counters:
        by_track.setdefault(trace.tracks[track][1], []).append(value)
    assert sorted(by_track["training: queue depth"]) == sorted([i % 7 for i in range(50)] + [1, 2, 3, 2, 1])
    assert len(by_track["training: memory.allocated"]) == 50
    assert max(by_track["training: memory.allocated"]) == 1024 * 49
    assert sum(1 for s in trace.slices if s["name"] == "step") == 50


@pytest.mark.parametrize(("payload", "expected"), [
    (np.arange(4), [0, 1, 2, 3]),
    ([1.5, 2.5], [1.5, 2.5]),
    (np.arange(10, dtype=np.int16)[::3], [0, 3, 6, 9]),  # not contiguous: the general path each time
    (np.arange(6, dtype=np.uint8).reshape(2, 3), [0, 1, 2, 3, 4, 5]),
    (np.array(1.5, dtype=np.float32), 1.5),
    (np.array([(1, 2.5)], dtype=[("a", "i4"), ("b", "f8")]), [{"a": 1, "b": 2.5}]),
])
def test_repeated_payloads_take_the_cached_path_alike(payload, expected):
    """The first call registers and caches the schemas; later ones (the per-call path: cached schema,
    buffer, one C call) send the same thing, from every spelling."""
    d = nvtx.get_domain("repeat-" + str(np.asarray(payload).dtype))
    with _no_warning():
        with recorder.capture() as got:
            for _ in range(3):
                nvtx.mark("m", payload=payload)
                nvtx.end_range(nvtx.start_range("s", payload=payload))
                with nvtx.annotate("a", payload=payload, domain="repeat-ann"):
                    pass
                d.mark(message="dm", payload=payload)
                nvtx.push_range("inline", color=0x123456, payload=payload, domain="repeat-ann")
                nvtx.pop_range(domain="repeat-ann")
    got_ = decoded(got)
    assert [(k, m, t, v, tr) for k, m, t, v, tr in got_] == [
        (k, m, "ext", expected, False)
        for k, m in [("mark", "m"), ("start", "s"), ("push", "a"), ("mark", "dm"), ("push", "inline")]] * 3


def test_zero_d_array_is_an_extended_payload_of_its_dtype_as_in_nvtx():
    # (a 0-d integer array was sent as an int64 scalar payload; nvtx 0.2.16 sends an extended
    # payload with its dtype's scalar schema, the first such payload of a process included)
    with recorder.capture() as got:
        for _ in range(2):
            nvtx.mark("z", payload=np.array(7))
            nvtx.mark("f", payload=np.array(2.5, dtype=np.float32))
    assert [(k, m, t, v) for k, m, t, v, _ in decoded(got)] == [("mark", "z", "ext", 7), ("mark", "f", "ext", 2.5)] * 2


def test_numpy_is_imported_at_the_first_payload_that_needs_it(tmp_path):
    # `import nvtx_cffi`, ranges, marks and scalar payloads never import NumPy (~170 ms); a list
    # payload imports it and is sent as a binary payload, as when it was imported up front.
    env = {**os.environ, **recorder.environment(str(tmp_path))}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        import nvtx_cffi as nvtx
        before = "numpy" in sys.modules
        with nvtx.annotate("a", color="red", payload=3):
            nvtx.mark("m", payload=2.5)
        c = nvtx.get_domain("d")
        c.mark(message="dm", payload=7)
        print("numpy after ranges and marks:", before or "numpy" in sys.modules)
        nvtx.mark("list", payload=[1, 2, 3])
        print("numpy after a list payload:", "numpy" in sys.modules)
    """)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["numpy after ranges and marks: False", "numpy after a list payload: True"]
    decoder = ExtDecoder()
    got = []
    for e in recorder.read(tmp_path).events:
        decoder.feed(e)
        if e.kind in ("push", "mark"):
            got.append((e.message, e.payload_type, e.payload if e.payload_type != "ext" else decoder.payload_of(e)))
    assert got == [("a", "int64", 3), ("m", "double", 2.5), ("dm", "int64", 7), ("list", "ext", ([1, 2, 3], False))]


def test_annotate_with_a_new_array_each_call_sends_each_one():
    """``with annotate(..., payload=array)``: a new array (new values) each call, from a keyword and a
    positional spelling, nested in itself, held past its ``with``, 0-d, empty and strided: each push
    carries its own array, as the attributes' path sends it."""
    arrays = [np.arange(3) + 10 * i for i in range(4)]
    with _no_warning():
        with recorder.capture() as got:
            for i, arr in enumerate(arrays):
                with nvtx.annotate("kw", color="red", payload=arr):
                    with nvtx.annotate("kw", color="red", payload=arr * 2):  # same template, outer held
                        pass
                with nvtx.annotate("pos", "red", "arrays", None, arr.astype(np.float32) / 2) as held:
                    pass
                assert held.payload.tolist() == (arr / 2).tolist() and held.attributes.payload is held.payload
                with nvtx.annotate("kw", color="red", payload=np.array(i)):  # 0-d: its dtype's scalar schema
                    pass
                with nvtx.annotate("kw", color="red", payload=np.arange(i * 4)[::2]):  # strided; empty at i=0
                    pass
    pushes = [e for e in got if e.kind == "push"]
    got_ = [(m, t, v if t == "ext" else e.payload)
            for (k, m, t, v, _), e in zip([d for d in decoded(got) if d[0] == "push"], pushes)]
    expected = []
    for i, arr in enumerate(arrays):
        expected += [("kw", "ext", arr.tolist()), ("kw", "ext", (arr * 2).tolist()),
                     ("pos", "ext", (arr / 2).tolist()), ("kw", "ext", i)]
        expected.append(("kw", "ext", list(range(0, i * 4, 2))) if i else ("kw", None, None))
    assert got_ == expected
    assert {e.color for e in pushes} == {0xFF0000}
    assert {e.domain for e in pushes if e.message == "pos"} == {"arrays"}


def test_module_level_calls_with_a_new_array_each_call_send_each_one():
    """mark/push_range and Domain keyword calls with an array payload that changes every call (C
    sends it with the call site's slot): each event carries its own array; 0-d and strided arrays
    and start_range as the Python path sends them."""
    arrays = [np.arange(3, dtype=np.int32) + 10 * i for i in range(4)]
    d = nvtx.get_domain("arrays-domain")
    with _no_warning():
        with recorder.capture() as got:
            for i, arr in enumerate(arrays):
                nvtx.mark("m", payload=arr)
                nvtx.mark("m", "green", "arrays-module", 3, arr * 2)
                nvtx.push_range(message="p", color="red", payload=arr + 1, domain="arrays-module")
                nvtx.pop_range(domain="arrays-module")
                nvtx.mark("m", payload=np.array(i, dtype=np.int32))  # 0-d: its dtype's scalar schema
                nvtx.mark("m", payload=arr[::2])
                nvtx.end_range(nvtx.start_range("s", payload=arr))
                d.mark(message="dm", payload=arr + 2)
                d.push_range(message="dp", color="red", payload=arr + 3)
                d.pop_range()
                d.end_range(d.start_range(message="ds", payload=arr + 4))
    events = [e for e in got if e.kind in ("mark", "push", "start")]
    got_ = [(e.kind, e.message, e.domain, t, v if t == "ext" else e.payload)
            for (_, _, t, v, _), e in zip(decoded(got), events)]
    expected = []
    for i, arr in enumerate(arrays):
        expected += [("mark", "m", None, "ext", arr.tolist()), ("mark", "m", "arrays-module", "ext", (arr * 2).tolist()),
                     ("push", "p", "arrays-module", "ext", (arr + 1).tolist()), ("mark", "m", None, "ext", i),
                     ("mark", "m", None, "ext", arr[::2].tolist()), ("start", "s", None, "ext", arr.tolist()),
                     ("mark", "dm", "arrays-domain", "ext", (arr + 2).tolist()),
                     ("push", "dp", "arrays-domain", "ext", (arr + 3).tolist()),
                     ("start", "ds", "arrays-domain", "ext", (arr + 4).tolist())]
    assert got_ == expected
    assert [e.category for e in events if e.domain == "arrays-module" and e.kind == "mark"] == [3] * 4


ARRAYS_ONLY = r"""
import json
import numpy as np
import nvtx_cffi as nvtx
from nvtx_cffi import _accel, _payload, recorder
from nvtx_cffi.ext_records import ExtDecoder

python_emits = []
emit = _payload.emit
def counted(*args):  # the Python paths look emit up here; C holds the function itself
    python_emits.append(args[0])
    return emit(*args)
_payload.emit = counted

with recorder.capture() as got:
    for i in range(5):  # nothing but mark and push_range with arrays in this program
        nvtx.mark("m", payload=np.arange(3) + i)
        nvtx.push_range("p", color="red", payload=np.arange(2, dtype=np.float32) * i)
        nvtx.pop_range()
decoder = ExtDecoder()
values = []
for e in got:
    decoder.feed(e)
    if e.kind in ("mark", "push"):
        values.append((e.kind, e.message, decoder.payload_of(e)[0]))
print(json.dumps({"accelerated": _accel.accel is not None, "python_emits": len(python_emits), "values": values}))
"""


def test_arrays_take_the_c_path_in_a_program_that_only_marks_them():
    """The first arrays of a dtype go through the Python path, which checks the dtype and tells the
    accelerator; every later one is sent from C (with the accelerator), in any program."""
    from conftest import run_python

    out = json.loads(run_python(ARRAYS_ONLY).stdout.strip().splitlines()[-1])
    assert out["values"] == [e for i in range(5) for e in (["mark", "m", [i, i + 1, i + 2]],
                                                          ["push", "p", [0.0, float(i)]])]
    # accelerated: the first two marks and pushes only (a message's first call is sent inline, its
    # second prepares its slot: see Domain._emit_unprepared), each time with a new dtype or slot
    assert out["python_emits"] == (4 if out["accelerated"] else 10)
