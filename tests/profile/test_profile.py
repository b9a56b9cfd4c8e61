"""nvtx_cffi.Profile and ``python -m nvtx_cffi``: ranges per call, checked with the recorder.

Each scenario runs in a fresh subprocess attached to the recorder (NVTX loads its tool once per
process). Run this file on 3.11 (sys.setprofile engine) and 3.12+ (sys.monitoring engine).

The C engine (c/speedups/profiler*.c) under AddressSanitizer, as checked on 3.9, 3.11, 3.12 and 3.13:

    NVTX_CFFI_CFLAGS=-fsanitize=address python setup.py build_ext --inplace --force
    cd tests && LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
        python -m pytest profile/test_profile.py
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from nvtx_cffi import _accel, recorder

ENGINE = "monitoring" if sys.version_info >= (3, 12) and sys.implementation.name == "cpython" else "setprofile"
BLUE = 0x0000FF


def run(tmp_path: Path, code: str, *, record: bool = True, args: tuple = ("-c",), cwd=None) -> dict:
    """Run ``code`` (or a command) in a subprocess, recorded into tmp_path/rec; last stdout line as JSON."""
    env = dict(os.environ)
    if record:
        env.update(recorder.environment(tmp_path / "rec"))
    else:  # conftest attaches the recorder to the test process; this child gets no tool
        env.pop("NVTX_INJECTION64_PATH", None)
    cmd = [sys.executable, *args] + ([textwrap.dedent(code)] if args == ("-c",) else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=cwd or tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def ranges(tmp_path: Path, domain: str = "nvtx.py") -> dict:
    """Per tid: the push/pop sequence of ``domain`` as ("push", message) / ("pop",)."""
    out = defaultdict(list)
    for e in recorder.read(tmp_path / "rec").events:
        if e.domain == domain and e.kind in ("push", "pop"):
            out[e.tid].append(("push", e.message) if e.kind == "push" else ("pop",))
    return dict(out)


def assert_balanced(seq: list) -> None:
    depth = 0
    for item in seq:
        depth += 1 if item[0] == "push" else -1
        assert depth >= 0, seq
    assert depth == 0, seq


PROGRAM = """
import json, threading, nvtx_cffi
def gen():
    yield 1
    yield 2
def outer(x):
    return len([x]) + sum(gen())
def boom():
    raise KeyError(1)
p = nvtx_cffi.Profile({options})
with p:
    outer(1)
    try:
        boom()
    except KeyError:
        pass
print(json.dumps({{"tid": threading.get_native_id()}}))
"""


@pytest.mark.parametrize("linenos", [True, False])
def test_messages_generators_exceptions(tmp_path, linenos):
    out = run(tmp_path, PROGRAM.format(options=f"linenos={linenos}, annotate_cfuncs=True"))
    name = (lambda line, fn: f"<string>:{line}({fn})") if linenos else (lambda line, fn: fn)
    seq = ranges(tmp_path)[out["tid"]]
    # PyPy reports no c_call for its builtin sum(): there the generator runs directly under outer.
    sum_opens, sum_closes = ([("push", "sum")], [("pop",)]) if platform.python_implementation() == "CPython" else ([], [])
    assert seq == [
        ("push", name(6, "outer")),
        ("push", "len"), ("pop",),
        *sum_opens,
        # a generator's range closes at each yield and reopens on resumption
        ("push", name(3, "gen")), ("pop",), ("push", name(3, "gen")), ("pop",), ("push", name(3, "gen")), ("pop",),
        *sum_closes,
        ("pop",),
        ("push", name(8, "boom")), ("pop",),  # closed by the exception
    ]
    events = [e for e in recorder.read(tmp_path / "rec").events if e.kind == "push"]
    assert {e.color for e in events} == {BLUE}
    assert {e.domain for e in events} == {"nvtx.py"}


def test_without_cfuncs_and_registered_once(tmp_path):
    out = run(tmp_path, PROGRAM.format(options="annotate_cfuncs=False"))
    seq = ranges(tmp_path)[out["tid"]]
    assert [m for m in seq if m[0] == "push"] == [("push", "<string>:6(outer)")] + [("push", "<string>:3(gen)")] * 3 \
        + [("push", "<string>:8(boom)")]
    assert_balanced(seq)
    strings = [e.name for e in recorder.read(tmp_path / "rec").events if e.kind == "string"]
    assert sorted(strings) == sorted(set(strings))  # each message registered once, not per call


def test_coroutines_balanced(tmp_path):
    out = run(tmp_path, """
        import asyncio, json, threading, nvtx_cffi
        async def leaf(i):
            await asyncio.sleep(0)
            return i
        async def main():
            return sum(await asyncio.gather(*(leaf(i) for i in range(3))))
        with nvtx_cffi.Profile(annotate_cfuncs=False, include="<string>"):
            asyncio.run(main())
        print(json.dumps({"tid": threading.get_native_id()}))
    """)
    seq = ranges(tmp_path)[out["tid"]]
    assert_balanced(seq)
    pushes = [m[1] for m in seq if m[0] == "push"]
    assert pushes.count("<string>:6(main)") >= 2  # suspended at the await, resumed later
    assert pushes.count("<string>:3(leaf)") == 6  # three coroutines, each resumed once


def _write_package(root: Path) -> None:
    pkg = root / "mypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text("import json\nfrom .sub import helper\n"
                                 "def work():\n    return helper.assist() + len(json.dumps([1]))\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "helper.py").write_text("def assist():\n    return 1\n")


@pytest.mark.parametrize("options, expected", [
    ("include='mypkg', annotate_cfuncs=False", ["core.py:3(work)", "helper.py:1(assist)"]),
    ("include='mypkg', exclude='mypkg.sub', annotate_cfuncs=False", ["core.py:3(work)"]),
    ("include='mypkg.core', annotate_cfuncs=True", ["core.py:3(work)", "len"]),  # C calls of included code
    ("include='*/sub/*', annotate_cfuncs=False", ["helper.py:1(assist)"]),  # a glob over file paths
    ("include='my*', exclude=['*helper*', 'json'], annotate_cfuncs=False", ["core.py:3(work)"]),
])
def test_include_exclude(tmp_path, options, expected):
    _write_package(tmp_path)
    out = run(tmp_path, f"""
        import json, threading, nvtx_cffi
        from mypkg import core
        with nvtx_cffi.Profile({options}):
            core.work()
        print(json.dumps({{"tid": threading.get_native_id()}}))
    """)
    seq = ranges(tmp_path)[out["tid"]]
    assert [m[1] for m in seq if m[0] == "push"] == expected
    assert_balanced(seq)


def test_default_profiles_the_standard_library(tmp_path):
    _write_package(tmp_path)
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        from mypkg import core
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False):
            core.work()
        print(json.dumps({"tid": threading.get_native_id()}))
    """)
    pushes = [m[1] for m in ranges(tmp_path)[out["tid"]] if m[0] == "push"]
    assert pushes[:2] == ["work", "assist"] and "dumps" in pushes and "encode" in pushes


