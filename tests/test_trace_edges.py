"""The tracer at its edges (issue 11's doubtful behaviours): abbreviated options, a SIGINT sent to
the tracer alone, background processes that outlive the program, interrupted conversions, and a
tracer running inside a traced program. Each asserts the trace written (or not) and the message."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from trace_check import run_tracer


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
