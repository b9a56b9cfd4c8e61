"""The call shapes measured by the asv suite and by ``asv_bench/compare.py``, and how to time them.

A shape is setup code plus a loop body, written against ``L``: the ``nvtx_cffi`` or ``nvtx``
module (the APIs are the same, that is the point of a drop-in). ``plain`` is the body without any
annotation, the baseline the overhead is measured above. Setup runs once; its names become locals
of a generated timing function, so the loop pays no global or attribute lookups that a user's
code would not pay too.

NVTX loads its tool once per process, at initialisation: :func:`attach` must run before the
library is first imported, so each (library, tool) combination needs a process of its own.

Each shape also has a floor statement (``floor_setup``, ``floor``): the same spelling against the
no-op C objects of ``floor.py`` (``F``), what the interpreter charges before any library does anything.

Both ``compare.py`` and the asv suite time shapes with :func:`best_ns_per_op` (one function over
:func:`samples_ns`, so the two report the same figure) and turn its minima into a reported figure with :func:`reported_ns`.

>>> L = load_library("nvtx_cffi")
>>> best = best_ns_per_op({"body": Timer(SHAPES["push_pop"], L).run,
...                        "plain": Timer(SHAPES["push_pop"], None, plain=True).run}, 3, 100)
>>> best["body"] >= best["plain"] >= 0.0
True
"""
from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import textwrap
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional

__all__ = ["Shape", "SHAPES", "LIBRARIES", "TOOLS", "Timer", "attach", "best_ns_per_op",
           "load_library", "null_tool_path", "reported_ns", "samples_ns", "shape_available"]

#: Libraries a shape can run against ("plain" runs the baseline body, no annotation at all).
LIBRARIES = ("plain", "nvtx_cffi", "nvtx")
#: NVTX tool attached to the process: none, or the do-nothing tool (cost of reaching a tool).
TOOLS = ("none", "null")

#: How many copies of the body one loop iteration runs (so loop overhead is a small correction).
UNROLL = 10
#: Samples of :func:`best_ns_per_op` as compare.py takes them by default and as the asv suite does:
#: min over REPEATS samples of NUMBER loop iterations (NUMBER x UNROLL bodies) each.
REPEATS, NUMBER = 200, 1000


class Shape(NamedTuple):
    name: str
    title: str
    setup: str  # run once; may use L (the library module)
    body: str  # the measured statement(s)
    plain: str  # the same statement(s) with no annotation
    needs: str = ""  # attribute L must have ("" = none)
    libraries: tuple = ("nvtx_cffi", "nvtx")
    plain_setup: str = ""  # setup of the plain body (no L there)
    plainest: str = ""  # the plainest spelling of the same call (a shape name; "" = this is one)
    group: str = ""  # a family of shapes with a benchmark class of its own ("counters"; "" = none)
    # The interpreter's floor for this shape: setup binding the body's names to floor.c's no-op C
    # objects (F: benchmarks.floor.load()), so the floor statement is the same spelling with nothing
    # behind it: the same calls with the same arguments, the same `with`, the same f-string or payload.
    floor_setup: str = ""
    floor: str = ""  # the floor statement, where the body's calls are methods ("" = the body itself)


_F = "def f():\n    pass\n"
# Per-call values: ``i`` changes every call (an int past the small-int cache, as a step counter
# soon is; ``x`` a float), so nothing keyed by the value can be reused. The plain body pays the
# same increment.
_I = "i = 1000\n"
_X = "x = 0.5\n"
_N = "import itertools\nn = itertools.count()\n"  # never repeats, across runs too
_ANN = "annotate = L.annotate\n"
_PP = "push_range = L.push_range\npop_range = L.pop_range\n"
_SE = "start_range = L.start_range\nend_range = L.end_range\n"
_FA = "def f(a, b=1):\n    return a\n"

