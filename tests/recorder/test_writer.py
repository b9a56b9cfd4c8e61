"""nvtx_cffi.writer (nvtx 0.2.16's NVTXW API): events written with explicit timestamps through
nvtx-cffi's own backend become a timeline; every interface call reaches a backend with the
arguments nvtx 0.2.16 gives (tests/c/writer_log_backend.c logs them); bad input raises what nvtx's
does, never a crash."""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import nvtx_cffi
from nvtx_cffi import writer
from nvtx_cffi._native import lib
from nvtx_cffi.writer import convert

from conftest import build_script, run_python, setup_script
from support.cbuild import c_library
from support.paths import C_HELPERS, SOURCE

pytestmark = pytest.mark.skipif(not lib.nvtxcffi_w_available() or not os.path.isfile(writer.backend_path()),
                                reason="nvtx-cffi built without the NVTXW headers (nvidia-nvtx 13.0.x)")
HAVE_NVTX = importlib.util.find_spec("nvtx") is not None and platform.python_implementation() == "CPython"
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


@pytest.fixture(scope="session")
def log_backend(tmp_path_factory) -> str:
    """tests/c/writer_log_backend.c: logs every NVTXW call to $NVTXW_TEST_LOG."""
    return c_library(tmp_path_factory.mktemp("writer_log_backend"), "writer_log_backend", [C_HELPERS / "writer_log_backend.c"])


@pytest.fixture(scope="session")
def no_entry_point(tmp_path_factory) -> str:
    """A shared library without nvtxwGetInterface."""
    src = tmp_path_factory.mktemp("noentry") / "noentry.c"
    src.write_text("__attribute__((visibility(\"default\"))) int not_a_backend(void) { return 1; }\n")
    return c_library(src.parent, "noentry", [src])


def _trace(record_dir: Path) -> dict:
    out = record_dir / "trace.json"
    convert(str(record_dir), str(out))
    return json.loads(out.read_text())


# --------------------------------------------------------------------------- (a) nvtx-cffi's backend


def test_backend_path_is_an_nvtxw_library():
    path = writer.backend_path()
    assert os.path.isfile(path)
    backend = writer.load_backend(path)
    assert isinstance(backend, writer.Backend)
    backend.close()
    backend.close()  # a second close does nothing


def test_events_and_counters_with_explicit_timestamps_become_a_timeline(tmp_path):
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("run", backend=backend, config=f"dir={tmp_path}") as session:
        io = session.get_domain("io")
        nbytes = io.get_counter("bytes read", int)
        temp = io.get_counter("temperature", float)
        with session.create_stream("worker 0", domain=io) as stream:
            stream.write_pushpop(1_000, 5_000, message="read", color=0xFF00FF00, category="disk")
            stream.write_mark(2_000, message="checkpoint")
            stream.write_startend(1_500, 2_500, message="async")
            stream.write_push(6_000, message=io.get_registered_string("registered"))
            stream.write_pop(7_000)
            stream.write_start(8_000, 42, message="started", category=7)
            stream.write_end(9_500, 42)
            stream.write_counter_sample(nbytes, 3_000, 4096)
            stream.write_counter_sample(temp, 3_500, 2.5)
            stream.write_counter_batch(nbytes, [10, 20], timestamps=[4_000, 4_500])
        with session.create_stream(b"worker 1") as other:  # the default domain
            other.write_pushpop(2_000, 2_250, message="other")
    files = [f for f in os.listdir(tmp_path) if f.endswith(".nvtxrec")]
    assert len(files) == 1

    doc = _trace(tmp_path)
    assert doc["otherData"]["t0_ns"] == 1_000  # the earliest event
    ev = doc["traceEvents"]
    threads = {e["args"]["name"]: e["tid"] for e in ev if e.get("name") == "thread_name"}
    assert set(threads) == {"worker 0", "worker 1"}
    w0, w1 = threads["worker 0"], threads["worker 1"]
    spans = {(e["name"], e["tid"]): e for e in ev if e.get("ph") == "X"}
    read = spans[("read", w0)]
    assert (read["ts"], read["dur"]) == (0.0, 4.0)  # microseconds from t0
    assert read["args"] == {"domain": "io", "category": "disk", "color": "#00ff00"}
    assert (spans[("registered", w0)]["ts"], spans[("registered", w0)]["dur"]) == (5.0, 1.0)
    other = spans[("other", w1)]
    assert (other["ts"], other["dur"]) == (1.0, 0.25)
    assert "domain" not in other["args"]
    marks = [(e["name"], e["ts"]) for e in ev if e.get("ph") == "i"]
    assert marks == [("checkpoint", 1.0)]
    asyncs = sorted((e["name"], e["ph"], e["ts"]) for e in ev if e.get("ph") in ("b", "e"))
    assert asyncs == [("async", "b", 0.5), ("async", "e", 1.5), ("started", "b", 7.0), ("started", "e", 8.5)]
    started = [e for e in ev if e.get("name") == "started" and e["ph"] == "b"][0]
    assert started["id2"] == {"local": "0x2a"} and started["args"]["category"] == "7"  # an unnamed category: its number
    counters = sorted((e["name"], e["ts"], e["args"]["value"]) for e in ev if e.get("ph") == "C")
    assert counters == [("io: bytes read", 2.0, 4096), ("io: bytes read", 3.0, 10), ("io: bytes read", 3.5, 20),
                        ("io: temperature", 2.5, 2.5)]  # a counter track is "domain: name"


