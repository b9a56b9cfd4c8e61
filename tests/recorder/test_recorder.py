"""Tests of the NVTX recorder (libnvtx_recorder.so) and its reader, nvtx_cffi.recorder.

NVTX loads its tool once per process, at the first NVTX call, so every scenario runs in a fresh
Python subprocess started with recorder.environment(tmp_path); the test then reads tmp_path.
The NVTX calls come from tests/c/nvtx_client.c, compiled here into a small shared library (a C
client with its own NVTX dispatch table), and from NVIDIA's nvtx package when it is installed.
"""
from __future__ import annotations

import importlib.util
import json
import re
import os
import platform
import shutil
import struct
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from nvtx_cffi import recorder

from conftest import setup_script
from support.cbuild import c_library
from support.nvtx_client import client_lib  # noqa: F401  (a fixture)
from support.paths import C_HELPERS, SOURCE

try:
    import numpy  # noqa: F401  (recorder.blocks needs it; the Event API does not)
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False


def run_recorded(directory: Path, code: str, *, max_bytes: int | None = None,
                 extra_env: dict[str, str] | None = None, timeout: float = 120) -> dict:
    """Run ``code`` in a Python subprocess attached to the recorder; its last stdout line as JSON."""
    env = {**os.environ, **recorder.environment(directory, max_bytes=max_bytes), **(extra_env or {})}
    env.pop("PYTHONHASHSEED", None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


PRELUDE = """
import ctypes, json, os, sys, threading
lib = ctypes.CDLL({lib!r})
lib.client_start_end.restype = ctypes.c_uint64
lib.client_start_end_open.restype = ctypes.c_uint64
def recorder_lib():
    rec = ctypes.CDLL(os.environ["NVTX_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    rec.nvtx_recorder_dropped.restype = ctypes.c_uint64
    rec.nvtx_recorder_file.restype = ctypes.c_char_p
    return rec
"""


def script(client_lib: str, body: str) -> str:
    return PRELUDE.format(lib=client_lib) + textwrap.dedent(body)


def strip(event: recorder.Event) -> tuple:
    """Every field but time/pid/tid."""
    return (event.kind, event.domain, event.message, event.color, event.category, event.payload,
            event.payload_type, event.api, event.name, event.target, event.resource)


# --------------------------------------------------------------------------- 1. a C client


def test_c_client_every_field(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        tid = threading.get_native_id()
        print(json.dumps({"rc": lib.client_scenario(tid), "pid": os.getpid(), "tid": tid,
                          "file": recorder_lib().nvtx_recorder_file().decode()}))
    """))
    assert out["rc"] == 0
    rec = recorder.read(tmp_path)
    assert list(rec.processes) == [out["pid"]]
    info = rec.processes[out["pid"]]
    assert info.path == out["file"] and info.ppid == os.getpid() and info.dropped == 0
    assert rec.dropped == 0
    assert all(e.pid == out["pid"] and e.tid == out["tid"] for e in rec.events)
    times = [e.time_ns for e in rec.events]
    assert times == sorted(times) and len(set(times)) == len(times)

    tid = out["tid"]
    expected = [
        ("push", None, "outer", None, 0, None, None, "ascii", None, None, None),
        ("mark", None, "mark-a", None, 0, None, None, "ascii", None, None, None),
        ("pop", None, None, None, 0, None, None, "ex", None, None, None),
        ("push", None, "wide \u00e9\u4e2d\U0001F600", None, 0, None, None, "unicode", None, None, None),
        ("pop", None, None, None, 0, None, None, "ex", None, None, None),
        ("thread_name", None, None, None, 0, None, None, "ascii", "main-thread", tid, None),
        ("category", None, None, None, 7, None, None, "ascii", "seven", 7, None),
        ("domain", "my-domain", None, None, 0, None, None, "ascii", "my-domain", 1, None),
        ("domain", "my-domain", None, None, 0, None, None, "ascii", "my-domain", 1, None),
        # string ids are shared with interned messages: "outer", "mark-a" and the wide one came first
        ("string", "my-domain", None, None, 0, None, None, "ascii", "registered", 4, None),
        ("category", "my-domain", None, None, 3, None, None, "ascii", "three", 3, None),
        ("push", "my-domain", "registered", 0xFF00FF00, 3, -42, "int64", "domain", None, None, None),
        ("pop", "my-domain", None, None, 0, None, None, "domain", None, None, None),
        ("start", None, "started", None, 0, 2.5, "double", "ex", None, None, None),
        ("end", None, None, None, 0, None, None, "ex", None, None, None),
        ("mark", "my-domain", "w-mark", None, 0, 4000000000, "uint32", "domain", None, None, None),
        ("pop", None, None, None, 0, None, None, "ex", None, None, None),
    ]
    assert [strip(e) for e in rec.events] == expected
    start, end = (e for e in rec.events if e.kind in ("start", "end"))
    assert start.range_id == end.range_id and start.range_id > 0
    assert all(e.range_id is None for e in rec.events if e.kind not in ("start", "end"))
    assert info.thread_names == {tid: "main-thread"}
    assert info.category_names == {(None, 7): "seven", ("my-domain", 3): "three"}


def test_c_client_wide_and_cuda_naming(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        tid = threading.get_native_id()
        print(json.dumps({"rc": lib.client_wide_and_cuda(tid), "tid": tid}))
    """))
    assert out["rc"] == 0
    rec = recorder.read(tmp_path)
    tid = out["tid"]
    dom = "w-dom\u00e9"
    expected = [
        ("thread_name", None, None, None, 0, None, None, "unicode", "w-thread \u00fc", tid, None),
        ("category", None, None, None, 9, None, None, "unicode", "w-nine", 9, None),
        ("domain", dom, None, None, 0, None, None, "unicode", dom, 1, None),
        ("domain", dom, None, None, 0, None, None, "ascii", dom, 1, None),
        ("category", dom, None, None, 4, None, None, "unicode", "w-four", 4, None),
        ("string", dom, None, None, 0, None, None, "unicode", "w-registered \u4e2d", 1, None),
        ("start", dom, "w-registered \u4e2d", None, 0, 0.25, "float", "domain", None, None, None),
        ("end", dom, None, None, 0, None, None, "domain", None, None, None),
        ("mark", None, "w-mark", None, 0, None, None, "unicode", None, None, None),
        ("start", None, "w-start", None, 0, None, None, "unicode", None, None, None),
        ("end", None, None, None, 0, None, None, "ex", None, None, None),
        ("push", None, "w-push", 0x80112233, 0, -7, "int32", "ex", None, None, None),
        ("pop", None, None, None, 0, None, None, "ex", None, None, None),
        ("resource_name", None, None, None, 0, None, None, "ascii", "gpu3", 3, "cuda_device"),
        ("resource_name", None, None, None, 0, None, None, "unicode", "ctx", 0x1000, "cuda_context"),
        ("resource_name", None, None, None, 0, None, None, "ascii", "stream", 0x2000, "cuda_stream"),
        ("resource_name", None, None, None, 0, None, None, "ascii", "event", 0x3000, "cuda_event"),
    ]
    assert [strip(e) for e in rec.events] == expected
    ranges = [e.range_id for e in rec.events if e.kind in ("start", "end")]
    assert ranges[0] == ranges[1] and ranges[2] == ranges[3] and ranges[0] != ranges[2]
    info = rec.processes[rec.events[0].pid]
    assert info.thread_names == {tid: "w-thread \u00fc"}
    assert info.category_names == {(None, 9): "w-nine", (dom, 4): "w-four"}


