"""The NVTX call stream a tool sees: nvtx_cffi against NVIDIA's nvtx 0.2.16, call for call.

tests/c/callstream_tool.c is an injection tool that writes one line per callback (domain, message
type and text, colour, category, payload, registrations, counters), handles printed as what they
stand for. The same program runs in a child process three times: with ``import nvtx`` (nvtx
0.2.16), with ``import nvtx_cffi as nvtx`` (C path) and with NVTX_CFFI_PURE_PYTHON=1; the logs
must be equal line for line. The program also writes ``# label`` lines into the log before each
call (and ``# raised <type>`` when a call raises), so a diff shows which call differs.

Two ways of attaching: the tool named in the environment from the start, and named after import
(``os.environ["NVTX_INJECTION64_PATH"] = ...`` before the first call).

Lines left out of the comparison (``IGNORED``), each for a reason that is not a difference a tool
can act on:
  Initialize        NVTX's own loader calls nvtxInitialize when an extension module (payload,
                    counters) is first touched; where it lands says which module came first.
  DomainIsEnabled   nvtx 0.2.16 asks it once per domain it creates (a query, not an event).
  NameOsThread*     nvtx_cffi names Python threads in NVTX (docs/guide.md, "Thread names").
  DomainDestroy     nvtx 0.2.16 destroys domain handles when Python frees them (at exit).
"""
from __future__ import annotations

import difflib
import os
import platform
import textwrap
from pathlib import Path

import pytest

from conftest import run_python
from support.cbuild import c_library
from support.paths import C_HELPERS

pytestmark = pytest.mark.skipif(
    platform.python_implementation() != "CPython", reason="nvtx 0.2.16 (the reference) is CPython only")

IGNORED = ("Initialize", "DomainIsEnabled", "NameOsThread", "DomainDestroy")
IMPLS = ("cffi", "pure")
ATTACH = ("env", "late")


@pytest.fixture(scope="session")
def callstream_tool(tmp_path_factory) -> str:
    return c_library(tmp_path_factory.mktemp("callstream"), "nvtx_callstream", [C_HELPERS / "callstream_tool.c"],
                     ["-lpthread", "-ldl"])


@pytest.fixture(scope="session")
def reference():
    pytest.importorskip("nvtx", reason="nvtx 0.2.16 (the reference) is not installed")
    pytest.importorskip("numpy", reason="the scenarios use NumPy payloads")


# ---------------------------------------------------------------------------------------------- child programs

PRELUDE = """
import os, sys, itertools
_fd = os.open(os.environ["NVTX_CFFI_CALLSTREAM_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
def note(text):
    os.write(_fd, ("# " + text + "\\n").encode())
if os.environ["CALLSTREAM_IMPL"] == "nvtx":
    import nvtx
else:
    import nvtx_cffi as nvtx
if os.environ.get("CALLSTREAM_LATE_TOOL"):
    os.environ["NVTX_INJECTION64_PATH"] = os.environ["CALLSTREAM_LATE_TOOL"]
import numpy as np

MESSAGES = {"none": None, "empty": "", "text": "text", "bytes": b"bytes", "unicode": "gr\\u00fc\\u00dfe \\u2713"}
COLORS = [None, "red", 0xFF00FF00]
DOMAINS = [None, "", "lib"]
CATEGORIES = [None, 3, "io"]
PAYLOADS = [None, 7, 2.5, np.arange(3, dtype=np.int32)]

def combos():
    for i, (color, domain, category) in enumerate(itertools.product(COLORS, DOMAINS, CATEGORIES)):
        yield color, domain, category, PAYLOADS[i % len(PAYLOADS)]

def label(*parts):
    return " ".join(repr(p) if not isinstance(p, np.ndarray) else "array%r" % (p.tolist(),) for p in parts)

def attempt(text, fn):
    note(text)
    try:
        return fn()
    except Exception as e:
        note("raised " + type(e).__name__)

def sections(kinds=MESSAGES):
    for kind in kinds:
        note("## " + kind)
        yield kind, MESSAGES.get(kind)
"""

