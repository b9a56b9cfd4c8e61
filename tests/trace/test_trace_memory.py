"""Converting a recording whose range names never repeat: memory per name stays small.

Every name used to be kept for the whole conversion as a Python string in the reader's table (twice:
the table and its copy for the blocks), and in the JSON writer's cache of event heads (100,000 of
them): about 300 bytes a name, 330-380 MB peak for a million distinct names against 65 MB when
they repeat. Now the table holds the names' UTF-8 bytes in one buffer and the caches are bounded.

Each conversion runs in a fresh child process and reports its peak RSS; the bound is on what
distinct names add over the same number of ranges with 100 names (measured, CPython 3.11: +30 MB
at 200,000 names where it was +70 to +114 MB; +53 to +58 MB at 1,000,000 where it was +220 to
+270 MB). Default: 200,000 ranges; ``-m slow``: 1,000,000.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from support.hardening import opted_in_slow  # noqa: F401 (fixture)
from nvtx_cffi import recorder

try:
    import numpy as np
except ImportError:  # PyPy
    np = None

RECORD = """
import sys
import nvtx_cffi as nvtx
n, distinct = int(sys.argv[1]), sys.argv[2] == "distinct"
push, pop = nvtx.push_range, nvtx.pop_range
for i in range(n):
    push(f"range number {i if distinct else i % 100}")
    pop()