# --------------------------------------------------------------------------- 2. NVIDIA's nvtx


@pytest.mark.skipif(importlib.util.find_spec("nvtx") is None, reason="NVIDIA's nvtx not installed")
def test_nvidia_nvtx_package(tmp_path):
    out = run_recorded(tmp_path, """
        import json, threading, nvtx
        nvtx.push_range("hello", color="red", payload=5)
        nvtx.pop_range()
        nvtx.push_range("in-domain", color=0xFF123456, domain="dom", category=2, payload=1.5)
        nvtx.pop_range(domain="dom")
        nvtx.mark("marked", color="green")
        print(json.dumps({"tid": threading.get_native_id()}))
    """)
    rec = recorder.read(tmp_path)
    events = [e for e in rec.events if e.kind in ("push", "pop", "mark")]
    assert [(e.kind, e.domain, e.message) for e in events] == [
        ("push", None, "hello"), ("pop", None, None),
        ("push", "dom", "in-domain"), ("pop", "dom", None),
        ("mark", None, "marked"),
    ]
    assert all(e.tid == out["tid"] for e in rec.events)
    hello, _, in_domain, _, mark = events
    assert hello.color is not None and hello.color & 0xFFFFFF == 0xFF0000
    assert (hello.payload, hello.payload_type) == (5, "int64")
    assert in_domain.color == 0xFF123456 and in_domain.category == 2
    assert (in_domain.payload, in_domain.payload_type) == (1.5, "double")
    assert mark.color is not None and mark.color & 0xFFFFFF == 0x008000
    assert [e.name for e in rec.events if e.kind == "domain"] == ["dom"]


# --------------------------------------------------------------------------- 3. threads


def test_threads_counts_tids_and_nesting(tmp_path, client_lib):
    n = 20000  # several chunks per thread
    out = run_recorded(tmp_path, script(client_lib, f"""
        tids = {{}}
        def work(i):
            tids[i] = threading.get_native_id()
            lib.client_push_pop(b"thread-%d" % i, {n})
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps({{"tids": [tids[i] for i in range(4)], "dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), extra_env={"NVTX_CFFI_RECORD_CHUNK_BYTES": "65536"})
    rec = recorder.read(tmp_path)
    assert out["dropped"] == 0 and rec.dropped == 0
    tids = out["tids"]
    assert len(set(tids)) == 4
    by_tid = defaultdict(list)
    for e in rec.events:
        by_tid[e.tid].append(e)
    assert sorted(by_tid) == sorted(tids)
    for i, tid in enumerate(tids):
        events = by_tid[tid]
        assert Counter(e.kind for e in events) == {"push": n, "pop": n}
        assert {e.message for e in events if e.kind == "push"} == {f"thread-{i}"}
        depth = 0
        for e in events:  # this thread's events in time order
            depth += 1 if e.kind == "push" else -1
            assert depth in (0, 1)
        assert depth == 0


# --------------------------------------------------------------------------- 4. fork


def test_fork_children_have_their_own_files(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        import multiprocessing
        lib.client_domain_marks(b"parent-domain", 1)   # creates "forked-domain" in the parent
        lib.client_marks(b"parent-before", 3)
        pid = os.fork()
        if pid == 0:
            lib.client_marks(b"fork-child", 5)
            lib.client_domain_marks(b"fork-child-domain", 2)   # inherited handle
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        def mp_child():
            lib.client_marks(b"mp-child", 7)
        ctx = multiprocessing.get_context("fork")
        p = ctx.Process(target=mp_child)
        p.start(); p.join()
        assert p.exitcode == 0
        lib.client_marks(b"parent-after", 2)
        print(json.dumps({"pid": os.getpid(), "fork_child": pid, "mp_child": p.pid}))
    """))
    rec = recorder.read(tmp_path)
    parent, fork_child, mp_child = out["pid"], out["fork_child"], out["mp_child"]
    assert set(rec.processes) == {parent, fork_child, mp_child}
    assert rec.processes[fork_child].ppid == parent and rec.processes[mp_child].ppid == parent
    assert len({p.path for p in rec.processes.values()}) == 3

    def marks(pid):
        return Counter(e.message for e in rec.events if e.pid == pid and e.kind == "mark")

    assert marks(parent) == {"parent-domain": 1, "parent-before": 3, "parent-after": 2}
    assert marks(fork_child) == {"fork-child": 5, "fork-child-domain": 2}
    assert marks(mp_child) == {"mp-child": 7}
    # the child's domain events resolve through the definitions it inherited, which are no events
    assert {e.domain for e in rec.events if e.pid == fork_child and e.message == "fork-child-domain"} == {
        "forked-domain"}
    assert [e.kind for e in rec.events if e.pid == fork_child and e.kind == "domain"] == []
    assert [e.pid for e in rec.events if e.kind == "domain"] == [parent]
    # each file holds only its own process's events
    for pid, info in rec.processes.items():
        assert {e.pid for e in recorder.read_file(info.path).events} == {pid}


