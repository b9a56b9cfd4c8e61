#!/usr/bin/env python
"""One-shot side-by-side overhead table: nvtx-cffi against NVIDIA's nvtx, with and without a tool.

    python asv_bench/compare.py            # ~1 minute; --quick for a rough table in seconds

For every shape (see ``benchmarks/shapes.py``) × library {plain, nvtx-cffi, nvtx} × tool {none,
null}, prints the cost in ns above the baseline (the same code without annotation: an empty body,
or ``f()`` for decorated calls and Profile) and the ratio nvtx / nvtx-cffi, next to the target
target ratio. NVTX loads its tool once per process, so each (library, tool) combination runs
in a child process of its own; this process only collects and prints. Times are thread CPU time,
the minimum of many repeats (the shapes are interleaved so a noisy moment hits them all).
Each spelling of a call is also shown against the plainest spelling of the same call
("xplain": nvtx-cffi's cost over its cost for that one; the target is <= 2).
Beside each shape, its floor: what the interpreter charges for the same spelling with no-op C
objects in place of the library (``benchmarks/floor.py``), measured in nvtx-cffi's processes among
its shapes, plus what NVTX itself charges, with the same tool, for the calls the shape makes
(``asv_bench/c/nvtx_cost.c``, from C). A shape below its target where nvtx's cost over that floor is below the target too is
"at floor" (no library could meet it there); "cffi-floor" is nvtx-cffi's ns above the floor.
The last two rows are the raw C push+pop of this shim (GIL kept) against the same shim built by
stock CFFI (see ``benchmarks/stock_cffi.py``).

``--asv`` prints, from the same runs, the figures the asv suite records (``track_*_ns``): with the
null tool the ns above the baseline, as above; with no tool the absolute ns of the annotated call
(above the empty loop), see ``shapes.reported_ns``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from typing import Dict, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from benchmarks import floor, shapes  # noqa: E402

# Targets: nvtx / nvtx-cffi must be at least this, per tool ("identity": the decorator returns the
# function itself). The first seven shapes have their own; every spelling users write has >= 4 without a tool
# and >= 5 with one (>= 5 for per-call payloads too), and, for
# each spelling, at most MAX_VS_PLAINEST x the cost of the plainest spelling of the same call
# (Shape.plainest; the "xplain" column). Shapes not listed have no ratio target.
_FIRST_TARGETS = {
    "none": {"decorated": "identity", "with_new": 8, "with_reused": 2, "push_pop": 5, "mark": 4,
             "start_end": 3, "domain_attrs": 1},
    "null": {"decorated": 3, "with_new": 6, "with_reused": 2, "push_pop": 5, "mark": 7,
             "start_end": 5, "domain_attrs": 1},
}
_SPELLING_TARGETS = {"none": 4, "null": 5}
# Counters and binary payloads (shapes.COUNTER_SHAPES): with a tool, an int/float sample
# >= 3x cheaper than nvtx's, arrays and lists cheaper than nvtx's (no target without a tool).
_PAYLOAD_TARGETS = {"null": {"int_sample": 3, "int_sample_bound": 3, "float_sample": 3, "group_sample": 1,
                    "mark_array": 1, "with_array": 1, "mark_list": 1}}
# Pre-built Domain attributes are one C call in nvtx too (no target but the first shapes'); Domain calls
# that build attributes from keywords get the spellings' targets.
_SPELLING_EXEMPT = {"domain_attrs", "domain_mark", "domain_start_end", "with_reused"}


def _targets() -> Dict[str, Dict[str, object]]:
    targets = {tool: dict(values) for tool, values in _FIRST_TARGETS.items()}
    for name, shape in shapes.SHAPES.items():
        if name in _SPELLING_EXEMPT or "nvtx" not in shape.libraries:
            continue
        if not (shape.plainest or name in targets["none"]):  # Profile: no target
            continue
        for tool, least in _SPELLING_TARGETS.items():
            old = targets[tool].get(name)
            if old != "identity":
                targets[tool][name] = max(least, old or 0)
    targets["none"]["decorated_args"] = "identity"  # no tool: the decorator returns f itself
    for tool, values in _PAYLOAD_TARGETS.items():
        targets[tool].update(values)
    return targets


TARGETS = _targets()
MAX_VS_PLAINEST = 2.0
NOISE_NS = 0.5  # below this a difference is noise; ratios against it are shown as ">x"


def child(library: str, tool: str, repeats: int, number: int) -> Dict:
    """Measure every shape for one (library, tool) in this process; returns what the parent prints."""
    shapes.attach(tool)  # before the first import of the library: NVTX initialises then
    module = shapes.load_library(library)
    info: Dict = {"library": library, "tool": tool, "shapes": {}}
    if library == "nvtx_cffi":
        info["tool_attached"] = module.tool_attached()
        if tool == "null" and not module.tool_attached():
            raise SystemExit("the null tool did not attach")
    if library == "nvtx":
        info["version"] = getattr(module, "__version__", None) or _dist_version("nvtx")
    floor_module = _floor_module(info) if library == "nvtx_cffi" else None
    if floor_module is not None:
        try:
            info["nvtx_cost"] = floor.nvtx_cost()
        except NotImplementedError as exc:
            info["floor_skipped"] = str(exc)
        if tool == "none":  # (the same with any tool: one child measures it)
            info["error_check_ns"] = floor.error_check_ns(floor_module)
    timers = {"empty": shapes.Timer(shapes.EMPTY, None, plain=True)}
    for shape in shapes.SHAPES.values():
        if not shapes.shape_available(shape, library, module):
            continue
        try:
            timers[shape.name + ":plain"] = shapes.Timer(shape, module, plain=True)
            if library != "plain":
                timers[shape.name] = shapes.Timer(shape, module)
        except NotImplementedError as exc:  # e.g. no compiler for the stock CFFI build
            info.setdefault("skipped", {})[shape.name] = str(exc)
            continue
        if floor_module is not None:
            timers[shape.name + ":floor"] = shapes.Timer(shape, floor_module, floor=True)
    if library != "plain" and "decorated" in timers:
        info["decorator_returns_function"] = _decorator_identity(module)
        info["decorator_args_returns_function"] = _decorator_identity(
            module, color="red", domain="d")
    # interleaved (noise hits every shape alike): the same measurement as the asv suite's
    per_op = shapes.best_ns_per_op({name: timer.run for name, timer in timers.items()},
                                   repeats, number)
    info["empty"] = per_op["empty"]
    for shape in shapes.SHAPES:
        if shape + ":plain" in per_op:
            info["shapes"][shape] = {"plain": per_op[shape + ":plain"], "body": per_op.get(shape)}
            if shape + ":floor" in per_op:
                info["shapes"][shape]["floor"] = per_op[shape + ":floor"]
    return info


def _floor_module(info: Dict):
    """benchmarks/floor.py's module (built by the parent), or None with the reason in ``info``."""
    try:
        return floor.load()
    except NotImplementedError as exc:
        info["floor_skipped"] = str(exc)
        return None