"""

CONVERT = """
import json, resource, sys
from nvtx_cffi._trace.convert import convert
timeline = convert(sys.argv[1], sys.argv[2])
print(json.dumps({"ranges": timeline.range_count,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _record(directory, n: int, kind: str) -> str:
    env = dict(os.environ, **recorder.environment(directory))
    subprocess.run([sys.executable, "-c", RECORD, str(n), kind], env=env, check=True, timeout=600)
    return str(directory)


def _convert(source: str, output: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    proc = subprocess.run([sys.executable, "-c", CONVERT, source, output], env=env, capture_output=True,
                          text=True, timeout=900, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def _check(tmp_path, n: int, bound_mb: float) -> None:
    repeated = _record(tmp_path / "repeated", n, "repeated")
    distinct = _record(tmp_path / "distinct", n, "distinct")
    for ending in (".json", ".pftrace"):
        base = _convert(repeated, str(tmp_path / f"repeated{ending}"))
        got = _convert(distinct, str(tmp_path / f"distinct{ending}"))
        assert base["ranges"] == got["ranges"] == n
        added = got["peak_mb"] - base["peak_mb"]
        assert added <= bound_mb, (ending, got, base)
    # the names are all there, each once
    names = [e["name"] for e in json.loads((tmp_path / "distinct.json").read_text())["traceEvents"]
             if e["ph"] == "X"]
    assert len(names) == n and set(names) == {f"range number {i}" for i in range(n)}


def test_distinct_range_names_add_little_memory(tmp_path):
    _check(tmp_path, 200_000, bound_mb=50)


@pytest.mark.slow
def test_distinct_range_names_add_little_memory_full_size(tmp_path, opted_in_slow):
    _check(tmp_path, 1_000_000, bound_mb=85)


RECORD_SAMPLES = """
import sys
import nvtx_cffi as nvtx
sample = nvtx.get_domain("D").get_counter("c", int).sample
for i in range(int(sys.argv[1])):
    sample(i)
"""


@pytest.mark.skipif(np is None, reason="the compiled path's (NumPy)")
def test_counter_samples_stream_in_bounded_memory(tmp_path):
    """A thread's chunks of counter samples alone made one block of all of them, and they were all
    kept until an event came (none: the end), about 1 KB a sample (200,000 samples: +181 MB over
    20,000); the blocks are bounded by their samples' words too, and handed on without events:
    +18 to +20 MB (CPython 3.11)."""
    peaks = {}
    for n in (20_000, 200_000):
        raw = tmp_path / f"raw{n}"
        env = dict(os.environ, **recorder.environment(raw))
        subprocess.run([sys.executable, "-c", RECORD_SAMPLES, str(n)], env=env, check=True, timeout=300)
        for ending in (".json", ".pftrace"):
            peaks[n, ending] = _convert(str(raw), str(tmp_path / f"t{n}{ending}"))["peak_mb"]
    for ending in (".json", ".pftrace"):
        assert peaks[200_000, ending] - peaks[20_000, ending] <= 40, peaks
    doc = json.loads((tmp_path / "t200000.json").read_text())
    assert [e["args"]["value"] for e in doc["traceEvents"] if e["ph"] == "C"] == list(range(200_000))


@pytest.mark.parametrize("ids", [[1, 2, 3, 2], [7, 1 << 31, 5000000, 7]])  # dense; sparse
def test_the_compact_string_table_reads_as_the_dict_it_replaced(ids):
    table = recorder.StringTable({0xFFFFFFFF: "overflow"})
    for n, key in enumerate(ids):
        table._add(key, f"text {n} é".encode())
    table._add_many([9], "nine\xff".encode("latin-1") + "ten".encode(), [5])  # undecodable: replaced
    expected = {0xFFFFFFFF: "overflow", 9: "nine\ufffd"}
    for n, key in enumerate(ids):
        expected[key] = f"text {n} é"  # an id defined again: the last definition wins
    assert dict(table) == expected and len(table) == len(expected)
    assert all(table[key] == text and table.get(key) == text and key in table for key, text in expected.items())
    assert table[0] is None and table[123456] == "<unknown string 123456>"
    assert table.get(123456) is None and table.get(0, "d") == "d" and 123456 not in table and "x" not in table
    keys = list(expected) + [0, 123456]
    assert table.texts(keys) == [table[k] for k in keys]


@pytest.mark.skipif(np is None, reason="raw_many is the NumPy path's")
@pytest.mark.parametrize("ids", [[], [1, 2], [7, 1 << 31]])  # empty (an NVTXW-written file); dense; sparse
def test_raw_many_gives_the_texts_bytes_and_no_bytes_for_keys_it_does_not_hold(ids):
    table = recorder.StringTable({0xFFFFFFFF: "overflow"})
    for key in ids:
        table._add(key, f"text {key}".encode())
    keys = np.array([0, 0, *ids, 123456, 0xFFFFFFFF], dtype=np.int64)
    data, lengths = table.raw_many(keys)
    # 0, an unknown id and a text given as str have no bytes (-1: look them up as text)
    assert lengths.tolist() == [-1, -1, *[len(f"text {key}") for key in ids], -1, -1]
    assert bytes(data) == b"".join(f"text {key}".encode() for key in ids)


ODD_NAMES = ['quote " inside', "back\\slash", "tab\there", "control \x01 byte", "é accent", "日本語", "dup", "dup"]

RECORD_ODD = """
import sys
import nvtx_cffi as nvtx
odd = {odd!r}
for i in range(int(sys.argv[1])):
    nvtx.push_range(odd[i // 500] if i % 500 == 7 and i // 500 < len(odd) else f"range number {{i}}")
    nvtx.pop_range()
"""


@pytest.mark.parametrize("native", [True, False])
def test_distinct_names_that_need_escaping_read_back_from_json_and_pftrace(tmp_path, monkeypatch, native):
    """Many distinct names take the bulk paths (names' bytes copied as they are; the few that JSON
    escapes, or that are not ASCII, spelt by Python): every name reads back as recorded."""
    pytest.importorskip("numpy")
    from nvtx_cffi import _fixedwidth as fixedwidth
    from nvtx_cffi._trace import chrome
    from nvtx_cffi._trace.convert import convert

    n = 6000
    env = dict(os.environ, **recorder.environment(tmp_path / "raw"))
    subprocess.run([sys.executable, "-c", RECORD_ODD.format(odd=ODD_NAMES), str(n)], env=env, check=True,
                   timeout=300)
    expected = sorted(ODD_NAMES + [f"range number {i}" for i in range(n) if not (i % 500 == 7 and i // 500 < 8)])
    if not native:
        monkeypatch.setattr(fixedwidth, "_NATIVE", [None])

    def by_row(*args):
        raise AssertionError("formatted row by row")

    monkeypatch.setattr(chrome.ChromeTraceWriter, "_ranges_by_row", by_row)
    convert(str(tmp_path / "raw"), str(tmp_path / "t.json"))
    with open(tmp_path / "t.json", encoding="utf-8") as f:
        doc = json.load(f)
    assert sorted(e["name"] for e in doc["traceEvents"] if e["ph"] == "X") == expected
    pytest.importorskip("perfetto")
    pytest.importorskip("google.protobuf")
    from support.pftrace_check import read_pftrace

    convert(str(tmp_path / "raw"), str(tmp_path / "t.pftrace"))
    assert sorted(s["name"] for s in read_pftrace(str(tmp_path / "t.pftrace")).slices) == expected


def test_perfetto_bulk_interning_gives_one_entry_per_text_in_order_of_first_use():
    """Two text ids of one text (a message and a registered string): one interned name, as the
    name-by-name encoder gives; names a sequence already holds keep their iids."""
    np = pytest.importorskip("numpy")
    from nvtx_cffi._trace import pftrace

    class Batch:
        def text_list(self, ids):
            return [{1: "b", 2: "a", 3: "b", 4: "c"}[i] for i in ids]

    writer = pftrace.PerfettoWriter(io.BytesIO(), 0)
    seq = pftrace._Sequence(2, 1)
    keys = np.array([3, 2, 1, 3, 9], dtype=np.uint32)
    mask = np.array([True, True, True, True, False])
    iids, entries = writer._name_iids(Batch(), seq, keys, mask)
    assert iids.tolist() == [1, 2, 1, 1, 0] and seq.names == {"b": 1, "a": 2}
    assert entries == pftrace._event_name((1, "b")) + pftrace._event_name((2, "a"))
    iids, entries = writer._name_iids(Batch(), seq, np.array([4, 2], dtype=np.uint32), np.array([True, True]))
    assert iids.tolist() == [3, 2] and entries == pftrace._event_name((3, "c"))