def test_fork_while_other_threads_record(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        stop = False
        def spin():
            while not stop:
                lib.client_push_pop(b"spin", 1000)
        # NVTX's first call loads the tool under a once-guard that other threads wait on spinning;
        # a fork inside that window leaves the child spinning for good (NVTX's own, see docs/compatibility.md).
        # This test is about forks while threads record, so NVTX is initialised first.
        lib.client_marks(b"init", 1)
        threads = [threading.Thread(target=spin) for _ in range(3)]
        for t in threads: t.start()
        children = []
        for i in range(20):
            pid = os.fork()
            if pid == 0:
                lib.client_marks(b"child", 1)
                os._exit(0)
            children.append(pid)
        for pid in children:
            assert os.waitpid(pid, 0)[1] == 0
        stop = True
        for t in threads: t.join()
        print(json.dumps({"children": children}))
    """), timeout=300)  # a bound on a hang: under ASan on a loaded 2-core machine it takes a minute
    rec = recorder.read(tmp_path)
    for pid in out["children"]:
        assert [(e.kind, e.message) for e in rec.events if e.pid == pid] == [("mark", "child")]
    spins = Counter(e.kind for e in rec.events if e.message == "spin" or e.kind == "pop")
    assert spins["push"] == spins["pop"] > 0 and rec.dropped == 0


# --------------------------------------------------------------------------- 5. dropped


@pytest.mark.parametrize("threads", [1, 4])
def test_dropped_events_are_counted_exactly(tmp_path, client_lib, threads):
    n = 3000
    out = run_recorded(tmp_path, script(client_lib, f"""
        def work():
            lib.client_marks(b"x", {n})
        ts = [threading.Thread(target=work) for _ in range({threads})]
        for t in ts: t.start()
        for t in ts: t.join()
        print(json.dumps({{"dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), max_bytes=4096 + 3 * 8192, extra_env={"NVTX_CFFI_RECORD_CHUNK_BYTES": "8192"})
    rec = recorder.read(tmp_path)
    kept = sum(1 for e in rec.events if e.kind == "mark")
    assert len(rec.events) == kept
    (path,) = tmp_path.glob("*.nvtxrec")
    assert 0 < kept < threads * n and path.stat().st_size <= 4096 + 3 * 8192  # the bound holds
    assert rec.dropped == out["dropped"] == threads * n - kept  # every event recorded or counted
    (info,) = rec.processes.values()
    assert info.dropped == rec.dropped and info.write_errors == 0


# --------------------------------------------------------------------------- 6. torn tail


def _words(data: bytes, chunk_off: int = 4096):
    """(file offset, tag) of every record word of the chunk at chunk_off, up to the first zero word."""
    size = struct.unpack_from("<Q", data, chunk_off)[0] >> 32
    out = []
    for off in range(chunk_off + 32, min(chunk_off + size, len(data)), 8):
        w = struct.unpack_from("<Q", data, off)[0]
        if w == 0:
            break
        out.append((off, w & 0xFF))
    return out


def test_torn_and_cut_records(tmp_path, client_lib):
    run_recorded(tmp_path / "rec", script(client_lib, """
        lib.client_numbered_marks(b"m", 40)
    """))
    (path,) = (tmp_path / "rec").glob("*.nvtxrec")
    data = path.read_bytes()
    full = recorder.read_file(path)
    assert [e.message for e in full.events] == [f"m{i}" for i in range(40)]
    marks = [off for off, tag in _words(data) if tag == 5]  # head words of the 40 marks
    assert len(marks) == 40

    def messages(blob: bytes) -> list:
        p = tmp_path / "cut.nvtxrec"
        p.write_bytes(blob)
        listed = [e.message for e in recorder.read_file(p).events]
        if HAVE_NUMPY:
            columnar = [b.strings[i] for b in recorder.blocks(p) for i in b.events["message"]]
            assert listed == columnar
        return listed

    # the file cut in the middle of mark 10's record: marks 0..9 remain
    for cut in (marks[10] + 1, marks[10] + 8, marks[10] + 13):
        assert messages(data[:cut]) == [f"m{i}" for i in range(10)]
    # an uncommitted record (head word still 0) ends the chunk
    torn = bytearray(data)
    struct.pack_into("<Q", torn, marks[25], 0)
    assert messages(bytes(torn)) == [f"m{i}" for i in range(25)]
    # a corrupt word too, and the reader says how much it skipped
    struct.pack_into("<Q", torn, marks[5], 0x0B)
    assert messages(bytes(torn)) == [f"m{i}" for i in range(5)]
    assert recorder.read_file(tmp_path / "cut.nvtxrec").skipped_bytes == marks[25] - marks[5]
    # a file still being created (empty, or its reserved header still zero) is an empty recording
    assert messages(b"") == [] and messages(bytes(4096)) == []
    # a file cut inside its header is an error that names it
    (tmp_path / "cut.nvtxrec").write_bytes(data[:100])
    with pytest.raises(ValueError, match=r"cut\.nvtxrec.*cut inside its header"):
        recorder.read_file(tmp_path / "cut.nvtxrec")
    if HAVE_NUMPY:
        with pytest.raises(ValueError, match=r"cut\.nvtxrec.*cut inside its header"):
            recorder.blocks(tmp_path / "cut.nvtxrec")


def test_a_corrupt_data_record_length_is_skipped_and_counted(tmp_path, client_lib, monkeypatch):
    """A data record whose length claims more words than follow it: the NumPy path raised IndexError
    (reader and every converter), the Event API dropped the rest of the chunk uncounted."""
    from nvtx_cffi._trace.convert import convert

    run_recorded(tmp_path / "rec", script(client_lib, """
        lib.client_numbered_marks(b"m", 40)
        from nvtx_cffi import _threads
        _threads.name_current_thread("last")  # a data record last in the chunk (the exit may add a clock pair)
    """))
    (path,) = (tmp_path / "rec").glob("*.nvtxrec")
    data = path.read_bytes()
    words = _words(data)
    heads = [(off, tag) for off, tag in words if 0x20 <= tag <= 0x26]
    marks = [off for off, tag in words if tag == 5]
    string_m10 = max(off for off, tag in heads if off < marks[10] and tag == 0x20)  # "m10"'s string

    def lengthened(off: int) -> tuple:
        """The recording with the data record at off claiming one more word; (file, its words)."""
        w = struct.unpack_from("<Q", data, off)[0]
        corrupt = bytearray(data)
        struct.pack_into("<Q", corrupt, off, w + (7 << 32))
        p = tmp_path / "corrupt" / path.name
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(bytes(corrupt))
        return p, 1 + ((w >> 32) + 6) // 7

    def read_both_ways(p):
        numpy_scan = recorder.read(p.parent)
        with monkeypatch.context() as m:
            m.setattr(recorder, "_numpy", lambda: None)
            python_scan = recorder.read(p.parent)
        listed = [(e.kind, e.message) for e in numpy_scan.events]
        assert [(e.kind, e.message) for e in python_scan.events] == listed
        assert python_scan.skipped_bytes == numpy_scan.skipped_bytes
        if HAVE_NUMPY:
            columnar = [b.strings[i] for b in recorder.blocks(p.parent) for i in b.events["message"]]
            assert columnar == [message for kind, message in listed if kind == "mark"]
        for fmt in ("json", "pftrace", "sqlite"):
            assert convert(str(p.parent), str(tmp_path / f"t.{fmt}"), fmt).mark_count == 40
        return [message for kind, message in listed if kind == "mark"], numpy_scan.skipped_bytes

    # in the middle of the chunk: that string is lost, the marks after it are not
    p, size = lengthened(string_m10)
    marks_read, skipped = read_both_ways(p)
    assert marks_read[:10] + marks_read[11:] == [f"m{i}" for i in range(40) if i != 10]
    assert re.fullmatch(r"<unknown string \d+>", marks_read[10]) and skipped == 8 * size
    # the chunk's last record: its length runs past the chunk's last word
    last, last_tag = heads[-1]
    p, size = lengthened(last)
    assert last + 8 * size == words[-1][0] + 8, "the last data record should end the chunk's words"
    marks_read, skipped = read_both_ways(p)
    assert marks_read == [f"m{i}" for i in range(40)] and skipped == 8 * size


def test_reading_what_is_not_a_recording(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        recorder.read(tmp_path / "missing")
    if HAVE_NUMPY:
        with pytest.raises(FileNotFoundError, match="missing"):
            recorder.blocks(tmp_path / "missing")
    with pytest.raises(ValueError, match="/etc/passwd: not an NVTX recording"):
        recorder.read_file("/etc/passwd")
    (tmp_path / "empty").mkdir()
    rec = recorder.read(tmp_path / "empty")
    assert (rec.events, rec.processes, rec.dropped, rec.skipped_bytes) == ([], {}, 0, 0)
    if HAVE_NUMPY:
        assert list(recorder.blocks(tmp_path / "empty")) == []
    (tmp_path / "empty" / "nvtx-1-e0-0.nvtxrec").write_text("root:x:0:0:root:/root:/bin/bash\n" * 200)
    with pytest.raises(ValueError, match="nvtx-1-e0-0.nvtxrec: not an NVTX recording"):
        recorder.read(tmp_path / "empty")


def test_the_readers_take_format_version_2_from_its_header():
    """The readers read every number of the format from c/recorder/nvtxrec_format.h (through the
    CFFI module); these are the numbers of the files written so far, which must still read."""
    from nvtx_cffi import _recording_format as fmt

    lib = fmt.lib
    assert (fmt.MAGIC, lib.NVTXREC_HEADER_SIZE) == (b"NVTXREC2", 4096)
    assert (fmt.FILE_HEADER.format, fmt.CHUNK_HEADER.format) == ("<8sIIIIIIQQQQIIQdQQQ", "<QIIQQ")
    assert fmt.FILE_HEADER_FIELDS[:4] == ("magic", "version", "header_size", "page_size")
    assert fmt.FILE_HEADER_FIELDS[-3:] == ("dropped", "write_errors", "run_id")
    assert fmt.KINDS == {1: "push", 2: "pop", 3: "start", 4: "end", 5: "mark"}
    assert fmt.APIS == {0: "ex", 1: "ascii", 2: "unicode", 3: "domain"}
    assert [lib.NVTXREC_W_ATTR, lib.NVTXREC_W_RANGE_ID_HI, lib.NVTXREC_W_CONT] == [0x10, 0x17, 0xFF]
    assert fmt.DEFINITIONS == {0x20: "string", 0x21: "domain", 0x22: "category", 0x23: "thread_name",
                               0x24: "resource_name", 0x25: "blob", 0x26: "clock"}
    assert fmt.PAYLOAD_TYPES == {1: "uint64", 2: "int64", 3: "double", 4: "uint32", 5: "int32", 6: "float",
                                 7: "ext", 8: "unknown"}
    assert fmt.BLOB_KINDS == {1: "schema", 2: "counter_group", 3: "counter_sample", 4: "payload", 5: "scope"}
    assert fmt.RESOURCES == {1: "cuda_device", 2: "cuda_context", 3: "cuda_stream", 4: "cuda_event"}
    assert (lib.NVTXREC_CHUNK_TAG, lib.NVTXREC_CHUNK_CHECK, lib.NVTXREC_STRING_OVERFLOW) == (0x30, 0x4E565443, 0xFFFFFFFF)
    assert recorder._DATA_FIXED.size == lib.NVTXREC_DATA_FIXED
    # the shim's payload kinds are the format's codes (one numbering)
    assert (recorder.PT_INT64, recorder.PT_UINT64, recorder.PT_DOUBLE) == (2, 1, 3)


@pytest.mark.parametrize("name, raw, value", [
    ("int8", 0xFF, -1), ("uint16", 0x1FFFF, 0xFFFF), ("int32", 0xFFFFFFF9, -7), ("int64", (1 << 64) - 7, -7),
    ("uint64", (1 << 64) - 1, (1 << 64) - 1), ("float", 0x3E800000, 0.25), ("double", 0x3FD0000000000000, 0.25),
])
def test_a_payload_type_reads_by_its_name(name, raw, value):
    """What makes a payload type added to the header read with no change to the readers: its name."""
    from nvtx_cffi import _recording_format as fmt

    read = fmt._value_reader(fmt._value_format(name))
    assert read(raw) == value
    if name in fmt.PAYLOAD_FORMATS:  # a type of the header: the tracer writes its bits back alike
        assert read(fmt.payload_bits(name, value)) == value


def test_corrupt_chunk_header_is_skipped_and_reported(tmp_path, client_lib):
    # two threads: two chunks; the first one's header is damaged
    run_recorded(tmp_path / "rec", script(client_lib, """
        lib.client_numbered_marks(b"a", 20)
        t = threading.Thread(target=lambda: lib.client_numbered_marks(b"b", 20))
        t.start(); t.join()
    """))
    (path,) = (tmp_path / "rec").glob("*.nvtxrec")
    data = bytearray(path.read_bytes())
    first = struct.unpack_from("<Q", data, 4096)[0] >> 32
    assert len(data) > 4096 + first
    struct.pack_into("<Q", data, 4096, 0x30 | (3 << 32))  # a size that is not a whole page
    path.write_bytes(bytes(data))
    rec = recorder.read(tmp_path / "rec")
    assert [e.message for e in rec.events] == [f"b{i}" for i in range(20)]
    assert (rec.skipped_chunks, rec.skipped_bytes) == (1, first)
    if HAVE_NUMPY:
        s = recorder.blocks(tmp_path / "rec")
        assert (s.skipped_chunks, s.skipped_bytes) == (1, first)
        assert sum(len(b.events) for b in s) == 20


# --------------------------------------------------------------------------- API


def test_capture_in_process(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        from nvtx_cffi import recorder
        lib.client_marks(b"before", 2)
        assert recorder.loaded()
        path = recorder.current_file()
        with recorder.capture() as events:
            lib.client_marks(b"inside", 3)
            lib.client_push_pop(b"range", 2)
        lib.client_marks(b"after", 1)
        print(json.dumps({"events": [(e.kind, e.message) for e in events], "path": path,
                          "dropped": events.dropped, "pid": os.getpid()}))
    """))
    assert [tuple(e) for e in out["events"]] == [("mark", "inside")] * 3 + [("push", "range"), ("pop", None)] * 2
    assert out["dropped"] == 0
    assert recorder.read(tmp_path).processes[out["pid"]].path == out["path"]


def test_in_process_api_without_recorder():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import pytest
        from nvtx_cffi import recorder
        assert not recorder.loaded()
        assert recorder.current_file() is None
        recorder.flush()  # no-op
        with pytest.raises(RuntimeError, match="not loaded"):
            with recorder.capture():
                pass
        print("checked")
    """)], env={k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"},
        capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["checked"], proc.stderr


def test_paths_and_environment(tmp_path):
    assert os.path.isabs(recorder.library_path()) and os.path.isfile(recorder.library_path())
    assert os.path.isabs(recorder.null_tool_path()) and os.path.isfile(recorder.null_tool_path())
    env = recorder.environment(tmp_path)
    assert re.fullmatch("[0-9a-f]{16}", env.pop("NVTX_CFFI_RECORD_RUN"))  # a new run id per call
    assert env == {"NVTX_INJECTION64_PATH": recorder.library_path(), "NVTX_CFFI_RECORD_DIR": str(tmp_path)}
    assert recorder.environment(tmp_path, max_bytes=1 << 20)["NVTX_CFFI_RECORD_MAX_BYTES"] == str(1 << 20)


def test_recorder_without_directory_answers_but_records_nothing(tmp_path, client_lib):
    out = run_recorded(tmp_path, script(client_lib, """
        print(json.dumps({"rc": lib.client_scenario(threading.get_native_id()),
                          "file": recorder_lib().nvtx_recorder_file()}))
    """), extra_env={"NVTX_CFFI_RECORD_DIR": ""})
    assert out == {"rc": 0, "file": None}
    assert list(tmp_path.iterdir()) == []


def test_null_tool_is_attached(tmp_path, client_lib):
    code = script(client_lib, """
        print(json.dumps({"ids": [lib.client_start_end() for _ in range(3)]}))
    """)
    env = {**os.environ, "NVTX_INJECTION64_PATH": recorder.null_tool_path()}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    ids = json.loads(proc.stdout)["ids"]
    assert ids[0] > 0 and ids == sorted(ids) and len(set(ids)) == 3  # 0 would mean no tool


def test_write_errors_are_counted_as_dropped(tmp_path, client_lib):
    # The file may not grow past header + 2 chunks (RLIMIT_FSIZE, like a full disk): chunk
    # allocation fails, and every event that needed a new chunk is dropped and counted.
    n = 1000
    out = run_recorded(tmp_path, script(client_lib, f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096 + 2 * 8192, resource.RLIM_INFINITY))
        lib.client_marks(b"x", {n})
        print(json.dumps({{"dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), extra_env={"NVTX_CFFI_RECORD_CHUNK_BYTES": "8192"})
    rec = recorder.read(tmp_path)
    kept = sum(1 for e in rec.events if e.kind == "mark")
    (path,) = tmp_path.glob("*.nvtxrec")
    assert 0 < kept < n and path.stat().st_size <= 4096 + 2 * 8192
    assert rec.dropped == out["dropped"] == n - kept
    (info,) = rec.processes.values()
    assert info.write_errors > 0


# --------------------------------------------------------------------------- blob records (payload extension hook)


@pytest.fixture(scope="session")
def blob_recorder(tmp_path_factory) -> str:
    """The recorder built with tests/c/blob_hook.c, which exports the internal nvtxrec_emit_blob."""
    sources = [*[SOURCE / source for source in setup_script()["RECORDER_SOURCES"]], C_HELPERS / "blob_hook.c"]
    return c_library(tmp_path_factory.mktemp("blobrec"), "nvtx_recorder_blob", sources,
                     ["-I", str(SOURCE / "c" / "recorder"), "-lpthread"])


def test_blob_records_reach_the_reader(tmp_path, client_lib, blob_recorder):
    run_recorded(tmp_path, script(client_lib, """
        lib.client_marks(b"before", 1)
        rec = ctypes.CDLL(os.environ["NVTX_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        assert rec.test_recording() == 1
        rec.test_emit_blob(3, 0, ctypes.c_uint64(2**64 - 5), b"\\x00\\x01abc", 5)
        big = b"x" * 70000
        rec.test_emit_blob(1, 0, ctypes.c_uint64(7), big, len(big))
        rec.test_emit_blob(200, 0, ctypes.c_uint64(0), None, 0)
        lib.client_marks(b"after", 1)
        print("{}")
    """), extra_env={"NVTX_INJECTION64_PATH": blob_recorder})
    events = recorder.read(tmp_path).events
    assert [e.kind for e in events] == ["mark", "blob", "blob", "blob", "mark"]
    b1, b2, b3 = events[1:4]
    assert (b1.name, b1.target, b1.data, b1.truncated) == ("counter_sample", 2**64 - 5, b"\x00\x01abc", False)
    assert (b2.name, b2.target, len(b2.data), b2.truncated) == ("schema", 7, 65536, True)
    assert b2.data == b"x" * 65536
    assert (b3.name, b3.data) == ("unknown(200)", b"")


@pytest.fixture(scope="session")
def reenter_hook(tmp_path_factory) -> str:
    """tests/c/reenter_hook.c built as a library to preload: its malloc raises a signal whose handler
    samples a counter, at the first allocation of an armed NVTX call."""
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("ASan's malloc comes first in LD_PRELOAD: the hook cannot interpose it")
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the hook's malloc calls glibc's __libc_malloc")
    return c_library(tmp_path_factory.mktemp("reenter"), "reenter_hook", [C_HELPERS / "reenter_hook.c"], ["-ldl"])


@pytest.mark.parametrize(("which", "outer"), [(0, [0]), (1, [7, 8]), (2, [])],
                         ids=["sample", "batch", "schema"])
def test_signal_handler_sample_inside_an_allocating_handler_is_dropped(tmp_path, reenter_hook, which, outer):
    # A signal handler's NVTX call while the recorder handles a large sample / a batch / a schema
    # registration, at its malloc (the hook raises the signal there): the recorder claimed its
    # per-thread state before allocating, so the inner sample is counted as dropped and the outer
    # call recorded whole. Before, these handlers allocated before the claim: the inner sample was
    # recorded (value 42) and nothing counted, i.e. a handler's NVTX call could re-enter malloc.
    out = run_recorded(tmp_path, f"""
        import ctypes, json, os
        hook = ctypes.CDLL({reenter_hook!r})  # the preloaded copy
        hook.reenter_setup.restype = ctypes.c_uint64
        counter = hook.reenter_setup()
        fired = hook.reenter_run({which})
        rec = ctypes.CDLL(os.environ["NVTX_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        rec.nvtx_recorder_dropped.restype = ctypes.c_uint64
        print(json.dumps({{"counter": counter, "fired": fired, "dropped": rec.nvtx_recorder_dropped()}}))
    """, extra_env={"LD_PRELOAD": reenter_hook})
    assert out["fired"] == 1
    rec = recorder.read(tmp_path)
    assert out["dropped"] == rec.dropped == 1
    from nvtx_cffi.ext_records import ExtDecoder
    decoder = ExtDecoder()
    values = [s.values["value"] for e in rec.events for s in decoder.feed(e) if s.counter.id == out["counter"]]
    assert values == [1] + outer  # the warm-up sample, then the outer call's; no 42
    schemas = [e for e in rec.events if e.kind == "blob" and e.name == "schema"]
    assert len(schemas) == (2 if which == 2 else 1)


# --------------------------------------------------------------------------- full disk, exec, sizes, threads, liveness


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


def _fill(path: Path) -> None:
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\1" * 4096) == 4096:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("room", ["none", "header"])
def test_full_disk_warns_and_runs_unrecorded(tmp_path, client_lib, room):
    # A real full filesystem: a 64 KiB tmpfs filled up (none: not even the header fits; header: the
    # header and the first chunk fit, later chunks do not). Before: SIGBUS (exit 135).
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "64k")
    try:
        _fill(disk)
        if room == "header":
            os.truncate(disk / "filler", max(0, os.path.getsize(disk / "filler") - 2 * 4096))
        env = {**os.environ, **recorder.environment(disk / "rec")}
        code = script(client_lib, """
            lib.client_marks(b"x", 5000)
            print(json.dumps({"dropped": recorder_lib().nvtx_recorder_dropped()}))
        """)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("nvtx-cffi recorder:")]
        assert len(warnings) == 1, proc.stderr
        assert "No space left on device" in warnings[0]
        dropped = json.loads(proc.stdout.strip().splitlines()[-1])["dropped"]
        if room == "none":
            assert "cannot reserve space for" in warnings[0]
            assert dropped == 5000 and list((disk / "rec").glob("*.nvtxrec")) == []
        else:
            assert "cannot extend" in warnings[0]
            rec = recorder.read(disk / "rec")
            kept = sum(1 for e in rec.events if e.kind == "mark")
            (info,) = rec.processes.values()
            assert 0 < kept < 5000 and dropped == rec.dropped == 5000 - kept and info.write_errors > 0
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_exec_images_are_kept_apart(tmp_path, client_lib):
    second = script(client_lib, """
        lib.client_pop()
        lib.client_marks(b"second", 3)
        print(json.dumps({"pid": os.getpid()}))
    """)
    first = script(client_lib, f"""
        lib.client_push(b"left open")
        rid = lib.client_start_end_open()
        lib.client_name_thread(threading.get_native_id(), b"first-main")
        lib.client_marks(b"first", 2000)  # more than the bound: the first image drops
        dropped = recorder_lib().nvtx_recorder_dropped()
        sys.stdout.write(json.dumps({{"rid": rid, "dropped": dropped}}) + "\\n")
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-c", {second!r}])
    """)
    env = {**os.environ, **recorder.environment(tmp_path, max_bytes=4096 + 3 * 4096)}
    proc = subprocess.run([sys.executable, "-c", first], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    (pid,) = {line["pid"] for line in lines if "pid" in line}
    rec = recorder.read(tmp_path)
    assert sorted((i.pid, i.exec_gen) for i in rec.images) == [(pid, 0), (pid, 1)]
    img0, img1 = sorted(rec.images, key=lambda i: i.exec_gen)
    assert img0.dropped == lines[0]["dropped"] > 0 and img1.dropped == 0
    assert rec.dropped == img0.dropped + img1.dropped
    assert img0.thread_names == {pid: "first-main"} and img1.thread_names == {}
    assert rec.processes[pid] is img1
    by_gen = Counter((e.exec_gen, e.kind, e.message) for e in rec.events)
    assert by_gen[(0, "push", "left open")] == 1 and by_gen[(0, "start", "open")] == 1
    assert by_gen[(1, "pop", None)] == 1 and by_gen[(1, "mark", "second")] == 3
    assert not any(e.exec_gen == 1 and e.kind in ("push", "start") for e in rec.events)
    (start,) = [e for e in rec.events if e.kind == "start"]
    assert start.range_id == lines[0]["rid"] and start.exec_gen == 0
    names = sorted(os.path.basename(i.path) for i in rec.images)
    assert names[0].startswith(f"nvtx-{pid}-e0-") and names[1].startswith(f"nvtx-{pid}-e1-")


@pytest.mark.parametrize("value, dropped", [("64K", True), ("64kb", True), ("64M", False), ("12Q", False),
                                            ("-5", False)])
def test_max_bytes_takes_size_suffixes(tmp_path, client_lib, value, dropped):
    env = {**os.environ, **recorder.environment(tmp_path), "NVTX_CFFI_RECORD_MAX_BYTES": value}
    code = script(client_lib, """
        lib.client_marks(b"x", 20000)
        print(json.dumps({"dropped": recorder_lib().nvtx_recorder_dropped()}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    (path,) = tmp_path.glob("*.nvtxrec")
    if dropped:  # 64 KiB: bounded there, the rest counted
        assert path.stat().st_size <= 64 * 1024 and out["dropped"] > 0
    else:
        assert out["dropped"] == 0
    garbage = value in ("12Q", "-5")
    assert (f"NVTX_CFFI_RECORD_MAX_BYTES={value} is not a size" in proc.stderr) == garbage
    rec = recorder.read(tmp_path)
    assert sum(1 for e in rec.events if e.kind == "mark") + rec.dropped == 20000


def test_thousands_of_short_threads_fit_a_small_bound(tmp_path, client_lib):
    # Before: every thread took a whole 256 KiB chunk of the bound. Now a first chunk is one page.
    n = 3000
    out = run_recorded(tmp_path, script(client_lib, f"""
        tids = []
        def work():
            tids.append(threading.get_native_id())
            lib.client_marks(b"t", 2)
        for _ in range({n}):
            t = threading.Thread(target=work); t.start(); t.join()
        print(json.dumps({{"dropped": recorder_lib().nvtx_recorder_dropped(), "tids": tids}}))
    """), max_bytes=16 << 20)
    rec = recorder.read(tmp_path)
    assert out["dropped"] == rec.dropped == 0
    per_thread = Counter(e.tid for e in rec.events if e.kind == "mark")
    assert set(per_thread) == set(out["tids"]) and len(per_thread) == n
    assert set(per_thread.values()) == {2}
    (path,) = tmp_path.glob("*.nvtxrec")
    assert path.stat().st_size <= 4096 + (n + 1) * 4096


def test_active_files_tell_which_processes_still_record(tmp_path, client_lib):
    code = script(client_lib, """
        lib.client_marks(b"alive", 1)
        print(json.dumps({"file": recorder_lib().nvtx_recorder_file().decode()}), flush=True)
        sys.stdin.readline()
    """)
    env = {**os.environ, **recorder.environment(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        path = json.loads(proc.stdout.readline())["file"]
        assert recorder.active_files(tmp_path) == [path]
        assert recorder.active_files(tmp_path) == [path]  # testing does not take the lock away
        proc.kill()  # SIGKILL: the kernel drops the lock
        proc.wait(timeout=30)
        assert recorder.active_files(tmp_path) == []
        assert [e.message for e in recorder.read(tmp_path).events] == ["alive"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- the columnar reader


@pytest.mark.skipif(not HAVE_NUMPY, reason="recorder.blocks needs NumPy")
def test_blocks_carry_what_the_events_carry(tmp_path, client_lib, blob_recorder):
    run_recorded(tmp_path, script(client_lib, """
        lib.client_scenario(threading.get_native_id())
        t = threading.Thread(target=lambda: lib.client_push_pop(b"in thread", 5000))
        t.start(); t.join()
        rec = ctypes.CDLL(os.environ["NVTX_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        rec.test_emit_blob(4, 0, ctypes.c_uint64(99), b"raw", 3)
        lib.client_numbered_marks(b"n", 3)
    """), extra_env={"NVTX_INJECTION64_PATH": blob_recorder})
    events = [e for e in recorder.iter_events(tmp_path) if e.kind in ("push", "pop", "start", "end", "mark")]
    s = recorder.blocks(tmp_path, max_events=1000)  # several blocks
    got = list(s)
    assert len(got) > 2 and all(len(b.events) <= 1000 for b in got)
    assert s.start_ns <= min(e.time_ns for e in events) and s.end_ns >= max(e.time_ns for e in events)
    rows = []
    for b in got:
        values, valid = recorder.decode_payloads(b.events)
        for ev, value, ok in zip(b.events, values, valid):
            rows.append((recorder._KINDS[ev["kind"]], int(ev["time_ns"]), b.pid, int(ev["tid"]),
                         b.domains[int(ev["domain"])], b.strings[int(ev["message"])],
                         int(ev["color"]) if ev["flags"] & recorder.FLAG_COLOR else None, int(ev["category"]),
                         float(value) if ok else None,
                         int(ev["range_id"]) if ev["kind"] in (3, 4) else None, recorder._APIS[ev["api"]]))
    expected = [(e.kind, e.time_ns, e.pid, e.tid, e.domain, e.message, e.color, e.category,
                 float(e.payload) if e.payload is not None else None, e.range_id, e.api) for e in events]
    assert rows == expected  # same order: file order, per thread chunk
    blobs = [x for b in got for x in b.blobs]
    assert [(x.kind, x.kind_id, x.arg, x.data, x.truncated) for x in blobs] == [("payload", 4, 99, b"raw", False)]
    assert sum(1 for r in rows if r[5] == "in thread") == 5000


@pytest.mark.skipif(not HAVE_NUMPY, reason="recorder.blocks needs NumPy")
def test_blocks_read_blob_records_as_the_event_reader_does_torn_ones_too(tmp_path, client_lib, blob_recorder):
    # The columnar reader gathers the data bytes of all a chunk's blob records at once; what it
    # hands on must be what the event reader reads one record at a time: data (empty, one word,
    # many words, cut at the recorder's limit), kind, target, time, thread, and a torn record
    # (a continuation word's tag overwritten with 0) left out, the records after it kept. (The event
    # reader takes a zero word for the end of what was written and reads nothing more of that chunk.)
    run_recorded(tmp_path, script(client_lib, """
        lib.client_marks(b"before", 1)
        rec = ctypes.CDLL(os.environ["NVTX_INJECTION64_PATH"], mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        rec.test_emit_blob(3, 0, ctypes.c_uint64(2**64 - 5), b"\\x00\\x01abc", 5)
        rec.test_emit_blob(4, 0, ctypes.c_uint64(1), b"TORN-ME-PLEASE!!", 16)
        rec.test_emit_blob(200, 0, ctypes.c_uint64(0), None, 0)
        for n in (7, 8, 13, 14, 70000):
            data = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
            rec.test_emit_blob(4, 0, ctypes.c_uint64(n), data, n)
        t = threading.Thread(target=lambda: rec.test_emit_blob(4, 0, ctypes.c_uint64(9), b"thread", 6))
        t.start(); t.join()
        lib.client_marks(b"after", 1)
    """), extra_env={"NVTX_INJECTION64_PATH": blob_recorder})

    def both():
        events = [e for e in recorder.read(tmp_path).events if e.kind == "blob"]
        blobs = [x for b in recorder.blocks(tmp_path, max_events=1000) for x in b.blobs]
        return ([(e.name, e.target, e.data, e.truncated, e.time_ns, e.tid) for e in events],
                [(x.kind, x.arg, x.data, x.truncated, x.time_ns, x.tid) for x in blobs])

    events, blobs = both()
    assert blobs == events and len(events) == 9
    whole = blobs
    assert [e[1] for e in events] == [2**64 - 5, 1, 0, 7, 8, 13, 14, 70000, 9]
    assert events[7][2] == (bytes(range(256)) * 274)[:65536] and events[7][3]  # cut at 64 KiB
    (path,) = tmp_path.glob("*.nvtxrec")
    data = bytearray(path.read_bytes())
    at = data.index(b"-ME-PLE") - 1  # a continuation word of it: its tag byte, then 7 data bytes
    assert at % 8 == 0 and data[at] == recorder._W_CONT
    data[at] = 0
    path.write_bytes(bytes(data))
    _events, blobs = both()
    assert blobs == whole[:1] + whole[2:]


@pytest.mark.parametrize("clock", ["tsc", "monotonic"])
def test_times_are_clock_monotonic_even_after_sigkill(tmp_path, client_lib, clock):
    # TSC timestamps are mapped to CLOCK_MONOTONIC through the clock pairs in the file; a process
    # killed with SIGKILL writes no last pair, so its last event must still come out right.
    code = script(client_lib, """
        import signal, time
        times = []
        for i in range(3):
            a = time.monotonic_ns(); lib.client_marks(b"m", 1); b = time.monotonic_ns()
            times.append((a, b))
            time.sleep(0.05)
        print(json.dumps(times), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, **recorder.environment(tmp_path)}
    if clock == "monotonic":
        env["NVTX_CFFI_RECORD_CLOCK"] = "monotonic"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    bounds = json.loads(proc.stdout)
    marks = [e for e in recorder.read(tmp_path).events if e.kind == "mark"]
    assert len(marks) == 3
    for e, (a, b) in zip(marks, bounds):
        assert a <= e.time_ns <= b


# --------------------------------------------------------------------------- a program that closes the recorder's descriptor

CLOSES_ITS_DESCRIPTORS = """
import json, os, sys
import nvtx_cffi as nvtx
from nvtx_cffi import recorder
for i in range(1000):
    nvtx.push_range("before")
    nvtx.pop_range()
mine = os.path.realpath(recorder.current_file())
(old,) = [int(fd) for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == mine]
os.closerange(3, 1 << 16)  # as daemonising code does: the recorder's descriptor too
if sys.argv[1] == "moved":  # the record file is no longer where it was made: it cannot be reopened
    os.rename(mine, mine[:-len(".nvtxrec")] + "-moved.nvtxrec")
path = sys.argv[2]
with open(path, "wb") as f:
    f.write(bytes(range(256)) * (32 << 10))  # 8 MiB of the program's own
fd = os.open(path, os.O_RDWR)
if fd != old:
    os.dup2(fd, old)  # the program's file under the number the recorder had
for i in range(200000):
    nvtx.push_range("after")
    nvtx.pop_range()
print(json.dumps({"old": old}))
"""


@pytest.mark.parametrize("case", ["reused", "moved"])
def test_a_closed_and_reused_descriptor_never_gets_the_recording(tmp_path, case):
    """A program that closes every descriptor and opens a file of its own under the number the
    recorder's file had: the recorder checks its descriptor (device, inode) before each new chunk and
    reopens its file by path. The program's file stays byte-for-byte its own; the recording has every
    range, or, where the file cannot be reopened (moved away), what it has plus the dropped count
    is every range, and a warning says so."""
    own = tmp_path / "own.bin"
    rec_dir = tmp_path / "rec"
    env = {**os.environ, **recorder.environment(rec_dir)}
    proc = subprocess.run([sys.executable, "-c", CLOSES_ITS_DESCRIPTORS, case, str(own)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert own.read_bytes() == bytes(range(256)) * (32 << 10)
    rec = recorder.read(rec_dir)
    counts = Counter(e.message for e in rec.events if e.kind == "push")
    pops = sum(1 for e in rec.events if e.kind == "pop")
    assert counts["before"] == 1000
    if case == "reused":
        assert (counts["after"], pops, rec.dropped) == (200000, 201000, 0)
        assert "nvtx-cffi recorder" not in proc.stderr
    else:
        assert 0 < counts["after"] < 200000
        assert counts["after"] + pops - 1000 + rec.dropped == 400000
        assert "nvtx-cffi recorder: lost its descriptor and cannot reopen" in proc.stderr


@pytest.mark.parametrize("name", ["nvtx_cffi.recorder", "nvtx_cffi.ext_records"])
def test_all_lists_the_public_names(name):
    # __all__ is what the module offers: each name in it exists, and every function, class and
    # constant the module defines without a leading underscore is in it (its helpers are private).
    module = importlib.import_module(name)
    names = vars(module)
    assert [n for n in module.__all__ if n not in names] == []
    defined = {n for n, value in names.items() if not n.startswith("_") and not isinstance(value, type(sys))
               and getattr(value, "__module__", name) == name}
    assert sorted(defined - set(module.__all__)) == []
