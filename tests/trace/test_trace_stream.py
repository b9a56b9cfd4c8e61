"""The tracer converts recordings as a stream: same trace as the in-memory path, bounded memory.

The conversion reads events per file and per thread chunk (not sorted by time), pairs them as they
come and writes each range when it completes. The mixed scenario below is built so that the file
order differs from time order where it matters: an end comes before its start, and a domain is
used in a chunk that comes before the chunk that defines it.
"""
from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from support.trace_check import run_tracer, validate_chrome_trace

from nvtx_cffi import recorder, to_argb
from nvtx_cffi._trace.chrome import write_chrome_trace
from nvtx_cffi._trace.pairing import build_timeline

MIXED = """
    import os, subprocess, sys, threading
    import nvtx_cffi as nvtx

    print("root", os.getpid(), threading.get_native_id(), flush=True)
    nvtx.mark("main-first")  # the main thread claims the first chunk of the file
    box = {}
    ready, go = threading.Event(), threading.Event()

    def late():
        nvtx.push_range("wd", domain="D"); nvtx.pop_range(domain="D")  # defines D, in a later chunk
        box["rid"] = nvtx.start_range("cross", color="orange")           # starts in that later chunk
        print("late", threading.get_native_id(), flush=True)
        ready.set(); go.wait()

    t = threading.Thread(target=late); t.start(); ready.wait()
    nvtx.end_range(box["rid"])                                          # ends in the first chunk
    nvtx.push_range("md", domain="D"); nvtx.pop_range(domain="D")       # D used before its definition
    go.set(); t.join()

    def worker():
        for j in range(3):
            with nvtx.annotate("work", payload=j):
                nvtx.mark("tick")

    workers = [threading.Thread(target=worker) for _ in range(2)]
    for w in workers: w.start()
    for w in workers: w.join()
    child = ("import os, nvtx_cffi as nvtx; print('child', os.getpid(), flush=True); "
             "nvtx.push_range('open'); nvtx.mark('child-last'); os._exit(0)")
    with nvtx.annotate("child", color="blue"):
        subprocess.run([sys.executable, "-c", child], check=True)
"""


def _ids(stdout: str) -> dict:
    return {line.split()[0]: [int(x) for x in line.split()[1:]] for line in stdout.splitlines() if line.strip()}


def _multiset(doc: dict) -> list:
    return sorted(json.dumps(e, sort_keys=True) for e in doc["traceEvents"])


def test_streamed_trace_equals_the_in_memory_one_and_has_every_event(tmp_path):
    script = tmp_path / "mixed.py"
    script.write_text(textwrap.dedent(MIXED))
    raw = tmp_path / "raw"
    traced = run_tracer(str(tmp_path), [str(script)], "--record-dir", str(raw))
    assert traced.returncode == 0, traced.stderr
    ids = _ids(traced.stdout)
    (root, main_tid), (late_tid,), (child,) = ids["root"], ids["late"], ids["child"]

    # The stream really is out of time order where pairing must cope with it.
    order = [(e.kind, e.message, e.domain) for e in recorder.iter_events(str(raw)) if e.pid == root]
    assert order.index(("end", None, None)) < order.index(("start", "cross", None))
    assert order.index(("push", "md", "D")) < order.index(("push", "wd", "D"))

    # The in-memory path: every event read, sorted by time, then paired and written one by one.
    rec = recorder.read(str(raw))
    timeline = build_timeline(rec.events, rec.processes, rec.dropped)
    timeline.process_names[root] = f"python {script}"
    out = io.StringIO()
    write_chrome_trace(timeline, out)
    reference = validate_chrome_trace(json.loads(out.getvalue()))
    assert _multiset(traced.doc) == _multiset(reference)
    assert traced.doc["otherData"] == reference["otherData"]

    # And independently of both: the exact events.
    x = {(e["name"], e["pid"], e["tid"], e["args"].get("domain"), e["args"].get("unterminated"))
         for e in traced.events("X")}
    assert sorted(e["name"] for e in traced.events("X")) == ["child", "md", "open", "wd"] + ["work"] * 6
    assert {("md", root, main_tid, "D", None), ("wd", root, late_tid, "D", None),
            ("child", root, main_tid, None, None), ("open", child, child, None, True)} <= x
    assert sorted(e["args"]["payload"] for e in traced.events("X", "work")) == [0, 0, 1, 1, 2, 2]
    assert len({e["tid"] for e in traced.events("X", "work")}) == 2
    (b,), (e,) = traced.events("b", "cross"), traced.events("e", "cross")
    assert (b["pid"], b["tid"], e["tid"], b["args"]["color"]) == (root, late_tid, main_tid,
                                                                  f"#{to_argb('orange') & 0xFFFFFF:06x}")
    assert e["ts"] >= b["ts"]
    (open_range,) = traced.events("X", "open")
    (last_mark,) = traced.events("i", "child-last")
    assert abs(open_range["ts"] + open_range["dur"] - last_mark["ts"]) < 1e-6  # closed at its last event
    assert sorted(m["name"] for m in traced.events("i")) == ["child-last", "main-first"] + ["tick"] * 6
    other = traced.doc["otherData"]
    assert (other["unterminated_ranges"], other["unmatched_pops"], other["unmatched_ends"],
            other["dropped_events"]) == (1, 0, 0, 0)
    # timestamps count from the recording's first event (of any kind, in any process)
    assert other["t0_ns"] == rec.events[0].time_ns == min(e.time_ns for e in rec.events)
    (first,) = traced.events("i", "main-first")
    (first_ns,) = [e.time_ns for e in rec.events if e.kind == "mark" and e.message == "main-first"]
    assert first["ts"] == (first_ns - other["t0_ns"]) / 1000.0
    assert traced.thread_names()[(root, main_tid)] == "MainThread"  # Python thread names reach the trace