def test_schema_events_and_batches_become_ranges_and_marks(tmp_path):
    np = pytest.importorskip("numpy")
    begin = nvtx_cffi.numpy_dtype(np.int64, entry_kind=nvtx_cffi.EntryKind.RANGE_BEGIN)
    end = nvtx_cffi.numpy_dtype(np.int64, entry_kind=nvtx_cffi.EntryKind.RANGE_END)
    at = nvtx_cffi.numpy_dtype(np.int64, entry_kind=nvtx_cffi.EntryKind.MARK)
    color = nvtx_cffi.numpy_dtype(np.uint32, entry_type=nvtx_cffi.PayloadEntryType.COLOR_ARGB)
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("schemas", backend=backend, config=f"dir={tmp_path}") as session:
        domain = session.get_domain("batch")
        ranges = domain.get_schema([("b", begin), ("e", end), ("c", color)], kind=nvtx_cffi.EventKind.RANGE_PUSHPOP)
        marks = domain.get_schema([("t", at)], kind=nvtx_cffi.EventKind.MARK)
        assert domain.get_schema([("t", at)], kind=nvtx_cffi.EventKind.MARK) is marks  # cached
        with session.create_stream("s", domain=domain) as stream:
            stream.write_event_batch(ranges, [(100, 400, 0xFFFF0000), (500, 900, 0)])
            stream.write_event(marks, (250,))
    ev = _trace(tmp_path)["traceEvents"]
    spans = sorted((e["ts"], e["dur"], e["args"].get("color")) for e in ev if e.get("ph") == "X")
    assert spans == [(0.0, 0.3, "#ff0000"), (0.4, 0.4, None)]
    assert [e["ts"] for e in ev if e.get("ph") == "i"] == [0.15]


def test_the_backend_refuses_timestamps_it_cannot_record(tmp_path):
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("neg", backend=backend, config=f"dir={tmp_path}") as session:
        with session.create_stream("s") as stream:
            with pytest.raises(writer.WriterError) as got:
                stream.write_mark(-1, message="before zero")
            assert got.value.result_code == 2 and got.value.operation == "nvtxwMarkWriteUtf8"
            stream.write_mark(1, message="kept")
    ev = _trace(tmp_path)["traceEvents"]
    assert [e["name"] for e in ev if e.get("ph") == "i"] == ["kept"]