#: The spellings users write, each against the plainest spelling of the same call.
CALL_SHAPES = [
    Shape("with_color_kw", "with annotate('x', color='red')", _ANN,
          "with annotate('x', color='red'):\n    pass", "pass", plainest="with_new"),
    Shape("with_color_pos", "with annotate('x', 'red')", _ANN,
          "with annotate('x', 'red'):\n    pass", "pass", plainest="with_new"),
    Shape("with_full_kw", "with annotate(x,color,domain,category=)", _ANN,
          "with annotate('x', color='red', domain='d', category='c'):\n    pass", "pass",
          plainest="with_new"),
    Shape("with_full_pos", "with annotate('x','red','d','c')", _ANN,
          "with annotate('x', 'red', 'd', 'c'):\n    pass", "pass", plainest="with_new"),
    Shape("with_payload", "with annotate('x', payload=i), i+=1", _ANN + _I,
          "i += 1\nwith annotate('x', payload=i):\n    pass", "i += 1", plain_setup=_I,
          plainest="with_new"),
    Shape("with_payload_float", "with annotate('x',color,payload=x+.5)", _ANN + _X,
          "x += 0.5\nwith annotate('x', color='red', payload=x):\n    pass", "x += 0.5",
          plain_setup=_X, plainest="with_new"),
    Shape("with_fstring", "with annotate(f'step {i%8}', color=)", _ANN + _I,
          "i += 1\nwith annotate(f'step {i & 7}', color='red'):\n    pass",
          "i += 1\ns = f'step {i & 7}'", plain_setup=_I, plainest="with_new"),
    Shape("decorated_args", "@annotate(color,domain) g(1, b=2)",
          _FA + "g = L.annotate('f', color='red', domain='d')(f)\n", "g(1, b=2)", "f(1, b=2)",
          plain_setup=_FA, plainest="decorated"),
    Shape("push_pop_color_kw", "push_range('x', color='red') + pop", _PP,
          "push_range('x', color='red')\npop_range()", "pass", plainest="push_pop"),
    Shape("push_pop_color_pos", "push_range('x', 'red') + pop", _PP,
          "push_range('x', 'red')\npop_range()", "pass", plainest="push_pop"),
    Shape("push_pop_full_kw", "push_range(x,color,domain,category=)+pop", _PP,
          "push_range('x', color='red', domain='d', category='c')\npop_range(domain='d')", "pass",
          plainest="push_pop"),
    Shape("push_pop_payload", "push_range('x',color,payload=i) + pop", _PP + _I,
          "i += 1\npush_range('x', color='red', payload=i)\npop_range()", "i += 1",
          plain_setup=_I, plainest="push_pop"),
    Shape("push_pop_fstring", "push_range(f'step {i%8}') + pop", _PP + _I,
          "i += 1\npush_range(f'step {i & 7}')\npop_range()", "i += 1\ns = f'step {i & 7}'",
          plain_setup=_I, plainest="push_pop"),
    Shape("mark_payload", "mark('x', payload=i), i+=1", "mark = L.mark\n" + _I,
          "i += 1\nmark('x', payload=i)", "i += 1", plain_setup=_I, plainest="mark"),
    Shape("mark_payload_float", "mark('x', payload=x), x+=.5", "mark = L.mark\n" + _X,
          "x += 0.5\nmark('x', payload=x)", "x += 0.5", plain_setup=_X, plainest="mark"),
    Shape("mark_full_kw", "mark(x,color,domain,category=)", "mark = L.mark\n",
          "mark('x', color='red', domain='d', category='c')", "pass", plainest="mark"),
    Shape("mark_fstring", "mark(f'step {i%8}')", "mark = L.mark\n" + _I,
          "i += 1\nmark(f'step {i & 7}')", "i += 1\ns = f'step {i & 7}'", plain_setup=_I,
          plainest="mark"),
    Shape("start_end_kw", "end_range(start_range(message=,color=,domain=))", _SE,
          "end_range(start_range(message='x', color='red', domain='d'))", "pass",
          plainest="start_end"),
    Shape("start_end_payload", "end_range(start_range('x', payload=i))", _SE + _I,
          "i += 1\nend_range(start_range('x', payload=i))", "i += 1", plain_setup=_I,
          plainest="start_end"),
    Shape("domain_kw", "Domain push_range(message=,color=)+pop",
          "d = L.get_domain('bench')\n",
          "d.push_range(message='x', color='red')\nd.pop_range()", "pass", plainest="domain_attrs"),
    Shape("domain_mark", "Domain mark(attrs)",
          "d = L.get_domain('bench')\nattrs = d.get_event_attributes(message='x')\n",
          "d.mark(attrs)", "pass"),
    Shape("domain_start_end", "Domain end_range(start_range(attrs))",
          "d = L.get_domain('bench')\nattrs = d.get_event_attributes(message='x')\n",
          "d.end_range(d.start_range(attrs))", "pass"),
    Shape("domain_payload", "Domain mark(message='x', payload=i)",
          "d = L.get_domain('bench')\n" + _I,
          "i += 1\nd.mark(message='x', payload=i)", "i += 1", plain_setup=_I, plainest="domain_mark"),
    # Beyond the spellings with targets (no target; shown so the dashboard sees them): messages that never
    # repeat (a counter that carries over from run to run, so repeats do not replay cached texts),
    # and Domain attributes built at each call.
    Shape("mark_unbounded", "mark(f'request {n}'), n never repeats", "mark = L.mark\n" + _N,
          "mark(f'request {next(n)}')", "s = f'request {next(n)}'", plain_setup=_N),
    # (each shape its own texts: a text one shape sends is not new to another, which then prepares it)
    Shape("push_pop_unbounded", "push_range(f'request {n}') + pop, n never repeats", _PP + _N,
          "push_range(f'push {next(n)}')\npop_range()", "s = f'push {next(n)}'", plain_setup=_N),
    Shape("with_unbounded", "with annotate(f'request {n}'), n never repeats", _ANN + _N,
          "with annotate(f'with {next(n)}'):\n    pass", "s = f'with {next(n)}'", plain_setup=_N),
    # a message used exactly twice (registered at its first call, prepared at its second)
    Shape("mark_twice", "mark(m); mark(m), m used exactly twice", "mark = L.mark\n" + _N,
          "m = f'twice {next(n)}'\nmark(m)\nmark(m)", "m = f'twice {next(n)}'", plain_setup=_N),
    Shape("with_twice", "with annotate(m) x2, m used exactly twice", _ANN + _N,
          "m = f'wtwice {next(n)}'\nwith annotate(m):\n    pass\nwith annotate(m):\n    pass",
          "m = f'wtwice {next(n)}'", plain_setup=_N),
    Shape("domain_attrs_per_call", "Domain mark(get_event_attributes('x')) each call",
          "d = L.get_domain('bench')\n", "d.mark(d.get_event_attributes(message='x'))", "pass"),
]

