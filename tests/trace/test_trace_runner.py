"""The tracer around the program: which background processes it waits for, output names at the
file system's limit, outputs that cannot be written and record files it cannot read. Each test
runs the real tracer and checks the trace, the message and what is left on disk."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.trace_check import run_tracer, validate_chrome_trace

PROG = "python -m nvtx_cffi trace"


from test_trace_edges import tracer_env, write  # noqa: E402  (the tracer tests' own helpers)


def _kill(pid_file) -> None:
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


# --------------------------------------------------------------------------- background processes


LEAVES_A_SLEEP = """
    import subprocess, sys
    import nvtx_cffi as nvtx
    nvtx.mark("parent")
    # a process that inherits the recorder's environment and never calls NVTX
    # (its output is not the tracer's pipes: the test would wait for those to close)
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open("sleep.pid", "w").write(str(sleeper.pid))
    # and one that records, starting after the program has exited
    subprocess.Popen([sys.executable, "-c",
                      "import time, nvtx_cffi as nvtx; time.sleep(0.2); nvtx.mark('child early'); "
                      "time.sleep(1.0); nvtx.mark('child late')"], start_new_session=True)
"""


def test_a_background_process_that_never_records_is_not_waited_for(tmp_path):
    """A `sleep` left by the program was taken for a recording process: the tracer waited its whole
    --wait, warned that it was cut off and left its temporary recording directory behind."""
    script = write(tmp_path, "leaves_sleep.py", LEAVES_A_SLEEP)
    began = time.monotonic()
    try:
        traced = run_tracer(str(tmp_path), [script], "--wait", "60", env=tracer_env(tmp_path))
    finally:
        _kill(tmp_path / "sleep.pid")
    took = time.monotonic() - began
    assert traced.returncode == 0, traced.stderr
    assert took < 20, took  # the sleep's 30 s and the 60 s --wait: neither waited for
    # the recording child is still waited for (its late mark comes 1 s after its first)
    assert sorted(e["name"] for e in traced.events("i")) == ["child early", "child late", "parent"]
    assert "WARNING" not in traced.stderr and "still recording" not in traced.stderr, traced.stderr
    assert os.listdir(tmp_path / "tmp") == []  # the temporary recording is removed


def test_wait_for_recording_tells_recording_processes_from_others(tmp_path):
    """recording_pids() named every process with the recorder's environment: an old `sleep` too."""
    from nvtx_cffi import recorder
    from nvtx_cffi._trace import runner

    record_dir = str(tmp_path / "rec")
    env = dict(os.environ, **recorder.environment(record_dir))
    sleeper = subprocess.Popen(["sleep", "30"], env=env)
    recorder_child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, nvtx_cffi as nvtx; nvtx.mark('m'); print(flush=True); "
                               "sys.stdin.read()"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        recorder_child.stdout.readline()  # it has recorded
        time.sleep(0.3)
        assert runner.recording_pids(record_dir) == [recorder_child.pid]
        began = time.monotonic()
        assert runner.wait_for_recording(record_dir, 0.5, grace=0.1) == [recorder_child.pid]
        assert time.monotonic() - began >= 0.5  # the recording one is waited for, up to the timeout
        recorder_child.stdin.close()
        recorder_child.wait(timeout=30)
        began = time.monotonic()
        assert runner.wait_for_recording(record_dir, 30, grace=0.1) == []  # the sleep is not waited for
        assert time.monotonic() - began < 10
    finally:
        sleeper.kill()
        recorder_child.kill()
        sleeper.wait()
        recorder_child.wait()


# --------------------------------------------------------------------------- output names


def test_an_output_name_at_the_file_system_limit_is_written(tmp_path):
    """A 250-byte -o name failed with ENAMETOOLONG after the program ran: the temporary file beside
    it is named 22 bytes longer; the recording was lost."""
    script = write(tmp_path, "one.py", "import nvtx_cffi as nvtx\nnvtx.push_range('r'); nvtx.pop_range()\n")
    name = "t" * 245 + ".json"
    assert len(name) == 250
    traced = run_tracer(str(tmp_path), [script], env=tracer_env(tmp_path), trace_name=name)
    assert traced.returncode == 0, traced.stderr
    assert [e["name"] for e in traced.events("X")] == ["r"]
    validate_chrome_trace(traced.doc)
    assert sorted(os.listdir(tmp_path)) == sorted(["one.py", name, "tmp"])  # no partial file left
    assert os.listdir(tmp_path / "tmp") == []


def test_an_output_name_too_long_is_refused_before_the_program_runs(tmp_path):
    script = write(tmp_path, "ran.py", "open(__file__ + '.ran', 'w').close()\n")
    name = "t" * 251 + ".json"
    traced = run_tracer(str(tmp_path), [script], env=tracer_env(tmp_path), trace_name=name)
    assert traced.returncode == 2
    assert traced.stderr == (f"{PROG}: error: cannot write trace {str(tmp_path / name)!r}: file name too long "
                             f"(256 bytes; the file system takes 255)\n")
    assert not os.path.exists(script + ".ran")