def test_max_depth(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        def rec(n):
            if n:
                rec(n - 1)
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, max_depth=2):
            rec(5)
            rec(0)
        print(json.dumps({"tid": threading.get_native_id()}))
    """)
    assert ranges(tmp_path)[out["tid"]] == [("push", "rec"), ("push", "rec"), ("pop",), ("pop",),
                                            ("push", "rec"), ("pop",)]


def test_threads_started_after_enable(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        from concurrent.futures import ThreadPoolExecutor
        def task(i):
            return i * 2
        tids = []
        def worker():
            tids.append(threading.get_native_id())
            task(1)
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>"):
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            with ThreadPoolExecutor(1) as pool:
                pool.submit(lambda: tids.append(threading.get_native_id())).result()
                pool.submit(task, 2).result()
        print(json.dumps({"tids": tids}))
    """)
    per_tid = ranges(tmp_path)
    worker, pooled = out["tids"]
    assert per_tid[worker] == [("push", "worker"), ("push", "task"), ("pop",), ("pop",)]
    assert ("push", "task") in per_tid[pooled]
    assert_balanced(per_tid[pooled])


def test_disable_closes_ranges_open_on_this_thread(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        p = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False)
        def inner():
            return p.disable()
        def outer():
            return inner()
        p.enable()
        left = outer()
        print(json.dumps({"tid": threading.get_native_id(), "left": left, "enabled": p.enabled}))
    """)
    assert out["left"] == 0 and out["enabled"] is False
    assert ranges(tmp_path)[out["tid"]] == [("push", "outer"), ("push", "inner"), ("pop",), ("pop",)]


def test_disable_reports_ranges_open_on_other_threads(tmp_path):
    out = run(tmp_path, """
        import json, threading, warnings, nvtx_cffi
        started, release = threading.Event(), threading.Event()
        def blocked():
            started.set()
            release.wait()
            return sum([1])
        p = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>")
        p.enable()
        t = threading.Thread(target=blocked, name="stuck")
        t.start()
        started.wait()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            left = p.disable()
        release.set()
        t.join()
        print(json.dumps({"left": left, "warnings": [str(w.message) for w in caught],
                          "categories": [w.category.__name__ for w in caught], "tid": t.native_id}))
    """)
    assert out["left"] == 1
    assert out["categories"] == ["RuntimeWarning"]
    assert "stuck: 1" in out["warnings"][0]
    seq = ranges(tmp_path)[out["tid"]]
    if ENGINE == "setprofile":
        # the thread's own hook closes its range at its next event after disable()
        assert seq == [("push", "blocked"), ("pop",)]
    else:
        assert seq == [("push", "blocked")]


def test_running_frames_do_not_pop_and_reenable(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        p = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>")
        def leaf():
            pass
        def running():
            p.enable()    # running() and <module> were already running: they opened nothing
            leaf()
        running()
        leaf()
        p.disable()
        p.enable()
        p.enable()        # no-op when enabled
        leaf()
        p.disable()
        p.disable()       # no-op when disabled
        print(json.dumps({"tid": threading.get_native_id()}))
    """)
    assert ranges(tmp_path)[out["tid"]] == [("push", "leaf"), ("pop",)] * 3


@pytest.mark.parametrize("c_engine", [True, False], ids=["c-engine", "python-engine"])
def test_enabling_another_profile_takes_over(tmp_path, c_engine):
    """As nvtx's Profile.enable() (it replaces the hook): the enabled one is disabled first, its
    ranges closed. It used to raise RuntimeError('another nvtx_cffi.Profile is enabled')."""
    out = run(tmp_path, f"import nvtx_cffi._profile as P\nP.C_ENGINE = P.C_ENGINE and {c_engine}\n" + """
import json, sys, threading, warnings, nvtx_cffi
a = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>")
b = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>")
def leaf():
    pass
def outer():
    b.enable()    # a's range of outer() is closed here; outer() was running before b: no range
    leaf()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a.enable()
    outer()
    state = [a.enabled, b.enabled]
    a.disable()   # no longer enabled: does nothing
    leaf()
    b.disable()
    # Not disabled, and its hooks cleared by hand (a test harness, a notebook): enabling another works.
    a.enable()
    sys.setprofile(None)
    threading.setprofile(None)
    b.enable()
    leaf()
    b.disable()
print(json.dumps({"state": state, "after": [a.enabled, b.enabled], "tid": threading.get_native_id(),
                  "warnings": [str(w.message) for w in caught], "profile": sys.getprofile() is None}))
""")
    assert out["state"] == [False, True] and out["after"] == [False, False]
    assert out["warnings"] == [] and out["profile"]
    assert ranges(tmp_path)[out["tid"]] == [("push", "outer"), ("pop",)] + [("push", "leaf"), ("pop",)] * 3


