#!/usr/bin/env python3
"""Conversion time, output size and peak RSS of the tracer, per output format, side by side in one run.

    python asv_bench/scripts/trace_convert_bench.py 1e6   # record 1e6 push/pop ranges once, convert it 4 ways
    python asv_bench/scripts/trace_convert_bench.py 1e7 --keep DIR  # keep the recording (and reuse it next time)
    python asv_bench/scripts/trace_convert_bench.py 1e6 --baseline DIR  # also each format with the nvtx_cffi in DIR
    python asv_bench/scripts/trace_convert_bench.py 1e6 --shape ranges,payload,marks  # side by side (see --shape)
    python asv_bench/scripts/trace_convert_bench.py 1e7 --shape mixed --formats pftrace  # 2 processes, 3 threads each
    python asv_bench/scripts/trace_convert_bench.py 5e7 --shape payload --client c --formats pftrace --no-stats
        # 1e8 events recorded from C (about 2 GB of records under the temporary directory), streamed

``--baseline DIR``: DIR holds another ``nvtx_cffi`` package (an older version, installed or copied
there); each format is converted with it too (``PYTHONPATH=DIR``), right after the current one, so
both rows of a format see the same load.

``--shape``: what the program records, N of them: ``ranges`` (default: ``examples/many_ranges.py N``,
push/pop ranges with a colour), ``payload`` (``with nvtx.annotate("step", payload=i)``), ``marks``
(``nvtx.mark("tick", payload=i)``), ``arrays`` (``nvtx.mark("x", payload=np.arange(16))``:
a binary payload of 16 int64 each), ``startend`` (N events: ``nvtx.start_range("job")``, each
ended by ``nvtx.end_range`` on a second thread, a thousand at a time), ``groups`` (N samples of a
counter group of two fields), ``counterkinds`` (N counter samples, a quarter each: float16 samples,
``sample_no_value``, int64 and group ``batch_submit`` batches of 10), or several,
comma-separated: each recorded, then converted, in one table (``--keep DIR`` keeps them in
``DIR/<shape>``). ``mixed``: N events in all from two
processes recording at once, 3 threads each: a C program (``asv_bench/c/trace_client.c``, 9/10 of
the events: ranges ``step`` and marks ``tick`` with an int64 payload, a mark after each range) and a
Python one (1/10: one thread ``with nvtx.annotate("step", payload=i)``, one ``nvtx.mark("tick",
payload=i)``, one ``counter.sample(i)`` of an int64 counter, a third of the Python events each).

``--client c``: ``payload`` and ``marks`` recorded by ``asv_bench/c/trace_client.c`` (one thread,
the same events in a domain ``bench``) instead of Python: tens of ns an event instead of µs, for
1e8-event recordings. The C programs are compiled with ``cc`` against the NVTX headers the package
builds with (``build_ffi.nvtx_include_dir()``).
``--no-stats``: convert without ``--stats``, whose exact median keeps 8 bytes a range for the
whole conversion; without it memory holds only the batches in flight, whatever the recording's size.

Records the program with the recorder, then converts the same recording, each in
a fresh process under ``/usr/bin/time -v`` (``--stats`` included, as ``trace --stats`` does):
Columns: wall seconds of the conversion (imports included), CPU seconds of the process (user +
system, whole process: less sensitive to a loaded machine), output size, bytes per event, peak RSS,
throughput (recorded events, and MB of records, per wall second).
``read`` (the recorder's ``blocks()`` alone, no pairing or writing: the reader's share), then
``json``, ``pftrace`` and ``sqlite``. Prints one table.
``--formats json,png``: ``png`` is ``json`` with ``--png`` (the picture collected and drawn; the
output size is the PNG's): its time less ``json``'s is the picture's share.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # asv_bench: its benchmarks package, whatever the working directory

from benchmarks.building import load_build_ffi  # noqa: E402

CONVERT = r"""
import sys, time
mode, raw, out, with_stats = sys.argv[1:5]
t = time.perf_counter()
from nvtx_cffi._trace.stats import StatsCollector, format_summary
stats = StatsCollector() if with_stats == "1" else None
if mode == "read":  # the recorder's columnar reader alone: what the tracer's own work adds to
    from nvtx_cffi import recorder
    from nvtx_cffi._trace.columns import BATCH_EVENTS
    from nvtx_cffi._trace.model import Timeline
    tl = Timeline()
    for block in recorder.blocks(raw, max_events=BATCH_EVENTS):
        tl.event_count += len(block.events)
    open(out, "w").close()
