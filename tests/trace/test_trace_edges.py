"""The tracer at its edges (its doubtful behaviours): abbreviated options, a SIGINT sent to
the tracer alone, background processes that outlive the program, interrupted conversions, and a
tracer running inside a traced program. Each asserts the trace written (or not) and the message."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.trace_check import run_tracer


def write(tmp_path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def tracer_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR", "NVTX_CFFI_RECORD_MAX_BYTES")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp_path / "tmp")  # the tracer's temporary recording goes here
    return env


@pytest.mark.parametrize("args", [["--out", "t.json"], ["--max-b", "1K"], ["--stat"]])
def test_abbreviated_options_are_refused_by_name(tmp_path, capsys, args):
    """argparse took "--out" for "--output" while the splitter took its value for the script."""
    from nvtx_cffi._trace import cli

    script = write(tmp_path, "ran.py", "open(__file__ + '.ran', 'w').close()\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*args, script])
    assert exit_info.value.code == 2
    assert f"unrecognized arguments: {args[0]}" in capsys.readouterr().err
    assert not os.path.exists(script + ".ran")


def test_sigint_sent_to_the_tracer_alone_reaches_the_program(tmp_path):
    """kill -INT <tracer pid> was swallowed (SIGINT ignored) while the program ran on."""
    script = write(tmp_path, "waits.py", """
        import signal, sys, time
        import nvtx_cffi as nvtx
        got = []
        signal.signal(signal.SIGINT, lambda *a: got.append(1))
        open(sys.argv[1], "w").close()
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # a second, duplicated SIGINT would arrive meanwhile
        nvtx.mark(f"got {len(got)} SIGINT")
    """)
    ready = tmp_path / "ready"
    trace = tmp_path / "t.json"
    tracer = subprocess.Popen([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(trace), script, str(ready)],
                              cwd=tmp_path, env=tracer_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(tracer.pid, signal.SIGINT)
    _, err = tracer.communicate(timeout=60)
    assert tracer.returncode == 0, err
    marks = [e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "i"]
    assert marks == ["got 1 SIGINT"]


BACKGROUND = """
    import os, subprocess, sys, time
    import nvtx_cffi as nvtx
    nvtx.mark("parent")
    subprocess.Popen([sys.executable, "-c",
                      "import time, nvtx_cffi as nvtx; nvtx.mark('child early'); open('early', 'w').close(); "
                      "time.sleep({sleep}); nvtx.mark('child late')"], start_new_session=True)
    deadline = time.monotonic() + 60
    while {wait_early} and not os.path.exists("early") and time.monotonic() < deadline:
        time.sleep(0.01)