# Counters and binary payloads: counter samples, and NumPy arrays / lists as extended
# payloads. Their own family ("counters": bench_overhead.Counters), no spelling target.
_DOM = "d = L.get_domain('bench')\n"
_ARR = "import numpy as np\na = np.arange(16)\n"
COUNTER_SHAPES = [
    Shape("int_sample", "counter.sample(5) (int64 counter)", _DOM + "c = d.get_counter('c', int)\n",
          "c.sample(5)", "pass", needs="get_domain", group="counters"),
    Shape("int_sample_bound", "s = counter.sample; s(5)", _DOM + "s = d.get_counter('c', int).sample\n",
          "s(5)", "pass", needs="get_domain", group="counters"),
    Shape("float_sample", "counter.sample(0.5) (float64 counter)", _DOM + "c = d.get_counter('f', float)\n",
          "c.sample(0.5)", "pass", needs="get_domain", group="counters"),
    Shape("group_sample", "group.sample((1, 2.0)) (i8+f8 dtype)",
          _DOM + "g = d.get_counter('g', [('a', 'i8'), ('b', 'f8')])\nv = (1, 2.0)\n",
          "g.sample(v)", "pass", needs="get_domain", group="counters"),
    Shape("mark_array", "mark('x', payload=np.arange(16))", "mark = L.mark\n" + _ARR,
          "mark('x', payload=a)", "pass", group="counters"),
    Shape("with_array", "with annotate('x', payload=np.arange(16))", _ANN + _ARR,
          "with annotate('x', payload=a):\n    pass", "pass", group="counters"),
    Shape("mark_list", "mark('x', payload=[16 ints])", "mark = L.mark\nlst = list(range(16))\n",
          "mark('x', payload=lst)", "pass", group="counters"),
]

