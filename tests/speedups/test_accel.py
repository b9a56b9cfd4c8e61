"""The C accelerator (``c/speedups/accel*.c``) against the Python implementation it stands in for.

The test process runs whichever path its environment selects (C on CPython, Python on PyPy or with
``NVTX_CFFI_PURE_PYTHON=1``); the tests below hold for both. ``test_pure_python_path_passes`` runs
this file, the bad-input tests and the event tests again with the Python path forced, and
``test_both_paths_raise_the_same_errors`` compares the two paths' errors message by message.
"""
from __future__ import annotations

import gc
import inspect
import json
import os
import pickle
import re
import subprocess
import sys
import weakref

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import _accel, recorder

from support.hardening import opted_in_slow  # noqa: F401 (fixture)
from support.paths import TESTS
from conftest import ranges, run_python

ACCELERATED = _accel.accel is not None


@nvtx.annotate("picklable", color="red")
def picklable(x, *, times=2):
    """Module level: pickled by reference."""
    return x * times


class Widget:
    def __init__(self, size):
        self.size = size

    @nvtx.annotate("Widget.grow")
    def grow(self, by, *, twice=False):
        """Grow."""
        self.size += by * (2 if twice else 1)
        return self.size

    @staticmethod
    @nvtx.annotate("Widget.unit")
    def unit():
        return 1

    @classmethod
    @nvtx.annotate("Widget.make")
    def make(cls, size):
        return cls(size)


class Mine(nvtx.annotate):
    __slots__ = ()


def test_accelerator_is_used_where_it_should_be():
    assert ACCELERATED is (sys.implementation.name == "cpython" and not _accel.PURE_PYTHON)
    if ACCELERATED:
        assert type(picklable) is _accel.accel.function and type(nvtx.push_range) is _accel.accel.function
        assert isinstance(nvtx.annotate("x"), _accel.accel.AnnotateBase)
    else:
        assert inspect.isfunction(picklable) and inspect.isfunction(nvtx.push_range)


def test_decorated_function_keeps_functools_wraps_metadata():
    def original(a, b=2, *args, key, **kwargs) -> int:
        """Original doc."""
        return a

    original.custom = "kept"
    wrapped = nvtx.annotate("meta")(original)
    assert wrapped.__wrapped__ is original
    assert (wrapped.__name__, wrapped.__qualname__, wrapped.__doc__, wrapped.__module__) == (
        "original", original.__qualname__, "Original doc.", __name__)
    assert wrapped.__annotations__ == original.__annotations__
    assert wrapped.custom == "kept" and wrapped.__dict__["custom"] == "kept"
    assert inspect.signature(wrapped) == inspect.signature(original)
    assert not inspect.iscoroutinefunction(wrapped) and not inspect.isgeneratorfunction(wrapped)