def test_without_a_tool_enable_does_nothing(tmp_path):
    out = run(tmp_path, """
        import json, sys, nvtx_cffi
        p = nvtx_cffi.Profile()
        p.enable()
        hooked = sys.getprofile() is not None
        if hasattr(sys, "monitoring"):
            hooked = hooked or any(sys.monitoring.get_tool(i) for i in range(6))
        print(json.dumps({"enabled": p.enabled, "hooked": hooked, "left": p.disable()}))
    """, record=False)
    assert out == {"enabled": False, "hooked": False, "left": 0}


@pytest.mark.parametrize("kwargs, error, match", [
    ({"max_depth": 0}, ValueError, "max_depth must be a positive int"),
    ({"max_depth": 1.5}, TypeError, "max_depth must be a positive int or None, not float"),
    ({"max_depth": True}, TypeError, "max_depth"),
    ({"include": 3}, TypeError, "include must be a str, an iterable of str or None, not int"),
    ({"exclude": ["ok", 4]}, TypeError, "exclude must contain str patterns, not int"),
    ({"include": [""]}, ValueError, "include must not contain an empty pattern"),
    ({"domain": 1}, TypeError, "domain must be a str, not int"),
    # was accepted, and enable() then raised an OverflowError that did not name it
    ({"max_depth": 2**40}, OverflowError, r"^max_depth 1099511627776 is out of range \(at most 2147483647\)$"),
    ({"max_depth": 10**5000}, OverflowError, r"^max_depth \(a 16610-bit int\) is out of range"),
])
def test_bad_arguments(kwargs, error, match):
    import nvtx_cffi
    with pytest.raises(error, match=match):
        nvtx_cffi.Profile(**kwargs)


def test_max_depth_takes_integer_likes():
    import nvtx_cffi

    class Index:
        def __index__(self):
            return 3

    assert nvtx_cffi.Profile(max_depth=Index()).max_depth == 3


# ------------------------------------------------ other profilers: cProfile, coverage, a user's hook
# Under `python -m cProfile`, disable() restored cProfile's profiler object with
# sys.setprofile (TypeError: 'Profile' object is not callable), left the engine marked running
# (every later enable() raised) and cProfile unhooked.

COEXIST = """\
import json, sys, warnings
import nvtx_cffi
import nvtx_cffi._profile as P
P.C_ENGINE = P.C_ENGINE and {c_engine}
warnings.simplefilter("ignore")
def inside(n):
    return n + 1
def after(n):
    return n * 2
engines = []
for _ in range(2):  # a second enable() must work: nothing left marked running
    with nvtx_cffi.Profile(linenos=False) as p:
        engines.append(p.engine)
        inside(1)
after(2)
print(json.dumps({{"engines": engines, "tid": __import__("threading").get_native_id(),
                  "profile": type(sys.getprofile()).__name__}}))
"""


@pytest.mark.parametrize("c_engine", [True, False], ids=["c-engine", "python-engine"])
def test_profile_under_cprofile(tmp_path, c_engine):
    import pstats

    if sys.implementation.name == "pypy":
        pytest.skip("PyPy: cProfile's hook is invisible to sys.getprofile(), so Profile replaces it (docs/guide.md)")

    script = tmp_path / "coexist.py"
    script.write_text(COEXIST.format(c_engine=c_engine))
    out = run(tmp_path, "", args=("-m", "cProfile", "-o", str(tmp_path / "out.prof"), str(script)))
    pushes = [item for item in ranges(tmp_path)[out["tid"]] if item[0] == "push"]
    assert pushes.count(("push", "inside")) == 2 and ("push", "after") not in pushes
    if ENGINE == "setprofile":  # cProfile still holds sys.setprofile afterwards (3.12+: sys.monitoring)
        assert out["profile"] == "Profile"
    # cProfile saw the calls after disable() (and, where it was not paused, those inside)
    stats = {func[2]: counts[1] for func, counts in pstats.Stats(str(tmp_path / "out.prof")).stats.items()
             if func[0] == str(script)}
    assert stats["after"] == 1
    # sys.monitoring leaves cProfile running; sys.setprofile (3.9-3.11, PyPy) pauses it meanwhile
    assert stats.get("inside", 0) == (2 if ENGINE == "monitoring" else 0)


@pytest.mark.parametrize("c_engine", [True, False], ids=["c-engine", "python-engine"])
def test_profile_chains_a_python_profile_function(tmp_path, c_engine):
    """A profile function set with sys.setprofile keeps getting its events, and is given back."""
    out = run(tmp_path, f"import nvtx_cffi._profile as P\nP.C_ENGINE = P.C_ENGINE and {c_engine}\n" + """
import json, sys, threading, warnings, nvtx_cffi
warnings.simplefilter("ignore")
seen = []
def mine(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "work":
        seen.append(threading.current_thread().name)
def work():
    return 1
sys.setprofile(mine)
with nvtx_cffi.Profile(linenos=False):
    work()
work()
restored = sys.getprofile() is mine
sys.setprofile(None)
print(json.dumps({"seen": seen, "restored": restored, "tid": threading.get_native_id()}))
""")
    assert out["restored"] and out["seen"] == ["MainThread", "MainThread"]
    assert ("push", "work") in ranges(tmp_path)[out["tid"]]


