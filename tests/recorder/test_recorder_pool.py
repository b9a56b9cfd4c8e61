"""The recorder's background thread ("pool"): it keeps chunk_max chunks reserved, mapped and faulted in
so that a thread's chunk switch is taking one, and unmaps full ones.

It starts at a thread's first chunk_max claim when chunk_max >= 64 KiB. These tests make it run
(64 KiB chunks, hundreds of them) and check what must not change: exact counts under threads, the
bound, fork children (which have no such thread and start their own), SIGKILL and exit.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from nvtx_cffi import recorder
from support.nvtx_client import client_lib  # noqa: F401  (a fixture)
from test_recorder import run_recorded, script

CHUNK = {"NVTX_CFFI_RECORD_CHUNK_BYTES": "65536"}

THREADS = """
def threads_now():  # pool threads ("nvtx-recorder"), and all threads
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # gone meanwhile
            pass
    return names.count("nvtx-recorder"), len(names)
"""


def pscript(lib: str, body: str) -> str:
    return script(lib, THREADS + textwrap.dedent(body))


def test_pool_thread_starts_and_threads_stay_exact(tmp_path, client_lib):
    n, k = 8, 60000  # 8 threads x 60000 push+pop x 24 B: ~180 chunks of 64 KiB
    out = run_recorded(tmp_path, pscript(client_lib, f"""
        before = threads_now()
        def work(i):
            lib.client_push_pop(b"t%d" % i, {k})
        ts = [threading.Thread(target=work, args=(i,)) for i in range({n})]
        for t in ts: t.start()
        for t in ts: t.join()
        print(json.dumps({{"before": before, "after": threads_now(),
                           "dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), extra_env=CHUNK, timeout=300)
    assert out["before"][0] == 0 and out["after"][0] == 1  # the pool thread, and only one
    assert out["dropped"] == 0
    rec = recorder.read(tmp_path)
    assert rec.dropped == 0 and rec.skipped_bytes == 0
    pushes = Counter(e.message for e in rec.events if e.kind == "push")
    assert pushes == {f"t{i}": k for i in range(n)}
    assert sum(1 for e in rec.events if e.kind == "pop") == n * k
    # per thread, times never go back and pushes and pops alternate
    by_tid = {}
    for e in rec.events:
        by_tid.setdefault(e.tid, []).append(e)
    assert len(by_tid) == n  # the main thread records nothing
    for events in by_tid.values():
        kinds = [e.kind for e in events]
        assert kinds == ["push", "pop"] * k
        times = [e.time_ns for e in events]
        assert times == sorted(times)


@pytest.mark.parametrize("threads", [1, 8])
def test_pool_respects_the_bound(tmp_path, client_lib, threads):
    bound = 4096 + 40 * 65536
    k = 200000  # far more than fits
    out = run_recorded(tmp_path, script(client_lib, f"""
        def work():
            lib.client_marks(b"x", {k})
        ts = [threading.Thread(target=work) for _ in range({threads})]
        for t in ts: t.start()
        for t in ts: t.join()
        print(json.dumps({{"dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), max_bytes=bound, extra_env=CHUNK, timeout=300)
    (path,) = tmp_path.glob("*.nvtxrec")
    assert path.stat().st_size <= bound
    rec = recorder.read(tmp_path)
    kept = sum(1 for e in rec.events if e.kind == "mark")
    assert 0 < kept < threads * k
    assert rec.dropped == out["dropped"] == threads * k - kept  # every event recorded or counted
    # the pool stops short of the bound and inline claims fill the rest: nearly all of it is used
    assert kept * 16 > 0.9 * (bound - 4096 - 64 * 1024 * (threads + 1))


def test_fork_child_records_with_its_own_pool_thread(tmp_path, client_lib):
    k = 100000
    out = run_recorded(tmp_path, pscript(client_lib, f"""
        signal_alarm = __import__("signal").alarm
        lib.client_push_pop(b"parent-before", {k})   # the parent's pool thread runs now
        parent_threads = threads_now()
        children = []
        for i in range(3):
            pid = os.fork()
            if pid == 0:
                signal_alarm(60)                      # a lock inherited held would hang here
                alone = threads_now()[1]
                lib.client_push_pop(b"child", {k})
                # forked alone; then its own pool thread (exit code 3: not so)
                os._exit(0 if (alone, threads_now()[0]) == (1, 1) else 3)
            children.append(pid)
            lib.client_push_pop(b"parent-between", 1000)
        status = [os.waitpid(pid, 0)[1] for pid in children]
        lib.client_push_pop(b"parent-after", {k})
        print(json.dumps({{"pid": os.getpid(), "children": children, "status": status,
                           "parent_threads": parent_threads}}))
    """), extra_env=CHUNK, timeout=300)
    assert out["status"] == [0, 0, 0] and out["parent_threads"][0] == 1
    rec = recorder.read(tmp_path)
    assert rec.dropped == 0 and rec.skipped_bytes == 0

    def pushes(pid):
        return Counter(e.message for e in rec.events if e.pid == pid and e.kind == "push")

    assert pushes(out["pid"]) == {"parent-before": k, "parent-between": 3000, "parent-after": k}
    for pid in out["children"]:
        assert pushes(pid) == {"child": k}
        assert sum(1 for e in rec.events if e.pid == pid and e.kind == "pop") == k


def test_sigkill_and_exit_with_the_pool_thread(tmp_path, client_lib):
    k = 100000
    for how in ("exit", "os._exit", "sigkill", "exit-from-thread"):
        d = tmp_path / how
        env = {**os.environ, **recorder.environment(d), **CHUNK}
        end = {
            "exit": "sys.exit(0)",
            "os._exit": "os._exit(0)",
            "sigkill": "os.kill(os.getpid(), 9)",
            "exit-from-thread": "t = threading.Thread(target=os._exit, args=(0,)); t.start(); t.join()",
        }[how]
        code = script(client_lib, f"""
            lib.client_push_pop(b"{how}", {k})
            {end}
        """)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=60)  # no hang at exit
        expected = -signal.SIGKILL if how == "sigkill" else 0
        assert proc.returncode == expected, proc.stderr
        assert proc.stderr == ""
        rec = recorder.read(d)
        assert Counter(e.kind for e in rec.events) == {"push": k, "pop": k}, how
        assert rec.dropped == 0 and rec.skipped_bytes == 0


def _chunk_headers(path: str) -> list:
    """``(seq, offset, tid)`` of every chunk of one record file, walked by its headers."""
    import struct
    hdr = struct.Struct("<QIIQQ")
    out = []
    with open(path, "rb") as f:
        data = f.read()
    off = 4096
    while off + hdr.size <= len(data):
        tag_size, tid, _check, coff, seq = hdr.unpack_from(data, off)
        if tag_size & 0xFFFFFFFF == 0x30 and coff == off:
            out.append((seq, off, tid))
            off += tag_size >> 32
        else:
            off += 4096
    return out


def test_a_threads_chunks_are_read_in_the_order_it_took_them(tmp_path, client_lib):
    # Thread A starts the pool, which then keeps chunks claimed ahead while A idles. Thread B claims
    # its first, small chunks inline (after those) and then takes the pool's: B's chunks do not lie
    # at increasing file offsets, and a reader going by offset would put B's later events first.
    out = run_recorded(tmp_path, pscript(client_lib, """
        import time
        lib.client_push_pop(b"a", 20000)  # 480 KB: the pool starts at A's first 64 KiB claim
        # wait for the pool's ready chunks (claimed now, before B's inline ones): the file grows
        # as it claims them and stops growing once it has its 4
        path = recorder_lib().nvtx_recorder_file().decode()
        deadline, sizes = time.monotonic() + 30, []
        while time.monotonic() < deadline and not (threads_now()[0] == 1 and len(sizes) > 5
                                                   and len(set(sizes[-5:])) == 1):
            time.sleep(0.05)
            sizes.append(os.path.getsize(path))
        b = []
        def work():
            b.append(threading.get_native_id())
            lib.client_push_pop(b"b", 20000)
        t = threading.Thread(target=work); t.start(); t.join()
        print(json.dumps({"b": b[0], "file": recorder_lib().nvtx_recorder_file().decode()}))
    """), extra_env=CHUNK, timeout=120)
    b_chunks = [(off, seq) for seq, off, tid in sorted(_chunk_headers(out["file"])) if tid == out["b"]]
    offsets = [off for off, _seq in b_chunks]
    assert offsets != sorted(offsets), f"B's chunks lie in file order: {b_chunks}"  # the case at hand
    rec = recorder.read(tmp_path)
    b_events = [e for e in rec.events if e.tid == out["b"]]
    assert [e.kind for e in b_events] == ["push", "pop"] * 20000
    times = [e.time_ns for e in b_events]
    assert times == sorted(times)
    # and the tracer pairs them all, with and without NumPy: 20000 "b" ranges, none negative
    from nvtx_cffi._trace.convert import convert
    for numpy in (True, False):
        out_json = tmp_path / f"t-{numpy}.json"
        convert(str(tmp_path), str(out_json), numpy=numpy)
        durations = [e["dur"] for e in json.loads(out_json.read_text())["traceEvents"]
                     if e.get("name") == "b" and e.get("ph") == "X"]
        assert len(durations) == 20000 and min(durations) >= 0, numpy



def file_spans_while_threads_record(tmp_path, client_lib, n: int, setup: str = "") -> list:
    """Run n threads that each record one mark and wait; the recording file's mappings while all n
    hold their chunk, as (start, end, file offset). Checks every mark was recorded."""
    out = run_recorded(tmp_path, script(client_lib, f"""
        {setup}
        threading.stack_size(64 * 1024)
        recorded = threading.Barrier({n} + 1, timeout=120)
        done = threading.Barrier({n} + 1, timeout=120)
        def work():
            lib.client_marks(b"t", 1)   # this thread's first chunk, kept while it lives
            recorded.wait()
            done.wait()
        ts = [threading.Thread(target=work) for _ in range({n})]
        for t in ts: t.start()
        recorded.wait()
        path = recorder_lib().nvtx_recorder_file().decode()
        with open("/proc/self/maps") as f:  # (start, end, file offset) of the file's mappings
            spans = [(int(a, 16), int(b, 16), int(off, 16)) for a, b, off in
                     ((line.split()[0].split("-") + [line.split()[2]]) for line in f if line.rstrip().endswith(path))]
        done.wait()
        for t in ts: t.join()
        print(json.dumps({{"spans": spans, "dropped": recorder_lib().nvtx_recorder_dropped()}}))
    """), timeout=300)
    assert out["dropped"] == 0
    rec = recorder.read(tmp_path)
    marks = [e for e in rec.events if e.kind == "mark"]
    assert len(marks) == n and {e.message for e in marks} == {"t"} and len({e.tid for e in marks}) == n
    return out["spans"]


def file_maps_while_threads_record(tmp_path, client_lib, n: int, setup: str = "") -> int:
    """How many mappings of the recording file the process holds while n threads each hold a chunk
    (lines of /proc/self/maps)."""
    return len(file_spans_while_threads_record(tmp_path, client_lib, n, setup))


def test_recording_threads_do_not_each_take_a_mapping(tmp_path, client_lib):
    """A process may hold vm.max_map_count (65530) mappings, and a Python thread takes ~3 (stack,
    guard, ...). With a mapping per recording thread's chunk, 20,000 concurrent recording threads
    could not start (``can't start new thread`` at ~16,300 here). Chunks are mapped at their file
    offset in one reserved window, so neighbouring chunks merge into one mapping: the file's
    mappings stay a handful however many threads record, and every event is still recorded."""
    file_maps = file_maps_while_threads_record(tmp_path, client_lib, 3000)
    assert 1 <= file_maps <= 8, file_maps  # was 3001: one per thread's chunk, and the header


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="ASan's shadow memory needs far more address space than any limit")
def test_with_an_address_space_limit_chunks_are_mapped_anywhere(tmp_path, client_lib):
    """Under RLIMIT_AS the window (4 GiB of address space by default) would count against the
    program's own limit, so the recorder maps each chunk on its own instead, and records alike."""
    setup = "import resource; resource.setrlimit(resource.RLIMIT_AS, (64 << 30, 64 << 30))"  # before NVTX's first call
    spans = file_spans_while_threads_record(tmp_path, client_lib, 50, setup)
    # Each chunk, and the header, mapped on its own: 51 mappings, but the kernel shows two as one
    # line when the second happens to land right after the first, at the next file offset. So:
    # no two lines share a placement (address - offset; in the window they all would), and the
    # lines cover the header and 50 chunks of one size.
    assert len({start - offset for start, _end, offset in spans}) == len(spans)
    header = 4096  # NVTXREC_HEADER_SIZE
    sizes = [end - start - (header if offset == 0 else 0) for start, end, offset in spans]
    chunk = math.gcd(*[size for size in sizes if size])
    assert sum(sizes) == 50 * chunk and any(offset == 0 for _s, _e, offset in spans), spans


def test_the_window_reserves_address_space_as_it_is_used(tmp_path, client_lib):
    """The window is reserved in 64 MiB slabs as the file grows, not as the whole --max-bytes
    (4 GiB by default) at once: a recording process's virtual size grows by about what it maps."""
    out = run_recorded(tmp_path, script(client_lib, """
        def vm_kib():
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
        before = vm_kib()
        lib.client_marks(b"first", 1)      # NVTX's first call: the recorder loads and opens its file
        lib.client_push_pop(b"more", 200000)  # ~5 MB of records
        print(json.dumps({"grown_kib": vm_kib() - before}))
    """))
    assert out["grown_kib"] < 160 * 1024, out  # the recorder library, a slab or two; not 4 GiB
    rec = recorder.read(tmp_path)
    assert sum(1 for e in rec.events if e.kind == "push") == 200000