def test_without_a_dir_key_the_directory_is_the_environment_s_then_the_session_name(tmp_path):
    code = """
        import os
        from nvtx_cffi import writer
        backend = writer.load_backend(writer.backend_path())
        for name in ("first", "second"):
            with writer.Session(name, backend=backend) as session:
                with session.create_stream("s") as stream:
                    stream.write_mark(5, message="m")
            os.environ["NVTX_CFFI_RECORD_DIR"] = "from-env"
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "NVTX_CFFI_RECORD_DIR"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["first", "from-env"]
    for folder in ("first", "from-env"):
        assert [f.endswith(".nvtxrec") for f in os.listdir(tmp_path / folder)] == [True]


# --------------------------------------------------------------------------- (b) the calls a backend sees

SCRIPT = r"""
import os, sys
if sys.argv[1] == "nvtx":
    import nvtx
    from nvtx import writer
else:
    import nvtx_cffi as nvtx
    from nvtx_cffi import writer
backend = writer.load_backend(sys.argv[2])
with writer.Session("sess", backend=backend, config="key=value") as session:
    io = session.get_domain("io")
    assert session.get_domain(b"io") is io
    scope = io.get_scope("node/0")
    count = io.get_counter("count", int, description="items", scope=scope)
    level = io.get_counter("level", float)
    with session.create_stream("st", domain=io, scope=nvtx.PredefinedScope.ROOT,
                               ordering=writer.StreamOrdering.STRICT, skid=writer.StreamSkid.TIME_NS,
                               skid_amount=5) as stream:
        stream.write_mark(100, message="hello", color=0xFF112233, category="cat")
        stream.write_pushpop(200, 300, message=b"range", category=9)
        stream.write_startend(400, 500)
        stream.write_push(600, message=io.get_registered_string("reg"))
        stream.write_pop(700)
        stream.write_start(800, 5, message="s")
        stream.write_end(900, 5)
        stream.write_counter_sample(count, 1000, -3)
        stream.write_counter_sample(level, 1100, 0.5)
        stream.write_counter_sample_no_value(count, 1200, nvtx.CounterNoValueReason.UNAVAILABLE)
        stream.write_counter_batch(count, [1, 2], timestamps=[1300, 1400])
