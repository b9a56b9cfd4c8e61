#!/usr/bin/env python
"""compare.py's results of several Pythons side by side (scripts/compare-pythons.sh writes them).

    python asv_bench/compare_summary.py OUT/compare-3.11.json OUT/compare-3.14.json ...

One table per tool; per Python, nvtx-cffi's and nvtx's ns above the baseline and the ratio nvtx /
nvtx-cffi, "!" after a ratio below its target (compare.py's TARGETS; "is f": the decorator returns
the function itself). The floor rows show the plain code's own cost (what the interpreter charges
for a `with` on a no-op Python CM, a Python call, a C method call). The Python version of a file
is read from its name (compare-X.Y.json).
"""
from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
from benchmarks import shapes  # noqa: E402


def load(paths):
    runs = []
    for path in paths:
        match = re.search(r"(\d+\.\d+)\.json$", path)
        version = match.group(1) if match else os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        runs.append((version, {tuple(key.split("/")): info for key, info in raw.items()}))
    runs.sort(key=lambda run: tuple(int(p) if p.isdigit() else 0 for p in run[0].split(".")))
    return runs


def cell(results, tool, name):
    shape = shapes.SHAPES[name]
    target = compare.TARGETS[tool].get(name)
    ours = compare.overhead(results.get(("nvtx_cffi", tool)), name)
    theirs = compare.overhead(results.get(("nvtx", tool)), name)
    if not shape.libraries:  # floor rows: the plain code's cost
        plain = compare.overhead(results.get(("plain", tool)), name)
        return "-" if plain is None else f"{plain:.1f}"
    if target == "identity":
        key = "decorator_returns_function" if name == "decorated" else "decorator_args_returns_function"
        return "is f" if (results.get(("nvtx_cffi", tool)) or {}).get(key) else "wrapped !"
    if ours is None or theirs is None:
        return "-" if ours is None else f"{ours:.0f}"
    ratio = theirs / max(ours, compare.FLOOR_NS)
    mark = " !" if isinstance(target, (int, float)) and ratio < target else "  "
    return f"{ours:.0f} {theirs:.0f} {ratio:.1f}{mark}"


def summary(runs) -> str:
    width = 17
    out = []
    for tool in shapes.TOOLS:
        label = "no tool" if tool == "none" else "null tool"
        header = f"{label + ': ns nvtx-cffi, nvtx, ratio':<44} {'target':>6}"
        header += "".join(f" | {version:>{width}}" for version, _ in runs)
        out += [header, "-" * len(header)]
        for name, shape in shapes.SHAPES.items():
            cells = [cell(results, tool, name) for _, results in runs]
            if all(c == "-" for c in cells):
                continue
            target = compare.TARGETS[tool].get(name)
            text = "" if target is None else ("is f" if target == "identity" else f">={target}")
            title = shape.title if len(shape.title) <= 44 else shape.title[:43] + "…"
            out.append(f"{title:<44} {text:>6}" + "".join(f" | {c:>{width}}" for c in cells))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    runs = load(paths)
    print("# asv_bench/compare.py per CPython (" + ", ".join(
        f"{version}: nvtx {(results.get(('nvtx', 'none')) or {}).get('version') or '-'}"
        for version, results in runs) + "); ns above baseline, thread CPU time; '!' below target")
    print(summary(runs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
