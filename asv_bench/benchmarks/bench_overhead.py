"""Per-call overhead of every annotation shape, nvtx-cffi vs NVIDIA's nvtx, with and without a tool.

Parameters: ``library`` (nvtx_cffi, nvtx: skipped when not importable) and ``tool`` (none, or the
null NVTX tool: reaching a tool without the tool's own work). asv runs each parameter combination
in a process of its own; NVTX loads its tool once per process, at initialisation, so ``setup``
attaches the tool before the library is first imported (this module imports neither at the top).

- ``time_<shape>``: asv's own timing of one call of the shape (includes asv's call overhead).
- ``track_<shape>_ns``: ns per call above the same code without annotation (thread CPU time,
  min of repeats): the number to compare, as in ``asv_bench/compare.py``.
- ``track_<shape>_fraction``: that overhead as a fraction of a small native workload (a CuPy
  kernel launch with a GPU, else a small NumPy operation).
"""
from __future__ import annotations

import time

from . import shapes

REPEATS, NUMBER = 15, 200  # track_*: min over REPEATS of NUMBER x UNROLL calls


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
        self._bench_once = self._bench_timer.once
        self._bench_timer.run(10)  # first-use preparation outside the measurement

    def overhead_ns(self):
        best = min(self._bench_timer.run(NUMBER) for _ in range(REPEATS))
        base = min(self._bench_plain.run(NUMBER) for _ in range(REPEATS))
        return (best - base) / (NUMBER * shapes.UNROLL)


def _make(name):
    """Define the benchmark class of shape ``name`` with its time_/track_ methods."""

    def time_call(self, library, tool):
        if self._bench_timer._profile is not None:  # Profile is only enabled around the loop
            self._bench_timer.run(1)
        else:
            self._bench_once()

    def track_ns(self, library, tool):
        return self.overhead_ns()

    def track_fraction(self, library, tool):
        return self.overhead_ns() / _workload_ns()

    track_ns.unit = "ns"
    track_fraction.unit = "fraction of workload"
    attrs = {"shape": name, f"time_{name}": time_call, f"track_{name}_ns": track_ns,
             f"track_{name}_fraction": track_fraction,
             "__doc__": shapes.SHAPES[name].title}
    return type(f"Shape_{name}", (_Shape,), attrs)


for _name in (name for name, shape in shapes.SHAPES.items()
              if shape.libraries and not shape.plainest and not shape.group):
    globals()[f"Shape_{_name}"] = _make(_name)
del _name


class _Spellings(_Shape):
    """Every spelling of one call (issue 12): parameters spelling x library x tool. The first
    spelling is the plainest one; the others should cost at most twice as much."""

    spellings: list = []

    def setup(self, spelling, library, tool):
        self.shape = spelling
        super().setup(library, tool)

    def time_call(self, spelling, library, tool):
        self._bench_once()

    def track_ns(self, spelling, library, tool):
        return self.overhead_ns()

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
    """Counter samples and binary (array/list) payloads (issue 9): parameters shape x library x
    tool, as the Spellings_* classes."""

    params = [[n for n, s in shapes.SHAPES.items() if s.group == "counters"], ["nvtx_cffi", "nvtx"],
              list(shapes.TOOLS)]
    param_names = ["shape", "library", "tool"]


class Baselines:
    """The two baselines: an empty loop iteration and a call of an empty function ``f()``."""

    def setup(self):
        def f():
            pass

        self.f = f

    def time_empty_loop(self):
        for _ in range(1):
            pass

    def time_plain_call(self):
        self.f()

    def track_plain_call_ns(self):
        call = shapes.Timer(shapes.SHAPES["decorated"], None, plain=True)
        empty = shapes.Timer(shapes.EMPTY, None, plain=True)
        return (min(call.run(NUMBER) for _ in range(REPEATS))
                - min(empty.run(NUMBER) for _ in range(REPEATS))) / (NUMBER * shapes.UNROLL)

    track_plain_call_ns.unit = "ns"


_workload = None


def _workload_ns() -> float:
    """ns of one small native operation: a CuPy kernel launch with a GPU, else NumPy."""
    global _workload
    if _workload is None:
        _workload = _cupy_workload() or _numpy_workload()
    return _workload


def _cupy_workload():
    try:
        import cupy

        a = cupy.ones(1024, dtype=cupy.float32)
        out = cupy.empty_like(a)
        cupy.add(a, a, out=out)
        cupy.cuda.Device().synchronize()
    except Exception:  # no CuPy, no GPU, no driver: fall back to NumPy
        return None
    return _best_ns(lambda: cupy.add(a, a, out=out))


def _numpy_workload():
    try:
        import numpy
    except ImportError:
        raise NotImplementedError("needs NumPy or CuPy") from None
    a = numpy.ones(1024, dtype=numpy.float32)
    out = numpy.empty_like(a)
    return _best_ns(lambda: numpy.add(a, a, out=out))


def _best_ns(operation, number=200, repeats=15) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        for _ in range(number):
            operation()
        best = min(best, time.thread_time_ns() - t0)
    return best / number