def _decorator_identity(module, **kwargs) -> bool:
    def f():
        pass

    return module.annotate("f", **kwargs)(f) is f


def _dist_version(name: str) -> Optional[str]:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def run_child(library: str, tool: str, repeats: int, number: int) -> Optional[Dict]:
    command = [sys.executable, os.path.abspath(__file__), "--child", library, tool,
               "--repeats", str(repeats), "--number", str(number)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"[{library}, tool={tool}] skipped: {done.stderr.strip().splitlines()[-1:] or done.returncode}",
              file=sys.stderr)
        return None
    return json.loads(done.stdout)


def overhead(info: Optional[Dict], shape: str) -> Optional[float]:
    """ns above the baseline: body - plain body (the library), plain - empty loop (plain)."""
    if info is None or shape not in info["shapes"]:
        return None
    entry = info["shapes"][shape]
    if info["library"] == "plain":
        return entry["plain"] - info["empty"]
    if entry["body"] is None:
        return None
    return entry["body"] - entry["plain"]


def floor_overhead(info: Optional[Dict], shape: str) -> Optional[float]:
    """ns above the baseline of the shape's floor statement (measured beside nvtx-cffi's body), plus
    NVTX's own cost of the shape's calls with the same tool (none where it could not be measured)."""
    entry = (info or {}).get("shapes", {}).get(shape)
    if entry is None or entry.get("floor") is None:
        return None
    cost = (info or {}).get("nvtx_cost") or {}
    nvtx = sum(cost.get(kind, 0.0) * count for kind, count in floor.nvtx_calls(shape).items())
    return entry["floor"] - entry["plain"] + nvtx


def ratio(theirs: float, ours: float) -> float:
    """theirs / ours, ours taken as at least NOISE_NS."""
    return theirs / max(ours, NOISE_NS)


def verdict(target, ours: Optional[float], theirs: Optional[float], floor: Optional[float]) -> str:
    """"met" or "NOT" against a numeric target, "at floor" for a miss where nvtx's cost over the
    shape's floor is below the target too (no library could meet it on this interpreter); "" without
    a numeric target or a measurement."""
    if not isinstance(target, (int, float)) or ours is None or theirs is None:
        return ""
    if ratio(theirs, ours) >= target:
        return "met"
    if floor is not None and ratio(theirs, floor) < target:
        return "at floor"
    return "NOT"


