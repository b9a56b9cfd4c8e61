"""Per-call cost of every annotation shape, nvtx-cffi vs NVIDIA's nvtx, with and without a tool.

Parameters: ``library`` (nvtx_cffi, nvtx: skipped when not importable) and ``tool`` (none, or the
null NVTX tool: reaching a tool without the tool's own work). asv runs each parameter combination
in a process of its own; NVTX loads its tool once per process, at initialisation, so ``setup``
attaches the tool before the library is first imported (this module imports neither at the top).

Every benchmark is a ``track_*`` measured in-process, as ``asv_bench/compare.py`` measures
(``shapes.best_ns_per_op``: thread CPU time, min of REPEATS samples of 10,000 calls each, the
annotated and the plain samples alternating), not asv's ``time_*`` timing of one call, which
measures asv's own call overhead (microseconds) more than the call (nanoseconds).

- ``track_<shape>_ns``, tool=null: ns per call above the same code without annotation
  (compare.py's table).
- ``track_<shape>_ns``, tool=none: the absolute ns of the annotated call (above an empty loop).
  The overhead without a tool is a few ns, and 0 by design for a decorator that returns the
  function itself: as a ratio between two commits it would show noise as a 10x change.
"""
from __future__ import annotations

from . import shapes

REPEATS = 60  # track_*: min over REPEATS samples of shapes.NUMBER x UNROLL calls (compare.py: 200)


def measure_ns(timer, plain, tool) -> float:
    """The figure of one shape: shapes.reported_ns of the shared measurement."""
    empty = shapes.Timer(shapes.EMPTY, None, plain=True)
    best = shapes.best_ns_per_op({"body": timer.run, "plain": plain.run, "empty": empty.run},
                                 REPEATS, shapes.NUMBER)
    return shapes.reported_ns(tool, best["body"], best["plain"], best["empty"])


class _Shape:
    """One shape; subclasses set ``shape``. Parameters: library x tool."""

    shape = ""
    params = [["nvtx_cffi", "nvtx"], list(shapes.TOOLS)]
    param_names = ["library", "tool"]
    timeout = 120  # (no "timer" attribute here: asv reads that name as its clock)

    def setup(self, library, tool):
        shapes.attach(tool)
        module = shapes.load_library(library)  # NotImplementedError: asv skips the combination
        shape = shapes.SHAPES[self.shape]
        if not shapes.shape_available(shape, library, module):
            raise NotImplementedError(f"{self.shape} is not available for {library}")
        if library == "nvtx_cffi" and tool == "null" and not module.tool_attached():
            raise RuntimeError("the null tool did not attach")
        self._bench_timer = shapes.Timer(shape, module)
        self._bench_plain = shapes.Timer(shape, None, plain=True)

    def overhead_ns(self, tool):
        return measure_ns(self._bench_timer, self._bench_plain, tool)


def _make(name):
    """Define the benchmark class of shape ``name`` with its track_ method."""

    def track_ns(self, library, tool):
        return self.overhead_ns(tool)

    track_ns.unit = "ns"
    attrs = {"shape": name, f"track_{name}_ns": track_ns, "__doc__": shapes.SHAPES[name].title}
    return type(f"Shape_{name}", (_Shape,), attrs)


for _name in (name for name, shape in shapes.SHAPES.items()
              if shape.libraries and not shape.plainest and not shape.group):
    globals()[f"Shape_{_name}"] = _make(_name)
del _name


class _Spellings(_Shape):
    """Every spelling of one call: parameters spelling x library x tool. The first spelling is the
    plainest one; the others should cost at most twice as much."""

    spellings: list = []

    def setup(self, spelling, library, tool):
        self.shape = spelling
        super().setup(library, tool)

    def track_ns(self, spelling, library, tool):
        return self.overhead_ns(tool)

    track_ns.unit = "ns"


def _make_spellings(plainest):
    names = [plainest] + [n for n, s in shapes.SHAPES.items() if s.plainest == plainest]
    attrs = {"params": [names, ["nvtx_cffi", "nvtx"], list(shapes.TOOLS)],
             "param_names": ["spelling", "library", "tool"],
             "__doc__": "Spellings of " + shapes.SHAPES[plainest].title}
    return type(f"Spellings_{plainest}", (_Spellings,), attrs)


for _name in sorted({shape.plainest for shape in shapes.SHAPES.values() if shape.plainest}):
    globals()[f"Spellings_{_name}"] = _make_spellings(_name)
del _name


class Counters(_Spellings):
    """Counter samples and binary (array/list) payloads: parameters shape x library x
    tool, as the Spellings_* classes."""

    params = [[n for n, s in shapes.SHAPES.items() if s.group == "counters"], ["nvtx_cffi", "nvtx"],
              list(shapes.TOOLS)]
    param_names = ["shape", "library", "tool"]


class Baselines:
    """The two baselines, absolute ns per body: an empty loop's share (what ``tool=none`` figures
    are measured above) and a call of an empty function ``f()`` above it."""

    def setup(self):
        runs = {"call": shapes.Timer(shapes.SHAPES["decorated"], None, plain=True).run,
                "empty": shapes.Timer(shapes.EMPTY, None, plain=True).run}
        self.best = shapes.best_ns_per_op(runs, REPEATS, shapes.NUMBER)

    def track_empty_loop_ns(self):
        return self.best["empty"]

    def track_plain_call_ns(self):
        return self.best["call"] - self.best["empty"]

    track_empty_loop_ns.unit = "ns"
    track_plain_call_ns.unit = "ns"