backend.close()
"""


def _log_of(tmp_path, which: str, backend: str) -> list:
    log = tmp_path / f"{which}.log"
    run_python(SCRIPT.replace("sys.argv[1]", repr(which)).replace("sys.argv[2]", repr(backend)),
               env={"NVTXW_TEST_LOG": str(log)})
    return log.read_text().splitlines()


def test_a_backend_sees_the_calls_and_arguments_of_the_script(tmp_path, log_backend):
    log = _log_of(tmp_path, "nvtx_cffi", log_backend)
    calls = [line.split(" ", 1)[0] for line in log if not line.startswith("  ")]
    assert calls == (["nvtxwGetInterface", "SessionBegin", "DomainRegister", "ScopeRegister", "CounterRegister",
                      "CounterRegister", "StreamOpen"] + ["SchemaRegister"] * 13
                     + ["CategoryRegister", "EventWrite", "EventWrite", "EventWrite", "StringRegister",
                        "EventWrite", "EventWrite", "EventWrite", "EventWrite", "CounterWrite", "CounterWrite",
                        "CounterNoValueWrite", "CounterBatchWrite", "StreamClose", "SessionEnd", "nvtxwFinalize"])
    text = "\n".join(log)
    assert "nvtxwGetInterface version=2" in text
    assert "SessionBegin name=sess config=key=value -> 0x1001" in text
    assert "DomainRegister 0x1001 name=io -> 0x2001" in text
    assert "ScopeRegister 0x2001 path=node/0 parent=1 -> 300" in text
    assert "CounterRegister 0x2001 name=count schema=17 scope=300 -> 200" in text
    assert "CounterRegister 0x2001 name=level schema=44 scope=0 -> 201" in text
    assert "StreamOpen 0x1001 name=st domain=0x2001 scope=1 time=0 order=0,1,1,5 -> 0x3001" in text
    assert "CategoryRegister 0x2001 1 name=cat" in text
    # the mark: {int64 timestamp, uint32 color, uint32 category} then the message's own payload
    i = log.index("EventWrite 0x3001 count=2")
    assert log[i + 1].endswith(f"size=16 data=100,{0xFF112233 | 1 << 32}")
    assert log[i + 2].endswith("size=5 data='hello'")
    assert log[i + 4].endswith(f"size=24 data=200,300,{9 << 32}")  # pushpop: begin, end, color 0 / category 9
    assert "StringRegister 0x2001 reg -> 0x4001" in text
    assert "CounterWrite 0x3001 t=1000 counter=200" in text and "value schema=200 size=8 data=-3" in text
    assert "CounterNoValueWrite 0x3001 t=1200 counter=200 reason=2" in text
    assert "  timestamps schema=0 size=16 data=1300,1400" in text


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_a_backend_sees_what_nvtx_sends(tmp_path, log_backend):
    ours = _log_of(tmp_path, "nvtx_cffi", log_backend)
    theirs = _log_of(tmp_path, "nvtx", log_backend)
    assert ours == theirs


def test_backend_errors_become_writer_errors(tmp_path, log_backend):
    code = f"""
        from nvtx_cffi import writer
        backend = writer.load_backend({log_backend!r})
        session = writer.Session("s", backend=backend)
        session.begin()
        stream = session.create_stream("st")
        try:
            stream.open()
        except writer.WriterError as exc:
            print(type(exc).__name__, exc.result_code, exc.operation, exc)
        session.end()
    """
    out = run_python(code, env={"NVTXW_TEST_FAIL": "StreamOpen"}).stdout.strip()
    assert out == "WriterError 1 StreamOpen StreamOpen failed: failed (code 1)"


# --------------------------------------------------------------------------- (c) bad input

LOAD_ERRORS = r"""
import sys
which, paths = sys.argv[1], sys.argv[2:]
if which == "nvtx":
    from nvtx import writer
else:
    from nvtx_cffi import writer
for path in paths:
    try:
        writer.load_backend(path)
        print("loaded")
    except writer.WriterError as exc:
        print("WriterError", exc.result_code, exc.operation)
    except Exception as exc:
        print(type(exc).__name__)
"""


def _load_errors(which: str, paths, env=None) -> list:
    code = LOAD_ERRORS.replace("sys.argv[1]", repr(which)).replace("sys.argv[2:]", repr(list(paths)))
    return run_python(code, env=env).stdout.splitlines()


@pytest.fixture
def bad_paths(tmp_path, no_entry_point) -> list:
    text = tmp_path / "not-a-library.so"
    text.write_text("just text\n")
    return [str(tmp_path / "missing.so"), str(text), no_entry_point, str(tmp_path)]


def test_load_backend_errors(bad_paths):
    assert _load_errors("nvtx_cffi", bad_paths) == ["OSError", "OSError", "WriterError 5 load_backend", "OSError"]
    with pytest.raises(OSError, match="missing.so"):
        writer.load_backend(bad_paths[0])
    with pytest.raises(TypeError, match="path"):
        writer.load_backend(3)


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_load_backend_errors_are_nvtx_errors(bad_paths, log_backend):
    assert _load_errors("nvtx_cffi", bad_paths) == _load_errors("nvtx", bad_paths)
    env = {"NVTXW_TEST_VERSION_FAIL": "1"}
    ours = _load_errors("nvtx_cffi", [log_backend], env)
    assert ours == ["WriterError 6 nvtxwGetInterface"] == _load_errors("nvtx", [log_backend], env)


BAD_CALLS = r"""
import sys
if sys.argv[1] == "nvtx":
    import nvtx
    from nvtx import writer
else:
    import nvtx_cffi as nvtx
    from nvtx_cffi import writer