# One program per API shape. Each message kind is a section of its own (``## kind``); every
# combination of colour, domain and category (payload cycling) is called in turn, three rounds, so
# a (message, domain) is met a first, second and third time with other attributes in between.
SHAPES = {
    "mark": """
for kind, msg in sections():
    for rnd in range(3):
        for c, d, cat, p in combos():
            attempt(label("mark", msg, c, d, cat, p), lambda: nvtx.mark(msg, color=c, domain=d, category=cat, payload=p))
""",
    "push_pop": """
for kind, msg in sections():
    for rnd in range(3):
        for c, d, cat, p in combos():
            attempt(label("push", msg, c, d, cat, p), lambda: nvtx.push_range(msg, c, d, cat, p))
            attempt(label("pop", d), lambda: nvtx.pop_range(domain=d))
""",
    "start_end": """
for kind, msg in sections():
    for rnd in range(3):
        for c, d, cat, p in combos():
            r = attempt(label("start", msg, c, d, cat, p),
                        lambda: nvtx.start_range(message=msg, color=c, domain=d, category=cat, payload=p))
            attempt("end", lambda: nvtx.end_range(r))
""",
    "context": """
for kind, msg in sections():
    for rnd in range(3):
        for c, d, cat, p in combos():
            def body():
                with nvtx.annotate(msg, color=c, domain=d, category=cat, payload=p):
                    note("inside")
            attempt(label("with annotate", msg, c, d, cat, p), body)
""",
    "decorator": """
for kind, msg in sections():
    functions = []
    for c, d, cat, p in combos():
        def work():
            note("work")
        functions.append((label("@annotate", msg, c, d, cat, p),
                          attempt(label("decorate", msg, c, d, cat, p),
                                  lambda: nvtx.annotate(msg, color=c, domain=d, category=cat, payload=p)(work))))
    for rnd in range(3):
        for text, f in functions:
            attempt(text, f)
""",
    "domain_attributes": """
for kind, msg in sections(list(MESSAGES) + ["registered"]):
    prepared = []
    for c, d, cat, p in combos():
        dom = nvtx.get_domain(d)
        if kind == "registered":
            reg = dom.get_registered_string("reg-" + str(d))
            attrs = attempt(label("attributes", c, d, cat, p),
                            lambda: dom.get_event_attributes(color=c, category=cat, payload=p))
            prepared.append((label(kind, c, d, cat, p), dom, attrs, {"message": reg}))
        else:
            attrs = attempt(label("attributes", msg, c, d, cat, p),
                            lambda: dom.get_event_attributes(msg, c, cat, p))
            prepared.append((label(kind, c, d, cat, p), dom, attrs, {}))
    for rnd in range(3):
        for text, dom, attrs, kw in prepared:
            attempt("Domain.mark " + text, lambda: dom.mark(attrs, **kw))
            attempt("Domain.push_range " + text, lambda: dom.push_range(attrs, **kw))
            attempt("Domain.pop_range", lambda: dom.pop_range())
            rid = attempt("Domain.start_range " + text, lambda: dom.start_range(attrs, **kw))
            attempt("Domain.end_range", lambda: dom.end_range(rid))
""",
    "domain_keywords": """
for kind, msg in sections():
    for rnd in range(3):
        for c, d, cat, p in combos():
            dom = nvtx.get_domain(d)
            kw = dict(message=msg, color=c, category=cat, payload=p)
            text = label(msg, c, d, cat, p)
            attempt("Domain.mark " + text, lambda: dom.mark(**kw))
            attempt("Domain.push_range " + text, lambda: dom.push_range(**kw))
            attempt("Domain.pop_range", lambda: dom.pop_range())
            rid = attempt("Domain.start_range " + text, lambda: dom.start_range(**kw))
            attempt("Domain.end_range", lambda: dom.end_range(rid))
""",
    "counters": """
note("## all")
pair = np.dtype([("a", np.int32), ("b", np.float64)])
for rnd in range(3):
    for d in DOMAINS:
        dom = nvtx.get_domain(d)
        i = attempt(label("int counter", d), lambda: dom.get_counter("ints", int))
        attempt("sample int", lambda: i.sample(5 + rnd))
        f = attempt(label("float counter", d), lambda: dom.get_counter("floats", float, description="a float"))
        attempt("sample float", lambda: f.sample(0.25 * rnd))
        s = attempt(label("counter with semantics", d), lambda: dom.get_counter(
            "bytes", int, scope="/proc", semantics=nvtx.CounterSemantics(unit="B", min=0, max=4096)))
        attempt("sample semantics", lambda: s.sample(100))
        attempt("sample no value", lambda: s.sample_no_value(nvtx.CounterNoValueReason.UNCHANGED))
        g = attempt(label("group counter", d), lambda: dom.get_counter("pair", pair))
        attempt("sample group", lambda: g.sample(np.array((1, 0.5), dtype=pair)))
        attempt("batch int", lambda: i.batch_submit([1, 2, 3], [10, 20, 30]))
        attempt("batch float", lambda: f.batch_submit(np.array([0.5, 1.5]), np.array([40, 50])))
        attempt("batch group", lambda: g.batch_submit(np.array([(2, 1.0), (3, 2.0)], dtype=pair), [60, 70]))
""",
    "ext_payloads": """
note("## all")
pair = np.dtype([("a", np.int32), ("b", np.float64)])
values = [
    [1, 2, 3], (4.5, 5.5), range(3), b"raw",
    np.arange(4, dtype=np.int8), np.linspace(0, 1, 3, dtype=np.float32), np.arange(6, dtype=np.uint16).reshape(2, 3),
    np.array([(1, 0.5), (2, 1.5)], dtype=pair), np.array((7, 8.5), dtype=pair), np.array(5, dtype=np.int64),
    np.array([], dtype=np.float64), np.array(["ab", "c"]),
]
for rnd in range(3):
    for d in DOMAINS:
        for v in values:
            attempt(label("mark payload", d, v), lambda: nvtx.mark("ext", domain=d, payload=v))
            def body():
                with nvtx.annotate("ext-with", domain=d, payload=v):
                    pass
            attempt(label("with payload", d, v), body)
            dom = nvtx.get_domain(d)
            attempt(label("Domain.mark payload", d, v), lambda: dom.mark(message="ext-dom", payload=v))
""",
}

