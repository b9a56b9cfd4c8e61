#!/usr/bin/env python
"""Per-call overhead of nvtx_cffi.Profile vs NVIDIA nvtx's Profile, side by side in one run.

Each measurement runs in its own subprocess with the null NVTX tool attached (a tool that does
nothing, so the numbers are the Python-side cost). Overhead = time per call of a small function
with the profile enabled minus without, best of several repeats.

    python asv_bench/scripts/compare_profile.py [--calls N] [--repeat R]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
impl, linenos, cfuncs, calls, repeat = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
if impl == "nvtx":
    import nvtx as mod
else:
    import nvtx_cffi as mod
    assert mod.enabled(), "null tool not attached"
def leaf(x):
    return x
def work(n):
    s = 0
    for i in range(n):
        s += leaf(i)      # one Python call per iteration
        s += abs(i)       # one C call per iteration
    return s
def best():
    out = []
    for _ in range(repeat):
        t = time.perf_counter_ns()
        work(calls)
        out.append(time.perf_counter_ns() - t)
    return min(out) / calls
base = best()
p = mod.Profile(linenos=linenos, annotate_cfuncs=cfuncs)
p.enable()
prof = best()
p.disable()
print(json.dumps({"base": base, "profiled": prof}))
"""


def measure(impl, linenos, cfuncs, calls, repeat, env):
    out = subprocess.run([sys.executable, "-c", CHILD, impl, str(int(linenos)), str(int(cfuncs)),
                          str(calls), str(repeat)], env=env, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["profiled"] - data["base"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from nvtx_cffi import recorder
    env = {**os.environ, "NVTX_INJECTION64_PATH": recorder.null_tool_path()}
    have_nvtx = importlib.util.find_spec("nvtx") is not None
    print(f"Python {sys.version.split()[0]}; ns added per loop iteration (1 Python call + 1 C call)")
    print(f"{'linenos':>8} {'cfuncs':>7} {'nvtx 0.2':>10} {'nvtx_cffi':>10} {'ratio':>7}")
    for linenos, cfuncs in ((True, True), (False, False), (True, False)):
        ours = measure("nvtx_cffi", linenos, cfuncs, args.calls, args.repeat, env)
        theirs = measure("nvtx", linenos, cfuncs, args.calls, args.repeat, env) if have_nvtx else float("nan")
        print(f"{linenos!s:>8} {cfuncs!s:>7} {theirs:10.0f} {ours:10.0f} {ours / theirs:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
