"""Annotation overhead on a real workload, as a percentage of the workload's own time.

The job of ``examples/cupy_memory.py``: "data generation" of COUNT random square arrays and a
"compute" of the squared differences of neighbouring arrays (each pair's sum read back), run with
annotations on and off. "On" annotates as a user profiling it would: a range around the run, one
around each phase, and one around each array generated and each pair computed (3 + 2 * COUNT - 1
ranges a run). "Off" is the same code without any annotation call.

- :class:`CupyWorkload`: 100 arrays of 1024 x 1024 on the GPU; ``variant`` no_pool (every array a
  fresh ``cudaMalloc``), default_pool (CuPy's memory pool installed), fused (the pool and the
  compute as one ``cupy.fuse`` kernel). Skipped (NotImplementedError, asv's skip) where CuPy does
  not import or there is no CUDA device. Wall time, the device synchronised at the end of a run.
- :class:`NumpyWorkload`: the same shape with NumPy, on every machine, with small arrays (100 of
  64 x 64, ~1 ms a run, ~1 s a benchmark); ``variant`` new_arrays (every array allocated) or
  out_buffers (arrays and the compute's buffer allocated once, filled in place: the pool's
  counterpart). Thread CPU time.

``track_overhead_pct``: (on - off) / off * 100 over ``repeats`` runs of each, on and off runs
alternating (``shapes.samples_ns``, the sampling of the per-call benchmarks): the median of the
differences of neighbouring on/off runs over the median off run. (Not the difference of the two
minima, as for single calls: a run is a millisecond of allocations and array code whose own
spread is larger than the ranges' cost, and two minima picked that spread.) It is a few percent
with nvtx-cffi, by design: read it in points, not as a ratio between commits.
``track_workload_ms``: the median unannotated run (the scale the percentage is of).
"""
from __future__ import annotations

import statistics
import time

from . import shapes

COUNT = 100


def _job(arrays_for, compute, L=None):
    """One run; annotated when ``L`` (the library module) is given."""
    if L is None:  # the same statements, less the annotations
        arrays = []
        for make in arrays_for:
            arrays.append(make())
        total = 0.0
        for a, b in zip(arrays, arrays[1:]):
            total += float(compute(a, b).sum())
        return total
    annotate = L.annotate
    with annotate("run", color="purple"):
        with annotate("data generation", color="green", domain="workload"):
            arrays = []
            for make in arrays_for:
                with annotate("array", color="green", domain="workload"):
                    arrays.append(make())
        with annotate("compute", color="red", domain="workload"):
            total = 0.0
            for a, b in zip(arrays, arrays[1:]):
                with annotate("pair", color="red", domain="workload"):
                    total += float(compute(a, b).sum())
    return total


class _Workload:
    params = [[], ["nvtx_cffi", "nvtx"], list(shapes.TOOLS)]
    param_names = ["variant", "library", "tool"]
    timeout = 300
    repeats = 100
    clock = staticmethod(time.thread_time_ns)

    def prepare(self, variant):
        """(arrays_for, compute, synchronize) for one variant; NotImplementedError to skip."""
        raise NotImplementedError

    def setup(self, variant, library, tool):
        shapes.attach(tool)
        module = shapes.load_library(library)
        if library == "nvtx_cffi" and tool == "null" and not module.tool_attached():
            raise RuntimeError("the null tool did not attach")
        arrays_for, compute, synchronize = self.prepare(variant)
        clock = self.clock

        def timed(L):
            def run(number):
                t0 = clock()
                for _ in range(number):
                    _job(arrays_for, compute, L)
                synchronize()
                return clock() - t0
            return run

        samples = shapes.samples_ns({"on": timed(module), "off": timed(None)}, self.repeats, 1)
        on, off = samples["on"], samples["off"]
        self.off_ns = statistics.median(off)
        self.extra_ns = statistics.median([a - b for a, b in zip(on, off)])

    def track_overhead_pct(self, variant, library, tool):
        return self.extra_ns / self.off_ns * 100.0

    def track_workload_ms(self, variant, library, tool):
        return self.off_ns / 1e6

    track_overhead_pct.unit = "%"
    track_workload_ms.unit = "ms"


class NumpyWorkload(_Workload):
    """The CuPy job's shape with NumPy, small arrays: annotation overhead in % of the run."""

    SIDE = 64
    params = [["new_arrays", "out_buffers"], *_Workload.params[1:]]
    repeats = 250

    def prepare(self, variant):
        try:
            import numpy as np
        except ImportError:
            raise NotImplementedError("needs NumPy") from None
        rng = np.random.default_rng(0)
        shape = (self.SIDE, self.SIDE)
        if variant == "new_arrays":
            arrays_for = [lambda: rng.random(shape, dtype=np.float32)] * COUNT

            def compute(a, b):
                return (a - b) ** 2
        else:
            buffers = [np.empty(shape, dtype=np.float32) for _ in range(COUNT)]
            arrays_for = [lambda out=out: rng.random(out=out, dtype=np.float32) for out in buffers]
            tmp = np.empty(shape, dtype=np.float32)

            def compute(a, b):
                np.subtract(a, b, out=tmp)
                return np.multiply(tmp, tmp, out=tmp)
        return arrays_for, compute, lambda: None


class CupyWorkload(_Workload):
    """examples/cupy_memory.py's job on the GPU: annotation overhead in % of the run."""

    SIDE = 1024
    params = [["no_pool", "default_pool", "fused"], *_Workload.params[1:]]
    repeats = 20
    clock = staticmethod(time.perf_counter_ns)  # the GPU's time is not this thread's CPU time

    def prepare(self, variant):
        try:
            import cupy as cp
        except ImportError:
            raise NotImplementedError("needs CuPy") from None
        try:
            if cp.cuda.runtime.getDeviceCount() < 1:
                raise NotImplementedError("no CUDA device")
        except NotImplementedError:
            raise
        except Exception as exc:  # no driver or runtime: CuPy raises its own error types
            raise NotImplementedError(f"no usable CUDA device ({exc})") from None
        cp.cuda.set_allocator(None if variant == "no_pool" else cp.get_default_memory_pool().malloc)
        rng = cp.random.default_rng(0)
        shape = (self.SIDE, self.SIDE)
        arrays_for = [lambda: rng.random(shape, dtype=cp.float32)] * COUNT

        def squared_difference(a, b):
            return (a - b) ** 2

        compute = cp.fuse(squared_difference) if variant == "fused" else squared_difference
        device = cp.cuda.Device()
        return arrays_for, compute, device.synchronize