SHAPE_SECTIONS = {shape: ("all",) if shape in ("counters", "ext_payloads") else
                  ("none", "empty", "text", "bytes", "unicode") + (("registered",) if shape == "domain_attributes" else ())
                  for shape in SHAPES}

_logs: dict = {}


def _run(tool: str, tmp_dir: Path, shape: str, impl: str, attach: str, env: dict | None = None,
         code: str | None = None) -> tuple[list[str], str]:
    """Runs the shape's program (or ``code``) under one implementation; the log lines and stdout."""
    log = tmp_dir / f"{shape}-{impl}-{attach}.log"
    if log.exists():
        log.unlink()
    child_env = {"NVTX_CFFI_CALLSTREAM_LOG": str(log), "CALLSTREAM_IMPL": impl}
    if impl == "pure":
        child_env["NVTX_CFFI_PURE_PYTHON"] = "1"
    if attach == "env":
        child_env["NVTX_INJECTION64_PATH"] = tool
    else:
        child_env["CALLSTREAM_LATE_TOOL"] = tool
    child_env.update(env or {})
    remove = ("NVTX_CFFI_RECORD_DIR", "NVTX_INJECTION64_PATH", "NVTX_CFFI_PURE_PYTHON", "NVTX_DISABLE",
              "NVTX_CFFI_PREPARE_AT")  # (the default, what users get, unless env sets it)
    proc = run_python(PRELUDE + textwrap.dedent(code if code is not None else SHAPES[shape]), child_env,
                      remove=remove, check=False)
    assert proc.returncode == 0, f"{impl} child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if not line.startswith(IGNORED)], proc.stdout