SHAPES: Dict[str, Shape] = {s.name: s for s in [
    Shape("decorated", "@annotate call (above f())", _F + "g = L.annotate('f')(f)\n", "g()", "f()",
          plain_setup=_F),
    Shape("with_new", "with annotate('x') built each time", "annotate = L.annotate\n",
          "with annotate('x'):\n    pass", "pass"),
    Shape("with_reused", "with a reused annotate object", "a = L.annotate('x')\n",
          "with a:\n    pass", "pass"),
    Shape("push_pop", "push_range('x') + pop_range()",
          "push_range = L.push_range\npop_range = L.pop_range\n",
          "push_range('x')\npop_range()", "pass"),
    Shape("mark", "mark('x')", "mark = L.mark\n", "mark('x')", "pass"),
    Shape("start_end", "end_range(start_range('x'))",
          "start_range = L.start_range\nend_range = L.end_range\n",
          "end_range(start_range('x'))", "pass"),
    Shape("domain_attrs", "Domain pre-built attrs push+pop",
          "d = L.get_domain('bench')\nattrs = d.get_event_attributes(message='x')\n",
          "d.push_range(attrs)\nd.pop_range()", "pass"),
    *CALL_SHAPES,
    *COUNTER_SHAPES,
    Shape("profile", "Profile enabled, per call of f()",
          _F + "profile = L.Profile()\n", "f()", "f()", needs="Profile", plain_setup=_F),
    # The raw C calls of this shim, GIL kept, against the same shim built by stock CFFI
    # (which releases the GIL and saves errno around each call): see stock_cffi.py.
    Shape("gil_kept", "C push+pop, this shim (GIL kept)",
          "from nvtx_cffi._native import lib\nslot = lib.nvtxcffi_slot_create(0, -1, 0xFF0000FF, 0)\n"
          "push = lib.nvtxcffi_push\npop = lib.nvtxcffi_pop\n",
          "push(slot)\npop(0)", "pass", libraries=("nvtx_cffi",)),
    Shape("stock_cffi", "C push+pop, stock CFFI (GIL released)",
          "from benchmarks.stock_cffi import load\nlib = load().lib\nlib.nvtxcffi_initialize()\n"
          "slot = lib.nvtxcffi_slot_create(0, -1, 0xFF0000FF, 0)\n"
          "push = lib.nvtxcffi_push\npop = lib.nvtxcffi_pop\n",
          "push(slot)\npop(0)", "pass", libraries=("nvtx_cffi",)),
]}


def null_tool_path() -> Optional[str]:
    """The null tool library: ``$NVTX_CFFI_NULL_TOOL``, else the one installed with nvtx_cffi.

    Found without importing nvtx_cffi (importing it initialises NVTX, which must wait for
    :func:`attach`). None when there is none.
    """
    override = os.environ.get("NVTX_CFFI_NULL_TOOL")
    if override:
        return override if os.path.exists(override) else None
    spec = importlib.util.find_spec("nvtx_cffi")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "libnvtx_null_tool.so")
        if os.path.exists(path):
            return path
    return None


def attach(tool: str) -> None:
    """Set this process's environment so NVTX loads ``tool`` ("none" or "null") when it initialises."""
    os.environ.pop("NVTX_DISABLE", None)
    if tool == "none":
        os.environ.pop("NVTX_INJECTION64_PATH", None)
    elif tool == "null":
        path = null_tool_path()
        if path is None:
            msg = "null tool library not found (build nvtx_cffi or set NVTX_CFFI_NULL_TOOL)"
            raise NotImplementedError(msg)
        os.environ["NVTX_INJECTION64_PATH"] = path
    else:
        msg = f"tool must be one of {TOOLS}, not {tool!r}"
        raise ValueError(msg)


def load_library(library: str) -> Any:
    """The module a shape's ``L`` stands for (None for "plain"); NotImplementedError if missing."""
    if library == "plain":
        return None
    try:
        return importlib.import_module(library)
    except ImportError as exc:
        raise NotImplementedError(f"{library} is not importable: {exc}") from None


def shape_available(shape: Shape, library: str, module: Any) -> bool:
    """Whether ``shape`` runs against ``library`` (plain runs every shape's baseline body)."""
    if library == "plain":
        return True
    if library not in shape.libraries:
        return False
    return not shape.needs or hasattr(module, shape.needs)