elif mode == "png":  # JSON with --png: the picture's collector fed too, then drawn (output: the PNG)
    import os
    from nvtx_cffi._trace.convert import convert
    from nvtx_cffi._trace.png import PngCollector, write_png
    picture = PngCollector()
    tl = convert(raw, out + ".json", stats=stats, picture=picture)
    os.remove(out + ".json")
    write_png(tl, out, collected=picture)
else:
    from nvtx_cffi._trace.convert import convert
    tl = convert(raw, out, stats=stats)
if stats is not None:
    format_summary(tl, stats.rows())
print("seconds", time.perf_counter() - t, "events", tl.event_count)
"""


#: --shape: the program recorded (run with the count as its argument; ``ranges`` is examples/many_ranges.py)
SHAPES = {
    "payload": "import sys, nvtx_cffi as nvtx\nfor i in range(int(sys.argv[1])):\n"
               "    with nvtx.annotate('step', payload=i):\n        pass\n",
    "marks": "import sys, nvtx_cffi as nvtx\nfor i in range(int(sys.argv[1])):\n    nvtx.mark('tick', payload=i)\n",
    # N marks with an array payload of 16 int64 (a binary payload: the extension's schema and blob)
    "arrays": "import sys, numpy as np, nvtx_cffi as nvtx\nvalues = np.arange(16)\n"
              "for i in range(int(sys.argv[1])):\n    nvtx.mark('x', payload=values)\n",
    # start/end ranges that end on another thread: N events, the ranges of each 1000 ended by a second thread
    "startend": """import sys, threading, queue, nvtx_cffi as nvtx
n = int(sys.argv[1]) // 2
chunks = queue.Queue()
def end_them():
    for chunk in iter(chunks.get, None):
        for rid in chunk:
            nvtx.end_range(rid)
ender = threading.Thread(target=end_them)
ender.start()
for at in range(0, n, 1000):
    chunks.put([nvtx.start_range("job") for _ in range(at, min(n, at + 1000))])
chunks.put(None)
ender.join()
""",
    # N counter samples of a group of two fields (int32, float64): a row per field in every format
    "groups": """import sys, numpy as np, nvtx_cffi as nvtx