def _section(lines: list[str], kind: str) -> list[str]:
    out, inside = [], False
    for line in lines:
        if line.startswith("# ## "):
            inside = line == f"# ## {kind}"
        elif inside:
            out.append(line)
    return out


def _stream(tool, tmp_path_factory, shape, impl, attach, prepare_at=None):
    """The log of a shape's program; ``prepare_at``: NVTX_CFFI_PREPARE_AT for nvtx_cffi (None: the default)."""
    key = (shape, impl, attach, prepare_at if impl != "nvtx" else None)
    if key not in _logs:
        env = {"NVTX_CFFI_PREPARE_AT": prepare_at} if prepare_at and impl != "nvtx" else None
        name = f"{shape}-{prepare_at}" if prepare_at and impl != "nvtx" else shape
        _logs[key] = _run(tool, tmp_path_factory.getbasetemp(), name, impl, attach, env=env, code=SHAPES[shape])[0]
    return _logs[key]


def _unified_diff(a: list[str], b: list[str], n: int = 2) -> list[str]:
    """difflib.unified_diff without autojunk: a log's frequent lines (RangePop) are not junk."""
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(n):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [" " + line for line in a[a1:a2]]
                continue
            out += ["-" + line for line in a[a1:a2]]
            out += ["+" + line for line in b[b1:b2]]
    return out


def _compare(expected: list[str], got: list[str], what: str):
    if expected != got:
        diff = "\n".join(["--- nvtx 0.2.16", f"+++ {what}"] + _unified_diff(expected, got))
        pytest.fail(f"the call stream differs from nvtx 0.2.16 ({what}):\n{diff}", pytrace=False)


# Known differences from nvtx 0.2.16's stream, listed in the README's compatibility table: an array
# payload's schema is registered at its first event, not when get_event_attributes takes it; a
# module-level call with an array payload registers the schema before the message; a 0-d NumPy
# array goes as a scalar payload. (strict: a fix makes these pass, and then the mark must go)
KNOWN_DIFFERENCES = {
}


def _known(shape: str, kind: str):
    reason = KNOWN_DIFFERENCES.get((shape, kind))
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


# Each (message, domain) is met three times: at the default a message is sent with its call every
# time; with NVTX_CFFI_PREPARE_AT=2 its second and third calls go through what it prepared.
@pytest.mark.parametrize("prepare_at", [None, "2"], ids=["default", "prepare_at_2"])
@pytest.mark.parametrize("attach", ATTACH)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape,kind", [pytest.param(s, k, marks=_known(s, k)) for s in SHAPES for k in SHAPE_SECTIONS[s]])
def test_call_stream_matches_nvtx(reference, callstream_tool, tmp_path_factory, shape, kind, impl, attach, prepare_at):
    expected = _section(_stream(callstream_tool, tmp_path_factory, shape, "nvtx", attach), kind)
    assert any(not line.startswith("#") for line in expected), "nvtx 0.2.16 made no NVTX call: the tool is not attached"
    got = _section(_stream(callstream_tool, tmp_path_factory, shape, impl, attach, prepare_at), kind)
    _compare(expected, got, f"nvtx_cffi {impl}, {shape}, message {kind}, tool {attach}, prepare at {prepare_at or 'default'}")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_c_and_pure_paths_make_the_same_calls(reference, callstream_tool, tmp_path_factory, shape):
    """The accelerated path and NVTX_CFFI_PURE_PYTHON=1 make the same calls, in the same order."""
    pure = _stream(callstream_tool, tmp_path_factory, shape, "pure", "env")
    assert any(not line.startswith("#") for line in pure), "no NVTX call reached the tool"
    got = _stream(callstream_tool, tmp_path_factory, shape, "cffi", "env")
    if pure != got:
        diff = "\n".join(["--- nvtx_cffi pure", "+++ nvtx_cffi cffi"] + _unified_diff(pure, got))
        pytest.fail(f"the C and pure Python paths differ ({shape}):\n{diff}", pytrace=False)