"""


def test_tracer_waits_for_background_children_that_still_record(tmp_path):
    """Only the direct child was waited for: a background grandchild's events were missing, and
    its recorder re-created the removed temporary directory."""
    script = write(tmp_path, "bg.py", BACKGROUND.format(sleep=1.0, wait_early=False))
    traced = run_tracer(str(tmp_path), [script], env=tracer_env(tmp_path))
    assert traced.returncode == 0, traced.stderr
    assert sorted(e["name"] for e in traced.events("i")) == ["child early", "child late", "parent"]
    time.sleep(0.2)
    assert os.listdir(tmp_path / "tmp") == []  # the temporary recording is gone, not re-created


def test_tracer_says_which_processes_it_cut_off(tmp_path):
    script = write(tmp_path, "bg.py", BACKGROUND.format(sleep=3.0, wait_early=True))
    traced = run_tracer(str(tmp_path), [script], "--wait", "0.3", env=tracer_env(tmp_path))
    assert traced.returncode == 0, traced.stderr
    assert sorted(e["name"] for e in traced.events("i")) == ["child early", "parent"]
    line = next(line for line in traced.stderr.splitlines() if "still recording" in line)
    assert "WARNING: 1 process(es) still recording 0.3 s after the program exited (pid " in line
    kept = line.rsplit("their recordings stay in ", 1)[1]
    assert os.path.dirname(kept) == str(tmp_path / "tmp")


def test_interrupted_conversion_keeps_the_previous_trace(tmp_path, monkeypatch, capsys):
    """Ctrl-C during conversion printed a traceback and left a truncated JSON in place."""
    from nvtx_cffi._trace import cli

    script = write(tmp_path, "one.py", "import nvtx_cffi as nvtx\nnvtx.mark('x')\n")
    output = tmp_path / "t.json"
    output.write_text('{"previous": true}')

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.os, "replace", interrupted)
    status = cli.main(["-o", str(output), script])
    err = capsys.readouterr().err
    assert status == 130 and "Traceback" not in err
    assert f"interrupted; {output} was not written (a previous file there is left as it was)" in err
    assert output.read_text() == '{"previous": true}'
    assert sorted(os.listdir(tmp_path)) == ["one.py", "t.json"]  # no partial file left


def test_an_interrupt_just_after_the_partial_file_is_made_removes_it(tmp_path, monkeypatch):
    """A SIGTERM turned into an exception right after the partial trace file was created (before
    the code that removes it on failure was entered) left the file behind (seen on PyPy in
    test_sigterm_during_conversion_removes_the_temporary_files)."""
    from nvtx_cffi._trace import cli

    real_open = os.open

    def open_then_interrupt(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if str(path).endswith(".partial"):
            os.close(fd)
            raise KeyboardInterrupt  # as the SIGTERM handler's exception would, at the next bytecode
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with cli._atomic_output(str(tmp_path / "t.json")):
            pass
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_sigterm_during_conversion_removes_the_temporary_files(tmp_path):
    """SIGTERM while converting left the temporary recording (115 MB for 1e6 ranges) behind."""
    script = write(tmp_path, "many.py", """
        import nvtx_cffi as nvtx
        for i in range(300_000):
            nvtx.push_range("r"); nvtx.pop_range()
    """)
    output = tmp_path / "out" / "t.json"
    output.parent.mkdir()
    tracer = subprocess.Popen([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(output), script],
                              cwd=tmp_path, env=tracer_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not os.listdir(output.parent) and tracer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if tracer.poll() is not None:
        pytest.skip("the conversion ended before the test could interrupt it")
    tracer.send_signal(signal.SIGTERM)
    _, err = tracer.communicate(timeout=60)
    assert tracer.returncode == 128 + signal.SIGTERM, err
    assert f"terminated by signal {int(signal.SIGTERM)}; {output} was not written" in err
    assert os.listdir(output.parent) == [] and os.listdir(tmp_path / "tmp") == []


def test_nested_tracer_events_reach_both_traces(tmp_path):
    """A traced program that runs the tracer itself: the inner program's events were missing from
    the outer trace."""
    inner = write(tmp_path, "inner.py", "import nvtx_cffi as nvtx\nnvtx.mark('inner mark')\n")
    outer = write(tmp_path, "outer.py", f"""
        import subprocess, sys
        import nvtx_cffi as nvtx
        nvtx.mark("outer mark")
        subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", "inner.json", {inner!r}], check=True)
    """)
    traced = run_tracer(str(tmp_path), [outer], env=tracer_env(tmp_path))
    assert traced.returncode == 0, traced.stderr
    assert {"outer mark", "inner mark"} <= {e["name"] for e in traced.events("i")}
    inner_doc = json.loads((tmp_path / "inner.json").read_text())
    assert [e["name"] for e in inner_doc["traceEvents"] if e["ph"] == "i"] == ["inner mark"]


def test_two_tracers_writing_one_output_leave_a_complete_trace(tmp_path):
    """Both wrote the same file in place (interleaved: invalid JSON); now each renames a whole one."""
    script = write(tmp_path, "many.py", """
        import sys
        import nvtx_cffi as nvtx
        for i in range(20_000):
            nvtx.push_range(sys.argv[1]); nvtx.pop_range()
    """)
    output = tmp_path / "same.json"
    tracers = [subprocess.Popen([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(output), script, tag],
                                cwd=tmp_path, env=tracer_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for tag in ("first", "second")]
    for tracer in tracers:
        _, err = tracer.communicate(timeout=120)
        assert tracer.returncode == 0, err
    names = {e["name"] for e in json.loads(output.read_text())["traceEvents"] if e["ph"] == "X"}
    assert names in ({"first"}, {"second"})  # one whole trace, the last renamed
    assert sorted(os.listdir(tmp_path)) == ["many.py", "same.json", "tmp"]


# --------------------------------------------------------------------------- failures after the program ran


def _limit_file_size(limit: int):
    """For Popen's preexec_fn: files this process writes stop at ``limit`` bytes (EFBIG, as on a full
    disk, instead of the SIGXFSZ that would kill it)."""
    import resource

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return preexec


# The program lifts the tracer's file size limit for itself before it records: only the tracer's
# writing of the trace meets it.
LIFTS_THE_LIMIT = """
    import resource
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    import nvtx_cffi as nvtx
    for i in range(5000):
        nvtx.push_range(f"range {i % 500}"); nvtx.pop_range()