backend = writer.load_backend(sys.argv[2])
session = writer.Session("s", backend=backend)
session.begin()
io = session.get_domain("io")
other = session.get_domain("other")
counter = io.get_counter("c", int)
stream = session.create_stream("st", domain=io)
stream.open()
cases = [
    lambda: writer.Backend(None),
    lambda: writer.Session("s", backend=None),
    lambda: writer.Session(1, backend=backend),
    lambda: session.get_domain(5),
    lambda: session.create_stream("x", interleaving=0),
    lambda: session.create_stream("x", ordering="strict"),
    lambda: session.create_stream("x", skid=None),
    lambda: session.create_stream("x", time_domain_id="ns"),
    lambda: session.create_stream("x", scope=nvtx.PredefinedScope.CURRENT_VM),
    lambda: session.create_stream("x", scope=5),
    lambda: session.create_stream("x", scope="root"),
    lambda: session.create_stream("x", domain=other, scope=io.get_scope("p")),
    lambda: io.get_scope("p", parent=3),
    lambda: io.get_scope("p", parent=nvtx.PredefinedScope.CURRENT_OS),
    lambda: io.get_scope("p", parent=other.get_scope("q")),
    lambda: io.get_registered_string(1),
    lambda: io.get_category_id(None),
    lambda: io.get_counter("c", int, scope="s"),
    lambda: io.get_counter("c", "no such dtype"),
    lambda: stream.write_mark("100"),
    lambda: stream.write_mark(1.5),
    lambda: stream.write_mark(2 ** 63),
    lambda: stream.write_mark(1, message=5),
    lambda: stream.write_mark(1, category=-1),
    lambda: stream.write_mark(1, category=2 ** 32),
    lambda: stream.write_mark(1, category=1.5),
    lambda: stream.write_mark(1, color=-1),
    lambda: stream.write_mark(1, message=other.get_registered_string("r")),
    lambda: stream.write_pushpop(1, "2"),
    lambda: stream.write_start(1, 0),
    lambda: stream.write_start(1, -1),
    lambda: stream.write_end(1, 0),
    lambda: stream.write_counter_sample("c", 1, 1),
    lambda: stream.write_counter_sample(other.get_counter("c", int), 1, 1),
    lambda: stream.write_counter_sample(counter, 1, "one"),
    lambda: stream.write_counter_sample(counter, 1, 2 ** 64),
    lambda: stream.write_counter_sample_no_value(counter, 1, 0),
    lambda: stream.write_counter_batch(counter, [1], timestamps=[1], ordering=0),
    lambda: stream.write_counter_batch(counter, [1]),
    lambda: stream.write_counter_batch(counter, [1, 2], timestamps=[1]),
    lambda: stream.write_counter_batch(counter, [], timestamps=[]),
    lambda: stream.write_event(None, ()),
    lambda: stream.open(),
]
for case in cases:
    try:
        case()
        print("ok")
    except Exception as exc:
        print(type(exc).__name__)
stream.close()
for case in (stream.close, lambda: stream.write_mark(1)):
    try:
        case()
        print("ok")
    except Exception as exc:
        print(type(exc).__name__)
session.end()
for case in (session.end, lambda: session.get_domain("io"), lambda: io.get_category_id("c"),
             lambda: stream.open()):
    try:
        case()
        print("ok")
    except Exception as exc:
        print(type(exc).__name__)