def test_the_oracle_resolves_handles(reference, callstream_tool, tmp_path):
    """The tool itself: a registered message prints as its text, a category id as its name, a
    domain as its name, range ids in order; a message sent as text prints as ASCII."""
    lines, _ = _run(callstream_tool, tmp_path, "oracle", "nvtx", "env", code="""
d = nvtx.get_domain("lib")
d.mark(d.get_event_attributes(message="hello", category="io", color=0x11223344, payload=-5))
r = d.start_range(message="hello", payload=0.5)
d.end_range(r)
""")
    assert lines == [
        'DomainCreateA name="lib"',
        'DomainNameCategoryA domain="lib" id=1 name="io"',
        'DomainRegisterStringA domain="lib" text="hello"',
        'DomainMarkEx domain="lib" v=3 size=48 msg=REGISTERED:"hello" color=ARGB:0x11223344 category=1("io") '
        'payload=INT64:-5',
        'DomainRangeStartEx domain="lib" v=3 size=48 msg=REGISTERED:"hello" color=ARGB:0x000000ff category=0 '
        'payload=DOUBLE:0.5 -> R1',
        'DomainRangeEnd domain="lib" R1',
    ]


BAD_CALLS = """
import warnings
warnings.simplefilter("ignore")
lib = lambda: nvtx.get_domain("lib")
cases = {
    "mark colour name": lambda: nvtx.mark("m", color="no-such-colour"),
    "mark int message": lambda: nvtx.mark(123),
    "push_range int domain": lambda: nvtx.push_range("m", domain=123),
    "start_range bytes domain": lambda: nvtx.start_range("m", domain=b"lib"),
    "mark list category": lambda: nvtx.mark("m", category=[1]),
    "mark negative category": lambda: nvtx.mark("m", category=-1),
    "mark huge colour": lambda: nvtx.mark("m", color=2**40),
    "mark negative colour": lambda: nvtx.mark("m", color=-1),
    "annotate int message": lambda: nvtx.annotate(1.5),
    "annotate bad colour": lambda: nvtx.annotate("m", color=object()),
    "Domain.end_range str": lambda: lib().end_range("x"),
    "Domain.end_range negative": lambda: lib().end_range(-1),
    "Domain.mark keyword category": lambda: lib().mark(message="m", category=[1]),
    "Domain.mark unknown keyword": lambda: lib().mark(message="m", colour="red"),
    "Domain.push_range positional str": lambda: lib().push_range("m"),
    "get_event_attributes colour": lambda: lib().get_event_attributes("m", color="no-such-colour"),
    "get_registered_string int": lambda: lib().get_registered_string(5),
    "get_category_id int": lambda: lib().get_category_id(5),
    "get_counter bad dtype": lambda: lib().get_counter("c", "not a dtype"),
    "int counter sample str": lambda: lib().get_counter("i", int).sample("3"),
    "int counter sample 2**63": lambda: lib().get_counter("i", int).sample(2**63),
    "float counter sample str": lambda: lib().get_counter("f", float).sample("1"),
    "batch lengths differ": lambda: lib().get_counter("i", int).batch_submit([1, 2], [1]),
}
for name, call in cases.items():
    try:
        call()
    except Exception as e:
        print(name, "|", " ".join(t.__name__ for t in type(e).__mro__))
    else:
        print(name, "|", "-")
"""


def _outcomes(stdout: str) -> dict:
    return dict(line.split(" | ") for line in stdout.splitlines())


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_arguments_raise_what_nvtx_raises(reference, callstream_tool, tmp_path, impl):
    """Where nvtx 0.2.16 refuses a call, nvtx_cffi raises an instance of the same exception type
    (its own classes derive from nvtx's: ArgumentTypeError is a TypeError and an AttributeError)."""
    expected = _outcomes(_run(callstream_tool, tmp_path, "bad", "nvtx", "env", code=BAD_CALLS)[1])
    got = _outcomes(_run(callstream_tool, tmp_path, "bad", impl, "env", code=BAD_CALLS)[1])
    wrong = {name: (expected[name].split()[0], got[name]) for name in expected
             if expected[name] != "-" and expected[name].split()[0] not in got[name].split()}
    assert not wrong, "\n".join(f"{name}: nvtx 0.2.16 raises {e}, nvtx_cffi {impl}: {g}"
                                for name, (e, g) in wrong.items())
    assert sum(v != "-" for v in expected.values()) >= 15, expected