"""


@pytest.mark.parametrize("name, error", [("t.sqlite", "disk I/O error"),
                                         ("t.json", "[Errno 27] File too large"),
                                         ("t.pftrace", "[Errno 27] File too large")])
def test_a_trace_the_disk_cannot_hold_is_one_line_in_every_format(tmp_path, name, error):
    """.sqlite output that did not fit printed sqlite3.OperationalError's traceback (exit 1)."""
    script = write(tmp_path, "fills.py", LIFTS_THE_LIMIT)
    out = tmp_path / "out"
    out.mkdir()
    tracer = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", str(out / name), script],
                            cwd=tmp_path, env=tracer_env(tmp_path), capture_output=True, text=True, timeout=120,
                            preexec_fn=_limit_file_size(32 * 1024))
    assert tracer.returncode == 2
    (kept,) = os.listdir(tmp_path / "tmp")  # the recording is kept (and said where), no partial file
    assert tracer.stderr == (f"python -m nvtx_cffi trace: error: could not write the trace: {error}; "
                             f"the recording is kept in {tmp_path / 'tmp' / kept}\n")
    assert os.listdir(out) == [] and len(list((tmp_path / "tmp" / kept).glob("*.nvtxrec"))) == 1


@pytest.mark.parametrize("exit_code, status", [(3, 3), (0, 2)])
def test_a_program_that_removes_its_recording_gets_one_line_and_its_status(tmp_path, exit_code, status):
    """The tracer died with FileNotFoundError (exit 1) looking for processes still recording."""
    script = write(tmp_path, "removes.py", f"""
        import os, shutil
        import nvtx_cffi as nvtx
        nvtx.mark("before")
        shutil.rmtree(os.environ["NVTX_CFFI_RECORD_DIR"])
        nvtx.mark("after")
        raise SystemExit({exit_code})
    """)
    traced = run_tracer(str(tmp_path), [script], env=tracer_env(tmp_path))
    assert traced.returncode == status
    (line,) = traced.stderr.splitlines()
    assert re.fullmatch(rf"python -m nvtx_cffi trace: error: the recording directory {re.escape(str(tmp_path))}"
                        rf"/tmp/nvtx-cffi-trace-\w+ was removed while the program ran; "
                        rf"{re.escape(traced.trace_path)} was not written", line), line
    assert traced.doc is None and os.listdir(tmp_path / "tmp") == []


def test_a_png_that_cannot_be_written_is_not_called_a_trace_failure(tmp_path):
    """It said "could not write the trace" and no "wrote" line although the trace was complete."""
    pytest.importorskip("matplotlib")
    script = write(tmp_path, "removes_png_dir.py", """
        import shutil, sys
        import nvtx_cffi as nvtx
        nvtx.push_range("a"); nvtx.pop_range()
        shutil.rmtree(sys.argv[1])
    """)
    (tmp_path / "pictures").mkdir()
    png = tmp_path / "pictures" / "t.png"
    traced = run_tracer(str(tmp_path), [script, str(tmp_path / "pictures")], "--png", str(png),
                        env=tracer_env(tmp_path))
    assert traced.returncode == 2
    assert traced.stderr.splitlines() == [
        f"python -m nvtx_cffi trace: wrote trace.json (1 ranges, 0 marks, 1 process(es)); "
        f"open it at https://ui.perfetto.dev",
        f"python -m nvtx_cffi trace: error: could not write the PNG: [Errno 2] No such file or directory: '{png}'"]
    assert [e["name"] for e in traced.events("X")] == ["a"]


# --------------------------------------------------------------------------- counters only


COUNTER_SAMPLES = """
    import threading
    import nvtx_cffi as nvtx
    d = nvtx.get_domain("D")
    c = d.get_counter("q", int)
    t = threading.Thread(target=lambda: c.sample(1))  # the earliest sample, read last (its own chunk)
    t.start(); t.join()
    ts = [d.get_timestamp() for _ in range(2)]
    c.batch_submit([7, 9], ts)  # the latest sample in time: 9
"""


def _trace_counters(tmp_path, *args: str):
    """The tracer run on COUNTER_SAMPLES: (the process, {ts: value} of the trace's counter events)."""
    script = write(tmp_path, "counts.py", COUNTER_SAMPLES)
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", *args, "-o", "t.json", script], cwd=tmp_path,
                          env=tracer_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    return proc, {e["ts"]: e["args"]["value"] for e in events if e["ph"] == "C"}


def test_a_program_that_only_samples_counters_is_not_called_empty(tmp_path):
    """It said "no NVTX events were recorded" and "0 process(es)" over a trace of its samples."""
    proc, values = _trace_counters(tmp_path)
    assert proc.stderr == ("python -m nvtx_cffi trace: wrote t.json (0 ranges, 0 marks, 3 counter samples, "
                           "1 process(es)); open it at https://ui.perfetto.dev\n")
    assert sorted(values.values()) == [1, 7, 9]