"""

EXPECTED = ["ValueError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError",
            "ValueError", "ValueError", "TypeError", "ValueError", "TypeError", "ValueError", "ValueError", "TypeError",
            "TypeError", "TypeError", "TypeError", "TypeError", "TypeError", "OverflowError", "TypeError",
            "ValueError", "ValueError", "TypeError", "OverflowError", "ValueError", "TypeError", "ValueError",
            "OverflowError", "ValueError", "TypeError", "ValueError", "TypeError", "OverflowError", "TypeError",
            "TypeError", "ValueError", "ValueError", "ValueError", "TypeError", "RuntimeError",
            "RuntimeError", "RuntimeError",
            "RuntimeError", "RuntimeError", "RuntimeError", "RuntimeError"]
if not HAVE_NUMPY:
    # get_counter("c", "no such dtype"): a dtype other than int or float needs NumPy, a
    # RuntimeError without it (nvtx 0.2.16's "Install numpy to use dtype-based NVTX counters.")
    EXPECTED[18] = "RuntimeError"


def _bad_calls(which: str, backend: str, tmp_path) -> list:
    code = BAD_CALLS.replace("sys.argv[1]", repr(which)).replace("sys.argv[2]", repr(backend))
    return run_python(code, env={"NVTXW_TEST_LOG": str(tmp_path / f"{which}.log")}).stdout.splitlines()


def test_bad_arguments_raise_never_crash(tmp_path, log_backend):
    expected = list(EXPECTED)
    if importlib.util.find_spec("numpy") is None:  # a dtype name needs NumPy to be read (PyPy)
        expected[18] = "RuntimeError"
    assert _bad_calls("nvtx_cffi", log_backend, tmp_path) == expected


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_bad_arguments_raise_what_nvtx_raises(tmp_path, log_backend):
    # one deliberate difference: a float timestamp is a TypeError (nvtx truncates it to an int)
    float_timestamp = 20
    expected = EXPECTED[:float_timestamp] + ["ok"] + EXPECTED[float_timestamp + 1:]
    assert _bad_calls("nvtx", log_backend, tmp_path) == expected


def test_bad_argument_messages_name_the_argument(tmp_path):
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("m", backend=backend, config=f"dir={tmp_path}") as session:
        with pytest.raises(TypeError, match="name must be"):
            writer.Session(1, backend=backend)
        with pytest.raises(TypeError, match="backend must be"):
            writer.Session("s", backend="lib.so")
        with pytest.raises(ValueError, match="name must not contain NUL"):
            session.get_domain("a\0b")
        with session.create_stream("s") as stream:
            with pytest.raises(TypeError, match="timestamp must be an integer"):
                stream.write_mark("1")
            with pytest.raises(OverflowError, match="timestamp"):
                stream.write_mark(2 ** 63)
            with pytest.raises(TypeError, match="end must be an integer"):
                stream.write_pushpop(1, None)
            with pytest.raises(TypeError, match="message must be"):
                stream.write_mark(1, message=3)
            with pytest.raises(ValueError, match="category must be in"):
                stream.write_mark(1, category=-2)
            with pytest.raises(ValueError, match="range_id must be non-zero"):
                stream.write_start(1, 0)
            with pytest.raises(TypeError, match="counter must be"):
                stream.write_counter_sample(None, 1, 1)


def test_module_is_the_package_attribute():
    assert nvtx_cffi.writer is writer
    assert writer.PredefinedScope is nvtx_cffi.PredefinedScope
    assert set(writer.__all__) >= {"Backend", "Counter", "Domain", "PredefinedScope", "RegisteredString", "Schema",
                                   "Scope", "Session", "Stream", "StreamInterleaving", "StreamOrdering", "StreamSkid",
                                   "WriterError", "load_backend", "backend_path"}
    err = writer.WriterError(5, "load_backend")
    assert (err.result_code, err.operation, str(err)) == (5, "load_backend",
                                                           "load_backend failed: library symbol missing (code 5)")
    assert [m.value for m in writer.StreamOrdering] == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="create_stream"):
        writer.Stream()


def test_scalar_counter_batches_need_no_numpy(tmp_path):
    code = f"""
        import sys
        sys.modules["numpy"] = None  # (as on PyPy without NumPy)
        from nvtx_cffi import writer
        backend = writer.load_backend(writer.backend_path())
        with writer.Session("nonp", backend=backend, config="dir={tmp_path}") as session:
            domain = session.get_domain()
            ints, floats = domain.get_counter("ints", int), domain.get_counter("floats", float)
            with session.create_stream("s") as stream:
                stream.write_counter_batch(ints, [7, -8], timestamps=[100, 200])
                stream.write_counter_batch(floats, (0.5,), timestamps=[150])
                for bad in (lambda: stream.write_counter_batch(ints, [1, 2], timestamps=[1]),
                            lambda: stream.write_counter_batch(ints, [1])):
                    try:
                        bad()
                    except ValueError as exc:
                        print("ValueError", exc)
    """
    out = run_python(code).stdout.splitlines()
    assert out == ["ValueError data and timestamps must have the same length",
                   "ValueError write_counter_batch requires timestamps unless the counter layout embeds an "
                   "EntryKind.COUNTER_TIMESTAMP field"]
    ev = _trace(tmp_path)["traceEvents"]
    assert sorted((e["name"], e["ts"], e["args"]["value"]) for e in ev if e.get("ph") == "C") == [
        ("floats", 0.05, 0.5), ("ints", 0.0, 7), ("ints", 0.1, -8)]


def test_streams_written_from_threads_at_once_keep_every_event(tmp_path):
    import threading

    n, workers = 5000, 4  # several chunks per stream
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("threads", backend=backend, config=f"dir={tmp_path}") as session:
        domains = [session.get_domain(f"d{k}") for k in range(workers)]
        streams = [session.create_stream(f"t{k}", domain=domains[k]) for k in range(workers)]
        for s in streams:
            s.open()
        counters = [d.get_counter("c", int) for d in domains]

        def work(k: int) -> None:
            for i in range(n):
                t = 1_000 + 10 * i
                streams[k].write_pushpop(t, t + 5, message=f"r{i % 7}", category="cat")
                streams[k].write_counter_sample(counters[k], t, i)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    doc = _trace(tmp_path)
    ev = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    per_thread = {}
    for e in ev:
        if e.get("ph") == "X":
            per_thread.setdefault(names[e["tid"]], []).append((e["ts"], e["dur"], e["name"], e["args"]["domain"]))
    assert sorted(per_thread) == [f"t{k}" for k in range(workers)]
    for k in range(workers):
        got = sorted(per_thread[f"t{k}"])
        assert got == [(i / 100, 0.005, f"r{i % 7}", f"d{k}") for i in range(n)]
    assert sum(1 for e in ev if e.get("ph") == "C") == n * workers
    assert doc["otherData"]["dropped_events"] == 0


@pytest.mark.parametrize("sanitizer", [None, "thread", "address,undefined"])
def test_the_backend_from_c_threads(tmp_path, sanitizer):
    """tests/c/writer_stress.c: six threads on five streams (two share one), under TSan and ASan too."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "stress"
    flags = ["-g", "-O1", f"-fsanitize={sanitizer}", "-fno-omit-frame-pointer"] if sanitizer else ["-O2"]
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, "-I", build_script().nvtx_include_dir(),
           "-I", str(SOURCE / "c" / "recorder"), str(C_HELPERS / "writer_stress.c"),
           *[str(SOURCE / source) for source in setup_script()["WRITER_BACKEND_SOURCES"]], "-o", str(exe), "-lpthread"]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        if sanitizer:
            pytest.skip(f"cannot build with -fsanitize={sanitizer}")
        subprocess.run(cmd, check=True)
    n = 3000
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1", ASAN_OPTIONS="detect_leaks=1",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    proc = subprocess.run([str(exe), str(out), str(n)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr[-3000:]
    from nvtx_cffi import recorder

    rec = recorder.read(out)
    kinds = {}
    for e in rec.events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    assert rec.dropped == 0
    assert (kinds["push"], kinds["pop"]) == (4 * n, 4 * n)
    marks = [e for e in rec.events if e.kind == "mark"]
    assert sum(e.message == "shared" for e in marks) == 2 * n
    assert sum(e.message == "m0" for e in marks) == 4 * len(range(0, n, 1000))  # registered strings
    (big,) = {e.message for e in marks if e.message and len(e.message) > 1000}
    assert big == "x" * 65536 and all(e.truncated for e in marks if e.message == big)
    samples = [e for e in rec.events if e.kind == "blob" and e.name == "counter_sample"]
    assert len(samples) == 4 * n + 4
    names = {name for info in rec.processes.values() for name in info.thread_names.values()}
    assert names == {"own0", "own1", "own2", "own3", "shared"}