class Timer:
    """Times ``number`` unrolled iterations of a shape's body (or plain body, or floor statement)
    in thread CPU time. ``module`` is the library (``L``), or with ``floor`` the floor module (``F``)."""

    def __init__(self, shape: Shape, module: Any, plain: bool = False, floor: bool = False) -> None:
        if floor:
            namespace: Dict[str, Any] = {"F": module}
            setup, statement = shape.floor_setup, shape.floor or shape.body
        else:
            namespace = {"L": module}
            setup, statement = (shape.plain_setup, shape.plain) if plain else (shape.setup, shape.body)
        exec(setup, namespace)  # noqa: S102 - our own fixed snippets
        names = sorted(k for k in namespace if not k.startswith("__") and k not in ("L", "F"))
        body = textwrap.indent(statement + "\n", " " * 8) * UNROLL
        params = "".join(f", {k}={k}" for k in names)
        source = (
            f"def run(_n, _clock=_clock, _range=range{params}):\n"
            f"    _t0 = _clock()\n"
            f"    for _ in _range(_n):\n{body}"
            f"    return _clock() - _t0\n"
        )
        namespace["_clock"] = time.thread_time_ns
        exec(compile(source, f"<shape {shape.name}>", "exec"), namespace)  # noqa: S102
        self._run = namespace["run"]
        self._profile = namespace.get("profile") if shape.needs == "Profile" and not plain else None

    def run(self, number: int) -> int:
        """Thread CPU ns for ``number`` iterations (``number * UNROLL`` bodies): time with
        :func:`best_ns_per_op`."""
        if self._profile is not None:
            self._profile.enable()
            try:
                return self._run(number)
            finally:
                self._profile.disable()
        return self._run(number)