# ---------------------------------------------------------------------------------------------- a raising tool

RAISING_CALLS = {
    "mark": ("DomainMarkEx", 'nvtx.mark("x")'),
    "push_range": ("DomainRangePushEx", 'nvtx.push_range("x")'),
    "start_range": ("DomainRangeStartEx", 'nvtx.start_range("x", domain="lib")'),
    "annotate": ("DomainRangePushEx", 'exec("with nvtx.annotate(\\"x\\"):\\n    pass")'),
    "decorator": ("DomainRangePushEx", 'nvtx.annotate("x")(lambda: None)()'),
    "decorator's pop": ("DomainRangePop", 'nvtx.annotate("x")(lambda: None)()'),
    "decorator's pop, guarded callable": ("DomainRangePop", 'nvtx.annotate("x")(len)(())'),
    "annotate's pop": ("DomainRangePop", 'exec("with nvtx.annotate(\\"x\\"):\\n    pass")'),
    "Domain.mark": ("DomainMarkEx", 'nvtx.get_domain("lib").mark(nvtx.get_domain("lib").get_event_attributes("x"))'),
    "Domain.push_range": ("DomainRangePushEx", 'nvtx.get_domain("lib").push_range(message="x")'),
    "Domain.pop_range": ("DomainRangePop", 'nvtx.get_domain("lib").pop_range()'),
    "get_registered_string": ("DomainRegisterStringA", 'nvtx.get_domain("lib").get_registered_string("x")'),
}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("call", list(RAISING_CALLS))
def test_an_exception_set_by_the_tool_propagates(callstream_tool, tmp_path, call, impl):
    """A tool callback that sets a Python exception (a Python-based tool that failed): the call
    raises that exception, at its first and at its later calls, never SystemError ("returned a
    result with an exception set") and never a later, unrelated line."""
    callback, statement = RAISING_CALLS[call]
    _, out = _run(callstream_tool, tmp_path, call, impl, "env", env={"NVTX_CFFI_CALLSTREAM_RAISE": callback},
                  code=f"""
for n in range(3):
    try:
        {statement}
    except BaseException as e:
        print(n, type(e).__name__, e)
    else:
        print(n, "no exception")
    try:
        len(())
    except BaseException as e:
        print(n, "leaked:", type(e).__name__, e)
""")
    assert out.splitlines() == [f"{n} RuntimeError tool callback failed" for n in range(3)], out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("callback, statement, count", [
    ("DomainRegisterStringA", 'nvtx.get_domain("lib").get_registered_string("x")', "nvtxcffi_string_count"),
    ("DomainCreateA", 'nvtx.get_domain("lib")', "nvtxcffi_domain_count"),
])
def test_a_registration_that_raised_takes_no_table_entry(callstream_tool, tmp_path, callback, statement, count, impl):
    """A registration whose tool callback raised fails without holding an entry of the shim's
    bounded tables (65536 strings, 255 domains): failed calls repeated do not fill them."""
    _, out = _run(callstream_tool, tmp_path, "table", impl, "env", env={"NVTX_CFFI_CALLSTREAM_RAISE": callback},
                  code=f"""
from nvtx_cffi._native import lib
before = lib.{count}()
raised = 0
for n in range(300):
    try:
        {statement}
    except RuntimeError:
        raised += 1
print(raised, lib.{count}() - before)
""")
    assert out.split() == ["300", "0"], out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("statement", ['nvtx.mark("z")', 'nvtx.mark("z", payload=np.arange(2))',
                                       'nvtx.end_range(nvtx.start_range("z", domain="lib"))'])
