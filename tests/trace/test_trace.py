"""``python -m nvtx_cffi trace``: every test runs the real tracer on a real program and checks the trace.

The traced programs run as child processes (NVTX reads the injection variable once per process, so
the recorder can only be attached from the start); trace_check validates every JSON written.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from support.paths import SOURCE
from support.trace_check import run_tracer, validate_chrome_trace

from nvtx_cffi import to_argb

EXAMPLES = str(SOURCE / "examples")


def hex_of(color: str) -> str:
    return f"#{to_argb(color) & 0xFFFFFF:06x}"


def write(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


# --------------------------------------------------------------------------- one process


SINGLE = """
    import threading
    import nvtx_cffi as nvtx

    @nvtx.annotate("f()", color="purple")
    def f():
        for i in range(3):
            with nvtx.annotate("loop", color="red", domain="work", category="phase", payload=i):
                nvtx.mark("tick", color="green", payload=2.5)

    f()
    rid = nvtx.start_range("across threads", color="orange")
    t = threading.Thread(target=nvtx.end_range, args=(rid,))
    t.start(); t.join()
    print("ids", threading.get_native_id(), t.native_id)
"""


def test_single_process_ranges_marks_and_args(tmp_path):
    script = write(tmp_path, "single.py", SINGLE)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 0, traced.stderr
    main_tid, other_tid = map(int, re.search(r"ids (\d+) (\d+)", traced.stdout).groups())

    (f,) = traced.events("X", "f()")
    loops = traced.events("X", "loop")
    assert f["args"]["color"] == hex_of("purple") and f["tid"] == main_tid
    assert [e["args"]["payload"] for e in loops] == [0, 1, 2]
    for e in loops:
        assert e["args"]["color"] == hex_of("red")
        assert e["args"]["domain"] == "work" and e["args"]["category"] == "phase"
        assert e["cat"] == "work,phase"
        assert f["ts"] <= e["ts"] and e["ts"] + e["dur"] <= f["ts"] + f["dur"] + 1e-6  # inside f()
    ticks = traced.events("i", "tick")
    assert len(ticks) == 3 and all(t["args"]["payload"] == 2.5 for t in ticks)
    assert [any(e["ts"] <= t["ts"] <= e["ts"] + e["dur"] for e in loops) for t in ticks] == [True] * 3

    (begin,) = traced.events("b", "across threads")
    (end,) = traced.events("e", "across threads")
    assert (begin["tid"], end["tid"]) == (main_tid, other_tid)
    assert begin["id2"] == end["id2"] and begin["args"]["color"] == hex_of("orange")
    assert traced.doc["otherData"]["dropped_events"] == 0
    assert traced.thread_names()[(f["pid"], main_tid)]
    assert "ui.perfetto.dev" in traced.stderr


def test_threads_each_on_their_own_row_with_names(tmp_path):
    script = write(tmp_path, "threads.py", """
        import threading
        import nvtx_cffi as nvtx
        from nvtx_cffi._native import lib

        nvtx.tool_attached()  # NVTX's first call: Python names go on existing threads now, before the raw names below

        def work(k):
            lib.nvtxcffi_name_os_thread(threading.get_native_id(), f"worker-{k}".encode())
            for _ in range(k + 1):
                with nvtx.annotate(f"job {k}", color="blue"):
                    with nvtx.annotate("inner", color="yellow"):
                        pass
            print(f"tid {k} {threading.get_native_id()}\\n", end="", flush=True)  # one write: no interleaving

        threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
    """)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 0, traced.stderr
    tids = {int(k): int(tid) for k, tid in re.findall(r"tid (\d) (\d+)", traced.stdout)}
    names = traced.thread_names()
    for k, tid in tids.items():
        jobs = traced.events("X", f"job {k}")
        assert len(jobs) == k + 1 and {e["tid"] for e in jobs} == {tid}
        (pid,) = {e["pid"] for e in jobs}
        assert names[(pid, tid)] == f"worker-{k}"
    assert len(traced.events("X", "inner")) == 6
    assert len(set(tids.values())) == 3


def test_module_mode_passes_everything_after_the_module_to_it(tmp_path):
    write(tmp_path, "traced_mod.py", """
        import sys
        import nvtx_cffi as nvtx
        nvtx.mark("argv " + " ".join(sys.argv[1:]))
    """)
    traced = run_tracer(str(tmp_path), ["-m", "traced_mod", "a", "--stats", "-o", "b"])
    assert traced.returncode == 0, traced.stderr
    assert [e["name"] for e in traced.events("i")] == ["argv a --stats -o b"]
    assert "NVTX range summary" not in traced.stdout  # --stats went to the module, not the tracer


# --------------------------------------------------------------------------- child processes


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_children_are_merged_with_their_pids(tmp_path, method):
    example = os.path.join(EXAMPLES, "multiprocessing_spawn.py")
    traced = run_tracer(str(tmp_path), [example, "--short", "--start-method", method])
    assert traced.returncode == 0, traced.stderr
    (main,) = traced.events("X", "main")
    generate = traced.events("X", "mock generate data")
    means = traced.events("X", "mean")
    child_pids = {e["pid"] for e in generate}
    assert len(child_pids) == 2 and main["pid"] not in child_pids
    assert {e["pid"] for e in means} == child_pids
    for g in generate:  # each child: generate, then mean, within the parent's main range
        (m,) = [e for e in means if e["pid"] == g["pid"]]
        assert g["ts"] + g["dur"] <= m["ts"] + 1e-6
        assert main["ts"] <= g["ts"] and m["ts"] + m["dur"] <= main["ts"] + main["dur"] + 1e-6
    processes = {e["pid"]: e["args"]["name"] for e in traced.events("M", "process_name")}
    assert processes[main["pid"]] == f"python {example} ({main['pid']})"
    if method != "forkserver":  # (forkserver children are the server's)
        assert {processes[pid] for pid in child_pids} == {f"child of {main['pid']} ({pid})" for pid in child_pids}


def test_subprocess_of_python_is_traced(tmp_path):
    script = write(tmp_path, "parent.py", """
        import subprocess, sys
        import nvtx_cffi as nvtx
        with nvtx.annotate("parent"):
            child = subprocess.run([sys.executable, "-c",
                                    "import os, nvtx_cffi as n; n.mark('child ' + str(os.getpid()))"])
        raise SystemExit(child.returncode)
    """)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 0, traced.stderr
    (parent,) = traced.events("X", "parent")
    (mark,) = [e for e in traced.events("i") if e["name"].startswith("child ")]
    assert mark["pid"] == int(mark["name"].split()[1]) != parent["pid"]
    assert parent["ts"] <= mark["ts"] <= parent["ts"] + parent["dur"]


# --------------------------------------------------------------------------- other NVTX clients


def _nvtx_include_dir():
    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations) if spec else []:
        hits = sorted(glob.glob(os.path.join(root, "*", "include", "nvtx3", "nvToolsExt.h")))
        if hits:
            return os.path.dirname(os.path.dirname(hits[-1]))
    return None


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
def test_c_library_using_the_plain_ascii_api(tmp_path):
    include = _nvtx_include_dir()
    assert include is not None, "the test extra installs nvidia-nvtx (NVTX headers)"
    src = tmp_path / "client.c"
    src.write_text(textwrap.dedent("""
        #include <nvtx3/nvToolsExt.h>
        int client_work(int n) {
            for (int i = 0; i < n; i++) {
                nvtxRangePushA("c outer");
                nvtxRangePushA("c inner");
                nvtxMarkA("c mark");
                nvtxRangePop();
                nvtxRangePop();
            }
            return n;
        }
    """))
    lib = tmp_path / "libclient.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-I{include}", "-o", str(lib), str(src), "-ldl"],
                   check=True)
    # Only the C library talks to NVTX here: no nvtx_cffi import in the traced program.
    script = write(tmp_path, "cclient.py", f"""
        import ctypes
        assert ctypes.CDLL({str(lib)!r}).client_work(4) == 4
    """)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 0, traced.stderr
    outer, inner = traced.events("X", "c outer"), traced.events("X", "c inner")
    assert len(outer) == len(inner) == 4 and len(traced.events("i", "c mark")) == 4
    for o, i in zip(outer, inner):
        assert o["ts"] <= i["ts"] and i["ts"] + i["dur"] <= o["ts"] + o["dur"] + 1e-6
        assert "color" not in o["args"]  # the ASCII API has no colour


def test_nvidia_nvtx_package_is_recorded_too(tmp_path):
    pytest.importorskip("nvtx", reason="NVIDIA's nvtx package is not installed")
    script = write(tmp_path, "nv.py", """
        import nvtx
        with nvtx.annotate("from nvidia nvtx", color="red"):
            pass
    """)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 0, traced.stderr
    (e,) = traced.events("X", "from nvidia nvtx")
    assert e["args"]["color"] == "#ff0000"


# --------------------------------------------------------------------------- summary, drops, exit codes


def parse_summary(stdout: str) -> dict:
    """Rows of the --stats table keyed by the Range column."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Time (%)"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[-1]] = dict(zip(["percent", "total", "count", "avg", "med", "min", "max", "stddev", "style"],
                                   cells[:-1]))
    return rows