CHILD_ANNOTATIONS = """
import inspect, json, sys, typing
import nvtx_cffi as nvtx

@nvtx.annotate("typed")
def typed(a: "int", b: LATER = None) -> RETURN:
    return [b]

class Later:
    pass

from nvtx_cffi import _accel
out = {"type": type(typed).__module__, "accelerated": _accel.accel is not None,
       "annotations": {k: str(v) for k, v in typed.__annotations__.items()},
       "hints": {k: v.__name__ if isinstance(v, type) else str(v) for k, v in typing.get_type_hints(typed).items()},
       "signature": str(inspect.signature(typed, eval_str=True)),
       "has_annotate": hasattr(typed, "__annotate__")}
if sys.version_info >= (3, 14):
    import annotationlib
    out["annotate_same"] = typed.__annotate__ is typed.__wrapped__.__annotate__
    fwd = annotationlib.get_annotations(typed, format=annotationlib.Format.FORWARDREF)
    out["forwardref_keys"] = sorted(fwd)
    typed.__annotations__ = {"x": int}
    out["set"] = [str(typed.__annotations__), repr(typed.__annotate__)]
    try:
        typed.__annotate__ = 3
    except TypeError as exc:
        out["bad_annotate"] = str(exc)
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.version_info < (3, 10), reason="inspect.signature(eval_str=) is 3.10+ (PyPy 3.9)")
@pytest.mark.parametrize("pure", [False, True])
def test_decorated_function_annotations_resolve_like_the_functions(pure):
    # No `from __future__ import annotations` in the child: on 3.14+ annotations are evaluated
    # lazily through __annotate__ (PEP 649/749), and `Later` exists only after the decoration
    # (before 3.14 it must be a string there, annotations being evaluated at `def`).
    lazy = sys.version_info >= (3, 14)
    code = CHILD_ANNOTATIONS.replace("LATER", "Later" if lazy else '"Later"')
    code = code.replace("RETURN", "list[Later]" if lazy else '"list[Later]"')
    proc = run_python(code, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"})
    out = json.loads(proc.stdout)
    if pure or sys.implementation.name != "cpython":
        assert out["accelerated"] is False
    assert out["type"] == ("nvtx_cffi._speedups" if out["accelerated"] else "builtins")
    assert out["annotations"]["a"] == "int" and "Later" in out["annotations"]["b"]
    assert out["hints"] == {"a": "int", "b": "Later", "return": "list[__main__.Later]"}
    assert out["signature"] == "(a: int, b: __main__.Later = None) -> list[__main__.Later]"
    assert out["has_annotate"] is (sys.version_info >= (3, 14))
    if sys.version_info >= (3, 14):
        assert out["annotate_same"] is True and out["forwardref_keys"] == ["a", "b", "return"]
        assert out["set"] == ["{'x': <class 'int'>}", "None"]
        assert out["bad_annotate"] == "__annotate__ must be callable or None"


def test_coroutines_and_generators_keep_their_nature():
    async def coroutine():
        return 1

    def generator():
        yield 1

    assert inspect.iscoroutinefunction(nvtx.annotate("c")(coroutine))
    assert inspect.isgeneratorfunction(nvtx.annotate("g")(generator))


def test_methods_bind_like_functions():
    widget = Widget(1)
    with recorder.capture() as got:
        assert widget.grow(2) == 3
        assert widget.grow(1, twice=True) == 5
        assert Widget.grow(widget, 1) == 6  # through the class: the plain function
        bound = widget.grow
        assert bound(by=0) == 6
        assert Widget.unit() == 1 and Widget.make(4).size == 4
    assert Widget.__dict__["grow"].__get__(None, Widget) is Widget.__dict__["grow"]
    assert bound.__self__ is widget and bound.__func__ is Widget.__dict__["grow"]
    assert str(inspect.signature(bound)) == "(by, *, twice=False)"
    assert [e.message for e in ranges(got, "push")] == ["Widget.grow"] * 4 + ["Widget.unit", "Widget.make"]
    assert len(ranges(got, "pop")) == 6


def test_keyword_and_positional_arguments_are_forwarded():
    with recorder.capture() as got:
        assert picklable(3) == 6 and picklable(3, times=3) == 9 and picklable(x=2) == 4
    with pytest.raises(TypeError, match="positional argument"):
        picklable(1, 2)
    assert [e.message for e in ranges(got, "push")] == ["picklable"] * 3


def test_exceptions_propagate_with_the_range_closed():
    @nvtx.annotate("raises", domain="accel_errors")
    def raises(kind):
        raise kind("from inside")

    with recorder.capture() as got:
        for kind in (ValueError, KeyboardInterrupt):
            with pytest.raises(kind, match="from inside"):
                raises(kind)
    assert [(e.kind, e.domain) for e in got if e.kind in ("push", "pop")] == [
        ("push", "accel_errors"), ("pop", "accel_errors")] * 2


def test_recursion_nests_ranges_and_recursion_errors_leave_none_open():
    @nvtx.annotate("fact")
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    @nvtx.annotate("forever")
    def forever():
        return forever()

    with recorder.capture() as got:
        assert fact(10) == 3628800
    assert [e.kind for e in got if e.kind in ("push", "pop")] == ["push"] * 10 + ["pop"] * 10
    with recorder.capture() as got:
        with pytest.raises(RecursionError):
            forever()
    pushes, pops = ranges(got, "push"), ranges(got, "pop")
    assert len(pushes) == len(pops) > 10


def test_decorated_functions_pickle_by_reference():
    assert pickle.loads(pickle.dumps(picklable)) is picklable
    assert pickle.loads(pickle.dumps(Widget.__dict__["grow"])) is Widget.__dict__["grow"]
    assert pickle.loads(pickle.dumps(nvtx.push_range)) is nvtx.push_range


def test_decorated_functions_are_weakly_referenceable_and_collected():
    def f():
        return f

    wrapped = nvtx.annotate("cyclic")(f)
    wrapped.me = wrapped  # a reference cycle through its __dict__
    ref = weakref.ref(wrapped)
    assert ref() is wrapped
    del wrapped, f
    gc.collect()
    assert ref() is None


def test_annotate_class_and_instances():
    first = nvtx.annotate("cls-check", color="red")  # first sight: sent inline, not cached
    a = nvtx.annotate("cls-check", color="red")
    assert type(first) is type(a) is nvtx.annotate and a is nvtx.annotate("cls-check", color="red")
    assert a is nvtx.annotate(message="cls-check", color="red")  # keywords: the same cached object
    assert pickle.loads(pickle.dumps(a)) is a
    assert str(inspect.signature(nvtx.annotate)).startswith("(message: 'Message' = None, color: 'ColorLike' = None, domain")

    mine = Mine("mine", color="green")
    assert type(mine) is Mine and mine is not nvtx.annotate("mine", color="green")
    assert type(pickle.loads(pickle.dumps(mine))) is Mine
    with recorder.capture() as got:
        with mine as entered:
            assert entered is mine
    (push,) = ranges(got, "push")
    assert (push.message, push.color) == ("mine", 0x008000)
    with pytest.raises(AttributeError):
        mine.message = "other"


SEALED = r"""
import json, sys
import nvtx_cffi as nvtx
from nvtx_cffi import _accel, recorder
nvtx.mark("decide")  # NVTX's first call: the methods are bound for good
out = {"accelerated": _accel.accel is not None}
try:
    nvtx.annotate.extra = 1
    out["set"] = None