def samples_ns(runs: Dict[str, Callable[[int], int]], repeats: int = REPEATS,
               number: int = NUMBER) -> Dict[str, List[int]]:
    """The sampling compare.py and the asv suite share: ``repeats`` samples of each ``run`` (a
    :meth:`Timer.run`, or any callable that runs ``number`` iterations and returns their ns).

    The runs' samples alternate (one sample of each, then again), so a noisy moment of a shared
    machine hits an annotated body and its plain body alike. Each run first runs once, outside
    the measurement (first-use preparation, caches). The cyclic garbage collector is off meanwhile.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for run in runs.values():
            run(max(1, number // 10))
        out: Dict[str, List[int]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                out[name].append(run(number))
    finally:
        if gc_was_enabled:
            gc.enable()
    return out


def best_ns_per_op(runs: Dict[str, Callable[[int], int]], repeats: int = REPEATS,
                   number: int = NUMBER, per_number: int = UNROLL) -> Dict[str, float]:
    """The measurement of compare.py and of the asv suite's per-call benchmarks: for each run,
    the minimum over its :func:`samples_ns` of ns per body (``number * per_number`` bodies a
    sample). The minimum keeps the quiet samples of a shared machine."""
    samples = samples_ns(runs, repeats, number)
    return {name: min(values) / (number * per_number) for name, values in samples.items()}


def reported_ns(tool: str, body: float, plain: float, empty: float) -> float:
    """The figure reported for a shape, from :func:`best_ns_per_op`'s ns per body of the annotated
    body, of the plain body and of the empty loop.

    With a tool ("null"): the overhead, ns above the same code without annotation (compare.py's
    table). Without a tool ("none"): the absolute cost of the annotated body, ns above the empty
    loop. That overhead is a few ns, and 0 by design where the call is an empty function (a
    decorator that returns ``f`` itself), so a ratio of two runs of it would be a ratio of noise.
    """
    return body - plain if tool != "none" else body - empty


# Each shape's floor (Shape.floor_setup, Shape.floor): its spelling with floor.c's no-op C objects,
# each call the cheapest C callable of its arguments (none: METH_NOARGS, one positional: METH_O,
# else METH_FASTCALL | METH_KEYWORDS, CPython specialises all three), a `with` on a C type built each
# time or held, a decorated function a C object calling f. Domain and counter calls are method calls
# of a floor object (the method's name costs nothing).
_W = "annotate = F.Floor\n"
_O = "o = F.Floor()\n"
_D = "d = F.Floor()\n"
_DA = _D + "attrs = d\n"
_PO = _O + "push_range = o.one\npop_range = o.noargs\n"
_PK = _O + "push_range = o.call\npop_range = o.noargs\n"
_MO = _O + "mark = o.one\n"
_MK = _O + "mark = o.call\n"
_SO = _O + "start_range = o.one\nend_range = o.one\n"
_SK = _O + "start_range = o.call\nend_range = o.one\n"
_CP = _O + "push = o.one\npop = o.one\nslot = 0\n"
_FLOORS = {  # shape: (floor setup, floor statement or "" for the body itself)
    "decorated": (_F + "g = F.wrap(f)\n", ""),
    "with_new": (_W, ""),
    "with_reused": ("a = F.Floor('x')\n", ""),
    "push_pop": (_PO, ""),
    "mark": (_MO, ""),
    "start_end": (_SO, ""),
    "domain_attrs": (_DA, "d.one(attrs)\nd.noargs()"),
    "with_color_kw": (_W, ""),
    "with_color_pos": (_W, ""),
    "with_full_kw": (_W, ""),
    "with_full_pos": (_W, ""),
    "with_payload": (_W + _I, ""),
    "with_payload_float": (_W + _X, ""),
    "with_fstring": (_W + _I, ""),
    "decorated_args": (_FA + "g = F.wrap(f)\n", ""),
    "push_pop_color_kw": (_PK, ""),
    "push_pop_color_pos": (_PK, ""),
    "push_pop_full_kw": (_O + "push_range = o.call\npop_range = o.call\n", ""),
    "push_pop_payload": (_PK + _I, ""),
    "push_pop_fstring": (_PO + _I, ""),
    "mark_payload": (_MK + _I, ""),
    "mark_payload_float": (_MK + _X, ""),
    "mark_full_kw": (_MK, ""),
    "mark_fstring": (_MO + _I, ""),
    "start_end_kw": (_SK, ""),
    "start_end_payload": (_SK + _I, ""),
    "domain_kw": (_D, "d.call(message='x', color='red')\nd.noargs()"),
    "domain_mark": (_DA, "d.one(attrs)"),
    "domain_start_end": (_DA, "d.one(d.one(attrs))"),
    "domain_payload": (_D + _I, "i += 1\nd.call(message='x', payload=i)"),
    "mark_unbounded": (_MO + _N, ""),
    "push_pop_unbounded": (_PO + _N, ""),
    "with_unbounded": (_W + _N, ""),
    "mark_twice": (_MO + _N, ""),
    "with_twice": (_W + _N, ""),
    "domain_attrs_per_call": (_D, "d.one(d.call(message='x'))"),
    "int_sample": ("c = F.Floor()\n", "c.one(5)"),
    "int_sample_bound": ("s = F.Floor().one\n", ""),
    "float_sample": ("c = F.Floor()\n", "c.one(0.5)"),
    "group_sample": ("g = F.Floor()\nv = (1, 2.0)\n", "g.one(v)"),
    "mark_array": (_MK + _ARR, ""),
    "with_array": (_W + _ARR, ""),
    "mark_list": (_MK + "lst = list(range(16))\n", ""),
    "profile": (_F + "from benchmarks.floor import Profile\nprofile = Profile(F)\n", ""),
    "gil_kept": (_CP, ""),
    "stock_cffi": (_CP, ""),
}
SHAPES = {name: shape._replace(floor_setup=_FLOORS[name][0], floor=_FLOORS[name][1])
          for name, shape in SHAPES.items()}

EMPTY = Shape("empty", "empty loop", "", "pass", "pass")


def _grouped(shapes: Dict[str, Shape]) -> Dict[str, Shape]:
    """Each plainest spelling followed by the other spellings of the same call (table order)."""
    ordered: Dict[str, Shape] = {}
    for name, shape in shapes.items():
        if not shape.plainest:
            ordered[name] = shape
            ordered.update((n, s) for n, s in shapes.items() if s.plainest == name)
    ordered.update((n, s) for n, s in shapes.items() if n not in ordered)
    return ordered


SHAPES = _grouped(SHAPES)