def test_stats_table_counts_and_order(tmp_path):
    script = write(tmp_path, "st.py", """
        import time
        import nvtx_cffi as nvtx
        for i in range(5):
            with nvtx.annotate("short"):
                time.sleep(0.001)
        with nvtx.annotate("long", domain="d"):
            time.sleep(0.2)  # > 80 % even when a loaded machine stretches each 1 ms sleep to 8 ms
        r = nvtx.start_range("async")
        nvtx.end_range(r)
    """)
    traced = run_tracer(str(tmp_path), [script], "--stats")
    assert traced.returncode == 0, traced.stderr
    rows = parse_summary(traced.stdout)
    assert list(rows) == ["d:long", "short", "async"]  # by total time, domain-prefixed
    assert rows["short"]["count"] == "5" and rows["d:long"]["count"] == "1"
    assert rows["short"]["style"] == "PushPop" and rows["async"]["style"] == "StartEnd"
    assert float(rows["d:long"]["percent"]) > 80
    assert "dropped" not in traced.stdout


def test_stats_rows_are_bounded_by_name(tmp_path, monkeypatch, capsys):
    """1e6 ranges named f"request {i}" took --stats to 1.6 GB (a group per name).
    Scaled down: past MAX_NAMES names, ranges are summed into one exact "(other names)" row."""
    from nvtx_cffi._trace import cli, stats

    monkeypatch.setattr(stats, "MAX_NAMES", 10, raising=False)
    script = write(tmp_path, "names.py", """
        import nvtx_cffi as nvtx
        for _ in range(5):
            nvtx.push_range("hot"); nvtx.pop_range()
        for i in range(300):
            nvtx.push_range(f"request {i}"); nvtx.pop_range()
        nvtx.push_range("hot"); nvtx.pop_range()  # a name with a row keeps getting its ranges
    """)
    status = cli.main(["--stats", "-o", str(tmp_path / "t.json"), script])
    out = capsys.readouterr().out
    assert status == 0
    rows = parse_summary(out)
    assert sorted(rows) == sorted(["hot", "(other names)"] + [f"request {i}" for i in range(9)])
    assert rows["hot"]["count"] == "6" and rows["(other names)"]["count"] == "291"
    assert out.splitlines()[1].startswith("NVTX range summary: 10+ range name(s), 306 range(s)")
    assert "note: 291 range(s) with names beyond the first 10 are summed in the '(other names)' row(s)" in out


