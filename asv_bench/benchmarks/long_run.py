"""Cost does not grow over a long run: 2e5 and then 2e6 more calls of each shape.

For every shape that nvtx-cffi runs (see ``shapes.py``; per-call payloads and f-strings included),
in a process of its own per tool: ns per call over the first 2e5 calls and over the next 2e6, and
resident memory (``/proc/self/statm``) after a short warm-up, after the 2e5 and after the 2e6.
Nothing keyed by a per-call value may be created, cached or evicted, so the two ns figures must be
the same (noise aside) and memory flat.

    python asv_bench/benchmarks/long_run.py            # table, both tools, each in its own process

asv runs :class:`LongRun` (``track_*``), parameters shape x tool, nvtx_cffi only, for the shapes
whose value changes every call (payloads, f-strings).
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from typing import Dict

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks import shapes
else:
    from . import shapes

SHORT, LONG = 200_000, 2_000_000
CHUNKS = 10
#: The shapes measured: nvtx-cffi's annotation shapes (not the raw C rows, not Profile).
NAMES = [name for name, shape in shapes.SHAPES.items()
         if "nvtx" in shape.libraries and name != "profile"]


def _rss_kib() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


def measure(name: str, module) -> Dict[str, float]:
    """One shape: ns per call over SHORT calls then over LONG more (best of CHUNKS chunks each);
    RSS (KiB) after a warm-up, after the SHORT and after the LONG calls."""
    timer = shapes.Timer(shapes.SHAPES[name], module)
    plain = shapes.Timer(shapes.SHAPES[name], None, plain=True)
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as in every timing here; collected garbage would hide growth, not cause it
    try:
        timer.run(1000)
        rss0 = _rss_kib()
        # Each phase in CHUNKS equal chunks, the cheapest kept (this machine is shared: a chunk
        # that another process interrupted says nothing about the code); a cost that grows with
        # the calls made shows as a dearer best chunk in the long phase.
        short = min(timer.run(SHORT // CHUNKS // shapes.UNROLL) for _ in range(CHUNKS)) / (SHORT // CHUNKS)
        rss1 = _rss_kib()
        long = min(timer.run(LONG // CHUNKS // shapes.UNROLL) for _ in range(CHUNKS)) / (LONG // CHUNKS)
        rss2 = _rss_kib()
        base = min(plain.run(SHORT // CHUNKS // shapes.UNROLL) for _ in range(CHUNKS)) / (SHORT // CHUNKS)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {"ns_short": short - base, "ns_long": long - base, "ns_plain": base, "rss_warm_kib": rss0,
            "rss_growth_short_kib": rss1 - rss0, "rss_growth_long_kib": rss2 - rss1}


def child(tool: str) -> Dict[str, Dict[str, float]]:
    shapes.attach(tool)
    module = shapes.load_library("nvtx_cffi")
    if tool == "null" and not module.tool_attached():
        raise SystemExit("the null tool did not attach")
    return {name: measure(name, module) for name in NAMES
            if shapes.shape_available(shapes.SHAPES[name], "nvtx_cffi", module)}


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        json.dump(child(sys.argv[2]), sys.stdout)
        return 0
    results = {}
    for tool in shapes.TOOLS:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tool],
                              capture_output=True, text=True, check=True)
        results[tool] = json.loads(done.stdout)
    print(f"# nvtx-cffi, ns per call above the plain body: over {SHORT:.0e} calls, then over {LONG:.0e} "
          f"more (thread CPU time, best of {CHUNKS} chunks each); RSS growth (KiB) over each")
    header = f"{'shape':<44}"
    for tool in shapes.TOOLS:
        label = "no tool" if tool == "none" else "null tool"
        header += f" | {label + ': 2e5':>12} {'2e6':>6} {'dRSS 2e5':>8} {'dRSS 2e6':>8}"
    print(header)
    print("-" * len(header))
    for name in NAMES:
        row = f"{shapes.SHAPES[name].title:<44}"
        for tool in shapes.TOOLS:
            r = results[tool].get(name)
            if r is None:
                row += f" | {'-':>12} {'-':>6} {'-':>8} {'-':>8}"
                continue
            row += (f" | {r['ns_short']:>12.1f} {r['ns_long']:>6.1f} {r['rss_growth_short_kib']:>8.0f}"
                    f" {r['rss_growth_long_kib']:>8.0f}")
        print(row)
    return 0


#: What asv runs (each combination costs 2.2e6 calls per method): the per-call-value spellings.
ASV_NAMES = [name for name in NAMES if "i += 1" in shapes.SHAPES[name].body
             or "x += 0.5" in shapes.SHAPES[name].body]


class LongRun:
    """ns per call and RSS growth over 2e5 then 2e6 more calls (nvtx_cffi; shape x tool)."""

    params = [ASV_NAMES, list(shapes.TOOLS)]
    param_names = ["shape", "tool"]
    timeout = 300

    def setup(self, name, tool):
        shapes.attach(tool)
        module = shapes.load_library("nvtx_cffi")
        if not shapes.shape_available(shapes.SHAPES[name], "nvtx_cffi", module):
            raise NotImplementedError(name)
        self.result = measure(name, module)

    def track_cost_2e6_over_2e5(self, name, tool):
        """ns per annotated call over the 2e6 calls / over the first 2e5 (1.0: no growth). A ratio of
        whole costs, not a difference of overheads: that difference is 0 by design, so its change
        between two commits would be a ratio of noise."""
        r = self.result
        return (r["ns_long"] + r["ns_plain"]) / (r["ns_short"] + r["ns_plain"])

    def track_rss_growth_2e6_kib(self, name, tool):
        return self.result["rss_growth_long_kib"]

    track_cost_2e6_over_2e5.unit = "ratio"
    track_rss_growth_2e6_kib.unit = "KiB"


if __name__ == "__main__":
    sys.exit(main())
