"""``python -m nvtx_cffi convert`` of a kept recording, ``--no-output``, progress lines and
recording directories that cannot be converted. The conversions are checked against the trace
command's own output of the same recording (the same bytes, rows, summary and counts), the errors
by their exact line and exit status."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing

import pytest
from test_trace import parse_summary
from test_trace_edges import tracer_env, write

from nvtx_cffi import recorder
from nvtx_cffi._trace.progress import Progress, format_amount, format_duration

TRACE = "python -m nvtx_cffi trace"
CONVERT = "python -m nvtx_cffi convert"

PROGRAM = """
    import subprocess, sys, threading
    import nvtx_cffi as nvtx

    def work(n):
        for i in range(n):
            with nvtx.annotate("work", color="red", payload=i):
                nvtx.mark("step")

    t = threading.Thread(target=work, args=(3,), name="helper")
    t.start()
    work(2)
    t.join()
    nvtx.end_range(nvtx.start_range("async", domain="io"))
    nvtx.get_domain("io").get_counter("bytes", int).sample(4096)
    # a child started through a shell: its parent (sh) records nothing, it is still this run's
    subprocess.run(f"exec {sys.executable} -c 'import nvtx_cffi as nvtx; nvtx.push_range(\\"child\\"); "
                   "nvtx.pop_range()'", shell=True, check=True)