def test_profile_under_coverage(tmp_path):
    coverage = pytest.importorskip("coverage")
    script = tmp_path / "covered.py"
    script.write_text(COEXIST.format(c_engine=True))
    env = {**os.environ, **recorder.environment(tmp_path / "rec"), "COVERAGE_FILE": str(tmp_path / ".coverage")}
    proc = subprocess.run([sys.executable, "-m", "coverage", "run", str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [p for p in ranges(tmp_path)[out["tid"]] if p[0] == "push"].count(("push", "inside")) == 2
    data = coverage.CoverageData(basename=str(tmp_path / ".coverage"))
    data.read()
    lines = set(data.lines(str(script)))
    source = script.read_text().splitlines()
    for needle in ("    return n + 1", "    return n * 2", 'print(json.dumps({"engines"'):
        assert [i + 1 for i, line in enumerate(source) if line.startswith(needle)][0] in lines, needle


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the C engine is CPython's")
def test_engine_not_left_running_after_a_failed_disable(tmp_path):
    """An error while giving the profile hooks back must still stop the engine."""
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        def work():
            return 1
        real = threading.setprofile
        def broken(hook):
            raise RuntimeError("setprofile broke")
        p = nvtx_cffi.Profile(linenos=False, annotate_cfuncs=True)
        p.enable()
        work()
        threading.setprofile = broken
        try:
            p.disable()
            error = None
        except RuntimeError as exc:
            error = str(exc)
        threading.setprofile = real
        with nvtx_cffi.Profile(linenos=False) as again:
            work()
        print(json.dumps({"error": error, "tid": threading.get_native_id(), "enabled": p.enabled}))
    """)
    seq = ranges(tmp_path)[out["tid"]]
    assert seq.count(("push", "work")) == 2 and not out["enabled"]
    if ENGINE == "setprofile":
        assert out["error"] == "setprofile broke"


# --------------------------------------------------------------------------- the CLI

SCRIPT = """\
import sys, threading
def main(argv):
    return helper(len(argv))
def helper(n):
    return n
print("args", sys.argv[1:])
if main(sys.argv) != 3:
    raise SystemExit("wrong argv")
print("tid", threading.get_native_id())
sys.exit(7)
"""


def cli_run(tmp_path, *args, python_flags=(), record=True, cwd=None):
    """``python [python_flags] -m nvtx_cffi args...`` in a subprocess (recorded into tmp_path/rec)."""
    env = dict(os.environ)
    if record:
        env.update(recorder.environment(tmp_path / "rec"))
    else:
        env.pop("NVTX_INJECTION64_PATH", None)
    return subprocess.run([sys.executable, *python_flags, "-m", "nvtx_cffi", *args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=cwd or tmp_path)


def cli(tmp_path, *flags):
    (tmp_path / "script.py").write_text(SCRIPT)
    proc = cli_run(tmp_path, *flags, "script.py", "a", "--b")
    assert proc.returncode == 7, proc.stderr
    assert "args ['a', '--b']" in proc.stdout
    return int(proc.stdout.split("tid ")[1].split()[0])


def test_cli_runs_script_under_profile(tmp_path):
    tid = cli(tmp_path)
    seq = ranges(tmp_path)[tid]
    pushes = [m[1] for m in seq if m[0] == "push"]
    # nvtx's defaults: linenos on, C functions off; runpy's own frames are left out
    assert pushes[0] == "script.py:1(<module>)"
    assert "script.py:2(main)" in pushes and "script.py:4(helper)" in pushes
    assert "len" not in pushes and not any("runpy" in p or "_profile_cli" in p for p in pushes)
    assert_balanced(seq)


def test_cli_flags(tmp_path):
    tid = cli(tmp_path, "--no-linenos", "--annotate-cfuncs", "--include", "__main__", "--max-depth", "1")
    assert ranges(tmp_path)[tid] == [("push", "<module>"), ("pop",)]  # depth 1: only the outermost call


def test_cli_errors(tmp_path):
    proc = cli_run(tmp_path, "--max-depth", "0", "x.py", record=False)
    assert proc.returncode == 2 and "--max-depth: must be at least 1" in proc.stderr
    proc = cli_run(tmp_path, str(tmp_path / "missing.py"), record=False)
    assert proc.returncode == 2 and "can't open file" in proc.stderr and "missing.py" in proc.stderr
    # no script (only options): say what is missing, not argparse's "target, args"
    for args in ([], ["--no-linenos"], ["--"]):
        proc = cli_run(tmp_path, *args, record=False)
        assert proc.returncode == 2, args
        assert "give a script to run (script.py [args...]) or a module (-m module [args...])" in proc.stderr
        assert "target" not in proc.stderr
    proc = cli_run(tmp_path, "-m", record=False)
    assert proc.returncode == 2 and "argument -m: expected one argument" in proc.stderr


THREADS_AND_ATEXIT = """\
import atexit, sys, threading, time
def leaf():
    pass
def late():
    time.sleep(0.3)
    leaf()
    print("thread", threading.get_native_id(), sys.argv, flush=True)
def at_exit():
    leaf()
    print("atexit", threading.get_native_id(), sys.argv, flush=True)
atexit.register(at_exit)
threading.Thread(target=late).start()
sys.argv.append("changed")
sys.exit(3)
"""


def test_cli_profiles_threads_and_atexit_handlers_after_the_script(tmp_path):
    """Like python script.py: a thread still running and the atexit handlers see the script's
    sys.argv and are annotated; no warning about ranges of other threads (-W error made that
    exit 1 instead of the script's 3)."""
    (tmp_path / "late.py").write_text(THREADS_AND_ATEXIT)
    proc = cli_run(tmp_path, "--no-linenos", "late.py", "x", python_flags=("-W", "error"))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == ""
    argv = ["late.py", "x", "changed"]
    (thread_line,) = [line.split(" ", 2) for line in proc.stdout.splitlines() if line.startswith("thread")]
    (atexit_line,) = [line.split(" ", 2) for line in proc.stdout.splitlines() if line.startswith("atexit")]
    assert thread_line[2] == atexit_line[2] == repr(argv)
    got = ranges(tmp_path)
    thread, main = got[int(thread_line[1])], got[int(atexit_line[1])]
    assert [x for x in thread if x in (("push", "late"), ("push", "leaf"))] == [("push", "late"), ("push", "leaf")]
    if sys.implementation.name != "pypy":  # PyPy turns profiling off before the atexit handlers
        assert [x for x in main if x[0] == "push" and x[1] in ("at_exit", "leaf")] == \
            [("push", "at_exit"), ("push", "leaf")]
    assert_balanced(thread)
    assert_balanced(main)


STATE = """\
import atexit, json, sys
def state(when):
    # CPython deletes __file__ of __main__ when the script ends (not at sys.exit()), PyPy does not
    print(json.dumps([when, sys.argv, sys.path[:2], globals().get("__file__"), __package__, __spec__ is None,
                      type(__loader__).__name__, __name__, sys.modules["__main__"].__dict__ is globals()]))
atexit.register(state, "atexit")
state("run")
"""


def _python_vs_cli(tmp_path, target_args, python_flags=(), cli_flags=()):
    """stdout of ``python [flags] target...`` and of ``python [flags] -m nvtx_cffi target...``."""
    env = dict(os.environ)
    env.pop("NVTX_INJECTION64_PATH", None)
    run = lambda *args: subprocess.run([sys.executable, *python_flags, *args], env=env,  # noqa: E731
                                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    plain = run(*target_args)
    profiled = run("-m", "nvtx_cffi", *cli_flags, *target_args)
    return ((plain.returncode, plain.stdout, plain.stderr),
            (profiled.returncode, profiled.stdout, profiled.stderr))


def _state_tree(tmp_path):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "sub" / "s.py").write_text(STATE)
    (tmp_path / "link.py").symlink_to(tmp_path / "real" / "sub" / "s.py")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text(STATE)
    import zipfile
    with zipfile.ZipFile(tmp_path / "app.zip", "w") as z:
        z.writestr("__main__.py", STATE)
    (tmp_path / "mod.py").write_text(STATE)


@pytest.mark.parametrize("target", ["real/sub/s.py", "link.py", "real/../real/sub/s.py", "app", "./app/",
                                    "app.zip", "-m mod"])
@pytest.mark.parametrize("safe_path", [False, True], ids=["", "-P"])
def test_cli_runs_the_target_as_python_does(tmp_path, target, safe_path):
    """sys.argv, sys.path[0] (a script's real directory; a directory or zip file itself; none for a
    script with -P), __file__ and the __main__ module are python's, while the script runs and at
    exit (nothing is restored afterwards)."""
    if safe_path and sys.version_info < (3, 11):
        pytest.skip("-P is new in 3.11")
    _state_tree(tmp_path)
    plain, profiled = _python_vs_cli(tmp_path, [*target.split(), "x"], python_flags=("-P",) if safe_path else ())
    if safe_path and target == "-m mod":  # no current directory on sys.path: neither finds it
        assert plain[0] == 1 and "No module named mod" in plain[2]
    else:
        assert plain[0] == 0 and len(plain[1].splitlines()) == 2 and plain[2] == ""
    assert profiled == plain


def test_cli_joined_module_option(tmp_path):
    _state_tree(tmp_path)
    plain, profiled = _python_vs_cli(tmp_path, ["-mmod", "x"])
    assert profiled == plain and plain[0] == 0 and "mod.py" in plain[1]
    (tmp_path / "e.json").write_text('{"a": 1}')
    proc = cli_run(tmp_path, "-mjson.tool", "e.json", record=False)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"a": 1}, proc.stderr


PATH_EDITS = """\
import atexit, sys
def at_exit():
    print("atexit", sys.path[:1])
atexit.register(at_exit)
if sys.argv[1] == "clear":
    sys.path = []
else:
    sys.path.insert(0, "/inserted")
print("done")
"""


@pytest.mark.parametrize("how", ["clear", "insert"])
def test_cli_leaves_sys_path_as_the_script_left_it(tmp_path, how):
    """The old restore of sys.path[0] raised IndexError after sys.path = [] and overwrote an entry
    the script had inserted."""
    (tmp_path / "edit.py").write_text(PATH_EDITS)
    proc = cli_run(tmp_path, "edit.py", how, record=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["done", f"atexit {[] if how == 'clear' else ['/inserted']}"]
    assert proc.stderr == ""


ARGV = "import sys\nprint(sys.argv[1:])\n"


@pytest.mark.parametrize("args,argv,linenos", [
    # nvtx (optparse): unique abbreviations of the long options
    (["--no", "s.py"], [], False),
    (["--lin", "s.py"], [], True),
    (["--ann", "--no-l", "s.py"], [], False),
    # its options after the script are still options; the first "--" after it is dropped
    (["s.py", "--no-linenos", "x"], ["x"], False),
    (["s.py", "a", "--", "b", "--no-linenos", "--"], ["a", "b", "--no-linenos", "--"], True),
    (["s.py", "--include=__main__", "a", "--max", "5"], ["a"], True),
    # what nvtx refuses goes to the script (nvtx-cffi's extension), as python script.py gives it
    (["s.py", "--epochs", "3", "-b", "-m", "x"], ["--epochs", "3", "-b", "-m", "x"], True),
    (["--", "s.py", "-"], ["-"], True),
])
def test_cli_command_line_as_nvtx_parses_it(tmp_path, args, argv, linenos):
    (tmp_path / "s.py").write_text(ARGV)
    proc = cli_run(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [repr(argv)]
    pushes = [m for seq in ranges(tmp_path).values() for m in seq if m[0] == "push"]
    assert pushes[0] == ("push", "s.py:1(<module>)" if linenos else "<module>")


def test_cli_help_after_the_script_is_ours_as_with_nvtx(tmp_path):
    (tmp_path / "s.py").write_text(ARGV)
    proc = cli_run(tmp_path, "s.py", "--he", record=False)
    assert proc.returncode == 0 and "usage: python -m nvtx_cffi" in proc.stdout and "[]" not in proc.stdout


# --------------------------------------------------------------------------- the C engine (CPython)

# The C engine lives in the optional accelerator (CPython with a GIL, not NVTX_CFFI_PURE_PYTHON=1).
cpython_only = pytest.mark.skipif(_accel.speedups is None,
                                  reason="the C engine is the accelerator's (CPython, nvtx_cffi._speedups)")


@cpython_only
def test_c_engine_is_in_use(tmp_path):
    out = run(tmp_path, """
        import json, sys, nvtx_cffi
        from nvtx_cffi import _profile
        with nvtx_cffi.Profile() as p:
            if hasattr(sys, "monitoring"):
                tool = p._engine.tool
                event = sys.monitoring.events.PY_START
                hook = sys.monitoring.register_callback(tool, event, None)
                sys.monitoring.register_callback(tool, event, hook)
            else:
                hook = sys.getprofile()  # a C profile function shows only its argument
            engine = p.engine
        with nvtx_cffi.Profile(annotate_cfuncs=False) as p:
            other = p.engine
        print(json.dumps({"engine": _profile.ENGINE, "hook": type(hook).__name__, "used": engine,
                          "without_cfuncs": other}))
    """)
    assert out["engine"] == out["used"] == ("c-monitoring" if ENGINE == "monitoring" else "c-setprofile")
    # No frame-evaluation hook (it needed CPython's internals): 3.11 uses the profile function either way.
    assert out["without_cfuncs"] == out["engine"]
    assert out["hook"] == ("builtin_function_or_method" if ENGINE == "monitoring" else "ProfileFunction")


SCENARIOS = PROGRAM + """
def rec(n):
    if n:
        rec(n - 1)
with nvtx_cffi.Profile(linenos=False, max_depth=3):
    rec(5)
    sorted([3, 1, 2], key=abs)
    abs(-2)
def g2():
    try:
        yield 1
    except ValueError:
        yield 2
def thrower():
    fresh = g2()
    try:
        fresh.throw(KeyError("x"))  # thrown into a generator that never ran
    except KeyError:
        pass
    started = g2()
    next(started)
    assert started.throw(ValueError()) == 2
with nvtx_cffi.Profile({options}):
    thrower()
"""


@cpython_only
@pytest.mark.parametrize("cfuncs", [True, False])
def test_c_and_python_engines_agree(tmp_path, cfuncs):
    """The C engine emits exactly what the Python engine (PyPy's) emits."""
    seqs = []
    for c_engine in (True, False):
        code = f"import nvtx_cffi._profile as P\nP.C_ENGINE = {c_engine}\n" + \
            SCENARIOS.format(options=f"annotate_cfuncs={cfuncs}")
        (tmp_path / str(c_engine)).mkdir()
        out = run(tmp_path / str(c_engine), code)
        seqs.append(ranges(tmp_path / str(c_engine))[out["tid"]])
    assert seqs[0] == seqs[1]
    assert ("push", "<string>:8(outer)") in seqs[0] and (("push", "len") in seqs[0]) == cfuncs
    assert seqs[0].count(("push", "rec")) == 3  # max_depth=3
    assert_balanced(seqs[0])


@cpython_only
def test_c_cache_is_bounded_and_released(tmp_path):
    out = run(tmp_path, """
        import json, sys, threading, types, nvtx_cffi
        from nvtx_cffi._accel import speedups
        def template():
            return 1
        codes = [template.__code__.replace(co_name=f"f{i}") for i in range(300)]
        functions = [types.FunctionType(code, {}) for code in codes]
        before = [sys.getrefcount(code) for code in codes]
        speedups.prof_set_cache_limit(50)
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>"):
            for f in functions:
                f()
            for f in functions[:10] + functions[-10:]:  # cached and uncached codes, called again
                f()
            size = speedups.prof_cache_size()
        speedups.prof_set_cache_limit(-1)
        after = [sys.getrefcount(code) for code in codes]
        print(json.dumps({"tid": threading.get_native_id(), "size": size,
                          "after_size": speedups.prof_cache_size(), "leaked": after != before}))
    """)
    assert out["size"] == 50 and out["after_size"] == 0 and out["leaked"] is False
    seq = ranges(tmp_path)[out["tid"]]
    names = [f"f{i}" for i in range(300)] + [f"f{i}" for i in list(range(10)) + list(range(290, 300))]
    assert seq == [item for name in names for item in (("push", name), ("pop",))]


@cpython_only
def test_c_engine_survives_errors_in_its_python_side(tmp_path):
    """A failing slow path is reported (unraisable) and the program runs on, ranges balanced."""
    proc_out = run(tmp_path, """
        import json, sys, threading, nvtx_cffi
        from nvtx_cffi import _profile
        seen = []
        sys.unraisablehook = lambda u: seen.append(type(u.exc_value).__name__)
        def bad(self, code):
            if code.co_name == "broken":
                raise ZeroDivisionError
            return original(self, code)
        original = _profile._CEngine.c_classify
        _profile._CEngine.c_classify = bad
        def broken():
            return 1
        def fine():
            return broken() + 1
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>"):
            result = fine()
        print(json.dumps({"tid": threading.get_native_id(), "result": result, "seen": seen}))
    """)
    assert proc_out["result"] == 2 and proc_out["seen"] == ["ZeroDivisionError"]
    assert ranges(tmp_path)[proc_out["tid"]] == [("push", "fine"), ("pop",)]


def test_threads_already_running_at_enable(tmp_path):
    """sys.monitoring and the frame hook see threads that were running before enable(); a
    profile function (sys.setprofile) cannot be installed on them."""
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        go, done = threading.Event(), threading.Event()
        def task():
            return 1
        def early():
            go.wait()
            task()
        t = threading.Thread(target=early)
        t.start()
        with nvtx_cffi.Profile(linenos=False, annotate_cfuncs=False, include="<string>") as p:
            go.set()
            t.join()
            engine = p.engine
        print(json.dumps({"tid": t.native_id, "engine": engine}))
    """)
    seq = ranges(tmp_path).get(out["tid"], [])
    if out["engine"] in ("c-monitoring", "monitoring"):
        assert seq == [("push", "task"), ("pop",)]
    else:
        assert out["engine"] in ("c-setprofile", "setprofile") and seq == []


# ------------------------------------------------ enabled inside a coroutine/generator, lost hooks,
# disable() from another thread, sys.getprofile() save/restore (sys.setprofile engines)

PY_ENGINES = pytest.mark.parametrize("engine", ["c", "python", "python-chained"])


def _engine_prelude(engine: str) -> str:
    """Select the engine: the accelerator's, the Python one, or the Python one chaining a user's
    profile function (what 3.11 with the accelerator picks when sys.setprofile holds one)."""
    code = (f"import sys\nimport nvtx_cffi._profile as P\nP.C_ENGINE = P.C_ENGINE and {engine == 'c'}\n"
            f"ENGINE_NAME = {engine!r}\n")
    if engine == "python-chained":
        code += "def _mine(frame, event, arg):\n    pass\nsys.setprofile(_mine)\n"
    return code


@PY_ENGINES
def test_enabled_inside_a_coroutine_or_generator(tmp_path, engine):
    """The coroutine (generator) that runs enable() was running before it, and each resumption
    opens a range: the Python setprofile engine used to skip the close of every later suspension
    (the frame was in its snapshot of running frames), leaving one range open per resumption."""
    out = run(tmp_path, _engine_prelude(engine) + """
import asyncio, json, threading
from nvtx_cffi import Profile
async def main():
    with Profile(linenos=False, annotate_cfuncs=False, include="<string>"):
        for _ in range(3):
            await asyncio.sleep(0)
def gen():
    p = Profile(linenos=False, annotate_cfuncs=False, include="<string>")
    p.enable()
    yield 1
    yield 2
    yield 3
    p.disable()
asyncio.run(main())
values = list(gen())
print(json.dumps({"tid": threading.get_native_id(), "values": values}))
""")
    assert out["values"] == [1, 2, 3]
    # each resumption opens a range and each suspension (or disable()) closes it
    assert ranges(tmp_path)[out["tid"]] == [("push", "main"), ("pop",)] * 3 + [("push", "gen"), ("pop",)] * 3


@PY_ENGINES
def test_profile_function_removed_by_an_exception(tmp_path, engine):
    """CPython removes a profile function that raises (RecursionError at its call, KeyboardInterrupt
    inside it, here from a chained function): disable() used to leave open every range opened before
    (997 pushes, 0 pops). It closes them now, and warns that calls made meanwhile were missed."""
    out = run(tmp_path, _engine_prelude(engine) + """
import json, threading, warnings
from nvtx_cffi import Profile
def r(n):
    return r(n + 1)
def chained(n):
    if n:
        return chained(n - 1)
    raise_in_hook[0] = True
    leaf()      # the chained profile function raises KeyboardInterrupt at this call
def leaf():
    pass
def after():
    pass
raise_in_hook = [False]
if sys.getprofile() is not None:
    def _raising(frame, event, arg):
        if raise_in_hook[0] and event == "call" and frame.f_code.co_name == "leaf":
            raise_in_hook[0] = False
            raise KeyboardInterrupt
    sys.setprofile(_raising)
p = Profile(linenos=False, annotate_cfuncs=False, include="<string>")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p.enable()
    hooked = sys.getprofile() is not None or P.MONITORING
    if ENGINE_NAME == "python-chained":
        try:
            chained(2)
        except KeyboardInterrupt:
            pass
    else:
        try:
            r(0)
        except RecursionError:
            pass
    after()
    state = [p.enabled, sys.getprofile() is None]
    p.disable()
print(json.dumps({"tid": threading.get_native_id(), "warnings": [str(w.message) for w in caught],
                  "state": state, "c_engine": P.C_ENGINE, "hooked": hooked}))
""")
    seq = ranges(tmp_path)[out["tid"]]
    assert out["hooked"]
    if out["c_engine"] or ENGINE == "monitoring":
        # C callbacks do not raise, and sys.monitoring keeps a callback that raised: nothing is lost
        assert out["warnings"] == [] and out["state"] == [True, ENGINE == "monitoring"]
        assert seq[-2:] == [("push", "after"), ("pop",)]
        assert_balanced(seq)
        return
    if engine == "python-chained":
        # chained(2), chained(1), chained(0) were open; leaf's call never reached the engine
        count = 3
        assert seq == [("push", "chained")] * 3 + [("pop",)] * 3
    else:
        count = len(seq) // 2
        assert count > 100 and seq == [("push", "r")] * count + [("pop",)] * count
    assert out["state"] == [True, True]  # still enabled, but the thread lost its hook
    assert out["warnings"] == [
        f"nvtx_cffi.Profile: the profile function of this thread was removed (an exception inside it, "
        f"or sys.setprofile()) while {count} ranges were open; they are closed now, and calls made "
        "meanwhile were not annotated"]


@pytest.mark.parametrize("worker_profile", [None, "mine"])
@pytest.mark.parametrize("c_engine", [True, False], ids=["c-engine", "python-engine"])
def test_disable_from_another_thread_keeps_each_threads_profiler(tmp_path, c_engine, worker_profile):
    """disable() on the main thread of a Profile enabled on a worker used to restore the worker's
    previous profile function on the main thread, switching off the main thread's cProfile."""
    if sys.implementation.name == "pypy":
        pytest.skip("PyPy: cProfile's hook is invisible to sys.getprofile()")
    out = run(tmp_path, f"""
import nvtx_cffi._profile as P
P.C_ENGINE = P.C_ENGINE and {c_engine}
WORKER_PROFILE = {worker_profile!r}
""" + """
import cProfile, json, pstats, sys, threading, warnings
from nvtx_cffi import Profile
def leaf():
    pass
def mine(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "leaf":
        seen.append("leaf")
seen = []
cp = cProfile.Profile()
cp.enable()
p = Profile(linenos=False, annotate_cfuncs=False, include="<string>")
started, release = threading.Event(), threading.Event()
result = {}
def worker():
    if WORKER_PROFILE:
        sys.setprofile(mine)
    p.enable()
    result["engine"] = p.engine
    started.set()
    release.wait()
    leaf()      # the worker's first event after disable() gives it back its own profile function
    result["worker_profile"] = sys.getprofile() is (mine if WORKER_PROFILE else None)
    leaf()
    sys.setprofile(None)
t = threading.Thread(target=worker)
t.start()
started.wait()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    left = p.disable()
release.set()
t.join()
leaf()
leaf()
main_profile = sys.getprofile() is cp
cp.disable()
calls = [v[0] for k, v in pstats.Stats(cp).stats.items() if k[2] == "leaf"]
print(json.dumps({"main_profile": main_profile, "calls": calls, "left": left, "seen": seen,
                  "warnings": [str(w.message) for w in caught], "tid": t.native_id, **result}))
""")
    assert out["main_profile"] if ENGINE == "setprofile" else True
    # the main thread's cProfile saw its calls after disable() (3.12+: the worker's too)
    assert out["calls"] == ([2] if ENGINE == "setprofile" else [4])
    assert out["worker_profile"] is True
    assert out["seen"] == (["leaf", "leaf"] if worker_profile else [])
    # the worker's range of worker() (running since it enabled: none) and wait's frames are not ranges
    assert out["left"] == 0 and out["warnings"] == []
    assert ranges(tmp_path).get(out["tid"], []) == []


@PY_ENGINES
def test_getprofile_save_and_restore(tmp_path, engine):
    """``old = sys.getprofile(); sys.setprofile(f); ...; sys.setprofile(old)`` keeps Profile running:
    the C engine's sys.getprofile() used to be an int (TypeError: 'int' object is not callable)."""
    out = run(tmp_path, _engine_prelude(engine) + """
import json, threading
from nvtx_cffi import Profile
def leaf():
    pass
def other(frame, event, arg):
    pass
p = Profile(linenos=False, annotate_cfuncs=False, include="<string>")
p.enable()
old = sys.getprofile()
try:  # the C engine's profile function by keyword: a TypeError (it was a SystemError)
    if type(old).__name__ == "ProfileFunction":
        old(frame=sys._getframe(), event="c_call", arg=len)
    keywords = "accepted"
except TypeError as e:
    keywords = str(e)
sys.setprofile(other)
leaf()              # seen by other only
sys.setprofile(old)
leaf()
p.disable()
after = sys.getprofile()
sys.setprofile(old) # stale now: removes itself at the next event, records nothing
leaf()
stale = sys.getprofile()
sys.setprofile(None)
print(json.dumps({"tid": threading.get_native_id(), "callable": old is None or callable(old),
                  "keywords": keywords if type(old).__name__ == "ProfileFunction" else "n/a",
                  "after": after is (_mine if ENGINE_NAME == "python-chained" else None),
                  "stale": stale is (_mine if P.MONITORING and ENGINE_NAME == "python-chained" else None)}))
""")
    assert out == {"tid": out["tid"], "callable": True, "after": True, "stale": True,
                   "keywords": out["keywords"] if out["keywords"] == "n/a"
                   else "nvtx_cffi profile function takes no keyword arguments"}
    # sys.monitoring (3.12+) is not affected by sys.setprofile: it sees the first leaf() too
    assert ranges(tmp_path)[out["tid"]] == [("push", "leaf"), ("pop",)] * (1 if ENGINE == "setprofile" else 2)


@pytest.mark.skipif(ENGINE != "setprofile", reason="sys.monitoring engines set no profile function")
@PY_ENGINES
def test_the_profile_function_called_directly_records_like_a_call(tmp_path, engine):
    """The saved sys.getprofile() called by user code (as a profile function may be called): it runs
    profiled itself, so its first sight of a code met the calls it makes on this thread (that hung
    on a non-reentrant lock); a "call"/"return" pair records one range."""
    out = run(tmp_path, _engine_prelude(engine) + """
import json, threading
from nvtx_cffi import Profile
def leaf():
    pass
p = Profile(linenos=False, annotate_cfuncs=False, include="<string>")
p.enable()
hook = sys.getprofile()
frame = sys._getframe()
hook(frame, "call", None)
hook(frame, "return", None)
leaf()
p.disable()
print(json.dumps({"tid": threading.get_native_id()}))
""")
    got = ranges(tmp_path)[out["tid"]]
    assert got[-2:] == [("push", "leaf"), ("pop",)] and ("push", "<module>") in got
    assert_balanced(got)