def test_a_counter_only_runs_summary_counts_its_process_as_the_wrote_line_does(tmp_path):
    """The summary said "0 process(es)" where the "wrote" line said 1."""
    proc, _values = _trace_counters(tmp_path, "--stats")
    assert "0 ranges, 0 marks, 3 counter samples, 1 process(es)" in proc.stderr
    summary = [line for line in proc.stdout.splitlines() if line.startswith("NVTX range summary:")]
    assert summary == ["NVTX range summary: 0 range name(s), 0 range(s), 0 mark(s), 1 process(es), 0 thread(s)"]


UNPLACEABLE_BATCH = """
    import time
    import nvtx_cffi as nvtx
    d = nvtx.get_domain("T")
    boot = d.get_counter("boot", int, time_domain=nvtx.TimestampType.CPU_CLOCK_GETTIME_BOOTTIME)
    wall = d.get_counter("wall", int, time_domain=nvtx.TimestampType.CPU_CLOCK_GETTIME_REALTIME)
    boot.batch_submit([1, 2], [time.clock_gettime_ns(time.CLOCK_BOOTTIME)] * 2)
    wall.batch_submit([3], [time.time_ns()])
"""


def test_a_batch_of_an_unplaceable_time_domain_is_refused_with_one_warning_line(tmp_path):
    """A time domain with no known relation to the trace's clock: the tracer says so in one line
    naming the counter and the domain, and --stats notes the samples left out."""
    script = write(tmp_path, "tdom.py", UNPLACEABLE_BATCH)
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "--stats", "-o", "t.json", script],
                          cwd=tmp_path, env=tracer_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert len(warned) == 1 and re.fullmatch(
        r"python -m nvtx_cffi trace: WARNING: counter 'T: boot' \(process \d+\): batch timestamps of time domain "
        r"CPU_CLOCK_GETTIME_BOOTTIME \(17\) cannot be placed on the trace: .*; those samples are left out",
        warned[0]), proc.stderr
    assert re.search(r"note: 2 batch sample\(s\) of counter 'T: boot' \(process \d+\) were left out", proc.stdout)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [(e["name"], e["args"]["value"]) for e in events if e["ph"] == "C"] == [("T: wall", 3)]


def test_the_counter_tables_last_value_is_the_latest_in_time(tmp_path):
    """"Last" was the sample read last (a worker thread's early sample), not the latest one."""
    proc, values = _trace_counters(tmp_path, "--stats")
    assert values[max(values)] == 9
    header, rule, row = proc.stdout.split("NVTX counter summary: 1 counter track(s)\n\n")[1].splitlines()
    assert header.split() == ["Samples", "Min", "Max", "Mean", "Last", "Unit", "Counter"]
    assert row.split() == ["3", "1", "9", "5.66667", "9", "-", "D:", "q"]



BIG_COUNTER_SAMPLES = """
    import numpy as np
    import nvtx_cffi as nvtx
    d = nvtx.get_domain("D")
    g = d.get_counter("grp", [("n", "i8"), ("pad", "S70000")])  # a sample past the 64 KiB record bound
    ts = [d.get_timestamp() for _ in range(2)]
    g.batch_submit(np.array([(1, b"x"), (2, b"y")], dtype=g.dtype), ts)
    g.sample((3, b"z"))
"""


def test_counter_samples_cut_at_the_record_bound_are_traced_and_noted(tmp_path):
    """A batch of items past the record bound was dropped without a count (the trace had 1 of 3
    samples, --stats no word of it); now each is recorded cut, its leading fields traced, and
    --stats notes the cut samples."""
    pytest.importorskip("numpy")
    script = write(tmp_path, "big.py", BIG_COUNTER_SAMPLES)
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "--stats", "-o", "t.json", script],
                          cwd=tmp_path, env=tracer_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [(e["name"], e["args"]["value"]) for e in events if e["ph"] == "C"] == [
        ("D: grp.n", 1), ("D: grp.n", 2), ("D: grp.n", 3)]
    row = proc.stdout.split("NVTX counter summary: 1 counter track(s)\n\n")[1].splitlines()[2]
    assert row.split() == ["3", "1", "3", "2", "3", "-", "D:", "grp.n"]
    assert ("note: 3 counter sample(s) were cut at the recorder's 64 KiB record bound: their fields past "
            "the cut are missing above.") in proc.stdout
    assert "dropped" not in proc.stdout + proc.stderr