def test_stats_memory_is_bounded_with_many_names():
    try:
        import tracemalloc
    except ImportError:  # PyPy: the folding is checked, the peak is not measured
        tracemalloc = None

    from nvtx_cffi._trace.model import Range
    from nvtx_cffi._trace.stats import StatsCollector, format_summary

    collector = StatsCollector(max_names=100)
    r = Range("push", "x", None, None, None, None, 1, 1, 0)
    if tracemalloc is not None:
        tracemalloc.start()
    for i in range(200_000):
        r.name = f"request {i}"
        r.start_ns, r.end_ns = i, 2 * i
        collector.add(r)
    rows = collector.rows()
    peak = 0
    if tracemalloc is not None:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert len(rows) == 101 and collector.folded == 199_900
    (other,) = [row for row in rows if row.other]
    assert (other.count, other.min_ns, other.max_ns) == (199_900, 100, 199_999)
    assert other.total_ns == sum(range(100, 200_000))
    assert peak < 8 << 20, peak  # ~1.6 MB of durations (8 B a range), not a group per name
    assert "(other names)" in format_summary(_empty_timeline(), rows)


def test_stats_grouped_adds_count_as_one_add_per_group():
    """The converter's bulk path (groups by text id, past the bound summed at once) gives the rows
    of one add_many per group: the same names get rows, a text under two ids one row, before and
    after the bound, in later batches too."""
    np = pytest.importorskip("numpy")
    from nvtx_cffi._trace.stats import StatsCollector

    batches = [  # (domain, name) of each group, then its durations
        [((None, "a"), [5, 7]), (("D", "a"), [1]), ((None, "b"), [2]), ((None, "a"), [9]),
         ((None, "c"), [4, 4]), ((None, "d"), [8]), ((None, "b"), [3]), ((None, "e"), [6, 1]),
         ((None, "d"), [11])],
        [((None, "e"), [2]), ((None, "f"), [30]), ((None, "a"), [1]), ((None, "g"), [10, 20])],
    ]

    def rows(c):
        return [(r.label, r.style, r.count, r.total_ns, r.min_ns, r.max_ns, r.median_ns, r.other) for r in c.rows()]

    for max_names in (3, 4, 5, 100):
        one, bulk = StatsCollector(max_names=max_names), StatsCollector(max_names=max_names)
        for batch in batches:
            for (domain, name), durations in batch:
                one.add_many(domain, name, "push", np.array(durations, dtype=np.int64))
            sizes = [len(d) for _, d in batch]
            bulk.add_grouped([k[0] for k, _ in batch], [k[1] for k, _ in batch], "push",
                             np.array([x for _, d in batch for x in d], dtype=np.int64),
                             np.concatenate(([0], np.cumsum(sizes))))
        assert rows(bulk) == rows(one), max_names
    assert ("a", "PushPop", 4, 22, 1, 9, 6.0, False) in rows(bulk)  # (max_names 100: every name a row)
    assert one.folded == bulk.folded and StatsCollector(max_names=3).folded == 0