CONVERT = """
    import argparse, glob, os, re, sys
    from nvtx_cffi._trace import cli

    raw, out = sys.argv[1], sys.argv[2]
    pid = int(re.match(r"nvtx-(\\d+)-", os.path.basename(glob.glob(raw + "/*.nvtxrec")[0])).group(1))

    def status(field):  # KiB
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith(field + ":")).split()[1])

    try:  # reset the peak (VmHWM) to the current RSS, so the import's peak does not hide growth
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    before = status("VmRSS")  # imports done
    cli._convert(argparse.Namespace(progress=False, stats=True), raw, pid, "python n.py", out, None)
    print("growth_kib", status("VmHWM") - before, flush=True)
"""

#: 300k ranges = 600k events: the in-memory conversion grew the peak RSS by some 700 bytes an event
#: (~420 MB here); streaming holds what is open, the batches in flight and 8 bytes a range for the
#: median (2.4 MB). The reader thread keeps up to two batches of 65,536 events ahead of the one being
#: written (each ~10 MB with its pairing and formatting temporaries): 40-52 MB measured, the same
#: ~40 MB plus the median's 8-16 bytes a range for 3x the ranges.
#: Growth = peak RSS during the conversion (VmHWM, reset first) minus RSS before it, in the child.
RANGES = 300_000
GROWTH_BOUND_KIB = 64 << 10


@pytest.mark.skipif(platform.python_implementation() == "PyPy", reason="PyPy's GC grows RSS past the bound: an open limit of PyPy's collector here")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="under AddressSanitizer (scripts/sanitize.sh) freed memory is quarantined: RSS is not the program's")
def test_conversion_memory_does_not_grow_with_the_recording(tmp_path):
    raw = tmp_path / "raw"
    env = {**os.environ, **recorder.environment(str(raw))}
    env.pop("NVTX_CFFI_RECORD_MAX_BYTES", None)
    subprocess.run([sys.executable, "-c", f"""
import nvtx_cffi as nvtx
push, pop = nvtx.push_range, nvtx.pop_range
for i in range({RANGES}):
    push("r", color="green"); pop()
nvtx.push_range("outer"); nvtx.mark("end")
"""], env=env, check=True, timeout=60)
    script = tmp_path / "convert.py"
    script.write_text(textwrap.dedent(CONVERT))
    clean = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    out = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, str(script), str(raw), str(out)], env=clean, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    growth = int(proc.stdout.split("growth_kib")[1].split()[0])
    print(f"conversion of {2 * RANGES + 2} events grew the peak RSS by {growth} KiB")
    assert growth < GROWTH_BOUND_KIB, f"conversion grew by {growth} KiB"
    # and it converted everything: the summary counts every range, the trace holds them
    assert f"  {RANGES}  " in proc.stdout and "1 range(s) were still open" in proc.stdout
    doc = json.loads(out.read_text())
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X") == RANGES + 1
    kinds = [e.kind for e in recorder.iter_events(str(raw))]
    assert (kinds.count("push"), kinds.count("pop"), kinds.count("mark")) == (RANGES + 1, RANGES, 1)
    assert doc["otherData"]["events_recorded"] == len([k for k in kinds if k in ("push", "pop", "mark")])