group = nvtx.get_domain("bench").get_counter("pair", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
for i in range(int(sys.argv[1])):
    group.sample((i, i / 4))
""",
    # N counter samples of the other kinds, a quarter each: float16 samples, sample_no_value (each
    # reason in turn), int64 batch_submit of 10 values, group batches of 10
    "counterkinds": """import sys, numpy as np, nvtx_cffi as nvtx
d = nvtx.get_domain("bench")
half, depth = d.get_counter("half", np.float16), d.get_counter("depth", int)
group = d.get_counter("pair", nvtx.numpy_dtype([("a", np.int32), ("b", np.float64)]))
reasons = list(nvtx.CounterNoValueReason)
values = np.array([(i, i / 4) for i in range(10)], dtype=group.dtype)
for i in range(int(sys.argv[1]) // 40):
    for k in range(10):
        half.sample(k / 8)
        depth.sample_no_value(reasons[k % 3])
    stamps = [d.get_timestamp() for _ in range(10)]
    depth.batch_submit(range(i, i + 10), stamps)
    group.batch_submit(values, stamps)
""",
    # the Python half of --shape mixed: N events, a third from each thread
    "mixed": """import sys, threading, nvtx_cffi as nvtx
n = int(sys.argv[1]) // 3
counter = nvtx.get_domain("bench").get_counter("samples", int)
def ranges():
    for i in range(n // 2):
        with nvtx.annotate("step", payload=i):
            pass
def marks():
    for i in range(n):
        nvtx.mark("tick", payload=i)
def samples():
    for i in range(n):
        counter.sample(i)
threads = [threading.Thread(target=f) for f in (ranges, marks, samples)]
for t in threads:
    t.start()
for t in threads:
    t.join()
""",
}
#: --client c: the shapes asv_bench/c/trace_client.c records
C_SHAPES = ("payload", "marks")


def _c_client(work: str) -> str:
    """asv_bench/c/trace_client.c compiled into ``work``; returns the program's path."""
    program = os.path.join(work, "trace_client")
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-pthread", "-I", load_build_ffi().nvtx_include_dir(),
                    os.path.join(ROOT, "asv_bench", "c", "trace_client.c"), "-o", program, "-ldl"], check=True)
    return program


def _record(n: int, shape: str, raw: str, work: str, client: str) -> None:
    try:  # the installed package (the source tree has no compiled module unless built in place)
        from nvtx_cffi import recorder
    except ImportError:
        sys.path.insert(0, ROOT)
        from nvtx_cffi import recorder

    os.makedirs(raw, exist_ok=True)
    env = {**os.environ, **recorder.environment(raw)}
    if shape == "mixed":  # both processes at once, one run (one run id)
        c = subprocess.Popen([_c_client(work), "mixed", str(n - n // 10), "3"], env=env, cwd=work)
        subprocess.run([sys.executable, "-c", SHAPES[shape], str(n // 10)], env=env, check=True, cwd=work)
        if c.wait():
            raise subprocess.CalledProcessError(c.returncode, c.args)
    elif client == "c":
        subprocess.run([_c_client(work), shape, str(n), "1"], env=env, check=True, cwd=work)
    else:
        program = ["-c", SHAPES[shape]] if shape in SHAPES else [os.path.join(ROOT, "examples", "many_ranges.py")]
        subprocess.run([sys.executable, *program, str(n)], env=env, check=True, cwd=work)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=float, help="ranges (or marks; events for mixed) to record (1e6, 1e7)")
    ap.add_argument("--keep", metavar="DIR", help="recording directory to keep / reuse (several shapes: DIR/SHAPE)")
    ap.add_argument("--formats", default="read,json,pftrace,sqlite")
    ap.add_argument("--baseline", metavar="DIR", help="directory holding another nvtx_cffi package to compare with")
    ap.add_argument("--shape", default="ranges",
                    help=f"what the program records: {', '.join(['ranges', *SHAPES])}, or several (comma-separated)")
    ap.add_argument("--client", choices=("python", "c"), default="python",
                    help=f"what records {', '.join(C_SHAPES)}: a Python program or asv_bench/c/trace_client.c")
    ap.add_argument("--no-stats", action="store_true", help="convert without --stats (its median grows with N)")
    args = ap.parse_args()
    n = int(args.n)
    shapes = args.shape.split(",")
    unknown = [s for s in shapes if s != "ranges" and s not in SHAPES]
    if unknown:
        ap.error(f"unknown --shape {', '.join(unknown)}")
    if args.client == "c" and any(s not in C_SHAPES for s in shapes):
        ap.error(f"--client c records {', '.join(C_SHAPES)} only")
    work = tempfile.mkdtemp(prefix="nvtx-bench-")
    try:
        raws, recorded = {}, {}
        for shape in shapes:
            if args.keep:
                raw = raws[shape] = args.keep if len(shapes) == 1 else os.path.join(args.keep, shape)
            else:
                raw = raws[shape] = os.path.join(work, shape)
            if not (os.path.isdir(raw) and os.listdir(raw)):
                _record(n, shape, raw, work, args.client)
            recorded[shape] = sum(os.path.getsize(os.path.join(raw, f)) for f in os.listdir(raw))
            print(f"{n} {shape}: {recorded[shape] / 1e6:.0f} MB of records")
        print(f"{sys.implementation.name} {sys.version.split()[0]}; conversion "
              f"{'without' if args.no_stats else 'with'} --stats, one run each")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'shape':8} {'format':15} {'seconds':>8} {'CPU s':>8} {'output MB':>10} {'B/event':>8} "
              f"{'peak RSS MB':>12} {'Mevents/s':>10} {'records MB/s':>13}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))}
        runs = []
        for shape in shapes:
            for fmt in args.formats.split(","):
                runs.append((shape, fmt, fmt, env))
                if args.baseline:
                    runs.append((shape, fmt, fmt + " (base)", {**env, "PYTHONPATH": os.path.abspath(args.baseline)}))
        for shape, fmt, label, run_env in runs:
            out = os.path.join(work, {"json": "t.json", "pftrace": "t.pftrace",
                                      "sqlite": "t.sqlite", "read": "nothing", "png": "t.png"}[fmt])
            proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", CONVERT, fmt, raws[shape], out,
                                   "0" if args.no_stats else "1"],
                                  env=run_env, capture_output=True, text=True, cwd=work)
            if proc.returncode:
                print(shape, label, "failed:", proc.stderr[-2000:])
                continue
            seconds = float(re.search(r"seconds (\S+)", proc.stdout).group(1))
            events = int(re.search(r"events (\d+)", proc.stdout).group(1))
            rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
            cpu = sum(float(re.search(rf"{kind} time \(seconds\): (\S+)", proc.stderr).group(1))
                      for kind in ("User", "System"))
            size = os.path.getsize(out)
            print(f"{shape:8} {label:15} {seconds:8.2f} {cpu:8.2f} {size / 1e6:10.1f} {size / max(events, 1):8.1f} "
                  f"{rss / 1024:12.0f} {events / seconds / 1e6:10.2f} {recorded[shape] / seconds / 1e6:13.0f}", flush=True)
            os.remove(out)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