def _empty_timeline():
    from nvtx_cffi._trace.model import Timeline

    return Timeline()


def test_dropped_events_are_counted_and_reported(tmp_path):
    n = 50_000
    script = write(tmp_path, "many.py", f"""
        import nvtx_cffi as nvtx
        for _ in range({n}):
            nvtx.push_range("r")
            nvtx.pop_range()
    """)
    traced = run_tracer(str(tmp_path), [script], "--stats", "--max-bytes", "256k")
    assert traced.returncode == 0, traced.stderr
    other = traced.doc["otherData"]
    complete = len(traced.events("X", "r"))
    dropped = other["dropped_events"]
    assert 0 < complete < n and dropped > 0
    # Every push/pop was either recorded (paired or not) or counted as dropped; the drop count may
    # also include a few definition records (string/domain registrations) made past the bound.
    recorded = 2 * complete + other["unterminated_ranges"] + other["unmatched_pops"]
    assert 2 * n <= recorded + dropped <= 2 * n + 8
    assert re.search(rf"WARNING: {dropped} event\(s\) were dropped", traced.stdout)


def test_exit_code_is_preserved_and_trace_written(tmp_path):
    script = write(tmp_path, "fail.py", """
        import nvtx_cffi as nvtx
        with nvtx.annotate("before exit"):
            pass
        raise SystemExit(7)
    """)
    traced = run_tracer(str(tmp_path), [script])
    assert traced.returncode == 7
    assert len(traced.events("X", "before exit")) == 1


