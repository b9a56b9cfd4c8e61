"""Counters: nvtx 0.2.16's counter API, recorded by the recorder's counters-extension side."""
from __future__ import annotations

import functools
import inspect
import math
import struct
import sys
from contextlib import closing

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import recorder
from nvtx_cffi.ext_records import ExtDecoder

from conftest import run_python

try:
    import numpy as np
except ImportError:  # PyPy without NumPy: int/float counters work, dtype counters need NumPy
    np = None
needs_numpy = pytest.mark.skipif(np is None, reason="needs NumPy")

NAMES = ["Int64Counter", "Float64Counter", "Counter", "ExtCounter", "CounterSemantics", "CounterValueType",
         "CounterInterpolation", "CounterNoValueReason", "TimestampType", "numpy_dtype", "EntryKind",
         "PayloadEntryType", "EventKind", "BatchOrdering", "PredefinedScope"]


def samples(events):
    decoder = ExtDecoder()
    out = []
    for e in events:
        out.extend(decoder.feed(e))
    return decoder, out


def test_every_name_of_nvtx_is_there():
    for name in NAMES:
        assert hasattr(nvtx, name), name
        assert name in nvtx.__all__
    sig = inspect.signature(nvtx.Domain.get_counter)
    assert list(sig.parameters) == ["self", "name", "dtype", "description", "scope", "semantics", "time_domain"]
    assert sig.parameters["time_domain"].default is nvtx.TimestampType.TOOL_PROVIDED
    assert sig.parameters["scope"].kind is inspect.Parameter.KEYWORD_ONLY


def test_enum_values_are_nvtx_headers():
    assert nvtx.CounterValueType.DELTA.value == 2 << 4
    assert nvtx.CounterInterpolation.LINEAR.value == 4 << 8
    assert nvtx.CounterNoValueReason.UNAVAILABLE.value == 2
    assert nvtx.TimestampType.CPU_CLOCK_GETTIME_MONOTONIC.value == 14
    assert nvtx.PredefinedScope.CURRENT_SW_THREAD.value == 22
    assert nvtx.EntryKind.MARK.value == (3 << 12) | (2 << 10)
    assert nvtx.PayloadEntryType.REGISTERED_STRING.value == 80
    assert nvtx.BatchOrdering.UNSORTED.value == 3 << 1
    assert nvtx.EventKind.RANGE_PUSHPOP.value == 2 << 3


@needs_numpy
def test_int_and_float_counters_are_recorded():
    d = nvtx.get_domain("ctr")
    c = d.get_counter("bytes", int, semantics=nvtx.CounterSemantics(unit="B", min=0, max=10**6),
                      description="bytes moved", scope="/node/gpu0")
    f = d.get_counter("loss", float)
    assert isinstance(c, nvtx.Int64Counter) and isinstance(f, nvtx.Float64Counter)
    assert isinstance(c, nvtx.Counter)
    assert d.get_counter("bytes", int, semantics=nvtx.CounterSemantics(unit="B", min=0, max=10**6),
                         description="bytes moved", scope="/node/gpu0") is c
    assert (c.name, c.description, c.scope, c.time_domain) == ("bytes", "bytes moved", "/node/gpu0", 1)
    assert c.dtype == np.dtype(np.int64)
    with recorder.capture() as got:
        c.sample(4096)
        c.sample(-(2**63))
        f.sample(0.25)
        f.sample(3)  # an int where a double goes: converted, as nvtx
        c.sample_no_value(nvtx.CounterNoValueReason.UNCHANGED)
    _, out = samples(got)
    # registration happened before the capture: samples of unknown counters are not decoded, so
    # decode against the whole file instead
    _, out = samples(recorder.read_file(recorder.current_file()).events)
    mine = [s for s in out if s.counter.domain == "ctr"]
    assert [(s.counter.name, s.values, s.no_value) for s in mine] == [
        ("bytes", {"value": 4096}, None), ("bytes", {"value": -(2**63)}, None), ("loss", {"value": 0.25}, None),
        ("loss", {"value": 3.0}, None), ("bytes", {"value": -(2**63)}, 1)]  # UNCHANGED: the value held
    info = mine[0].counter
    assert (info.unit, info.description, info.scope, info.schema_id) == ("B", "bytes moved", "/node/gpu0", 17)
    sem = [s for s in info.semantics if s["kind"] == "counter"][0]
    assert (sem["min"], sem["max"], sem["limit_type"]) == (0, 10**6, 2)  # U64 limits, as nvtx
    assert sem["flags"] == (1 << 4) | (1 << 8) | (1 << 2) | (1 << 3)
    assert [s for s in info.semantics if s["kind"] == "time"] == [{"kind": "time", "time_domain": 1}]