def table(results: Dict) -> str:
    def cell(value: Optional[float]) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = []
    header = f"{'shape':<44}"
    for tool in shapes.TOOLS:
        label = "no tool" if tool == "none" else "null tool"
        header += (f" | {label + ': plain':>14} {'nvtx-cffi':>9} {'nvtx':>6} {'floor':>6} {'ratio':>6}"
                   f" {'target':>12} {'xplain':>9} {'cffi-floor':>10}")
    lines += [header, "-" * len(header)]
    for name, shape in shapes.SHAPES.items():
        row = f"{shape.title:<44}"
        shown = False
        for tool in shapes.TOOLS:
            plain = overhead(results.get(("plain", tool)), name)
            cffi_info = results.get(("nvtx_cffi", tool))
            ours = overhead(cffi_info, name)
            theirs = overhead(results.get(("nvtx", tool)), name)
            floor = floor_overhead(cffi_info, name)
            shown = shown or ours is not None or theirs is not None
            ratio_text, judged = "-", ""
            target = TARGETS[tool].get(name)
            if target == "identity":
                key = "decorator_returns_function" if name == "decorated" else "decorator_args_returns_function"
                same = (cffi_info or {}).get(key)
                ratio_text = "is f" if same else "wrapped"
                judged = "met" if same else "NOT met"
                target = "is f"
            elif ours is not None and theirs is not None:
                ratio_text = (">" if ours < NOISE_NS else "") + f"{ratio(theirs, ours):.1f}"
                judged = verdict(target, ours, theirs, floor)
            target_text = "" if target is None else (target if isinstance(target, str) else f">={target}")
            versus = ""
            base = overhead(cffi_info, shape.plainest) if shape.plainest else None
            if target == "is f" and judged == "met":
                versus = "is f ok"  # the function itself: what is left above f() is timer noise
            elif ours is not None and base is not None:
                value = max(ours, NOISE_NS) / max(base, NOISE_NS)
                versus = f"{value:.2f} " + ("ok" if value <= MAX_VS_PLAINEST or ours <= 2 * NOISE_NS else "NOT")
            above_floor = None if ours is None or floor is None else ours - floor
            row += (f" | {cell(plain):>14} {cell(ours):>9} {cell(theirs):>6} {cell(floor):>6} {ratio_text:>6}"
                    f" {(target_text + ' ' + judged).strip():>12} {versus:>9} {cell(above_floor):>10}")
        if shown:
            lines.append(row)
    return "\n".join(lines)


def asv_table(results: Dict) -> str:
    """What the asv suite's ``track_*_ns`` record for these runs (shapes.reported_ns)."""
    columns = [(lib, tool) for tool in shapes.TOOLS for lib in ("nvtx_cffi", "nvtx")]
    header = f"{'shape':<44}" + "".join(f" {lib + '/' + tool:>15}" for lib, tool in columns)
    lines = ["# asv track_*_ns: tool=none: ns of the annotated call above the empty loop; "
             "tool=null: ns above the baseline", header, "-" * len(header)]
    for name, shape in shapes.SHAPES.items():
        cells = []
        for lib, tool in columns:
            info = results.get((lib, tool))
            entry = (info or {}).get("shapes", {}).get(name)
            if entry is None or entry["body"] is None:
                cells.append("-")
            else:
                cells.append(f"{shapes.reported_ns(tool, entry['body'], entry['plain'], info['empty']):.1f}")
        if any(c != "-" for c in cells):
            lines.append(f"{shape.title:<44}" + "".join(f" {c:>15}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=shapes.REPEATS,
                        help="timed repeats per shape (min is kept)")
    parser.add_argument("--number", type=int, default=shapes.NUMBER,
                        help="loop iterations per repeat (x10 bodies)")
    parser.add_argument("--asv", action="store_true",
                        help="also print the figures the asv suite records (track_*_ns)")
    parser.add_argument("--quick", action="store_true", help="20 repeats of 200: seconds, rough")
    parser.add_argument("--json", metavar="PATH", help="also write the raw results here")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "TOOL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.number = 20, 200
    if args.child:
        json.dump(child(*args.child, args.repeats, args.number), sys.stdout)
        return 0

    try:  # build the stock-CFFI shim once, here, not inside a timed child
        from benchmarks import stock_cffi
        stock_cffi.load()
    except NotImplementedError as exc:
        print(f"stock CFFI row skipped: {exc}", file=sys.stderr)
    try:  # and the floor module, and NVTX's cost program (which the children run, each with its tool)
        floor.load()
        floor.build_nvtx_cost()
    except NotImplementedError as exc:
        print(f"floor columns empty or without NVTX's own cost: {exc}", file=sys.stderr)
    if shapes.null_tool_path() is None:
        print("no null tool library (build nvtx_cffi or set NVTX_CFFI_NULL_TOOL): null-tool columns empty",
              file=sys.stderr)
    results = {}
    for tool in shapes.TOOLS:
        for library in shapes.LIBRARIES:
            results[library, tool] = run_child(library, tool, args.repeats, args.number)
    nvtx_info = results.get(("nvtx", "none")) or {}
    print(f"# {platform.python_implementation()} {platform.python_version()}, nvtx "
          f"{nvtx_info.get('version') or 'not installed'}; ns above baseline per call "
          f"(thread CPU time, min of {args.repeats} x {args.number * shapes.UNROLL}); "
          f"ratio = nvtx / nvtx-cffi; floor: the same spelling with no-op C objects, plus NVTX's own calls from C")
    print(table(results))
    check = (results.get(("nvtx_cffi", "none")) or {}).get("error_check_ns")
    if check is not None:
        print(f"# a thread-state lookup (PyErr_Occurred() from C, as a check for a tool's exception makes): {check:.1f} ns")
    if args.asv:
        print()
        print(asv_table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({f"{lib}/{tool}": info for (lib, tool), info in results.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