def test_counter_groups_become_one_series_per_field(tmp_path):
    np = pytest.importorskip("numpy")
    stamp = nvtx_cffi.numpy_dtype(np.int64, entry_kind=nvtx_cffi.EntryKind.COUNTER_TIMESTAMP)
    backend = writer.load_backend(writer.backend_path())
    with writer.Session("groups", backend=backend, config=f"dir={tmp_path}") as session:
        domain = session.get_domain("g")
        group = domain.get_counter("grp", [("a", np.int32), ("b", np.float64)])
        embedded = domain.get_counter("emb", [("t", stamp), ("v", np.float64)])
        unit = domain.get_counter("mem", float, semantics=nvtx_cffi.CounterSemantics(unit="B"))
        with session.create_stream("s", domain=domain) as stream:
            stream.write_counter_sample(group, 1_000, (1, 2.5))
            stream.write_counter_batch(group, np.array([(3, 4.5), (5, 6.5)], dtype=group.dtype),
                                       timestamps=[1_010, 1_020])
            stream.write_counter_batch(embedded, [(1_050, 1.25), (1_060, 2.25)])
            with pytest.raises(ValueError, match="embeds an EntryKind.COUNTER_TIMESTAMP"):
                stream.write_counter_sample(embedded, 1_070, (0, 0.5))
            stream.write_counter_sample(unit, 1_080, 7.0)
            stream.write_counter_sample_no_value(unit, 1_090, nvtx_cffi.CounterNoValueReason.UNAVAILABLE)
    ev = _trace(tmp_path)["traceEvents"]
    got = sorted((e["name"], e["ts"], e["args"]) for e in ev if e.get("ph") == "C")
    assert got == [("g: emb.v", 0.05, {"value": 1.25}), ("g: emb.v", 0.06, {"value": 2.25}),
                   ("g: grp.a", 0.0, {"value": 1}), ("g: grp.a", 0.01, {"value": 3}), ("g: grp.a", 0.02, {"value": 5}),
                   ("g: grp.b", 0.0, {"value": 2.5}), ("g: grp.b", 0.01, {"value": 4.5}),
                   ("g: grp.b", 0.02, {"value": 6.5}),
                   ("g: mem", 0.08, {"B": 7.0}), ("g: mem", 0.09, {"B": None})]  # (no value: a gap)