@needs_numpy
def test_batches_with_timestamps():
    d = nvtx.get_domain("ctr-batch")
    c = d.get_counter("depth", int)
    g = d.get_counter("pair", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
    assert isinstance(g, nvtx.ExtCounter)
    t = [d.get_timestamp() for _ in range(3)]
    assert t == sorted(t) and t[0] > 0
    c.batch_submit([5, 6, 7], t)
    c.batch_submit(np.array([8, 9]), np.array(t[:2]))
    g.batch_submit(np.array([(1, 0.5), (2, 1.5)], dtype=g.dtype), t[1:])
    g.sample((3, 2.5))
    _, out = samples(recorder.read_file(recorder.current_file()).events)
    mine = [(s.counter.name, s.time_ns, s.values) for s in out if s.counter.domain == "ctr-batch"]
    assert mine[:5] == [("depth", t[0], {"value": 5}), ("depth", t[1], {"value": 6}), ("depth", t[2], {"value": 7}),
                        ("depth", t[0], {"value": 8}), ("depth", t[1], {"value": 9})]
    assert mine[5:7] == [("pair", t[1], {"a": 1, "b": 0.5}), ("pair", t[2], {"a": 2, "b": 1.5})]
    assert mine[7][0] == "pair" and mine[7][2] == {"a": 3, "b": 2.5}
    # the timestamps are the recorder's clock: CLOCK_MONOTONIC, like every event
    import time
    before = time.monotonic_ns()
    now = d.get_timestamp()
    assert before <= now <= time.monotonic_ns()  # (a bracket: however long the thread waited between)



def _blobs(events, name, target=None):
    return [e for e in events if e.kind == "blob" and e.name == name and (target is None or e.target == target)]


@needs_numpy
@pytest.mark.parametrize("size", [65512, 65513, 70000])
def test_batch_items_past_the_record_bound_are_cut_and_flagged_as_samples_are(size):
    # A batch record holds a 16-byte head and (8-byte timestamp, item) pairs: an item over 65512
    # bytes cannot go whole. Such items go one per record, cut to fit and flagged truncated, as
    # sample() cuts and flags its value; before, the whole batch was dropped without a trace (no
    # record, dropped count 0).
    d = nvtx.get_domain(f"ctr-bigbatch-{size}")
    c = d.get_counter("big", np.dtype(f"S{size}"))
    values = np.array([b"a" * size, b"b" * size], dtype=f"S{size}")
    with recorder.capture() as got:
        c.batch_submit(values, [1, 2])
        c.sample(b"z" * size)
    assert got.dropped == 0
    blobs = _blobs(got, "counter_sample")
    cut = size > 65512
    assert [e.truncated for e in blobs] == [cut, cut, size > 65520]
    heads = [struct.unpack_from("<BBHIQ", e.data) for e in blobs]
    assert heads == [(4, 0, 0, size, 1), (4, 0, 0, size, 1), (2, 0, 0, size, 1)]  # item_size: the full size
    assert [len(e.data) for e in blobs] == [65536 if cut else 16 + 8 + size] * 2 + [min(65536, 16 + size)]
    _, out = samples(recorder.read_file(recorder.current_file()).events)
    mine = [s for s in out if s.counter.domain == f"ctr-bigbatch-{size}"]
    kept = min(size, 65512)
    assert [(s.time_ns, s.values["value"], s.truncated) for s in mine[:2]] == [
        (1, b"a" * kept, cut), (2, b"b" * kept, cut)]
    assert (mine[2].values["value"], mine[2].truncated) == (b"z" * min(size, 65520), size > 65520)
    assert len(mine) == 3


BATCH_BOUND = r"""
import json, os
import nvtx_cffi as nvtx
from nvtx_cffi import recorder
from nvtx_cffi._trace.counters import CounterStats
from nvtx_cffi.ext_records import ExtDecoder
extra = int(os.environ["BATCH_EXTRA"])
kept = (1 << 20) // 8
c = nvtx.get_domain("ctr-batch-bound").get_counter("many", int)
n = kept + extra
c.batch_submit(list(range(n)), list(range(1, n + 1)))
c.sample(-1)
decoder = ExtDecoder()
mine = [s for e in recorder.read_file(recorder.current_file()).events for s in decoder.feed(e)
        if s.counter.domain == "ctr-batch-bound"]
stats = CounterStats()
for s in mine:
    stats.add(s)
print(json.dumps({
    "n": len(mine), "kept": kept,
    "values_ok": [s.values["value"] for s in mine[:kept]] == list(range(kept)),
    "times_ok": [s.time_ns for s in mine[:kept]] == list(range(1, kept + 1)),
    "cut_at": [i for i, s in enumerate(mine) if s.batch_cut],
    "last": mine[-1].values, "truncated": any(s.truncated for s in mine),
    "note": "note: 1 batch_submit() call(s) passed more than the recorder's 1 MiB of values per batch" in stats.format(),
    "samples": stats.rows()[0]["samples"]}))
"""


@pytest.mark.parametrize("extra", [0, 1000])
def test_a_batch_past_the_recorders_bound_says_where_it_was_cut(extra, tmp_path):
    # The recorder keeps at most 1 MiB of a batch's values (131,072 int64 samples) and flags the
    # batch's last record when it leaves samples out: the reader marks the last sample kept
    # (batch_cut) and trace --stats says how many batches were cut. Before, the flag was ignored:
    # the table showed 131,072 samples as if they were all. (In a child with a record file of its
    # own: 2 MB of samples in this session's file slowed every later test that reads it.)
    import json
    proc = run_python(BATCH_BOUND, {**recorder.environment(tmp_path), "BATCH_EXTRA": str(extra)})
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    kept = out["kept"]
    assert out["n"] == kept + 1 and out["values_ok"] and out["times_ok"]
    assert out["cut_at"] == ([kept - 1] if extra else [])
    assert out["last"] == {"value": -1} and not out["truncated"]
    assert out["note"] is bool(extra)
    assert out["samples"] == kept + 1


def _semantics_words(data):
    """(id, length word, bytes that follow) of each semantics entry of a serialized chain."""
    out, off = [], 0
    while off + 8 <= len(data):
        sid, length = struct.unpack_from("<II", data, off)
        out.append((sid, length, len(data) - off - 8))
        off += 8 + length
    return out


def test_counter_registration_cuts_are_flagged_and_lengths_match():
    # Counter name past 2048 bytes, description past 1024, unit past the semantics' 4 KiB, scope
    # path past 64 KiB: each cut flags its record truncated, and each length word is what follows
    # it. Before: no flag on any of them, and the counter semantic's body length claimed 48 + 5000
    # bytes where 4096 in all were written.
    d = nvtx.get_domain("ctr-cut")
    with recorder.capture() as got:
        c = d.get_counter("n" * 3000, int, description="d" * 2000, scope="/" + "s" * 69999,
                          semantics=nvtx.CounterSemantics(unit="u" * 5000))
        ok = d.get_counter("short", int, description="fine", scope="/short",
                           semantics=nvtx.CounterSemantics(unit="B"))
        scoped = d.get_counter("scoped", int, scope="/" + "t" * 69999)  # only its scope is cut
        c.sample(5)
        ok.sample(6)
        scoped.sample(7)
    assert got.dropped == 0
    scope_blobs = _blobs(got, "scope")
    assert [(len(e.data), e.truncated) for e in scope_blobs] == [(65536, True), (6, False), (65536, True)]
    groups = _blobs(got, "counter_group")
    assert [e.truncated for e in groups] == [True, False, False]
    for e in groups:
        _, _, nl, dl, sl, _ = struct.unpack_from("<QQIIII", e.data)
        assert 32 + nl + dl + sl == len(e.data)
        sems = _semantics_words(e.data[32 + nl + dl:])
        assert sum(8 + length for _, length, _ in sems) == sl, sems
    (big, small, third) = [s for s in samples(got)[1]]
    info = big.counter
    assert (info.name, info.description, info.scope) == ("n" * 2048, "d" * 1024, "/" + "s" * 65535)
    assert info.unit == "u" * (4096 - 16 - 56)  # after the time semantic (16 bytes) and the counter head
    assert info.truncated is True and big.values == {"value": 5}
    assert (small.counter.name, small.counter.unit, small.counter.scope, small.counter.truncated) == (
        "short", "B", "/short", False)
    # a cut scope path makes its counters' info truncated too (CounterInfo.scope is what was kept)
    assert (third.counter.name, third.counter.scope, third.counter.truncated) == ("scoped", "/" + "t" * 65535, True)


@needs_numpy
def test_schema_entry_past_the_record_bound_is_cut_consistently():
    # A counter group whose first field's name is longer than a record: the entry is cut to the room
    # left and flagged, the fields after it left out, and num_entries / length words say what the
    # record holds (before: num_entries 2 with one entry present, its name length past the end).
    d = nvtx.get_domain("ctr-schema-cut")
    long_name = "f" * 70000
    g = d.get_counter("grp", [(long_name, "i8"), ("b", "f8")])
    short = d.get_counter("grp2", [("a", "i8"), ("b", "f8")])
    g.sample((1, 2.0))
    short.sample((3, 4.0))
    events = recorder.read_file(recorder.current_file()).events
    group_ids = {e.data[:8] for e in _blobs(events, "counter_group")
                 if e.domain == "ctr-schema-cut"}
    schemas = [e for e in _blobs(events, "schema") if struct.pack("<Q", e.target) in group_ids]
    assert [e.truncated for e in schemas] == [True, False]
    from nvtx_cffi.ext_records import parse_schema
    for e in schemas:
        mask, stype, flags, size, n, name_len, _ = struct.unpack_from("<QQQQQII", e.data)
        off = 48 + name_len
        for _ in range(n):
            _, _, _, _, nl, dl, sl, _ = struct.unpack_from("<QQQQIIII", e.data, off)
            off += 48 + nl + dl + sl
        assert off == len(e.data)  # every length word and the entry count describe what is there
    cut = parse_schema(schemas[0].target, schemas[0].data, schemas[0].truncated)
    assert cut.truncated and len(cut.entries) == 1
    assert long_name.startswith(cut.entries[0].name) and 60000 < len(cut.entries[0].name) < 65536
    assert [e.name for e in parse_schema(schemas[1].target, schemas[1].data).entries] == ["a", "b"]


def test_many_counters_past_the_one_argument_functions():
    d = nvtx.get_domain("ctr-many")
    counters = [d.get_counter(f"c{i}", int) for i in range(40)] + [d.get_counter(f"f{i}", float) for i in range(40)]
    for i, c in enumerate(counters):
        c.sample(i)
    _, out = samples(recorder.read_file(recorder.current_file()).events)
    got = {s.counter.name: s.values["value"] for s in out if s.counter.domain == "ctr-many"}
    assert got == {c.name: float(i) if c.name[0] == "f" else i for i, c in enumerate(counters)}


@needs_numpy
@pytest.mark.parametrize(("call", "error", "text"), [
    (lambda d: d.get_counter("x", int).sample("3"), TypeError, ""),
    (lambda d: d.get_counter("x", int).sample(2**63), OverflowError, ""),
    (lambda d: d.get_counter("x", int).sample(float("nan")), ValueError, "cannot convert float NaN to integer"),
    (lambda d: d.get_counter("x", int).sample(float("-inf")), OverflowError, ""),
    (lambda d: d.get_counter("x", int).sample(value=b"3"), TypeError, ""),
    (lambda d: d.get_counter("x", float).sample("1"), TypeError, ""),
    (lambda d: d.get_counter("x", int).sample_no_value(1), AttributeError, "reason must be a CounterNoValueReason"),
    (lambda d: d.get_counter("x", int).batch_submit([1, 2], [1]), ValueError, "values and timestamps must have the same length"),
    (lambda d: d.get_counter("x", "i4,i4").sample([(1, 2), (3, 4)]), ValueError, "expects exactly one sample"),
    (lambda d: d.get_counter("x", object), TypeError, "Counter dtype must not hold Python objects"),
    (lambda d: d.get_counter("x", ">i8"), ValueError, "not in native byte order"),
    (lambda d: d.get_counter("x", "not a dtype"), TypeError, "Counter dtype must be int, float, or NumPy dtype-like"),
    (lambda d: d.get_counter("x", [("a", "i4", 2)]), TypeError, "Counter group array fields are not supported"),
    (lambda d: d.get_counter("x", [("a", [("b", "i4")])]), TypeError, "Nested counter groups are not supported"),
    (lambda d: d.get_counter("x", int, time_domain=1), AttributeError, "time_domain must be a TimestampType"),
    (lambda d: d.get_counter("x", int, semantics="B"), TypeError, "semantics must be a CounterSemantics"),
    (lambda d: d.get_counter(3, int), TypeError, "name must be a str or bytes, not int"),
    (lambda d: d.get_counter("x\x00", int), ValueError, "name must not contain NUL"),
    (lambda d: nvtx.CounterSemantics(unit=3), TypeError, "Counter semantic unit must be str, bytes, or None."),
    (lambda d: nvtx.CounterSemantics(min=1, max=0), ValueError, "Counter semantic min cannot exceed max."),
    (lambda d: nvtx.CounterSemantics(min=1, max=2.0), ValueError, "min and max must have the same type"),
    (lambda d: nvtx.CounterSemantics(min=-1, max=2**63), ValueError, "Signed counter semantic limits must fit in int64."),
    (lambda d: nvtx.CounterSemantics(unit_scale_numerator=0), ValueError, "must be in range [1, 2**64 - 1]"),
    (lambda d: nvtx.CounterSemantics(value_type=1), TypeError, "value_type must be a CounterValueType"),
    (lambda d: nvtx.numpy_dtype("i4", entry_kind=nvtx.EntryKind.MARK), TypeError, "EntryKind.MARK requires 64-bit integer storage"),
    (lambda d: nvtx.numpy_dtype("i8", entry_type=nvtx.PayloadEntryType.CATEGORY), TypeError, "requires native uint32 storage"),
    (lambda d: nvtx.numpy_dtype("i8", entry_kind=3), TypeError, "entry_kind must be an nvtx.EntryKind or None"),
])
def test_bad_input(call, error, text):
    with pytest.raises(error) as info:
        call(nvtx.get_domain("ctr-bad"))
    assert text in str(info.value)


@needs_numpy
def test_nvtx_rejects_the_same_way():
    """What nvtx 0.2.16 rejects, nvtx-cffi rejects with the same exception type (CPython, nvtx installed)."""
    code = r"""
import json, numpy as np, {mod} as nvtx
d = nvtx.get_domain("d")
calls = {{
 "int_str": lambda: d.get_counter("x", int).sample("3"),
 "int_big": lambda: d.get_counter("x", int).sample(2**63),
 "float_str": lambda: d.get_counter("x", float).sample("1"),
 "reason": lambda: d.get_counter("x", int).sample_no_value(1),
 "lengths": lambda: d.get_counter("x", int).batch_submit([1, 2], [1]),
 "shape": lambda: d.get_counter("y", "i4,i4").sample([(1, 2), (3, 4)]),
 "dtype": lambda: d.get_counter("x", "not a dtype"),
 "group_array": lambda: d.get_counter("x", [("a", "i4", 2)]),
 "time_domain": lambda: d.get_counter("x", int, time_domain=1),
 "scope_enum": lambda: d.get_counter("x", int, scope=nvtx.PredefinedScope.ROOT),
 "name_int": lambda: d.get_counter(3, int),
 "sem_unit": lambda: nvtx.CounterSemantics(unit=3),
 "sem_minmax": lambda: nvtx.CounterSemantics(min=1, max=0),
 "dtype_kind": lambda: nvtx.numpy_dtype("i4", entry_kind=nvtx.EntryKind.MARK),
 "payload_bool": lambda: nvtx.mark("m", payload=np.array([True])),
 "payload_obj": lambda: nvtx.mark("m", payload=[object()]),
}}
out = {{}}
for k, f in calls.items():
    try:
        f(); out[k] = None
    except Exception as e:
        out[k] = type(e).__name__
print(json.dumps(out))
"""
    pytest.importorskip("nvtx")
    import json
    results = {}
    for mod in ("nvtx", "nvtx_cffi"):
        proc = run_python(code.format(mod=mod))
        results[mod] = json.loads(proc.stdout.strip().splitlines()[-1])
    # nvtx-cffi's ArgumentTypeError is a TypeError and the AttributeError nvtx raises
    ours = {k: ("AttributeError" if v == "ArgumentTypeError" else v) for k, v in results["nvtx_cffi"].items()}
    assert ours == results["nvtx"]
    assert all(results["nvtx"].values()), results["nvtx"]


@needs_numpy
@pytest.mark.parametrize("env,remove", [({}, ("NVTX_INJECTION64_PATH",)), ({"NVTX_DISABLE": "1"}, ())])
def test_no_tool_counters_do_nothing(env, remove):
    proc = run_python("""
import numpy as np, nvtx_cffi as nvtx
d = nvtx.get_domain("d")
c = d.get_counter("c", int)
g = d.get_counter("g", [("a", np.int64)])
assert c is g and type(c).__name__ == "_NoOpCounter", c
c.sample("anything"); c.batch_submit([1], [1, 2]); c.sample_no_value(None)
assert d.get_timestamp() == 0
try:
    d.get_counter("bad", object)
except TypeError:
    print("checked")
""", env=env, remove=remove)
    assert proc.stdout.strip() == "checked"


def test_tool_named_after_import_records_counters(tmp_path):
    """NVTX initialises at the first NVTX call (here: the domain), so a tool named after import is used."""
    proc = run_python(f"""
import os, nvtx_cffi as nvtx
from nvtx_cffi import recorder
os.environ.update(recorder.environment({str(tmp_path)!r}))
c = nvtx.get_domain("late").get_counter("late counter", int)
c.sample(42)
print(type(c).__name__)
""", remove=("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR"))
    assert proc.stdout.split() == ["Int64Counter"]
    _, out = samples(recorder.read(tmp_path).events)
    assert [(s.counter.name, s.values) for s in out] == [("late counter", {"value": 42})]


@needs_numpy
@pytest.mark.parametrize(("dtype", "value"), [
    ([("a", "i8"), ("b", "f8")], (1, 2.0)),
    ([("a", "i8"), ("b", "f8")], (True, 3)),  # bool and int where NumPy takes them
    ([("a", "u1"), ("b", "i4"), ("c", "f4")], (255, -7, 0.1)),  # padding between fields
    ({"names": ["a", "b"], "formats": ["i2", "f8"], "offsets": [0, 8], "itemsize": 24}, (3, 0.5)),
    ("i4", 12), ("f4", 0.1), ("f8", 3), ("u2", 65535),
])
def test_ext_counter_struct_path_packs_as_numpy(dtype, value):
    """ExtCounter.sample's struct.pack path lays a value out exactly as numpy.ascontiguousarray."""
    from nvtx_cffi._counters import _packer, _normalize_dtype

    normal = _normalize_dtype(dtype)
    packer = _packer(normal)
    assert packer is not None
    pack, _, spread = packer
    data = pack(*value) if spread else pack(value)
    expected = np.ascontiguousarray(value, normal)
    assert len(data) == expected.nbytes  # padding bytes are NumPy's garbage: compare the fields
    assert np.frombuffer(data, normal).tolist() == expected.reshape(-1).tolist()


@needs_numpy
@pytest.mark.parametrize(("dtype", "value"), [
    ([("a", "i8"), ("b", "f8")], (1.5, 2.0)),  # a float in an int field: NumPy truncates
    ([("a", "u1"), ("b", "f8")], (300, 1.0)),  # out of range: NumPy's error (or wrap), not struct's
    ([("a", "i8"), ("b", "f8")], (1, 2.0, 3)),  # wrong length: NumPy's error
    ([("a", "i8"), ("b", "f8")], ("x", 1.0)),
    ("f4", 1e300),  # NumPy: inf
])
def test_ext_counter_struct_refusals_go_the_numpy_way(dtype, value):
    d = nvtx.get_domain("struct-fallback")
    c = d.get_counter("c-" + str(dtype) + repr(value), dtype)
    try:
        with np.errstate(all="ignore"):
            expected = np.ascontiguousarray(value, np.dtype(dtype))
    except Exception as exc:  # the same exception type from sample()
        with pytest.raises(type(exc)):
            c.sample(value)
        return
    if nvtx.tool_attached():
        with np.errstate(all="ignore"):
            c.sample(value)  # accepted, as NumPy accepts it
    assert expected.size == 1


def test_int_and_float_counters_own_their_c_sample():
    """With the accelerator, Int64Counter/Float64Counter hold their own descriptor of the C sample
    (CPython 3.11 specialises the call only for self of exactly the descriptor's type)."""
    from nvtx_cffi._accel import speedups

    if speedups is None or not hasattr(speedups, "method_for"):
        pytest.skip("no accelerator")
    for cls in (nvtx.Int64Counter, nvtx.Float64Counter):
        descriptor = cls.__dict__["sample"]
        assert type(descriptor).__name__ == "method_descriptor" and descriptor.__objclass__ is cls


@needs_numpy
def test_bad_samples_raise_nvtx_exception_types_with_messages_naming_the_value():
    """The exception type nvtx 0.2.16 raises (its Cython conversion's, or NumPy's), with a message
    that names the argument; nothing is recorded for a refused sample. Without the accelerator
    (pure mode, PyPy) the int/float counters' messages are the C method's too."""
    d = nvtx.get_domain("bad-samples")
    c, f = d.get_counter("c", int), d.get_counter("f", float)
    pair = np.dtype([("a", "i8"), ("b", "f8")])
    group = d.get_counter("g", pair)
    int64 = "sample() of an int64 counter"
    cases = [
        (lambda: c.sample(10 ** 5000), OverflowError, f"{int64}: value is out of range (it must fit in int64)"),
        (lambda: c.sample(-(2 ** 63) - 1), OverflowError, f"{int64}: value is out of range (it must fit in int64)"),
        (lambda: c.sample("1"), TypeError, f"{int64} takes an int (or a number that int() truncates), not str"),
        (lambda: c.sample(None), TypeError, f"{int64} takes an int (or a number that int() truncates), not NoneType"),
        (lambda: c.sample(1e19), OverflowError, f"{int64}: value is out of range (it must fit in int64)"),
        (lambda: c.sample(np.float64(-1e19)), OverflowError, f"{int64}: value is out of range (it must fit in int64)"),
        (lambda: c.sample(val=1), TypeError, "sample() got an unexpected keyword argument 'val'"),
        (lambda: c.sample(), TypeError, "sample() missing 1 required positional argument: 'value'"),
        (lambda: c.sample(1, value=1), TypeError, "sample() got multiple values for argument 'value'"),
        (lambda: f.sample(10 ** 400), OverflowError,
         "sample() of a float64 counter: value is out of range (too large for a double)"),
        (lambda: f.sample("x"), TypeError, "sample() of a float64 counter takes a real number, not str"),
    ]
    for call, what, value, dtype in [(group.sample, "sample(): value", (1,), pair),
                                     (group.sample, "sample(): value", (10 ** 30, 1.0), pair),
                                     (lambda v: c.batch_submit(v, [1]), "batch_submit(): values", ["x"], "int64"),
                                     (lambda t: c.batch_submit([1], t), "batch_submit(): timestamps", [object()],
                                      "int64")]:
        with pytest.raises(Exception) as numpy_error:  # NumPy's own type and words, whatever version
            np.ascontiguousarray(value, np.dtype(dtype))
        cases.append((functools.partial(call, value), numpy_error.type,
                      f"{what} does not convert to dtype {np.dtype(dtype)}: {numpy_error.value}"))
    with recorder.capture():
        for call, error, message in cases:
            with pytest.raises(error) as caught:
                call()
            if nvtx.tool_attached():
                assert str(caught.value) == message
        c.sample(7)
    _, out = samples(recorder.read_file(recorder.current_file()).events)
    assert [(s.counter.name, s.values) for s in out if s.counter.domain == "bad-samples"] == [("c", {"value": 7})]


SAMPLE_CONVERSIONS = r"""
import decimal, fractions, json, sys
import numpy as np
nvtx = __import__(sys.argv[1])
from nvtx_cffi import recorder
from nvtx_cffi.ext_records import ExtDecoder

class Index:  # __index__ alone: nvtx's int64 conversion goes through __int__
    def __index__(self):
        return 3

class Int:
    def __int__(self):
        return 4

values = [7, True, 2.9, -2.9, np.float32(1.5), np.float64(2.5), np.bool_(True), np.int32(-3), np.uint64(2**64 - 1),
          decimal.Decimal("2.5"), fractions.Fraction(7, 2), Index(), Int(), "3", b"3", None, float("nan"),
          float("inf"), 2**63, -(2**63), 1e30]
outcomes = []
with recorder.capture() as events:  # the counters' registrations too: the decoder needs them
    d = nvtx.get_domain("conversions")
    counters = {"int": d.get_counter("i", int), "float": d.get_counter("f", float)}
    for kind, counter in counters.items():
        for i, value in enumerate(values):
            for by_keyword in (False, True):
                try:
                    counter.sample(value=value) if by_keyword else counter.sample(value)
                    outcomes.append([kind, i, by_keyword, "ok"])
                except Exception as e:
                    outcomes.append([kind, i, by_keyword, type(e).__name__])
decoder = ExtDecoder()
recorded = [[s.counter.name, s.values["value"]] for e in events for s in decoder.feed(e)]
print(json.dumps({"outcomes": outcomes, "recorded": recorded}, default=repr))
"""


@needs_numpy
@pytest.mark.parametrize("pure", [False, True])
def test_int_and_float_samples_convert_as_nvtx_converts_them(pure):
    """nvtx's int64 sample takes what int() truncates through __int__ (a float, a NumPy scalar, a
    Decimal) and refuses a str or an object with __index__ alone; its float64 one takes what float()
    takes. Outcome by outcome (positional and keyword) and value by value, the same as nvtx 0.2.16."""
    pytest.importorskip("nvtx")
    import json
    env = {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"}
    results = {mod: json.loads(run_python(f"import sys; sys.argv[1:] = [{mod!r}]\n" + SAMPLE_CONVERSIONS,
                                          env).stdout.strip().splitlines()[-1])
               for mod in ("nvtx", "nvtx_cffi")}
    assert results["nvtx_cffi"] == results["nvtx"]
    assert ["i", 2] in results["nvtx"]["recorded"] and ["i", -2] in results["nvtx"]["recorded"]  # truncated
    assert ["int", 11, False, "TypeError"] in results["nvtx"]["outcomes"]  # __index__ alone


SAMPLE_ERRORS = r"""
import contextlib, decimal, json, os
import nvtx_cffi as nvtx
from nvtx_cffi import recorder
from nvtx_cffi.ext_records import ExtDecoder
try:
    import numpy as np
except ImportError:
    np = None

class Index:  # __index__ alone: not an int64 sample (nvtx's conversion goes through __int__)
    def __index__(self):
        return 3

class BadInt:
    def __int__(self):
        raise ValueError("no int here")

class OwnError(ValueError):
    pass

class OwnInt:  # its own exception type passes unchanged
    def __int__(self):
        raise OwnError("mine")

tool = "NVTX_INJECTION64_PATH" in os.environ
with recorder.capture() if tool else contextlib.nullcontext([]) as events:
    d = nvtx.get_domain("sample-errors")
    c, f = d.get_counter("c", int), d.get_counter("f", float)
    calls = {
        "sample(1, 2)": lambda: c.sample(1, 2),
        "sample(1, 2, 3)": lambda: c.sample(1, 2, 3),
        "sample()": lambda: c.sample(),
        "sample(val=1)": lambda: c.sample(val=1),
        "sample(1, val=1)": lambda: c.sample(1, val=1),
        "sample(1, value=1)": lambda: c.sample(1, value=1),
        "sample(1, 2, value=3)": lambda: c.sample(1, 2, value=3),
        "sample(1, 2, val=3)": lambda: c.sample(1, 2, val=3),
        "sample(value=1, x=2)": lambda: c.sample(value=1, x=2),
        "float sample(1, 2)": lambda: f.sample(1, 2),
        "float sample(x=1)": lambda: f.sample(x=1),
        "batch_submit()": lambda: c.batch_submit(),
        "batch_submit(1, 2, 3)": lambda: c.batch_submit(1, 2, 3),
        "sample_no_value()": lambda: c.sample_no_value(),
        "sample_no_value(1, 2)": lambda: c.sample_no_value(1, 2),
    }
    if np is not None:  # a NumPy-dtype counter: its sample() is Python in both modes
        ext = d.get_counter("e", np.dtype("i4"))
        calls.update({"ext sample(1, 2)": lambda: ext.sample(1, 2), "ext sample()": lambda: ext.sample(),
                      "ext sample(val=1)": lambda: ext.sample(val=1)})
    if type(c).__name__ != "_NoOpCounter":  # (without a tool the values are not looked at, as in nvtx)
        values = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "'5'": "5", "b'5'": b"5",
                  "None": None, "2**63": 2**63, "-2**63-1": -2**63 - 1, "1e19": 1e19, "1j": 1j, "Index()": Index(),
                  "BadInt()": BadInt(), "OwnInt()": OwnInt(), "Decimal('NaN')": decimal.Decimal("NaN"),
                  "Decimal('-Infinity')": decimal.Decimal("-Infinity"), "10**400": 10**400, "[5]": [5]}
        if np is not None:
            values.update({"np.float64(nan)": np.float64("nan"), "np.array([5])": np.array([5]),
                           "np.array([5.0, 6.0])": np.array([5.0, 6.0]), "np.float64(1e19)": np.float64(1e19)})
        for name, value in values.items():
            calls[f"int {name}"] = lambda value=value: c.sample(value)
            calls[f"int value={name}"] = lambda value=value: c.sample(value=value)
            calls[f"float {name}"] = lambda value=value: f.sample(value)
    errors = {}
    for name, call in calls.items():
        try:
            call()
            errors[name] = None
        except Exception as e:  # (3.14+ may add ". Did you mean 'value'?" to Python's own message)
            errors[name] = [type(e).__name__, str(e).split(". Did you mean")[0]]
    c.sample(7)
    f.sample(2.5)
decoder = ExtDecoder()
recorded = [[s.counter.name, repr(s.values["value"])] for e in events for s in decoder.feed(e)
            if s.counter.domain == "sample-errors"]
print(json.dumps({"errors": errors, "recorded": recorded}))
"""

_I64 = "sample() of an int64 counter"
_F64 = "sample() of a float64 counter"
_NOT_INT = f"{_I64} takes an int (or a number that int() truncates), not "

#: What both modes say (with a tool); the rest of the table is checked C against pure.
SAMPLE_ERROR_MESSAGES = {
    "sample(1, 2)": ["TypeError", "sample() takes 1 positional argument but 2 were given"],
    "sample(1, 2, 3)": ["TypeError", "sample() takes 1 positional argument but 3 were given"],
    "sample()": ["TypeError", "sample() missing 1 required positional argument: 'value'"],
    "sample(val=1)": ["TypeError", "sample() got an unexpected keyword argument 'val'"],
    "sample(1, 2, value=3)": ["TypeError", "sample() got multiple values for argument 'value'"],
    "sample(1, 2, val=3)": ["TypeError", "sample() got an unexpected keyword argument 'val'"],
    "float sample(1, 2)": ["TypeError", "sample() takes 1 positional argument but 2 were given"],
    "int nan": ["ValueError", f"{_I64}: cannot convert float NaN to integer"],
    "int value=nan": ["ValueError", f"{_I64}: cannot convert float NaN to integer"],
    "int inf": ["OverflowError", f"{_I64}: cannot convert float infinity to integer"],
    "int -inf": ["OverflowError", f"{_I64}: cannot convert float infinity to integer"],
    "int BadInt()": ["ValueError", f"{_I64}: no int here"],
    "int OwnInt()": ["OwnError", "mine"],
    "int '5'": ["TypeError", _NOT_INT + "str"],
    "int b'5'": ["TypeError", _NOT_INT + "bytes"],
    "int None": ["TypeError", _NOT_INT + "NoneType"],
    "int 1j": ["TypeError", _NOT_INT + "complex"],
    "int [5]": ["TypeError", _NOT_INT + "list"],
    "int 2**63": ["OverflowError", f"{_I64}: value is out of range (it must fit in int64)"],
    "int -2**63-1": ["OverflowError", f"{_I64}: value is out of range (it must fit in int64)"],
    "int 1e19": ["OverflowError", f"{_I64}: value is out of range (it must fit in int64)"],
    "float '5'": ["TypeError", f"{_F64} takes a real number, not str"],
    "float None": ["TypeError", f"{_F64} takes a real number, not NoneType"],
    "float 1j": ["TypeError", f"{_F64} takes a real number, not complex"],
    "float 10**400": ["OverflowError", f"{_F64}: value is out of range (too large for a double)"],
    "float nan": None,
}
SAMPLE_ERROR_MESSAGES_NUMPY = {
    "ext sample(1, 2)": ["TypeError", "sample() takes 2 positional arguments but 3 were given"],
    "ext sample()": ["TypeError", "sample() missing 1 required positional argument: 'value'"],
    "ext sample(val=1)": ["TypeError", "sample() got an unexpected keyword argument 'val'"],
    "int np.float64(nan)": ["ValueError", f"{_I64}: cannot convert float NaN to integer"],
    "int np.array([5])": ["TypeError", _NOT_INT + "ndarray"],
    "int np.float64(1e19)": ["OverflowError", f"{_I64}: value is out of range (it must fit in int64)"],
    "float np.array([5.0, 6.0])": ["TypeError", f"{_F64} takes a real number, not ndarray"],
}
#: CPython's: PyPy's decimal words its own errors, and PyPy's CFFI takes an object with __index__ alone.
SAMPLE_ERROR_MESSAGES_CPYTHON = {
    "int Decimal('NaN')": ["ValueError", f"{_I64}: cannot convert NaN to integer"],
    "int Decimal('-Infinity')": ["OverflowError", f"{_I64}: cannot convert Infinity to integer"],
    "int Index()": ["TypeError", _NOT_INT + "Index"],
}
#: The do-nothing counter (no tool): its C methods check the arguments as the pure path's functions.
NO_OP_ERROR_MESSAGES = {
    "sample(1, 2)": ["TypeError", "sample() takes 1 positional argument but 2 were given"],
    "sample(val=1)": ["TypeError", "sample() got an unexpected keyword argument 'val'"],
    "batch_submit()": ["TypeError", "batch_submit() missing 2 required positional arguments: 'values' and 'timestamps'"],
    "batch_submit(1, 2, 3)": ["TypeError", "batch_submit() takes 2 positional arguments but 3 were given"],
    "sample_no_value(1, 2)": ["TypeError", "sample_no_value() takes 1 positional argument but 2 were given"],
}


@pytest.mark.parametrize("tool", ["recorder", "none"])
def test_sample_errors_read_the_same_in_c_and_pure_mode(tool):
    """A bad sample() call raises the same type with the same message in C mode (the C method of
    _speedups) and in pure mode (the CFFI function inside a Python function): argument counts and
    keywords as Python words them for ``sample(value)``, values that do not convert naming the call
    and the counter's type (a NaN's and an infinity's too). Nothing refused is recorded."""
    import json
    remove = ("NVTX_INJECTION64_PATH",) if tool == "none" else ()
    got = {pure: json.loads(run_python(SAMPLE_ERRORS, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"},
                                       remove=remove).stdout.strip().splitlines()[-1])
           for pure in (False, True)}
    assert got[False] == got[True]
    errors = got[False]["errors"]
    if tool == "none":
        assert got[False]["recorded"] == []
        for name, expected in NO_OP_ERROR_MESSAGES.items():
            assert errors[name] == expected, name
        return
    # every int64 value above is refused; the float64 counter takes a NaN, infinities, what float() takes
    accepted = [name for name, error in errors.items() if error is None]
    assert "float nan" in accepted and "float inf" in accepted
    if sys.implementation.name == "cpython":
        assert all(name.startswith("float ") for name in accepted), accepted
    else:  # PyPy (pure mode only): its CFFI's int64 conversion takes __index__ (nvtx's does not)
        assert set(accepted) - {"int Index()", "int value=Index()"} <= {n for n in accepted if n.startswith("float ")}
    recorded = got[False]["recorded"]
    assert [value for name, value in recorded if name == "c"][-1:] == ["7"]
    assert len([value for name, value in recorded if name == "c"]) == 1 + len([n for n in accepted if n.startswith("int ")])
    assert len([value for name, value in recorded if name == "f"]) == 1 + len([n for n in accepted if n.startswith("float ")])
    assert recorded[-1] == ["f", "2.5"]
    expected_table = {**SAMPLE_ERROR_MESSAGES, **(SAMPLE_ERROR_MESSAGES_NUMPY if np is not None else {}),
                      **(SAMPLE_ERROR_MESSAGES_CPYTHON if sys.implementation.name == "cpython" else {})}
    for name, expected in expected_table.items():
        assert errors[name] == expected, name


# --------------------------------------------------------------------------- the tracer's counter tracks


def _record(tmp_path, source: str):
    """Run ``source`` recording into tmp_path/raw; returns that directory."""
    import os
    import subprocess
    import textwrap

    raw = tmp_path / "raw"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    env.update(recorder.environment(str(raw)))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return raw


def _converted(tmp_path, raw, use_numpy: bool):
    """The recording converted to JSON, .pftrace and SQLite: (JSON events, {track: [values]} of the
    JSON, of the .pftrace and of SQLite (by (domain, name)), the --stats table, its rows)."""
    import json
    import sqlite3

    from nvtx_cffi._trace.convert import convert
    from nvtx_cffi._trace.counters import CounterStats

    tag = "np" if use_numpy else "py"
    table = CounterStats()
    out = tmp_path / f"t-{tag}.json"
    convert(str(raw), str(out), numpy=use_numpy, counter_stats=table)
    events = json.loads(out.read_text())["traceEvents"]
    json_tracks = {}
    for e in sorted((e for e in events if e["ph"] == "C"), key=lambda e: e["ts"]):
        (value,) = e["args"].values()
        json_tracks.setdefault(e["name"], []).append(value)
    db = tmp_path / f"t-{tag}.sqlite"
    convert(str(raw), str(db), numpy=use_numpy)
    with closing(sqlite3.connect(db)) as con:
        rows = con.execute("SELECT domain, counterId, name, value, noValue FROM NVTX_CFFI_COUNTERS"
                           " ORDER BY timestamp, rowid").fetchall()
    sql_tracks = {}
    for domain, counter_id, name, value, no_value in rows:
        sql_tracks.setdefault((domain, counter_id, name), []).append((value, no_value))
    pf_tracks = None
    try:
        import google.protobuf  # noqa: F401
        import perfetto  # noqa: F401
    except ImportError:
        pass
    else:
        from support.pftrace_check import read_pftrace

        pf = tmp_path / f"t-{tag}.pftrace"
        convert(str(raw), str(pf), numpy=use_numpy)
        trace = read_pftrace(str(pf))
        pf_tracks = {trace.tracks[t][1]: [] for t in trace.counter_tracks}
        for track, _ts, value in sorted(trace.counters, key=lambda c: c[1]):
            pf_tracks[trace.tracks[track][1]].append(value)
    return events, json_tracks, pf_tracks, sql_tracks, table


LATE_REGISTRATIONS = """
    import threading
    import numpy as np
    import nvtx_cffi as nvtx
    d = nvtx.get_domain("D")
    took_chunk, registered = threading.Event(), threading.Event()
    box = {}
    def early():
        nvtx.mark("early", domain="D")  # this thread's chunk comes first in the file
        took_chunk.set()
        registered.wait()
        box["c"].sample(5)
        box["g"].sample((1, 2.5))
        nvtx.mark("early array", domain="D", payload=np.array([1.5, 2.5]))
    def late():
        took_chunk.wait()
        box["c"] = d.get_counter("late", int)
        box["g"] = d.get_counter("group", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
        nvtx.mark("late array", domain="D", payload=np.array([0.5, 0.25]))
        registered.set()
    a, b = threading.Thread(target=early), threading.Thread(target=late)
    a.start(); b.start(); a.join(); b.join()
"""


@needs_numpy
@pytest.mark.parametrize("use_numpy", [True, False])
def test_registrations_of_a_thread_read_later_decode_the_earlier_threads_samples(tmp_path, use_numpy):
    """A counter or schema registered by a thread whose chunk is read after the sampling thread's:
    the early thread's samples vanished and its array payload decoded to null."""
    raw = _record(tmp_path, LATE_REGISTRATIONS)
    events, json_tracks, pf_tracks, sql_tracks, table = _converted(tmp_path, raw, use_numpy)
    payloads = {e["name"]: e["args"].get("payload") for e in events if e["ph"] == "i"}
    assert payloads["early array"] == [1.5, 2.5] and payloads["late array"] == [0.5, 0.25]
    assert json_tracks == {"D: late": [5], "D: group.a": [1], "D: group.b": [2.5]}
    assert pf_tracks in (None, {"D: late": [5.0], "D: group.a": [1.0], "D: group.b": [2.5]})
    assert sorted(sql_tracks) == [("D", 1, "group.a"), ("D", 1, "group.b"), ("D", 2, "late")] or \
        sorted(k[::2] for k in sql_tracks) == [("D", "group.a"), ("D", "group.b"), ("D", "late")]
    assert sorted((r["title"], r["samples"]) for r in table.rows()) == [
        ("D: group.a", 1), ("D: group.b", 1), ("D: late", 1)]


SAME_NAMES = """
    import nvtx_cffi as nvtx
    a, b = nvtx.get_domain("A"), nvtx.get_domain("B")
    la, lb = a.get_counter("loss", float), b.get_counter("loss", float)
    ni, nf = a.get_counter("n", int), a.get_counter("n", float)
    la.sample(1.0); lb.sample(100.0); la.sample(2.0); lb.sample(200.0)
    ni.sample(3); nf.sample(0.5); ni.sample(4)
"""


@pytest.mark.parametrize("use_numpy", [True, False] if np is not None else [False])
def test_counters_named_alike_keep_their_own_tracks(tmp_path, use_numpy):
    """A:loss and B:loss were one track (their series mixed), an int and a float counter named
    alike in one domain too, --stats included; SQLite's counter table had no domain."""
    raw = _record(tmp_path, SAME_NAMES)
    _events, json_tracks, pf_tracks, sql_tracks, table = _converted(tmp_path, raw, use_numpy)
    expected = {"A: loss": [1.0, 2.0], "B: loss": [100.0, 200.0], "A: n (int64)": [3, 4], "A: n (float64)": [0.5]}
    assert json_tracks == expected
    assert pf_tracks in (None, expected)
    by_name = {}
    for (domain, counter_id, name), values in sql_tracks.items():
        by_name.setdefault((domain, name), []).append(([v for v, _ in values], counter_id))
    assert sorted(v for v, _ in by_name[("A", "loss")]) == [[1.0, 2.0]]
    assert sorted(v for v, _ in by_name[("B", "loss")]) == [[100.0, 200.0]]
    assert sorted(v for v, _ in by_name[("A", "n")]) == [[0.5], [3.0, 4.0]]
    assert len({cid for _, cid in by_name[("A", "n")]}) == 2
    rows = {r["title"]: (r["samples"], r["min"], r["max"]) for r in table.rows()}
    assert rows == {"A: loss": (2, 1.0, 2.0), "B: loss": (2, 100.0, 200.0), "A: n (int64)": (2, 3, 4),
                    "A: n (float64)": (1, 0.5, 0.5)}
    text = table.format()
    assert "NVTX counter summary: 4 counter track(s)" in text
    assert [line.split("  ")[-1].strip() for line in text.splitlines()[4:8]] == [
        "A: loss", "A: n (float64)", "A: n (int64)", "B: loss"]


TIME_DOMAINS = """
    import time
    import nvtx_cffi as nvtx
    T = nvtx.TimestampType
    d = nvtx.get_domain("T")
    wall = d.get_counter("wall", int, time_domain=T.CPU_CLOCK_GETTIME_REALTIME)
    secs = d.get_counter("secs", int, time_domain=T.C_TIME)
    mono = d.get_counter("mono", int, time_domain=T.CPU_CLOCK_GETTIME_MONOTONIC)
    boot = d.get_counter("boot", int, time_domain=T.CPU_CLOCK_GETTIME_BOOTTIME)
    nvtx.mark("before", domain="T")
    now = time.time_ns()
    wall.batch_submit([1, 2], [now, now + 1_000_000])
    secs.batch_submit([3], [now // 1_000_000_000])
    mono.batch_submit([4], [time.monotonic_ns()])
    boot.batch_submit([5], [time.clock_gettime_ns(time.CLOCK_BOOTTIME)])
    nvtx.mark("after", domain="T")
"""


@pytest.mark.parametrize("use_numpy", [True, False] if np is not None else [False])
def test_batch_timestamps_are_mapped_from_their_time_domain(tmp_path, use_numpy):
    """A realtime counter's batch (time.time_ns()) landed ~56 years after the rest of the trace.
    Realtime and time() samples are placed by the header's (monotonic, realtime) pair; a time domain
    with no known relation to the trace's clock is refused: a warning naming the counter and the
    domain, its samples left out (and noted under --stats)."""
    raw = _record(tmp_path, TIME_DOMAINS)
    with pytest.warns(RuntimeWarning) as caught:
        events, _json, _pf, _sql, table = _converted(tmp_path, raw, use_numpy)
    messages = {str(w.message) for w in caught}
    assert any("'T: boot'" in m and "CPU_CLOCK_GETTIME_BOOTTIME (17)" in m for m in messages), messages
    assert not any("'T: wall'" in m or "'T: secs'" in m or "'T: mono'" in m for m in messages), messages
    marks = {e["name"]: e["ts"] for e in events if e["ph"] == "i"}
    samples = {}
    for e in events:
        if e["ph"] == "C":
            samples.setdefault(e["name"], []).append((e["ts"], e["args"]["value"]))
    assert "T: boot" not in samples
    assert [v for _, v in samples["T: wall"]] == [1, 2] and [v for _, v in samples["T: mono"]] == [4]
    # (µs) the realtime samples fall where the marks are, within the pair's precision
    for ts, _ in samples["T: wall"] + samples["T: mono"]:
        assert marks["before"] - 50_000 < ts < marks["after"] + 50_000, (ts, marks)
    (secs_ts, secs_value), = samples["T: secs"]
    assert secs_value == 3 and marks["before"] - 1_100_000 < secs_ts < marks["after"] + 50_000
    assert "1 batch sample(s) of counter 'T: boot'" in table.format()


def test_time_domains_map_by_the_header_pair():
    from nvtx_cffi.ext_records import Clocks

    clocks = Clocks(1_000, 10_000_000_000)  # monotonic 1 µs at realtime 10 s
    assert clocks.to_trace(12, 10_000_000_500) == 1_500
    assert clocks.to_trace(1, 777) == 777 and clocks.to_trace(14, 777) == 777
    assert clocks.to_trace(40, 11) == 1_000_001_000
    assert clocks.to_trace(32, 116444736000000000 + 100_000_005) == 1_000 + 10_000_000_500 - 10_000_000_000
    assert clocks.to_trace(10, 5) is None  # no TSC calibration
    assert Clocks(0, 0, lambda t: t * 2).to_trace(10, 5) == 10
    for refused in (15, 17, 18, 19, 30, 41, 42, 53, 80, 12345):
        assert clocks.to_trace(refused, 1) is None, refused
    assert Clocks(1_000, 0).to_trace(12, 5) is None  # no realtime reference


NO_VALUES = """
    import nvtx_cffi as nvtx
    R = nvtx.CounterNoValueReason
    c = nvtx.get_domain("Z").get_counter("z", int)
    c.sample_no_value(R.UNCHANGED)  # before any value: nothing to hold, a gap
    c.sample(5)
    c.sample_no_value(R.ZERO)
    c.sample(6)
    c.sample_no_value(R.UNCHANGED)
    c.sample_no_value(R.UNAVAILABLE)
    c.sample(7)
"""


@pytest.mark.parametrize("use_numpy", [True, False] if np is not None else [False])
def test_no_value_samples_show_as_their_reason_says(tmp_path, use_numpy):
    """sample_no_value(ZERO) was dropped (the track went 5 -> 6, --stats said Min 5), UNCHANGED and
    UNAVAILABLE too: zero is 0, unchanged the value held, unavailable a gap (JSON null, no .pftrace
    sample, SQLite NULL), each counted in --stats."""
    raw = _record(tmp_path, NO_VALUES)
    _events, json_tracks, pf_tracks, sql_tracks, table = _converted(tmp_path, raw, use_numpy)
    assert json_tracks == {"Z: z": [None, 5, 0, 6, 6, None, 7]}
    assert pf_tracks in (None, {"Z: z": [5.0, 0.0, 6.0, 6.0, 7.0]})
    ((_key, values),) = sql_tracks.items()
    assert values == [(None, "unchanged"), (5.0, None), (0.0, "zero"), (6.0, None), (6.0, "unchanged"),
                      (None, "unavailable"), (7.0, None)]
    (row,) = table.rows()
    assert (row["samples"], row["min"], row["max"], row["last"]) == (7, 0, 7, 7)
    assert (row["zero"], row["unchanged"], row["unavailable"]) == (1, 2, 1)
    assert row["mean"] == pytest.approx((5 + 0 + 6 + 6 + 7) / 5)
    lines = table.format().splitlines()
    assert lines[2].split() == ["Samples", "Min", "Max", "Mean", "Last", "Zero", "Unchanged", "Unavailable", "Unit",
                                "Counter"]
    assert lines[4].split() == ["7", "0", "7", "4.8", "7", "1", "2", "1", "-", "Z:", "z"]


NON_FINITE = """
    import numpy as np
    import nvtx_cffi as nvtx
    f = nvtx.get_domain("N").get_counter("f", float)
    for v in (1.0, float("nan"), float("inf"), 2.0):
        f.sample(v)
    nvtx.mark("arr", payload=np.array([float("nan"), float("inf"), -float("inf"), 1.0]))
    nvtx.mark("scalar", payload=float("nan"))
"""


@needs_numpy
@pytest.mark.parametrize("use_numpy", [True, False])
def test_nan_and_infinities_follow_one_rule_everywhere(tmp_path, use_numpy):
    """Arrays gave "nan"/"inf" in JSON where scalars gave "NaN"/"Infinity"; --stats printed nan for a
    counter with one NaN sample. One rule: JSON spells them "NaN", "Infinity", "-Infinity" at any
    depth; SQLite stores NaN as NULL (it has none) and infinities as such; --stats leaves NaN out of
    Min/Max/Mean/Last and counts it."""
    raw = _record(tmp_path, NON_FINITE)
    events, json_tracks, pf_tracks, sql_tracks, table = _converted(tmp_path, raw, use_numpy)
    payloads = {e["name"]: e["args"].get("payload") for e in events if e["ph"] == "i"}
    assert payloads == {"arr": ["NaN", "Infinity", "-Infinity", 1.0], "scalar": "NaN"}
    assert json_tracks == {"N: f": [1.0, "NaN", "Infinity", 2.0]}
    if pf_tracks is not None:
        got = pf_tracks["N: f"]
        assert got[0] == 1.0 and math.isnan(got[1]) and got[2:] == [math.inf, 2.0]
    ((_key, values),) = sql_tracks.items()
    assert values == [(1.0, None), (None, None), (math.inf, None), (2.0, None)]
    (row,) = table.rows()
    assert (row["samples"], row["nan"], row["min"], row["max"], row["last"]) == (4, 1, 1.0, math.inf, 2.0)
    assert "nan" not in table.format()


@needs_numpy
def test_a_groups_no_value_samples_cover_every_field(tmp_path):
    """ExtDecoder given the images' registrations (preload): a group's ZERO is 0 in each field,
    UNCHANGED the group's values held, UNAVAILABLE None in each."""
    raw = _record(tmp_path, """
        import numpy as np
        import nvtx_cffi as nvtx
        R = nvtx.CounterNoValueReason
        g = nvtx.get_domain("G").get_counter("g", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
        g.sample((3, 1.5))
        g.sample_no_value(R.UNCHANGED)
        g.sample_no_value(R.ZERO)
        g.sample_no_value(R.UNCHANGED)
        g.sample_no_value(R.UNAVAILABLE)
    """)
    rec = recorder.read(raw)
    decoder = ExtDecoder()
    for info in rec.images:
        decoder.preload(info)
    out = [s for e in rec.events for s in decoder.feed(e) if s.counter.domain == "G"]
    assert [(s.values, s.no_value) for s in out] == [
        ({"a": 3, "b": 1.5}, None), ({"a": 3, "b": 1.5}, 1), ({"a": 0, "b": 0.0}, 0), ({"a": 0, "b": 0.0}, 1),
        ({"a": None, "b": None}, 2)]
    assert out[0].counter.title == "G: g"


def test_counter_rows_of_several_processes_name_the_process():
    from nvtx_cffi._trace.counters import CounterStats
    from nvtx_cffi.ext_records import CounterInfo, CounterSample

    stats = CounterStats()
    for pid, value in ((7, 1.0), (9, 5.0), (7, 2.0)):
        info = CounterInfo(id=1, domain="A", schema_id=20, scope_id=0, name="loss", description=None, semantics=[],
                           title="A: loss")
        stats.add(CounterSample(pid=pid, tid=pid, time_ns=10, counter=info, values={"value": value}))
    assert [(r["pid"], r["samples"], r["max"]) for r in stats.rows()] == [(7, 2, 2.0), (9, 1, 5.0)]
    lines = stats.format().splitlines()
    assert lines[0] == "NVTX counter summary: 2 counter track(s)"
    assert [line.split("  ")[-1].strip() for line in lines[4:6]] == ["A: loss (process 7)", "A: loss (process 9)"]


EVERY_KIND = """
    import threading
    import numpy as np
    import nvtx_cffi as nvtx
    R = nvtx.CounterNoValueReason
    d = nvtx.get_domain("K")
    unit = nvtx.CounterSemantics(unit="B")
    kinds = {
        "i64": (int, [0, -1, 2**63 - 1, -2**63, 5]),
        "f64": (float, [1.5, float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e300, 5e-324]),
        "u64": (np.uint64, [0, 2**63, 2**64 - 1, 2**53 + 1]),
        "i32": (np.int32, [-2**31, 2**31 - 1, -7]), "u32": (np.uint32, [2**32 - 1, 3]),
        "i16": (np.int16, [-2**15, 12]), "u16": (np.uint16, [2**16 - 1]), "i8": (np.int8, [-128, 127]),
        "u8": (np.uint8, [255, 0]), "f32": (np.float32, [0.1, float("nan"), -float("inf"), 3.0]),
        "f16": (np.float16, [0.5, float("nan"), 2.0]),
    }
    counters = {name: d.get_counter(name, dtype, semantics=unit if name == "i64" else None,
                                    scope="s" if name == "u8" else None) for name, (dtype, _values) in kinds.items()}
    group = d.get_counter("g", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
    plain = nvtx.get_domain(None).get_counter("plain", float)
    burst = nvtx.get_domain("it's").get_counter("a 'burst'", int, semantics=nvtx.CounterSemantics(unit="o'clock"))

    def work(seed):
        for i in range(600):
            for name, (_dtype, values) in kinds.items():
                counters[name].sample(values[(i + seed) % len(values)])
            plain.sample(i / 7)
            if i % 50 == 7:
                counters["i64"].sample_no_value((R.UNCHANGED, R.ZERO, R.UNAVAILABLE)[i % 3])
                group.sample((i, i / 2))
                nvtx.mark("array", payload=np.array([i, i + 1]))
            if i % 100 == 3:
                counters["f64"].batch_submit([1.0, 2.0], [d.get_timestamp(), d.get_timestamp()])
            if i % 200 == 9:
                for k in range(1000):  # (a run of one counter's samples)
                    burst.sample(k - 500)
            with nvtx.annotate("step", payload=i):
                pass

    failed = []
    threading.excepthook = failed.append
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed[0].exc_value
"""


@needs_numpy
def test_counter_samples_of_every_kind_write_the_same_on_the_compiled_and_python_paths(tmp_path, monkeypatch):
    """Scalar counters' samples (int64, double, every other scalar dtype; NaN, infinities, -0.0,
    the int and uint extremes), amid sample_no_value, groups, batches and binary payloads, from three
    threads, over many batches: the compiled path (the reader's sample columns, SampleBlock, the
    writers' C) writes the JSON and .pftrace bytes, the SQLite rows and the --stats table the
    one-sample-at-a-time Python path writes."""
    import json
    import sqlite3

    from nvtx_cffi._trace import columns, counters
    from nvtx_cffi._trace.convert import convert
    from nvtx_cffi._trace.counters import CounterStats

    raw = _record(tmp_path, EVERY_KIND)
    monkeypatch.setattr(columns, "BATCH_EVENTS", 700)
    blocks = []
    real_block = counters.BatchExtDecoder._block

    def counted(self, *args):
        block = real_block(self, *args)
        blocks.append(len(block))
        return block

    monkeypatch.setattr(counters.BatchExtDecoder, "_block", counted)
    outs = {}
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(counters, "_NATIVE", [None])
        got = []
        for ending in ("json", "pftrace", "sqlite"):
            out = tmp_path / f"{compiled}.{ending}"
            table = CounterStats()
            convert(str(raw), str(out), counter_stats=table)
            if ending == "sqlite":
                with closing(sqlite3.connect(out)) as db:
                    got.append(db.execute("SELECT * FROM NVTX_CFFI_COUNTERS ORDER BY rowid").fetchall())
                    got.append(db.execute("SELECT * FROM NVTX_EVENTS ORDER BY rowid").fetchall())
            else:
                got.append(out.read_bytes())
            got.append((table.format(), table.rows()))
        outs[compiled] = got
        if compiled:
            # every sample in blocks, of each thread: 600 of the 11 kinds and of plain, 12 no-value
            # ones, 12 of the group (a row per field), 6 batches of 2, 3 bursts of 1000 (per format)
            assert len(blocks) > 9 and sum(blocks) == 3 * (3 * (600 * 12 + 12 + 2 * 12 + 2 * 6) + 3 * 3 * 1000)
            blocks.clear()
    assert not blocks  # (the Python path: none)
    assert outs[True][0] == outs[False][0]  # JSON
    assert outs[True][2] == outs[False][2]  # .pftrace
    assert outs[True][4:6] == outs[False][4:6]  # SQLite
    assert str(outs[True][1::2]) == str(outs[False][1::2])  # the --stats tables (NaN != NaN: as text)
    # and read back: every value of a track, in order, as sampled
    events = json.loads(outs[True][0])["traceEvents"]
    values = {}
    for e in events:
        if e["ph"] == "C":
            values.setdefault((e["name"], e["tid"] if "tid" in e else None), []).append(e["args"])
    by_name = {}
    for (name, _), args in values.items():
        by_name.setdefault(name, []).extend(args)
    assert {a["B"] for a in by_name["K: i64"] if a["B"] is not None} == {0, -1, 2**63 - 1, -2**63, 5}
    assert {a["value"] for a in by_name["K: u64"]} == {0, 2**63, 2**64 - 1, 2**53 + 1}
    assert {a["value"] for a in by_name["K: u8 [s]"]} == {255, 0}
    assert {str(a["value"]) for a in by_name["K: f64"]} >= {"1.5", "NaN", "Infinity", "-Infinity", "-0.0", "0.0",
                                                           "1e+300", "5e-324", "2.0"}
    assert {str(a["value"]) for a in by_name["K: f32"]} == {str(float(np.float32(0.1))), "NaN", "-Infinity", "3.0"}
    assert len(by_name["plain"]) == 3 * 600
    assert [a["o'clock"] for a in by_name["it's: a 'burst'"]].count(-500) == 9
    rows = {r["title"]: r for r in outs[True][1][1]}
    assert (rows["K: u64"]["min"], rows["K: u64"]["max"], rows["K: u64"]["samples"]) == (0, 2**64 - 1, 1800)
    assert (rows["K: i8"]["min"], rows["K: i8"]["max"]) == (-128, 127)
    assert rows["K: f32"]["nan"] == 450 and rows["K: f64"]["max"] == math.inf
    with closing(sqlite3.connect(tmp_path / "True.sqlite")) as db:
        t0 = db.execute("SELECT value FROM NVTX_CFFI_META WHERE key = 't0_ns'").fetchone()[0]
        stored = db.execute("SELECT timestamp, name, value FROM NVTX_CFFI_COUNTERS WHERE domain = 'K'"
                            " AND (value IS NOT NULL OR noValue IS NULL)").fetchall()  # (not the gaps)

    def number(value):
        value = float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(value, value))
        return "NaN" if value != value else value

    # (JSON, SQLite and .pftrace: the same samples, times and values; SQLite has NULL for NaN)
    samples = sorted((e["name"], round(e["ts"] * 1000) + t0, number(v)) for e in events if e["ph"] == "C"
                     for v in e["args"].values() if v is not None)
    assert sorted((f"K: {n}", ts + t0, "NaN" if v is None else v) for ts, n, v in stored) == [
        s for s in samples if s[0].startswith("K: ")]
    try:  # (read_pftrace imports perfetto when called)
        import perfetto.protos.perfetto.trace.perfetto_trace_pb2  # noqa: F401
        from support.pftrace_check import read_pftrace
    except ImportError:  # (no perfetto or protobuf package)
        return
    trace = read_pftrace(str(tmp_path / "True.pftrace"))
    assert sorted((trace.tracks[t][1], ts, number(v)) for t, ts, v in trace.counters) == samples