@pytest.mark.parametrize("how,signum", [("os.abort()", signal.SIGABRT),
                                        ("os.kill(os.getpid(), signal.SIGKILL)", signal.SIGKILL)])
def test_crash_keeps_what_was_recorded(tmp_path, how, signum):
    script = write(tmp_path, "crash.py", f"""
        import os, signal
        import nvtx_cffi as nvtx
        with nvtx.annotate("done before"):
            nvtx.mark("still here")
        nvtx.push_range("open at crash", color="red")
        {how}
    """)
    traced = run_tracer(str(tmp_path), [script], "--stats")
    assert traced.returncode == 128 + signum
    assert len(traced.events("X", "done before")) == 1 and len(traced.events("i", "still here")) == 1
    (cut,) = traced.events("X", "open at crash")
    assert cut["args"]["unterminated"] is True
    assert "1 range(s) were still open" in traced.stdout
    assert f"killed by signal {signum}" in traced.stderr


def test_sigterm_to_the_tracer_is_passed_on_and_the_trace_still_written(tmp_path):
    script = write(tmp_path, "wait.py", """
        import time
        import nvtx_cffi as nvtx
        nvtx.push_range("waiting")
        print("ready", flush=True)
        time.sleep(60)
    """)
    out = tmp_path / "t.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVTX_INJECTION", "NVTX_CFFI_RECORD"))}
    proc = subprocess.Popen([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(out), script], cwd=str(tmp_path),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    doc = validate_chrome_trace(json.loads(out.read_text()))
    (waiting,) = [e for e in doc["traceEvents"] if e["name"] == "waiting"]
    assert waiting["args"]["unterminated"] is True and "killed by signal 15" in err


def test_progress_is_reported_when_forced(tmp_path):
    script = write(tmp_path, "p.py", "import nvtx_cffi as nvtx\nnvtx.mark('m')\n")
    traced = run_tracer(str(tmp_path), [script], "--progress")
    assert traced.returncode == 0
    # the command's prefix, the bytes read of the recording's in units, the rate, and the last line's time
    assert re.search(r"^python -m nvtx_cffi trace: converting: [\d.]+ kB of [\d.]+ kB \(100%\), [\d.]+ [kMG]?B/s, "
                     r"done in [\d.]+ s$", traced.stderr, re.MULTILINE), traced.stderr


def test_keeps_raw_recordings_in_record_dir(tmp_path):
    from nvtx_cffi import recorder

    script = write(tmp_path, "k.py", "import nvtx_cffi as nvtx\nnvtx.mark('kept', payload=3)\n")
    traced = run_tracer(str(tmp_path), [script], "--record-dir", str(tmp_path / "raw"))
    assert traced.returncode == 0, traced.stderr
    marks = [e for e in recorder.read(str(tmp_path / "raw")).events if e.kind == "mark"]
    assert [(m.message, m.payload) for m in marks] == [("kept", 3)]


# --------------------------------------------------------------------------- PNG


def test_png_timeline_draws_ranges_in_their_colours(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    script = write(tmp_path, "png.py", """
        import time
        import nvtx_cffi as nvtx
        with nvtx.annotate("outer", color="#00ff00"):
            with nvtx.annotate("inner", color="#ff0000"):
                time.sleep(0.02)
    """)
    png = tmp_path / "t.png"
    traced = run_tracer(str(tmp_path), [script], "--png", str(png))
    assert traced.returncode == 0, traced.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(str(png))[:, :, :3].reshape(-1, 3)
    for rgb in ((0, 1, 0), (1, 0, 0)):
        assert ((abs(pixels - rgb)).max(axis=1) < 0.02).sum() > 100, f"no bar in colour {rgb}"


def test_png_without_matplotlib_is_a_clear_error(tmp_path):
    fake = tmp_path / "nompl"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    script = write(tmp_path, "x.py", "print('ran')\n")
    traced = run_tracer(str(tmp_path), [script], "--png", str(tmp_path / "t.png"),
                        env={"PYTHONPATH": str(fake)})
    assert traced.returncode == 2
    assert "--png needs matplotlib" in traced.stderr and "Traceback" not in traced.stderr
    assert "ran" not in traced.stdout  # refused before running the program


# --------------------------------------------------------------------------- usage errors


def test_script_not_found(tmp_path):
    traced = run_tracer(str(tmp_path), ["missing.py"])
    assert traced.returncode == 2
    assert "script 'missing.py' not found" in traced.stderr and "Traceback" not in traced.stderr
    assert traced.doc is None


def test_output_not_writable(tmp_path):
    script = write(tmp_path, "x.py", "print('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(tmp_path / "no" / "t.json"), script],
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    assert "ran" not in proc.stdout


def test_bad_max_bytes_names_the_option(tmp_path):
    script = write(tmp_path, "x.py", "pass\n")
    traced = run_tracer(str(tmp_path), [script], "--max-bytes", "lots")
    assert traced.returncode == 2 and "--max-bytes" in traced.stderr and "'lots'" in traced.stderr


def test_recorder_library_missing(tmp_path, monkeypatch, capsys):
    from nvtx_cffi import recorder
    from nvtx_cffi._trace import cli

    monkeypatch.setattr(recorder, "library_path", lambda: str(tmp_path / "gone" / "libnvtx_recorder.so"))
    script = write(tmp_path, "x.py", "open('ran', 'w').close()\n")
    status = cli.main(["-o", str(tmp_path / "t.json"), script])
    assert status == 2
    err = capsys.readouterr().err
    assert "NVTX recorder library is missing" in err and "libnvtx_recorder.so" in err
    assert not (tmp_path / "ran").exists()


def test_anything_but_trace_goes_to_the_profile_cli(monkeypatch):
    import types

    import nvtx_cffi
    import nvtx_cffi.__main__ as entry

    seen = []
    fake = types.ModuleType("nvtx_cffi._profile_cli")
    fake.main = lambda argv: seen.append(argv) or 5
    monkeypatch.setitem(sys.modules, "nvtx_cffi._profile_cli", fake)
    monkeypatch.setattr(nvtx_cffi, "_profile_cli", fake, raising=False)
    assert entry.main(["--linenos", "script.py", "a"]) == 5
    assert seen == [["--linenos", "script.py", "a"]]


def test_profile_cli_missing_is_a_clear_error(monkeypatch, capsys):
    import nvtx_cffi
    import nvtx_cffi.__main__ as entry

    monkeypatch.setitem(sys.modules, "nvtx_cffi._profile_cli", None)  # import fails as if absent
    monkeypatch.delattr(nvtx_cffi, "_profile_cli", raising=False)
    assert entry.main(["script.py"]) == 2
    err = capsys.readouterr().err
    assert "Profile CLI" in err and "nvtx_cffi trace" in err


# --------------------------------------------------------------------------- --profile

PROFILED = """\
    import threading
    def leaf(n):
        return n + 1
    def middle(n):
        return leaf(n) * 2
    def worker():
        middle(5)
    t = threading.Thread(target=worker, name="cruncher")
    t.start()
    t.join()
    print("tids", threading.get_native_id(), t.native_id)
    print(middle(1))
"""


def _within(inner: dict, outer: dict) -> bool:
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-6


def test_profile_gives_nested_call_ranges_and_thread_names(tmp_path):
    script = write(tmp_path, "calls.py", PROFILED)
    traced = run_tracer(str(tmp_path), [script], "--profile", "--include", "__main__")
    assert traced.returncode == 0, traced.stderr
    main_tid, worker_tid = (int(x) for x in traced.stdout.split("tids")[1].split()[:2])
    by_thread = {}
    for e in traced.events("X"):
        assert e["cat"] == "nvtx.py" and e["args"]["color"] == "#0000ff"
        by_thread.setdefault(e["tid"], []).append(e)
    main = {e["name"]: e for e in by_thread[main_tid]}
    assert sorted(main) == ["calls.py:1(<module>)", "calls.py:2(leaf)", "calls.py:4(middle)"]
    assert _within(main["calls.py:2(leaf)"], main["calls.py:4(middle)"])
    assert _within(main["calls.py:4(middle)"], main["calls.py:1(<module>)"])
    worker = [e["name"] for e in sorted(by_thread[worker_tid], key=lambda e: e["ts"])]
    assert worker == ["calls.py:6(worker)", "calls.py:4(middle)", "calls.py:2(leaf)"]
    names = {tid: name for (_, tid), name in traced.thread_names().items()}
    assert names[main_tid] == "MainThread" and names[worker_tid] == "cruncher"


def test_profile_options_reach_the_profile(tmp_path):
    script = write(tmp_path, "calls.py", PROFILED)
    traced = run_tracer(str(tmp_path), [script, "--not-for-the-tracer"], "--profile", "--no-linenos",
                        "--annotate-cfuncs", "--include", "__main__", "--max-depth", "2")
    assert traced.returncode == 0, traced.stderr
    main_tid, worker_tid = (int(x) for x in traced.stdout.split("tids")[1].split()[:2])
    names = lambda tid: sorted(e["name"] for e in traced.events("X") if e["tid"] == tid)  # noqa: E731
    # bare names; C functions called from the script; two levels only (leaf() is the third)
    assert [n for n in names(main_tid) if n in ("<module>", "middle", "leaf")] == ["<module>", "middle"]
    assert names(worker_tid) == ["middle", "worker"]
    if sys.implementation.name == "cpython":  # PyPy's profiler reports fewer C calls (not print)
        assert names(main_tid) == ["<module>", "get_native_id", "middle", "print", "print"]
    assert "get_native_id" in names(main_tid)


def test_profile_flags_round_trip():
    """The tracer's Profile options become the same options of the child's Profile CLI."""
    from nvtx_cffi._profile_cli import parse_command_line
    from nvtx_cffi._trace import cli, runner

    opts = cli._parser().parse_args(["--profile", "--no-linenos", "--include", "a", "--include", "b.*",
                                     "--exclude", "c", "--max-depth", "3"])
    command = runner.command_for("python", "s.py", None, ["x", "--include", "--"], profile=cli._profile_flags(opts))
    assert command[:3] == ["python", "-m", "nvtx_cffi"]
    child = parse_command_line(command[3:])
    assert (child.linenos, child.annotate_cfuncs, child.include, child.exclude, child.max_depth) == \
        (False, False, ["a", "b.*"], ["c"], 3)
    # the program's arguments are never the child's options
    assert (child.target, child.args, child.module) == ("s.py", ["x", "--include", "--"], False)


def test_profile_options_need_profile(tmp_path):
    script = write(tmp_path, "calls.py", PROFILED)
    traced = run_tracer(str(tmp_path), [script], "--include", "__main__")
    assert traced.returncode == 2 and traced.doc is None
    assert "need --profile" in traced.stderr


# --------------------------------------------------------------------------- the program's command line

ARGV_AND_FLAGS = """
    import json, sys
    import nvtx_cffi as nvtx
    nvtx.mark("ran")
    print(json.dumps({"argv": sys.argv, "optimize": sys.flags.optimize, "dev": sys.flags.dev_mode,
                      "warnoptions": sys.warnoptions}))
"""


def _program_output(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize("profile", [[], ["--profile"]], ids=["plain", "profile"])
def test_interpreter_flags_reach_the_program(tmp_path, profile):
    """python -W ... -O -X dev -m nvtx_cffi trace prog.py: the program runs with the same flags."""
    write(tmp_path, "prog.py", ARGV_AND_FLAGS)
    flags = ["-W", "error::UserWarning", "-O", "-X", "dev"]
    plain = subprocess.run([sys.executable, *flags, "prog.py"], cwd=tmp_path, capture_output=True, text=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVTX")}
    traced = subprocess.run([sys.executable, *flags, "-m", "nvtx_cffi", "trace", "--wait", "0", *profile,
                             "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert traced.returncode == 0, traced.stderr
    want = _program_output(plain.stdout)
    assert want["optimize"] == 1 and want["dev"] and "error::UserWarning" in want["warnoptions"]
    assert _program_output(traced.stdout) == want


@pytest.mark.parametrize("profile", [[], ["--profile"]], ids=["plain", "profile"])
def test_program_arguments_are_the_same_with_and_without_profile(tmp_path, profile):
    """Everything after the script goes to the program: a script named like an option (-c.py),
    a '--' and arguments spelled like the Profile CLI's options included."""
    write(tmp_path, "-c.py", ARGV_AND_FLAGS)
    traced = run_tracer(str(tmp_path), ["--", "-c.py", "a", "--", "--no-linenos", "--include", "x", "--"],
                        "--wait", "0", *profile)
    assert traced.returncode == 0, traced.stderr
    assert _program_output(traced.stdout)["argv"] == ["-c.py", "a", "--", "--no-linenos", "--include", "x", "--"]
    assert [e["name"] for e in traced.events("i")] == ["ran"]


@pytest.mark.parametrize("profile", [[], ["--profile"]], ids=["plain", "profile"])
def test_directory_with_main_is_a_program(tmp_path, profile):
    (tmp_path / "app").mkdir()
    write(tmp_path, "app/__main__.py", ARGV_AND_FLAGS)
    traced = run_tracer(str(tmp_path), ["app", "x"], "--wait", "0", *profile)
    assert traced.returncode == 0, traced.stderr
    assert _program_output(traced.stdout)["argv"] == ["app", "x"]
    assert [e["name"] for e in traced.events("i")] == ["ran"]
    (tmp_path / "empty").mkdir()
    traced = run_tracer(str(tmp_path), ["empty"], "--wait", "0", *profile, trace_name="t2.json")
    assert traced.returncode == 2 and traced.doc is None
    assert "script 'empty' is a directory without __main__.py" in traced.stderr


@pytest.mark.parametrize("status", [0, 3])
def test_stats_to_a_closed_pipe_is_no_trace_write_error(tmp_path, status):
    """trace --stats ... | true: the summary cannot be printed, but the trace was written: the
    program's status, no 'could not write the trace', no BrokenPipeError at exit."""
    script = write(tmp_path, "quiet.py", f"""
        import sys
        import nvtx_cffi as nvtx
        with nvtx.annotate("a"):
            pass
        sys.exit({status})
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVTX")}
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: writing to it is EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "--wait", "0", "--stats", "-o",
                               str(tmp_path / "t.json"), script], cwd=tmp_path, env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == status, proc.stderr
    assert "wrote t.json (1 ranges" in proc.stderr
    assert "could not write" not in proc.stderr and "BrokenPipeError" not in proc.stderr
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