"""
#: what PROGRAM records, as the `wrote` line counts it
COUNTS = "7 ranges, 5 marks, 1 counter samples, 2 process(es)"


def cli(cwd, *args: str, env=None, python=(sys.executable,)) -> subprocess.CompletedProcess:
    return subprocess.run([*python, "-m", "nvtx_cffi", *args], cwd=cwd, env=env or tracer_env(cwd),
                          capture_output=True, text=True, timeout=180)


def _no_numpy_python() -> tuple:
    """An interpreter command that runs ``-m nvtx_cffi`` as PyPy does, every ``import numpy`` failing."""
    return (sys.executable, "-c", "import runpy, sys; sys.modules['numpy'] = None; sys.argv[0] = 'nvtx_cffi'; "
                                  "runpy.run_module('nvtx_cffi', run_name='__main__', alter_sys=True)")


def _sqlite_rows(path) -> list:
    with closing(sqlite3.connect(path)) as db:
        return list(db.iterdump())


def _json_events(path) -> list:
    return sorted(json.dumps(e, sort_keys=True) for e in json.loads(open(path).read())["traceEvents"])


# --------------------------------------------------------------------------- convert = trace's own output


@pytest.mark.parametrize("ending", ["json", "pftrace", "sqlite"])
def test_convert_of_a_kept_recording_writes_the_trace_the_trace_command_wrote(tmp_path, ending):
    script = write(tmp_path, "prog.py", PROGRAM)
    traced = cli(tmp_path, "trace", "--record-dir", "kept", "-o", f"ref.{ending}", "--stats", script)
    assert traced.returncode == 0, traced.stderr
    converted = cli(tmp_path, "convert", "kept", "-o", f"out.{ending}", "--stats")
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout == traced.stdout  # the --stats summary, to the character
    rows = parse_summary(converted.stdout)
    assert (rows["work"]["count"], rows["io:async"]["count"], rows["child"]["count"]) == ("5", "1", "1")
    assert traced.stderr.splitlines()[-1] == f"{TRACE}: wrote ref.{ending} ({COUNTS}); open it at https://ui.perfetto.dev"
    assert converted.stderr == f"{CONVERT}: wrote out.{ending} ({COUNTS}); open it at https://ui.perfetto.dev\n"
    ref, out = tmp_path / f"ref.{ending}", tmp_path / f"out.{ending}"
    if ending == "sqlite":
        assert _sqlite_rows(out) == _sqlite_rows(ref)
        with closing(sqlite3.connect(out)) as db:
            assert db.execute("SELECT count(*) FROM NVTX_EVENTS WHERE text = 'work' AND eventType = 59").fetchone() == (5,)
    else:
        assert out.read_bytes() == ref.read_bytes()
    if ending == "json":
        doc = json.loads(out.read_text())
        names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
        (root,) = {e["pid"] for e in doc["traceEvents"] if e["name"] == "work"}
        (child,) = set(names) - {root}
        # the program named as the tracer named it; its child after its parent, the shell
        assert (names[root], names[child]) == (f"python {script} ({root})", names[child])
        assert re.fullmatch(rf"child of \d+ \({child}\)", names[child]), names
        assert sorted(e["args"]["payload"] for e in doc["traceEvents"] if e["name"] == "work") == [0, 0, 1, 1, 2]
    assert sorted(os.listdir(tmp_path)) == sorted(["prog.py", "kept", "tmp", f"ref.{ending}", f"out.{ending}"])


def test_convert_without_numpy_and_a_plain_trace_give_the_same_events(tmp_path):
    """The pure-Python path (PyPy's) converts the kept recording to the same events; a separate
    `trace -o` run of the program records the same ranges and marks (its times and pids its own)."""
    script = write(tmp_path, "prog.py", PROGRAM)
    traced = cli(tmp_path, "trace", "--record-dir", "kept", "-o", "ref.json", "--stats", script)
    assert traced.returncode == 0, traced.stderr
    converted = cli(tmp_path, "convert", "kept", "-o", "nonp.json", "--stats", python=_no_numpy_python())
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout == traced.stdout
    assert _json_events(tmp_path / "nonp.json") == _json_events(tmp_path / "ref.json")
    plain = cli(tmp_path, "trace", "-o", "plain.json", "--stats", script)
    assert plain.returncode == 0, plain.stderr

    def shape(path):
        events = json.loads(open(path).read())["traceEvents"]
        return sorted((e["ph"], e["name"], e.get("args", {}).get("payload")) for e in events if e["ph"] != "M")

    assert shape(tmp_path / "plain.json") == shape(tmp_path / "nonp.json")
    assert {k: v["count"] for k, v in parse_summary(plain.stdout).items()} == \
        {k: v["count"] for k, v in parse_summary(converted.stdout).items()} == {"work": "5", "io:async": "1", "child": "1"}


def test_a_tracer_inside_a_traced_program_keeps_the_enclosing_recording_one_run(tmp_path):
    """The inner tracer's recordings are linked into the enclosing one: with their own run id,
    `convert` of the enclosing recording would refuse it as two runs."""
    inner = write(tmp_path, "inner.py", "import nvtx_cffi as nvtx\nnvtx.mark('inner mark')\n")
    outer = write(tmp_path, "outer.py", f"""
        import subprocess, sys
        import nvtx_cffi as nvtx
        nvtx.mark("outer mark")
        subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", "inner.json", {inner!r}], check=True)
    """)
    traced = cli(tmp_path, "trace", "--record-dir", "kept", "-o", "ref.json", outer)
    assert traced.returncode == 0, traced.stderr
    assert len({i.run_id for i in recorder.read(tmp_path / "kept").images}) == 1
    converted = cli(tmp_path, "convert", "kept", "-o", "out.json")
    assert converted.returncode == 0, converted.stderr
    assert (tmp_path / "out.json").read_bytes() == (tmp_path / "ref.json").read_bytes()
    marks = sorted(e["name"] for e in json.loads((tmp_path / "out.json").read_text())["traceEvents"] if e["ph"] == "i")
    assert marks == ["inner mark", "outer mark"]


#: what a conversion without NumPy says first, after the command's name
SLOW_PATH = ('NumPy is not installed: converting on the slow path (10-25x slower); '
             'pip install "nvtx-cffi[trace]" (or numpy) for the fast one')


def test_a_conversion_without_numpy_says_so_once_and_how_to_get_the_fast_path(tmp_path):
    script = write(tmp_path, "prog.py", "import nvtx_cffi as nvtx\nfor i in range(3):\n    nvtx.mark('m', payload=i)\n")
    traced = cli(tmp_path, "trace", "--record-dir", "kept", "-o", "t.pftrace", "--progress", "--stats", script,
                 python=_no_numpy_python())
    assert traced.returncode == 0, traced.stderr
    says = sys.implementation.name == "cpython"  # (PyPy's list path is its JIT's: it says nothing)
    assert traced.stderr.splitlines().count(f"{TRACE}: {SLOW_PATH}") == says and traced.stderr.count("NumPy") == says
    for ending in ("json", "sqlite"):
        converted = cli(tmp_path, "convert", "kept", "-o", f"c.{ending}", python=_no_numpy_python())
        assert converted.returncode == 0, converted.stderr
        assert (converted.stderr.splitlines()[0] == f"{CONVERT}: {SLOW_PATH}") == says
        assert converted.stderr.count("NumPy") == says
    if importlib.util.find_spec("numpy") is not None:  # the fast path says nothing of it
        fast = cli(tmp_path, "convert", "kept", "-o", "fast.json")
        assert fast.returncode == 0 and "NumPy" not in fast.stderr, fast.stderr


@pytest.mark.parametrize("numpy", [True, False])
def test_convert_of_a_program_that_recorded_nothing_says_what_trace_said(tmp_path, numpy):
    """The kept recording of a program that made no NVTX call is the tracer's note of the program
    alone (the recorder was never loaded): `convert` writes the same empty trace, with the same
    lines and exit status, instead of refusing the directory as holding no recording."""
    script = write(tmp_path, "prog.py", "import os\n")
    python = (sys.executable,) if numpy else _no_numpy_python()
    traced = cli(tmp_path, "trace", "--record-dir", "kept", "-o", "ref.json", "--stats", script, python=python)
    nothing = "no NVTX events were recorded (does the program annotate with NVTX? is NVTX_DISABLE set?)"
    assert traced.returncode == 0 and f"{TRACE}: {nothing}\n" in traced.stderr, traced.stderr
    assert [name.endswith(".json") for name in os.listdir(tmp_path / "kept")] == [True]  # no record file
    converted = cli(tmp_path, "convert", "kept", "-o", "out.json", "--stats", python=python)
    assert (converted.returncode, converted.stdout) == (traced.returncode, traced.stdout)
    assert converted.stderr == traced.stderr.replace(TRACE, CONVERT).replace("ref.json", "out.json")
    assert (tmp_path / "out.json").read_bytes() == (tmp_path / "ref.json").read_bytes()


# --------------------------------------------------------------------------- --no-output


def test_stats_without_a_trace_file(tmp_path):
    script = write(tmp_path, "prog.py", PROGRAM)
    traced = cli(tmp_path, "trace", "--stats", "--no-output", "--record-dir", "kept", script)
    assert traced.returncode == 0, traced.stderr
    assert {k: v["count"] for k, v in parse_summary(traced.stdout).items()} == {"work": "5", "io:async": "1", "child": "1"}
    assert traced.stderr.splitlines()[-1] == f"{TRACE}: no trace file written (--no-output; {COUNTS})"
    converted = cli(tmp_path, "convert", "kept", "--stats", "--no-output")
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout == traced.stdout
    assert converted.stderr == f"{CONVERT}: no trace file written (--no-output; {COUNTS})\n"
    assert sorted(os.listdir(tmp_path)) == ["kept", "prog.py", "tmp"]  # no trace, no partial file
    assert os.listdir(tmp_path / "tmp") == []


def test_a_picture_without_a_trace_file_is_the_trace_commands_picture(tmp_path):
    pytest.importorskip("matplotlib")
    script = write(tmp_path, "prog.py", PROGRAM)
    traced = cli(tmp_path, "trace", "--png", "ref.png", "--no-output", "--record-dir", "kept", script)
    assert traced.returncode == 0, traced.stderr
    converted = cli(tmp_path, "convert", "kept", "--png", "out.png", "--no-output")
    assert converted.returncode == 0, converted.stderr
    assert converted.stderr == (f"{CONVERT}: no trace file written (--no-output; {COUNTS})\n"
                                f"{CONVERT}: wrote {tmp_path / 'out.png'}\n")
    assert (tmp_path / "out.png").read_bytes() == (tmp_path / "ref.png").read_bytes()  # titled after the program
    assert sorted(os.listdir(tmp_path)) == ["kept", "out.png", "prog.py", "ref.png", "tmp"]


NO_OUTPUT_ERRORS = [
    (["--no-output", "-o", "x.json", "--stats"],
     "error: --no-output writes no trace file: leave out -o/--output, or --no-output"),
    (["--no-output"], "error: --no-output without --stats or --png would produce nothing: add --stats and/or --png PIC.png"),
]


@pytest.mark.parametrize(("args", "line"), NO_OUTPUT_ERRORS)
def test_no_output_usage_errors_are_one_line_before_anything_runs(tmp_path, args, line):
    script = write(tmp_path, "ran.py", "import nvtx_cffi as nvtx\nnvtx.mark('m')\nopen(__file__ + '.ran', 'w').close()\n")
    traced = cli(tmp_path, "trace", *args, "--record-dir", "kept", script)
    assert (traced.returncode, traced.stderr) == (2, f"{TRACE}: {line}\n")
    assert not os.path.exists(script + ".ran") and not (tmp_path / "kept").exists()
    subprocess.run([sys.executable, script], env={**tracer_env(tmp_path), **recorder.environment(tmp_path / "rec")},
                   check=True)
    converted = cli(tmp_path, "convert", "rec", *args)
    assert (converted.returncode, converted.stderr) == (2, f"{CONVERT}: {line}\n")
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "rec.trace.json").exists()


# --------------------------------------------------------------------------- directories that cannot be converted


def _record(tmp_path, directory, code: str, env_extra=None, drop_run=False) -> None:
    env = {**tracer_env(tmp_path), **recorder.environment(directory), **(env_extra or {})}
    if drop_run:
        del env["NVTX_CFFI_RECORD_RUN"]
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, check=True, timeout=60)


def _bad_dirs(tmp_path):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "others").mkdir()
    (tmp_path / "others" / "notes.txt").write_text("x")
    (tmp_path / "others" / "run.log").write_text("x")
    (tmp_path / "nomagic").mkdir()
    (tmp_path / "nomagic" / "nvtx-1-e0-1.nvtxrec").write_bytes(b"PK\x03\x04" + bytes(5000))
    _record(tmp_path, tmp_path / "cut", "import nvtx_cffi as nvtx; nvtx.mark('m')")
    (cut,) = (tmp_path / "cut").glob("*.nvtxrec")
    cut.write_bytes(cut.read_bytes()[:100])
    return cut


BAD = {
    "missing": "error: recording directory '{p}' does not exist",
    "a-file": "error: '{p}' is not a directory: give the directory of a recording (trace --record-dir DIR)",
    "empty": "error: recording directory '{p}' is empty",
    "others": "error: '{p}' holds no recording: none of its 2 file(s) is a *.nvtxrec record file",
    "nomagic": "error: cannot read the recording: {p}/nvtx-1-e0-1.nvtxrec: not an NVTX recording (no NVTXREC2 magic)",
    "cut": "error: cannot read the recording: {f}: NVTX recording cut inside its header (100 of 4096 bytes)",
}


@pytest.mark.parametrize("numpy", [True, False])
def test_bad_recording_directories_are_one_line_naming_them(tmp_path, numpy):
    cut = _bad_dirs(tmp_path)
    python = (sys.executable,) if numpy else _no_numpy_python()
    for name, line in BAD.items():
        done = cli(tmp_path, "convert", name, "-o", "t.json", python=python)
        expected = f"{CONVERT}: " + line.format(p=tmp_path / name, f=cut) + "\n"
        assert (name, done.returncode, done.stderr) == (name, 2, expected)
        assert done.stdout == ""
    assert not (tmp_path / "t.json").exists()


def test_a_directory_of_two_runs_is_refused_and_each_run_can_be_picked(tmp_path):
    rec = tmp_path / "rec"
    _record(tmp_path, rec, "import nvtx_cffi as nvtx; nvtx.mark('first run')")
    _record(tmp_path, rec, """
        import os, nvtx_cffi as nvtx
        nvtx.mark('second run')
        if os.fork() == 0:  # a forked child: the same run
            nvtx.mark('second run child')
            os._exit(0)
        os.wait()
    """)
    _record(tmp_path, rec, "import nvtx_cffi as nvtx; nvtx.mark('no run id')", drop_run=True)
    images = sorted(recorder.read(rec).images, key=lambda i: i.start_ns)
    first, second, child, none = images
    assert second.run_id == child.run_id != first.run_id and 0 == none.run_id != first.run_id
    refused = cli(tmp_path, "convert", "rec", "-o", "t.json")
    assert refused.returncode == 2 and not (tmp_path / "t.json").exists()
    when = r", started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert re.fullmatch(
        re.escape(f"{CONVERT}: error: '{rec}' holds the recordings of 3 runs (run {first.run_id:016x}: 1 file(s), "
                  f"pid {first.pid}") + when + re.escape(f"; run {second.run_id:016x}: 2 file(s), pid "
                                                         f"{', '.join(map(str, sorted([second.pid, child.pid])))}")
        + when + re.escape(f"; run none: 1 file(s), pid {none.pid}") + when
        + re.escape("); convert one with --run ID, or all as one trace with --run all") + "\n", refused.stderr), \
        refused.stderr

    def marks(*args):
        done = cli(tmp_path, "convert", "rec", "-o", "t.json", *args)
        assert done.returncode == 0, done.stderr
        return sorted(e["name"] for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e["ph"] == "i")

    assert marks("--run", f"{second.run_id:016x}"[:6]) == ["second run", "second run child"]  # a prefix will do
    assert marks("--run", f"{first.run_id:016X}") == ["first run"]
    assert marks("--run", "none") == ["no run id"]
    assert marks("--run", "all") == ["first run", "no run id", "second run", "second run child"]
    wrong = cli(tmp_path, "convert", "rec", "--run", "zz", "-o", "t.json")
    assert wrong.returncode == 2 and wrong.stderr.startswith(f"{CONVERT}: error: --run 'zz' names no run of '{rec}' (run ")


def test_the_run_id_reaches_every_process_of_a_run(tmp_path):
    """recorder.environment() draws one id per call; children started through a shell inherit it;
    a malformed NVTX_CFFI_RECORD_RUN records no id."""
    env = recorder.environment(tmp_path / "a")
    run_id = int(env["NVTX_CFFI_RECORD_RUN"], 16)
    assert run_id != int(recorder.environment(tmp_path / "b")["NVTX_CFFI_RECORD_RUN"], 16)
    assert recorder.environment(tmp_path / "c", run_id=0x2A)["NVTX_CFFI_RECORD_RUN"] == "000000000000002a"
    with pytest.raises(ValueError, match="run_id must be"):
        recorder.environment(tmp_path / "c", run_id=1 << 64)
    code = (f"import subprocess, nvtx_cffi as nvtx; nvtx.mark('parent'); subprocess.run(\"exec {sys.executable} -c "
            f"'import nvtx_cffi as nvtx; nvtx.mark(str(1))'\", shell=True, check=True)")
    subprocess.run([sys.executable, "-c", code], env={**tracer_env(tmp_path), **env}, check=True, timeout=60)
    assert [i.run_id for i in recorder.read(tmp_path / "a").images] == [run_id, run_id]
    _record(tmp_path, tmp_path / "d", "import nvtx_cffi as nvtx; nvtx.mark('m')", {"NVTX_CFFI_RECORD_RUN": "not-hex"})
    assert [i.run_id for i in recorder.read(tmp_path / "d").images] == [0]


# --------------------------------------------------------------------------- progress lines


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_lines_say_amounts_rate_and_time_left_with_the_commands_prefix():
    clock, out = _Clock(), io.StringIO()
    p = Progress(CONVERT, force=True, stream=out, clock=clock)
    clock.now += 1.0
    p.update("converting", 45_600_000, 250_000_000)
    clock.now += 1.0  # within 2 s of the last line: left out (not a terminal)
    p.update("converting", 91_200_000, 250_000_000)
    clock.now += 1.5
    p.update("converting", 120_000_000, 250_000_000)
    clock.now += 0.1  # the last line is never left out
    p.update("converting", 250_000_000, 250_000_000)
    p.done()
    assert out.getvalue().splitlines() == [
        f"{CONVERT}: converting: 45.6 MB of 250.0 MB (18%), 45.6 MB/s, ~4 s left",
        f"{CONVERT}: converting: 120.0 MB of 250.0 MB (48%), 34.3 MB/s, ~4 s left",
        f"{CONVERT}: converting: 250.0 MB of 250.0 MB (100%), 69.4 MB/s, done in 3.6 s",
    ]


def test_progress_in_events_minutes_and_hours():
    clock, out = _Clock(), io.StringIO()
    p = Progress(TRACE, force=True, stream=out, unit="events", clock=clock)
    clock.now += 2.0
    p.update("pairing", 1_200_000, 300_000_000)
    clock.now += 600.0
    p.update("pairing", 7_000_000_000, 9_000_000_000)
    assert out.getvalue().splitlines() == [
        f"{TRACE}: pairing: 1.2 M of 300.0 M events (0%), 600.0 k events/s, ~8 min left",
        f"{TRACE}: pairing: 7.0 G of 9.0 G events (77%), 11.6 M events/s, ~3 min left",
    ]
    assert (format_duration(7200), format_duration(44.4), format_amount(999, "bytes"), format_amount(1500, "bytes")) \
        == ("2.0 h", "44 s", "999 B", "1.5 kB")


def test_progress_on_a_terminal_rewrites_one_line_after_a_second_and_is_silent_elsewhere():
    clock, tty = _Clock(), _Tty()
    p = Progress(TRACE, stream=tty, clock=clock)
    clock.now += 0.5
    p.update("converting", 1_000, 10_000_000)  # small conversions print nothing
    assert tty.getvalue() == ""
    clock.now += 0.7
    p.update("converting", 12_000_000, 120_000_000)
    clock.now += 0.1  # rewritten at most every 0.2 s
    p.update("converting", 13_000_000, 120_000_000)
    clock.now += 0.3
    p.update("converting", 120_000_000, 120_000_000)
    p.done()
    first = f"{TRACE}: converting: 12.0 MB of 120.0 MB (10%), 10.0 MB/s, ~11 s left"
    last = f"{TRACE}: converting: 120.0 MB of 120.0 MB (100%), 75.0 MB/s, done in 1.6 s"
    assert tty.getvalue() == f"\r{first}\r{last}\n"
    shorter = Progress(TRACE, force=True, stream=_Tty(), clock=clock)
    clock.now += 1
    shorter.update("converting", 5_000_000, 10_000_000)
    clock.now += 1
    shorter.update("c", 10_000_000, 10_000_000)  # a shorter line pads over the longer one
    lines = shorter._stream.getvalue().split("\r")[1:]
    assert len(lines[1]) == len(lines[0]) and lines[1].rstrip() == f"{TRACE}: c: 10.0 MB of 10.0 MB (100%), 5.0 MB/s, done in 2.0 s"
    piped = io.StringIO()
    silent = Progress(TRACE, stream=piped, clock=clock)
    clock.now += 5
    silent.update("converting", 1, 2)
    silent.done()
    assert piped.getvalue() == ""


def test_convert_progress_lines_carry_its_prefix(tmp_path):
    _record(tmp_path, tmp_path / "rec", "import nvtx_cffi as nvtx\nfor i in range(1000): nvtx.mark('m')")
    done = cli(tmp_path, "convert", "rec", "--stats", "--no-output", "--progress")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert re.fullmatch(rf"{CONVERT}: converting: [\d.]+ kB of [\d.]+ kB \(100%\), [\d.]+ [kMG]?B/s, done in [\d.]+ s",
                        lines[-2]), lines
    assert lines[-1] == f"{CONVERT}: no trace file written (--no-output; 0 ranges, 1000 marks, 1 process(es))"
