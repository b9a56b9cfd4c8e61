#!/usr/bin/env python
"""Side-by-side cost of counter samples and array payloads: nvtx-cffi against NVIDIA's nvtx 0.2.16.

    python asv_bench/counters_compare.py          # ~30 s; --quick for a rough table

Each (library, tool) pair runs in a child process of its own (NVTX loads its tool once per
process); tools: none, and the null tool (``libnvtx_null_tool.so``, whose counters-extension
handlers do nothing: the cost of reaching a tool). Times: thread CPU ns per call above an empty loop
body, the minimum of many repeats, ten calls unrolled per loop iteration.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = {
    "int_sample": ("c = d.get_counter('c', int)", "c.sample(5)"),
    "int_bound": ("s = d.get_counter('c', int).sample", "s(5)"),
    "float_sample": ("f = d.get_counter('f', float)", "f.sample(0.5)"),
    "group_sample": ("g = d.get_counter('g', [('a', 'i8'), ('b', 'f8')]); v = (1, 2.0)", "g.sample(v)"),
    "mark_array": ("import numpy as np; a = np.arange(16); m = nvtx.mark", "m('step', payload=a)"),
    "with_array": ("import numpy as np; a = np.arange(16); ann = nvtx.annotate",
                   "with ann('step', payload=a): pass"),
    "mark_list": ("l = list(range(16)); m = nvtx.mark", "m('step', payload=l)"),
    "floor_c_meth": ("st = set()", "st.discard(5)"),  # the interpreter's C-method call (no NVTX)
}
TARGET = {"int_sample": 3, "int_bound": 3, "float_sample": 3}


def child(library: str, tool: str, repeats: int, number: int) -> dict:
    if tool == "null":
        import importlib.util  # the installed nvtx_cffi (or an in-place build on PYTHONPATH)

        pkg = importlib.util.find_spec("nvtx_cffi").submodule_search_locations[0]
        os.environ["NVTX_INJECTION64_PATH"] = os.path.join(pkg, "libnvtx_null_tool.so")
    else:
        os.environ.pop("NVTX_INJECTION64_PATH", None)
    nvtx = __import__(library)
    d = nvtx.get_domain("bench")
    out = {}
    clock = time.thread_time_ns
    for name, (setup, stmt) in SHAPES.items():
        ns = {"nvtx": nvtx, "d": d}
        exec(setup, ns)
        body = "\n".join(["def run(n):", "    for _ in range(n):"] + ["        " + stmt] * 10)
        empty = "def run(n):\n    for _ in range(n):\n" + "        pass\n" * 10
        exec(body, ns)
        run = ns["run"]
        exec(empty, ns)
        base = ns["run"]
        run(number // 10)
        best, best_base = float("inf"), float("inf")
        for _ in range(repeats):
            t = clock(); run(number); best = min(best, clock() - t)
            t = clock(); base(number); best_base = min(best_base, clock() - t)
        out[name] = max(0.0, (best - best_base) / (number * 10))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    repeats, number = (5, 2000) if args.quick else (25, 10000)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], repeats, number)))
        return
    results = {}
    for tool in ("none", "null"):
        for library in ("nvtx_cffi", "nvtx"):
            proc = subprocess.run([sys.executable, __file__, "--child", library, tool] + (["--quick"] if args.quick else []),
                                  capture_output=True, text=True, check=True, cwd=os.path.dirname(os.path.abspath(__file__)))
            results[(library, tool)] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{'shape':14} {'tool':5} {'nvtx-cffi ns':>12} {'nvtx ns':>9} {'nvtx/cffi':>10} {'target':>7}")
    for tool in ("none", "null"):
        for shape in SHAPES:
            ours, theirs = results[("nvtx_cffi", tool)][shape], results[("nvtx", tool)][shape]
            ratio = f"{theirs / ours:.1f}x" if ours > 0.5 else f">{theirs / 0.5:.0f}x"
            target = f">={TARGET[shape]}x" if tool == "null" and shape in TARGET else ""
            print(f"{shape:14} {tool:5} {ours:12.1f} {theirs:9.1f} {ratio:>10} {target:>7}")


if __name__ == "__main__":
    main()
