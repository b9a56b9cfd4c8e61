#!/usr/bin/env python
"""compare.py's results of several Pythons side by side (scripts/compare-pythons.sh writes them).

    python asv_bench/compare_summary.py OUT/compare-3.11.json OUT/compare-3.14.json ...
    python asv_bench/compare_summary.py --markdown docs/overhead-tables.md \\
        --table accelerator=OUT/compare-3.11.txt --table pure-python=OUT/pure-3.11.txt OUT/compare-3.*.json

One table per tool; per Python, nvtx-cffi's and nvtx's ns above the baseline, the shape's floor
(what that interpreter charges for the same spelling with no-op C objects, compare.py's "floor") and
the ratio nvtx / nvtx-cffi, "!" after a ratio below its target (compare.py's TARGETS; "is f": the
decorator returns the function itself), "~+N" instead where the target is below that Python's floor
too (nvtx / floor below the target; N: nvtx-cffi's ns above the floor). The Python version of a file
is read from its name (compare-X.Y.json).

``--markdown PATH`` writes the documentation's overhead tables instead (docs/overhead.md includes
them): each ``--table NAME=FILE`` (a table compare.py printed, as it printed it), then the side-by-side
table, each in a section NAME ("per-python" for the side-by-side one) between pymdownx.snippets
markers, with the date it was measured (its input files' modification time, UTC).
"""
from __future__ import annotations

import argparse
import datetime
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
    target = compare.TARGETS[tool].get(name)
    cffi_info = results.get(("nvtx_cffi", tool))
    ours = compare.overhead(cffi_info, name)
    theirs = compare.overhead(results.get(("nvtx", tool)), name)
    floor = compare.floor_overhead(cffi_info, name)
    if target == "identity":
        key = "decorator_returns_function" if name == "decorated" else "decorator_args_returns_function"
        return "is f" if (cffi_info or {}).get(key) else "wrapped !"
    if ours is None:
        return "-"
    floor_text = "-" if floor is None else f"{floor:.0f}"
    if theirs is None:
        return f"{ours:.0f} - {floor_text} -" + " " * 6
    judged = compare.verdict(target, ours, theirs, floor)
    if judged == "NOT":
        mark = " !"
    elif judged == "at floor":
        mark = f" ~{ours - floor:+.0f}"
    else:
        mark = ""
    return f"{ours:.0f} {theirs:.0f} {floor_text} {compare.ratio(theirs, ours):.1f}{mark:<6}"


def summary(runs) -> str:
    width = 22
    out = []
    for tool in shapes.TOOLS:
        label = "no tool" if tool == "none" else "null tool"
        header = f"{label + ': ns nvtx-cffi, nvtx, floor, ratio':<44} {'target':>6}"
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
    checks = [(results.get(("nvtx_cffi", "none")) or {}).get("error_check_ns") for _, results in runs]
    if any(check is not None for check in checks):  # (results of compare.py before it measured this: none)
        out.append(f"{'a thread-state lookup from C (PyErr_Occurred), ns':<51}"
                   + "".join(f" | {'-' if c is None else f'{c:.1f}':>{width}}" for c in checks))
    return "\n".join(out).rstrip() + "\n"


def report(runs) -> str:
    """The side-by-side tables with their title line: what the command prints."""
    versions = ", ".join(f"{version}: nvtx {(results.get(('nvtx', 'none')) or {}).get('version') or '-'}"
                         for version, results in runs)
    title = (f"# asv_bench/compare.py per CPython ({versions}); ns above baseline, thread CPU time; "
             "'!' below target; '~+N' below target at the floor (nvtx / floor below it too), "
             "nvtx-cffi N ns above the floor")
    return title + "\n" + summary(runs)


MARKDOWN_NOTE = ("<!-- Written by asv_bench/compare_summary.py --markdown: do not edit by hand; "
                 "docs/overhead.md says how to regenerate it. -->")


def markdown(sections) -> str:
    """sections: (name, date measured, text) each; the text is shown as it is, in a code block."""
    out = [MARKDOWN_NOTE, ""]
    for name, measured, text in sections:
        out += [f"<!-- --8<-- [start:{name}] -->", f"Measured on {measured.isoformat()}.", "",
                "```text", text.rstrip("\n"), "```", f"<!-- --8<-- [end:{name}] -->", ""]
    return "\n".join(out)


def measured(paths) -> datetime.date:
    newest = max(os.path.getmtime(path) for path in paths)
    return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).date()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", metavar="compare-X.Y.json")
    parser.add_argument("--markdown", metavar="PATH", help="write the documentation's tables to PATH")
    parser.add_argument("--table", action="append", default=[], metavar="NAME=FILE",
                        help="with --markdown: a section NAME showing FILE, a table compare.py printed")
    args = parser.parse_args(argv)
    if not args.runs and not args.table:
        print(__doc__, file=sys.stderr)
        return 2
    if not args.markdown:
        if args.table:
            parser.error("--table needs --markdown")
        print(report(load(args.runs)), end="")
        return 0
    sections = []
    for spec in args.table:
        name, sep, path = spec.partition("=")
        if not (sep and name and path):
            parser.error(f"--table {spec!r}: expected NAME=FILE")
        with open(path, encoding="utf-8") as f:
            sections.append((name, measured([path]), f.read()))
    if args.runs:
        sections.append(("per-python", measured(args.runs), report(load(args.runs))))
    with open(args.markdown, "w", encoding="utf-8") as f:
        f.write(markdown(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