def test_no_event_after_its_message_registration_raised(callstream_tool, tmp_path, statement, impl):
    """A message whose registration's tool callback raised: the call raises and sends no event
    (nvtx 0.2.16 fails at the registration, before the event), at its first call too."""
    lines, out = _run(callstream_tool, tmp_path, "noevent", impl, "env",
                      env={"NVTX_CFFI_CALLSTREAM_RAISE": "DomainRegisterStringA"}, code=f"""
for n in range(3):
    try:
        {statement}
    except RuntimeError as e:
        print(n, type(e).__name__, e)
""")
    assert out.splitlines() == [f"{n} RuntimeError tool callback failed" for n in range(3)], out
    assert not [line for line in lines if line.split(" ", 1)[0] in ("DomainMarkEx", "DomainRangeStartEx")], lines
    assert sum(line.startswith('DomainRegisterStringA') and 'text="z"' in line for line in lines) == 3, lines


@pytest.mark.parametrize("impl", ["cffi", "pure"])
def test_the_decorator_closes_a_range_whose_push_raised(callstream_tool, tmp_path, impl):
    """A decorated function whose push's tool callback raised: the call raises, the function does
    not run, and the range the push opened is closed (the tool's range stack stays balanced)."""
    lines, out = _run(callstream_tool, tmp_path, "deco", impl, "env",
                      env={"NVTX_CFFI_CALLSTREAM_RAISE": "DomainRangePushEx"}, code="""
ran = []
@nvtx.annotate("deco", domain="lib")
def f(*args, **kwargs):
    ran.append(1)
for n in range(2):
    try:
        f(n)
    except RuntimeError as e:
        print(n, type(e).__name__, e)
print("ran", len(ran))
""")
    assert out.splitlines() == ["0 RuntimeError tool callback failed", "1 RuntimeError tool callback failed", "ran 0"], out
    kinds = [line.split(" ", 1)[0] for line in lines]
    assert kinds.count("DomainRangePushEx") == 2 and kinds.count("DomainRangePop") == 2, lines


def test_profile_hooks_report_what_the_tool_raised(callstream_tool, tmp_path):
    """Profile's C engines push and pop from the interpreter's hooks: an exception a tool callback
    set there is reported as unraisable, never left set (which made unrelated calls fail with
    SystemError) and never raised into the profiled program."""
    _, out = _run(callstream_tool, tmp_path, "profile", "cffi", "env",
                  env={"NVTX_CFFI_CALLSTREAM_RAISE": "DomainRangePushEx"}, code="""
unraisable = []
sys.unraisablehook = lambda u: unraisable.append(str(u.exc_value))
def g():
    return [len("ab") for _ in range(2)]
profile = nvtx.Profile()
profile.enable()
try:
    g()
    print("profiled", len(()))
except BaseException as e:
    print("profiled", type(e).__name__, e)
profile.disable()
print("after", len(()))
print("unraisable", bool(unraisable) and set(unraisable) == {"tool callback failed"})
""")
    assert out.splitlines() == ["profiled 0", "after 0", "unraisable True"], out


@pytest.mark.parametrize("impl", IMPLS)
def test_threads_registering_while_a_tool_callback_lets_others_run(callstream_tool, tmp_path, impl):
    """A tool whose registration callback lets other Python threads run (a Python-based tool's
    callback code may release the GIL): threads meeting new messages at once all finish (a thread
    waiting for the shim's registry lock with the GIL held deadlocked)."""
    env = {"NVTX_CFFI_CALLSTREAM_LOG": os.devnull, "CALLSTREAM_IMPL": impl, "NVTX_INJECTION64_PATH": callstream_tool,
           "NVTX_CFFI_CALLSTREAM_YIELD": "DomainRegisterStringA"}
    if impl == "pure":
        env["NVTX_CFFI_PURE_PYTHON"] = "1"
    proc = run_python(PRELUDE + textwrap.dedent("""
        import threading
        def work(k):
            for i in range(50):
                nvtx.mark(f"thread {k} message {i}")
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("finished")
        """), env, remove=("NVTX_CFFI_RECORD_DIR", "NVTX_CFFI_PURE_PYTHON", "NVTX_DISABLE"), timeout=20)
    assert proc.stdout.split() == ["finished"], proc.stderr