def test_two_sessions_in_one_folder_keep_their_streams_apart(tmp_path):
    backend = writer.load_backend(writer.backend_path())
    for k in range(2):
        with writer.Session(f"s{k}", backend=backend, config=f"dir={tmp_path}") as session:
            with session.create_stream("st") as stream:
                stream.write_push(100 * k + 10, message=f"r{k}")
                stream.write_pop(100 * k + 20)
    ev = _trace(tmp_path)["traceEvents"]
    spans = sorted((e["name"], e["ts"], e["dur"], e["tid"]) for e in ev if e.get("ph") == "X")
    assert [s[:3] for s in spans] == [("r0", 0.0, 0.01), ("r1", 0.1, 0.01)]
    assert spans[0][3] != spans[1][3]  # (the same tid would pair r0's push with r1's pop)


def test_the_package_imports_the_writer_at_first_use():
    code = """
        import sys
        import nvtx_cffi
        assert "nvtx_cffi.writer" not in sys.modules
        w = nvtx_cffi.writer
        assert sys.modules["nvtx_cffi.writer"] is w and w.Session.__name__ == "Session"
        try:
            nvtx_cffi.no_such_name
        except AttributeError as exc:
            print(exc)
    """
    assert run_python(code).stdout.strip() == "module 'nvtx_cffi' has no attribute 'no_such_name'"