def test_counter_stats_last_goes_by_time_not_by_arrival():
    from nvtx_cffi._trace.counters import CounterStats
    from nvtx_cffi.ext_records import CounterInfo, CounterSample

    info = CounterInfo(id=1, domain=None, schema_id=0, scope_id=0, name="c", description=None, semantics=[])
    stats = CounterStats()
    for time_ns, value in ((20, 5), (30, 6), (30, 8), (10, 4)):  # a tie: the one read later wins
        stats.add(CounterSample(pid=1, tid=1, time_ns=time_ns, counter=info, values={"value": value}))
    (row,) = stats.rows()
    assert (row["samples"], row["min"], row["max"], row["last"]) == (4, 4, 8, 8)


# --------------------------------------------------------------------------- --max-bytes


def _recorder_reads(spelling: str, tmp_path) -> tuple:
    """(warned, max_bytes in the file header) of a process recording with NVTX_CFFI_RECORD_MAX_BYTES=spelling."""
    import struct

    from nvtx_cffi import recorder

    directory = tmp_path / f"rec{len(os.listdir(tmp_path))}"
    env = {**tracer_env(tmp_path), **recorder.environment(directory), "NVTX_CFFI_RECORD_MAX_BYTES": spelling}
    proc = subprocess.run([sys.executable, "-c", "import nvtx_cffi as nvtx; nvtx.mark('m')"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (path,) = directory.glob("*.nvtxrec")
    return "is not a size" in proc.stderr, struct.unpack_from("<Q", path.read_bytes(), 48)[0]


SPELLINGS = ["4096", "64k", "16M", "2G", "1T", "1t", "64KB", "64kbb", " 5 ", "5\n", "\t7b", "017179869183G",
             "16777215T", "9999999999999999999",
             # refused by both
             "0", "0k", "-5", "+5", "1_0", "1e3", "k", "b", "5 k", "1P", "\n5", "\uff11", "1" + "b" * 70,
             "99999999999999999999", "16777216T", "17179869184G", "18446744073709551616"]


def test_max_bytes_takes_exactly_what_the_recorder_takes(tmp_path):
    """The CLI took 17179869184G (the recorder then warned and used 4 GiB while the program ran)
    and refused 1T, which the recorder takes."""
    import argparse

    from nvtx_cffi import recorder
    from nvtx_cffi._trace import cli

    import mmap

    default = _recorder_reads("nonsense", tmp_path)[1]
    smallest = 4096 + mmap.PAGESIZE  # the recorder's least bound: its header and one page
    for spelling in SPELLINGS:
        warned, bound = _recorder_reads(spelling, tmp_path)
        try:
            value = cli._byte_size(spelling)
        except argparse.ArgumentTypeError:
            assert warned and bound == default, spelling
            continue
        assert not warned and bound == max(value, smallest), spelling
        # and the value reaches the recorder as given (as a size it reads back exactly)
        assert _recorder_reads(recorder.environment(tmp_path, max_bytes=value)["NVTX_CFFI_RECORD_MAX_BYTES"],
                               tmp_path) == (False, max(value, smallest)), spelling


@pytest.mark.parametrize("spelling, message", [
    ("17179869184G", "'17179869184G' is more than the recorder's largest size, 2**64-1 bytes"),
    ("1P", "expected a size like 4096, 64k, 16M, 2G or 1T, got '1P'")])
def test_max_bytes_the_recorder_would_not_take_is_refused_before_the_program_runs(tmp_path, spelling, message):
    script = write(tmp_path, "ran.py", "open(__file__ + '.ran', 'w').close()\n")
    traced = run_tracer(str(tmp_path), [script], "--max-bytes", spelling, env=tracer_env(tmp_path))
    assert traced.returncode == 2
    assert traced.stderr.splitlines()[-1] == \
        f"python -m nvtx_cffi trace: error: argument --max-bytes: --max-bytes: {message}"
    assert not os.path.exists(script + ".ran")


def test_max_bytes_in_terabytes_reaches_the_recorder(tmp_path):
    import struct

    script = write(tmp_path, "m.py", "import nvtx_cffi as nvtx\nnvtx.mark('m')\n")
    traced = run_tracer(str(tmp_path), [script], "--max-bytes", "1T", "--record-dir", str(tmp_path / "raw"),
                        env=tracer_env(tmp_path))
    assert traced.returncode == 0, traced.stderr
    (path,) = (tmp_path / "raw").glob("*.nvtxrec")
    assert struct.unpack_from("<Q", path.read_bytes(), 48)[0] == 1 << 40