except TypeError as e:
    out["set"] = str(e)

class Step(nvtx.annotate):  # a subclass with an __init__ of its own: annotate gets one too
    def __init__(self, name):
        super().__init__(name, color="red")

Step.extra = 2  # subclasses stay mutable
with recorder.capture() as got:
    with nvtx.annotate("sealed"):
        pass
    with Step("load"):
        pass
out["pushes"] = [(e.message, e.color) for e in got if e.kind == "push"]
out["same"] = nvtx.annotate("sealed") is nvtx.annotate("sealed")
out["step_extra"] = Step.extra
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", [False, True])
def test_annotate_is_sealed_once_decided_with_the_accelerator_and_subclasses_stay_open(pure):
    """With the accelerator, annotate becomes an immutable type at NVTX's first call (CPython then
    calls it as it calls a built-in class); the Python path's stays an ordinary class. Either way a
    subclass with an __init__ of its own works and stays mutable."""
    out = json.loads(run_python(SEALED, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"}).stdout)
    if out["accelerated"]:
        assert out["set"] == "cannot set 'extra' attribute of immutable type 'annotate'"
    else:
        assert out["set"] is None
    assert not (pure and out["accelerated"])
    assert out["pushes"] == [["sealed", 0x0000FF], ["load", 0xFF0000]]  # (nvtx: blue by default)
    assert out["same"] is True and out["step_extra"] == 2


def test_with_statement_closes_the_range_on_error():
    a = nvtx.annotate("with-error", domain="accel_with")
    with recorder.capture() as got:
        with pytest.raises(ZeroDivisionError):
            with a:
                1 / 0
        for _ in range(3):  # the bound __enter__/__exit__ are reused: still one push and one pop each
            with a:
                pass
    assert [(e.kind, e.domain) for e in got if e.kind in ("push", "pop")] == [
        ("push", "accel_with"), ("pop", "accel_with")] * 4


def test_objects_outside_the_cache_make_no_reference_cycle(monkeypatch):
    from nvtx_cffi import _annotate

    monkeypatch.setattr(_annotate, "MAX_CACHED_ANNOTATIONS", 0)
    outside = nvtx.annotate("outside-the-cache", color="red")
    assert outside is not nvtx.annotate("outside-the-cache", color="red")
    with recorder.capture() as got:
        with outside:
            pass
    assert [e.message for e in ranges(got, "push")] == ["outside-the-cache"]
    # cached objects keep their bound __enter__/__exit__; others must not (it would be a cycle)
    assert not [r for r in gc.get_referrers(outside) if getattr(r, "__self__", None) is outside]


def test_domain_calls_with_prebuilt_attributes():
    d = nvtx.get_domain("accel_domain")
    attrs = d.get_event_attributes(message="prebuilt", color="red", category=4)
    with recorder.capture() as got:
        d.push_range(attrs)
        d.pop_range()
        d.mark(attrs)
        range_id = d.start_range(attrs)
        d.end_range(range_id)
    assert [(e.kind, e.domain, e.message, e.color, e.category) for e in got
            if e.kind in ("push", "pop", "mark", "start")] == [
        ("push", "accel_domain", "prebuilt", 0xFF0000, 4), ("pop", "accel_domain", None, None, 0),
        ("mark", "accel_domain", "prebuilt", 0xFF0000, 4), ("start", "accel_domain", "prebuilt", 0xFF0000, 4)]
    (end,) = ranges(got, "end")
    assert (end.range_id, end.domain) == (range_id, "accel_domain")
    if ACCELERATED:  # a method made a C function (without: a C function per Domain instance)
        assert str(inspect.signature(nvtx.Domain.pop_range)) == "(self, /)"


@pytest.mark.skipif(not ACCELERATED, reason="the C method's reading of Domain._index")
@pytest.mark.parametrize("index, raises", [(2**30 + 5, False), (2**31 - 1, False), (2**31, True), (-1, True),
                                           (2**64, True), ("0", True), (True, True), (0.0, True)])
def test_a_domain_whose_index_was_overwritten_pops_no_other_domain(index, raises):
    """Domain._index is private, but a value written there reaches the C pop_range: one that is not
    an int in 0..2**31-1 raises, one that is (small or not) names no domain of the shim's table, and
    no pop reaches any domain either way."""
    d = nvtx.get_domain("accel_overwritten_index")
    index_before = d._index
    try:
        d._index = index
        with recorder.capture() as got:
            if raises:
                with pytest.raises(AttributeError, match=r"^this Domain has no index \(not made by get_domain\)$"):
                    d.pop_range()
            else:
                assert d.pop_range() is None
    finally:
        d._index = index_before
    assert [e for e in got if e.kind == "pop"] == []
    with recorder.capture() as got:
        d.pop_range()
    assert [(e.kind, e.domain) for e in got if e.kind == "pop"] == [("pop", "accel_overwritten_index")]


# -- the two paths, side by side ------------------------------------------------------------------

ERRORS = r"""
import json, nvtx_cffi as nvtx
d = nvtx.get_domain("errs")
calls = {
    "push too many": lambda: nvtx.push_range("a", "blue", None, None, None, "extra"),
    "push unknown kw": lambda: nvtx.push_range(colour="red"),
    "push twice": lambda: nvtx.push_range("a", message="b"),
    "push bad colour": lambda: nvtx.push_range("a", color="nope"),
    "push unhashable": lambda: nvtx.push_range(["a"]),
    "mark bad payload": lambda: nvtx.mark("a", payload="x"),
    "mark bad category": lambda: nvtx.mark("a", category=-1),
    "start bad domain": lambda: nvtx.start_range("a", domain=7),
    "start too many": lambda: nvtx.start_range(1, 2, 3, 4, 5, 6),
    "pop too many": lambda: nvtx.pop_range(None, None),
    "pop bad domain": lambda: nvtx.pop_range(domain=7),
    "pop unknown kw": lambda: nvtx.pop_range(name="x"),
    "end missing": lambda: nvtx.end_range(),
    "end unknown kw": lambda: nvtx.end_range(range_id=None, x=1),
    "end bad": lambda: nvtx.end_range("x"),
    "end float pair": lambda: nvtx.end_range((1.5, 0)),
    "end negative": lambda: nvtx.end_range(-1),
    "annotate too many": lambda: nvtx.annotate("a", None, None, None, None, "extra"),
    "annotate unknown kw": lambda: nvtx.annotate(colour="red"),
    "annotate bad colour": lambda: nvtx.annotate("a", color="nope"),
    "annotate unhashable": lambda: nvtx.annotate(["a"]),
    "annotate non-callable": lambda: nvtx.annotate("a")(3),
    "domain push extra": lambda: d.push_range(None, "m"),
    "domain push kw": lambda: d.push_range(colour="red"),
    "domain push bad attrs": lambda: d.push_range("not attributes"),
    "domain mark bad attrs": lambda: d.mark(5),
    "domain start bad kw": lambda: d.start_range(message=3),
    "domain end bad": lambda: d.end_range("x"),
    "domain end negative": lambda: d.end_range(-1),
}
out = {}
for name, call in calls.items():
    try:
        result = call()
        out[name] = ["returned", repr(result) if name.startswith(("end", "pop", "push", "mark")) else None]
    except Exception as exc:
        out[name] = [type(exc).__name__, str(exc)]
try:
    d.pop_range(1)
except TypeError:
    out["domain pop extra"] = "TypeError"
print(json.dumps(out))
"""


@pytest.mark.parametrize("tool", ["recorder", "none"])
def test_both_paths_raise_the_same_errors(tool):
    remove = ("NVTX_CFFI_PURE_PYTHON",) + (("NVTX_INJECTION64_PATH",) if tool == "none" else ())
    c_path = json.loads(run_python(ERRORS, remove=remove).stdout)
    python_path = json.loads(run_python(ERRORS, {"NVTX_CFFI_PURE_PYTHON": "1"}, remove=remove).stdout)
    assert c_path == python_path
    assert c_path["push unknown kw"][0] == "TypeError"
    assert c_path["push unknown kw"][1].startswith("push_range() got an unexpected keyword argument 'colour'")
    assert c_path["end missing"][0] == "TypeError" and "range_id" in c_path["end missing"][1]
    assert c_path["domain pop extra"] == "TypeError"
    if tool == "recorder":
        assert c_path["push bad colour"] == [
            "ArgumentColorError", "unknown color 'nope': use an nvtx or CSS colour name, '#rrggbb', or an ARGB int"]
        assert c_path["end negative"] == ["ArgumentRangeError", "range_id -1 is out of range (0 to 2**64-1)"]


def test_pure_python_path_passes():
    """The Python implementation (PyPy's, and CPython's with NVTX_CFFI_PURE_PYTHON=1) passes too."""
    if not ACCELERATED:
        pytest.skip("this process already runs the Python path")
    env = {**os.environ, "NVTX_CFFI_PURE_PYTHON": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "speedups/test_accel.py", "api/test_bad_input.py", "api/test_events.py", "api/test_modes.py"],
        cwd=TESTS, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout


LEAK_CHECK = r"""
import resource, nvtx_cffi as nvtx
d = nvtx.get_domain("leak")
attrs = d.get_event_attributes(message="x")
a = nvtx.annotate("x")

@nvtx.annotate("f")
def f(x, y=1):
    return x

@nvtx.annotate("g")
def g():
    raise ValueError("x")

def round_():
    for _ in range(100_000):
        nvtx.push_range("x"); nvtx.pop_range(); nvtx.mark("x", color="red")
        nvtx.end_range(nvtx.start_range("x")); nvtx.push_range("x", domain="leak"); nvtx.pop_range("leak")
        nvtx.mark("x", payload=1)
        with a:
            pass
        with nvtx.annotate("x"):
            pass
        f(1, y=2)
        try:
            g()
        except ValueError:
            pass
        d.push_range(attrs); d.pop_range(); d.end_range(d.start_range(attrs)); d.mark(attrs)
        try:
            nvtx.push_range(colour=1)
        except TypeError:
            pass

def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

round_()  # warm: caches, allocator pools
before = rss_kib()
for _ in range(10):  # 10**6 rounds of every call
    round_()
print(rss_kib() - before)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""), reason="ASan's quarantine holds freed memory")
def test_a_million_calls_of_every_fast_path_do_not_grow_memory(opted_in_slow):
    """Refcount mistakes in C leak an object per call: 10**6 calls of each would show as MBs."""
    # the null tool: the real calls, nothing recorded (10**7 events would fill the disk)
    grown_kib = int(run_python(LEAK_CHECK, {"NVTX_INJECTION64_PATH": _null_tool()}, timeout=900).stdout.strip())
    assert grown_kib < 2048, f"RSS grew by {grown_kib} KiB over 10**6 rounds"


def _null_tool() -> str:
    return os.path.join(os.path.dirname(nvtx.__file__), "libnvtx_null_tool.so")


# ---- the split: abi3 core, optional accelerator bound through the shim's function table ----------

cpython_with_gil = pytest.mark.skipif(
    sys.implementation.name != "cpython" or bool(__import__("sysconfig").get_config_var("Py_GIL_DISABLED")),
    reason="the accelerator is built for CPython with a GIL only")


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="PyPy builds no abi3 module")
def test_core_is_abi3_and_the_accelerator_a_module_of_its_own():
    from nvtx_cffi._native import _ffi

    # _ffi.abi3.so; from 3.15 also _ffi.abi3-<multiarch>.so
    assert os.path.basename(_ffi.__file__).split(".")[1].startswith("abi3")
    if ACCELERATED:
        assert _accel.speedups.__name__ == "nvtx_cffi._speedups"
        assert ".abi3" not in os.path.basename(_accel.speedups.__file__)  # per-version build
        assert _accel.speedups.build_version == nvtx.__version__


@cpython_with_gil
def test_bind_refuses_a_table_that_is_not_the_shims():
    if not ACCELERATED:
        pytest.skip("no accelerator in this process")
    from nvtx_cffi._native import ffi

    zeros = ffi.new("char[256]")
    with pytest.raises(ImportError, match="function table has version 0"):
        _accel.speedups.bind(int(ffi.cast("uintptr_t", zeros)))
    with pytest.raises(ValueError, match="address is NULL"):
        _accel.speedups.bind(0)
    with recorder.capture() as got:  # still bound to the real shim
        nvtx.mark("after bad binds")
    assert [e.message for e in ranges(got, "mark")] == ["after bad binds"]


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="PyPy never has the accelerator")
@pytest.mark.parametrize("how", ["missing", "not built", "stale"])
def test_package_works_without_a_usable_accelerator(tmp_path, how):
    # "missing": the module is there but cannot be imported; "not built": no such module (an abi3
    # wheel, a failed optional compile; why_not said "cannot import name ... circular import");
    # "stale": it was built for another version of the Python files. All fall back to the complete
    # Python path.
    block = {
        "missing": "import sys; sys.modules['nvtx_cffi._speedups'] = None",
        "not built": "import importlib.machinery as m; real = m.PathFinder.find_spec.__func__; "
                     "m.PathFinder.find_spec = classmethod(lambda cls, name, path=None, target=None: "
                     "None if name == 'nvtx_cffi._speedups' else real(cls, name, path, target))",
        "stale": "import sys, types; stale = sys.modules['nvtx_cffi._speedups'] = types.ModuleType('s'); "
                 "stale.build_version = '0.0.0-stale'",
    }[how]
    proc = run_python(f"""
        {block}
        import inspect, json, nvtx_cffi as nvtx
        from nvtx_cffi import _accel, _profile, recorder
        @nvtx.annotate("f")
        def f():
            return 1
        with recorder.capture() as got:
            f()
            nvtx.mark("m")
        print(json.dumps({{"accel": _accel.accel is not None, "why": _accel.why_not,
                          "isfunction": inspect.isfunction(f), "engine": _profile.ENGINE,
                          "events": [(e.kind, e.message) for e in got if e.kind in ("push", "mark")]}}))
    """, remove=("NVTX_CFFI_PURE_PYTHON",))
    out = json.loads(proc.stdout)
    assert out["accel"] is False and out["isfunction"] is True
    assert out["why"] == {"missing": "not importable (import of nvtx_cffi._speedups halted; None in sys.modules)",
                          "not built": "not built (an abi3 wheel, NVTX_CFFI_SPEEDUPS=0, or its compile failed when installing)",
                          "stale": f"built for version 0.0.0-stale, not {nvtx.__version__}"}[how]
    assert not out["engine"].startswith("c-")
    assert out["events"] == [["push", "f"], ["mark", "m"]]


SUBINTERPRETER = r"""
import json
import nvtx_cffi as nvtx
from nvtx_cffi import _accel, recorder

def run_in_legacy_subinterpreter(code):
    # one that shares the GIL (and so can import the CFFI shim, which isolated ones cannot)
    try:
        import _interpreters as interpreters  # 3.13+
    except ImportError:
        import _xxsubinterpreters as interpreters  # 3.11, 3.12
        try:
            iid = interpreters.create(isolated=False)  # 3.12
        except TypeError:
            iid = interpreters.create()  # 3.11: subinterpreters always share the GIL
        try:
            interpreters.run_string(iid, code)
        finally:
            interpreters.destroy(iid)
        return
    iid = interpreters.create("legacy")
    try:
        error = interpreters.exec(iid, code)
    finally:
        interpreters.destroy(iid)
    if error is not None:
        raise RuntimeError(error.formatted)

SUB = '''
import sys, json
import nvtx_cffi as nvtx
from nvtx_cffi import _accel
@nvtx.annotate("sub f", color="green")
def f(x):
    return x + 1
for i in range(3):
    with nvtx.annotate("sub range", color="red", payload=i):
        nvtx.mark("sub mark", color="blue", payload=f(i))
print("SUB " + json.dumps({"accel": _accel.accel is not None, "why": _accel.why_not}))
sys.stdout.flush()
'''
with recorder.capture() as got:
    for i in range(3):
        with nvtx.annotate("main before", color="red", payload=i):
            pass
    run_in_legacy_subinterpreter(SUB)
    for i in range(3):
        with nvtx.annotate("main after", color="red", payload=i):
            nvtx.mark("main mark", payload=i)
print(json.dumps({"accel": _accel.accel is not None,
                  "events": [[e.kind, e.message, e.color, e.payload] for e in got if e.kind in ("push", "mark")]}))
"""


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's subinterpreters")
def test_a_subinterpreter_runs_the_python_path_and_the_main_one_keeps_the_accelerator():
    # The accelerator's state is process-wide C holding the first interpreter's classes and caches:
    # a subinterpreter that bound it too would swap them for its own in every interpreter.
    proc = run_python(SUBINTERPRETER)  # this process's mode
    sub = json.loads(next(line[4:] for line in proc.stdout.splitlines() if line.startswith("SUB ")))
    main = json.loads(proc.stdout.strip().splitlines()[-1])
    assert main["accel"] is ACCELERATED
    assert sub["accel"] is False
    if ACCELERATED:
        assert sub["why"] == "nvtx_cffi._speedups serves the interpreter that loaded it first, not a subinterpreter"
    red, green, blue = 0xFF0000, 0x008000, 0x0000FF  # blue: also the default colour
    assert main["events"] == (
        [["push", "main before", red, i] for i in range(3)]
        + [e for i in range(3) for e in (["push", "sub range", red, i], ["push", "sub f", green, None],
                                         ["mark", "sub mark", blue, i + 1])]
        + [e for i in range(3) for e in (["push", "main after", red, i], ["mark", "main mark", blue, i])])


ISOLATED = r"""
try:
    import _interpreters as interpreters  # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters  # 3.12
    iid = interpreters.create(isolated=True)
    try:
        interpreters.run_string(iid, "import nvtx_cffi")
        print("imported")
    except interpreters.RunFailedError as exc:
        print(exc)
    finally:
        interpreters.destroy(iid)
else:
    iid = interpreters.create("isolated")
    error = interpreters.exec(iid, "import nvtx_cffi")
    interpreters.destroy(iid)
    print(error.formatted if error is not None else "imported")
"""


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info < (3, 12),
                    reason="isolated subinterpreters (a GIL of their own) are CPython 3.12+")
def test_an_isolated_subinterpreter_cannot_import_the_package():
    out = run_python(ISOLATED).stdout
    # the CFFI backend or the shim, whichever is imported first: both are single-phase modules
    assert re.search(r"ImportError'?>?: module (_cffi_backend|(nvtx_cffi\._native\.)?_ffi) does not support "
                     r"loading in subinterpreters", out), out


# Python code that runs while the accelerator holds the first str of a message's text (a str
# subclass key's __eq__ in a dict lookup, a payload's __index__, a collection started by an
# allocation) and calls nvtx-cffi with another text of the same table entry, which replaces (frees)
# that str. Each must leave the str alive and the answers right; before the fix each crashed.
REENTRANT_TEXT_EVICTION = r"""
import gc, json, sys
import nvtx_cffi as nvtx
from nvtx_cffi import _speedups, recorder

def collider(text):
    "Another text in the same entry of the accelerator's table of f-string texts."
    return next(t for t in (f"evict{i}" for i in range(1 << 20))
                if _speedups._canon_index(t) == _speedups._canon_index(text))

evictions = 0
def evict(other):
    global evictions
    evictions += 1
    nvtx.annotate("".join(["", other]))  # a new str of that text: it takes the entry

def fresh(text):
    "An equal str that is a new object with no hash computed yet (as an f-string is)."
    return "".join([text[:3], text[3:]])

scenario = sys.argv[1]
wrong = []
if scenario == "str subclass __eq__ in a lookup":
    class Key(str):
        armed = False
        def __hash__(self):  # hashes as "hello": the slot dict compares it with "hello"
            return hash("hello")
        def __eq__(self, other):
            if Key.armed:
                Key.armed = False
                evict(HELLO_COLLIDER)
            return str.__eq__(self, other)
    HELLO_COLLIDER = collider("hello")
    nvtx.push_range(Key("other")); nvtx.pop_range()  # probed before "hello" in the slot dict
    nvtx.push_range("hello"); nvtx.pop_range()
    nvtx.annotate("hello")
    nvtx.annotate(fresh("hello"))  # the table's str of "hello": held by the table alone
    Key.armed = True
    nvtx.push_range(fresh("hello")); nvtx.pop_range()  # Key.__eq__ runs inside its lookup
    with recorder.capture() as events:
        for i in range(30000):
            nvtx.mark("".join(["m", str(i % 3000)]))  # new strs, some at the address freed
    got = [e.message for e in events if e.kind == "mark"]
    expected = ["m%d" % (i % 3000) for i in range(30000)]
    wrong = [(g, e) for g, e in zip(got, expected) if g != e][:5] + ([] if len(got) == 30000 else [len(got)])
elif scenario == "payload __index__":
    class Step:
        other = None
        def __init__(self, value):
            self.value = value
        def __index__(self):  # runs while the C path checks the payload (no tool)
            if Step.other is not None:
                other, Step.other = Step.other, None
                evict(other)
            return self.value
    for n in range(40):
        text = f"phase{n}"; hash(text)
        nvtx.annotate(text)
        nvtx.annotate(fresh(text))
        Step.other = collider(text)
        a = nvtx.annotate(fresh(text), payload=Step(n))
        if a.message != text or a.payload.value != n:
            wrong.append((a.message, text))
elif scenario == "collection at an allocation":
    other = None
    def on_gc(phase, info):
        global other
        if other is not None and phase == "start":
            gc.set_threshold(700)
            text, other = other, None
            evict(text)
    gc.callbacks.append(on_gc)
    for n in range(300):
        text = f"step{n}"; hash(text)
        colour = "#%06x" % (n + 1)
        nvtx.annotate(text)
        nvtx.annotate(text, color=colour)
        nvtx.annotate(fresh(text))  # the table's str of the text: held by the table alone
        target = collider(text)
        spare = [tuple([i, 1, 2, 3, 4, 5, 6]) for i in range(2500)]  # use up the 7-tuple free list
        gc.collect()
        keep = [[] for _ in range(n % 4)]  # shifts which allocation starts a collection
        gc.set_threshold(1)
        other = target
        a = nvtx.annotate(fresh(text), color=fresh(colour))  # a collection may start inside the call
        gc.set_threshold(700)
        if a.message != text or a.color != colour:
            wrong.append((a.message, text))
print(json.dumps({"evictions": evictions, "wrong": wrong}))
"""


@pytest.mark.skipif(not ACCELERATED, reason="the accelerator's table of texts")
@pytest.mark.parametrize(("scenario", "tool", "evictions"), [
    ("str subclass __eq__ in a lookup", True, 1),
    ("payload __index__", False, 40),
    ("collection at an allocation", False, 300),
])
def test_code_run_inside_a_call_that_replaces_the_message_text_entry_frees_nothing_in_use(scenario, tool, evictions):
    code = f"import sys; sys.argv[1:] = [{scenario!r}]\n" + REENTRANT_TEXT_EVICTION
    proc = run_python(code, remove=() if tool else ("NVTX_INJECTION64_PATH",), check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"evictions": evictions, "wrong": []}


@pytest.mark.skipif(not ACCELERATED, reason="the accelerator's table of texts")
def test_fstring_messages_of_texts_sharing_a_text_entry_get_their_own_objects():
    # new strs of two texts that take turns in one entry of the table of f-string texts: each call
    # that looks the table up (annotate(message) and the call-site table) answers for its own text
    from nvtx_cffi import _speedups
    from nvtx_cffi._domain import PREPARE_AT

    def fresh(text):  # an equal str with no hash computed yet, as an f-string is
        return "".join([text[:2], text[2:]])

    first = "turn0"
    second = next(t for t in (f"turn{i}" for i in range(1, 1 << 20))
                  if _speedups._canon_index(t) == _speedups._canon_index(first))
    for _ in range(2):  # prepared at a later call: the second round answers from the tables
        for text in (first, second):
            for _ in range(PREPARE_AT + 1):
                nvtx.annotate(text)
                nvtx.annotate(text, color="red")
    for _ in range(3):
        for text in (first, second, first, first, second):
            a, b = nvtx.annotate(fresh(text)), nvtx.annotate(fresh(text), color="red")
            assert (a.message, b.message, b.color) == (text, text, "red")
            assert a is nvtx.annotate(text) and b is nvtx.annotate(text, color="red")


@pytest.mark.parametrize("star", [False, True])
def test_python_wrapper_closes_only_ranges_it_opened(star):
    """The Python path's wrapper (PyPy, no accelerator): a RecursionError raised entering the push
    (the interpreter's depth check) opened nothing, so nothing is closed; any other exception from
    the push is a tool's callback raising after it, so the range is closed."""
    from nvtx_cffi import _wrappers

    log = []

    def begin(error):
        log.append("begin")
        if error is not None:
            raise error

    def target(*args, **kwargs):
        log.append("call")
        return args, kwargs

    def wrapped(error):
        def close():
            log.append("close")
        if star:  # the *args, **kwargs wrapper
            return _wrappers._generic_wrapper(lambda *a, **k: target(*a, **k), begin, error, close)
        return _wrappers._fixed_signature_wrapper(lambda a, b=2: target(a, b=b), begin, error, close)

    assert wrapped(None)(1, b=3) == ((1,), {"b": 3})
    assert log == ["begin", "call", "close"]
    log.clear()
    with pytest.raises(RecursionError):
        wrapped(RecursionError("entering the push"))(1)
    assert log == ["begin"]
    log.clear()
    with pytest.raises(KeyError):
        wrapped(KeyError("a tool's callback"))(1)
    assert log == ["begin", "close"]