def test_an_output_that_cannot_be_written_after_the_run_keeps_the_recording(tmp_path):
    """The output's directory went away while the program ran: the recording was removed with the
    error, the program's events lost."""
    script = write(tmp_path, "removes_out.py", """
        import shutil, sys
        import nvtx_cffi as nvtx
        nvtx.push_range("kept"); nvtx.pop_range()
        shutil.rmtree(sys.argv[1])
    """)
    out = tmp_path / "out"
    out.mkdir()
    traced = run_tracer(str(tmp_path), [script, str(out)], env=tracer_env(tmp_path), trace_name="out/t.json")
    assert traced.returncode == 2
    (kept,) = os.listdir(tmp_path / "tmp")
    kept_dir = tmp_path / "tmp" / kept
    (line,) = traced.stderr.splitlines()
    assert line.startswith(f"{PROG}: error: could not write the trace: [Errno 2] No such file or directory: ")
    assert line.endswith(f"; the recording is kept in {kept_dir}")
    from nvtx_cffi import recorder

    assert [(e.kind, e.message) for e in recorder.read(kept_dir).events if e.kind in ("push", "pop")] == \
        [("push", "kept"), ("pop", None)]


# --------------------------------------------------------------------------- record files it cannot read


CORRUPTS_A_COPY = """
    import glob, os, struct
    import nvtx_cffi as nvtx
    nvtx.mark("good")
    record_dir = os.environ["NVTX_CFFI_RECORD_DIR"]
    (mine,) = glob.glob(os.path.join(record_dir, "*.nvtxrec"))
    data = bytearray(open(mine, "rb").read())
    struct.pack_into("<Q", data, 32, {start_ns})  # the header's start_ns
    open(os.path.join(record_dir, "nvtx-4242-0.nvtxrec"), "wb").write(data)
"""


def test_a_record_header_with_start_ns_past_int64_is_one_line(tmp_path):
    """start_ns >= 2**63 in a record header passed the reader and raised OverflowError in
    recorder.blocks(): the tracer died with a traceback and wrote nothing."""
    script = write(tmp_path, "corrupts.py", CORRUPTS_A_COPY.format(start_ns=1 << 63))
    traced = run_tracer(str(tmp_path), [script], env=tracer_env(tmp_path))
    assert traced.returncode == 2
    assert "Traceback" not in traced.stderr
    (kept,) = os.listdir(tmp_path / "tmp")
    bad = tmp_path / "tmp" / kept / "nvtx-4242-0.nvtxrec"
    assert traced.stderr == (
        f"{PROG}: error: cannot read the recording: {bad}: corrupt NVTX recording header (start_ns "
        f"{1 << 63} is not below 2**62, the CLOCK_MONOTONIC time the file was created); "
        f"{traced.trace_path} was not written; the recording is kept in {tmp_path / 'tmp' / kept}\n")
    assert traced.doc is None


@pytest.mark.parametrize("start_ns", [1 << 62, (1 << 64) - 1])
def test_the_reader_names_the_file_and_the_field_of_a_bad_start_ns(tmp_path, start_ns):
    from nvtx_cffi import recorder

    record_dir = tmp_path / "rec"
    env = dict(os.environ, **recorder.environment(record_dir))
    subprocess.run([sys.executable, "-c", textwrap.dedent(CORRUPTS_A_COPY.format(start_ns=start_ns))],
                   env=env, check=True, cwd=tmp_path)
    bad = record_dir / "nvtx-4242-0.nvtxrec"
    message = f"{bad}: corrupt NVTX recording header (start_ns {start_ns} is not below 2**62"
    readers = [recorder.read, lambda d: list(recorder.iter_events(d))]
    if importlib.util.find_spec("numpy") is not None:  # (recorder.blocks is the NumPy reader)
        readers.append(lambda d: list(recorder.blocks(d)))
    for read in readers:
        with pytest.raises(ValueError) as info:
            read(record_dir)
        assert str(info.value).startswith(message)
    with pytest.raises(ValueError, match="start_ns"):
        recorder.read_file(bad)
    os.unlink(bad)
    assert [e.message for e in recorder.read(record_dir).events if e.kind == "mark"] == ["good"]  # the good one reads


def test_the_tracer_json_output_of_a_kept_recording_can_be_made_again(tmp_path):
    """What the 'kept' message promises: the recording converts once the bad file is gone."""
    from nvtx_cffi._trace.convert import RecordingError, convert

    from nvtx_cffi import recorder

    record_dir = tmp_path / "rec"
    env = dict(os.environ, **recorder.environment(record_dir))
    subprocess.run([sys.executable, "-c", textwrap.dedent(CORRUPTS_A_COPY.format(start_ns=1 << 63))],
                   env=env, check=True, cwd=tmp_path)
    out = tmp_path / "t.json"
    with pytest.raises(RecordingError, match="nvtx-4242-0.nvtxrec: corrupt NVTX recording header"):
        convert(str(record_dir), str(out))
    assert not out.exists()  # refused before the output is opened
    os.unlink(record_dir / "nvtx-4242-0.nvtxrec")
    convert(str(record_dir), str(out))
    assert [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "i"] == ["good"]
