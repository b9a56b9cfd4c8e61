"""What the README and the documentation site promise about the repository itself: the README's two
commands are the ones CI runs, and the overhead tables the site shows are the generated file, in
the form asv_bench/compare_summary.py writes it (scripts/docs.sh checks links, anchors and the
include itself). The parts that need the repository rather than the sdist skip without it.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from support.paths import SOURCE

SUMMARY = SOURCE / "asv_bench" / "compare_summary.py"
TABLES = SOURCE / "docs" / "overhead-tables.md"
needs_asv_bench = pytest.mark.skipif(not SUMMARY.is_file(), reason="needs the repository's asv_bench/")


def _section(markdown: str, title: str) -> str:
    return markdown.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_gives_the_two_commands_that_ci_runs():
    readme = (SOURCE / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```\n(.*?)^```$", _section(readme, "The two commands"), re.M | re.S)
    assert blocks == ["scripts/quickstart.sh\n", "scripts/test.sh\n"], blocks
    for command in blocks:
        assert (SOURCE / command.strip()).is_file(), command
    ci = SOURCE / ".ci" / "run"
    if not ci.is_file():
        pytest.skip("no .ci/run (an sdist): the commands exist, CI's use of them is not checked")
    text = ci.read_text(encoding="utf-8")
    assert "(cd \"$fresh/nvtx-cffi\" && scripts/quickstart.sh)" in text
    assert "\n    scripts/test.sh -q\n" in text


def _run_summary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SUMMARY), *args], capture_output=True, text=True, timeout=60)


def _sections(markdown: str):
    """(name, date, text) of each section, as compare_summary.markdown() takes them."""
    found = re.findall(r"<!-- --8<-- \[start:([\w-]+)\] -->\nMeasured on (\d{4}-\d\d-\d\d)\.\n\n```text\n(.*?)\n```\n"
                       r"<!-- --8<-- \[end:\1\] -->", markdown, re.S)
    return [(name, date, text + "\n") for name, date, text in found]


@needs_asv_bench
def test_the_overhead_tables_are_as_compare_summary_writes_them(tmp_path):
    committed = TABLES.read_text(encoding="utf-8")
    sections = _sections(committed)
    assert [name for name, _, _ in sections] == ["accelerator", "pure-python", "per-python"]
    program = ("import datetime, json, sys; sys.path.insert(0, sys.argv[1]); import compare_summary; "
               "sections = [(n, datetime.date.fromisoformat(d), t) for n, d, t in json.load(sys.stdin)]; "
               "sys.stdout.write(compare_summary.markdown(sections))")
    rendered = subprocess.run([sys.executable, "-c", program, str(SUMMARY.parent)], input=json.dumps(sections),
                              capture_output=True, text=True, timeout=60, check=True).stdout
    assert rendered == committed
    page = (SOURCE / "docs" / "overhead.md").read_text(encoding="utf-8")
    included = re.findall(r'^--8<-- "overhead-tables\.md:([\w-]+)"$', page, re.M)
    assert included == [name for name, _, _ in sections]


def _fake_run(nvtx_cffi_ns: float, nvtx_ns: float, floor_ns: float) -> dict:
    """compare.py's --json for one Python: every (library, tool), one shape measured, its floor
    measured beside nvtx-cffi's."""
    def info(library, tool, body):
        entry = {"plain": 3.0, "body": body}
        if library == "nvtx_cffi":
            entry["floor"] = 3.0 + floor_ns
        return {"library": library, "tool": tool, "empty": 1.0, "version": "0.2.16", "shapes": {"mark": entry}}
    return {f"{library}/{tool}": info(library, tool, body)
            for tool in ("none", "null")
            for library, body in (("plain", None), ("nvtx_cffi", 3.0 + nvtx_cffi_ns), ("nvtx", 3.0 + nvtx_ns))}


def _write_runs(tmp_path, *runs) -> list:
    paths = []
    for version, ours, theirs, floor in runs:
        path = tmp_path / f"compare-{version}.json"
        path.write_text(json.dumps(_fake_run(ours, theirs, floor)), encoding="utf-8")
        paths.append(str(path))
    return paths


@needs_asv_bench
def test_compare_summary_writes_the_tables_it_prints(tmp_path):
    runs = _write_runs(tmp_path, ("3.11", 12.0, 96.0, 6.0), ("3.14", 8.0, 70.0, 5.0))
    printed = _run_summary(*runs)
    assert printed.returncode == 0, printed.stderr
    # nvtx-cffi, nvtx, floor, ratio
    assert "mark('x')" in printed.stdout and "12 96 6 8.0" in printed.stdout and "8 70 5 8.8" in printed.stdout
    assert "floor, ratio" in printed.stdout.splitlines()[1]
    table = tmp_path / "compare-3.11.txt"
    table.write_text("# what compare.py printed\nshape | ...\n", encoding="utf-8")
    out = tmp_path / "tables.md"
    written = _run_summary("--markdown", str(out), "--table", f"accelerator={table}", *runs)
    assert written.returncode == 0, written.stderr
    sections = _sections(out.read_text(encoding="utf-8"))
    assert [(name, text) for name, _, text in sections] == [
        ("accelerator", table.read_text(encoding="utf-8")), ("per-python", printed.stdout)]
    refused = _run_summary("--table", f"accelerator={table}", *runs)
    assert refused.returncode == 2 and "--table needs --markdown" in refused.stderr


@needs_asv_bench
def test_compare_summary_marks_a_miss_at_the_floor_apart(tmp_path):
    """mark('x') has targets >= 4 without a tool and >= 7 with one: '!' for a miss where nvtx's cost
    over the floor would meet the target, '~+N' (N: nvtx-cffi's ns above the floor) where it would not."""
    runs = _write_runs(tmp_path, ("3.11", 20.0, 60.0, 10.0), ("3.14", 20.0, 60.0, 17.0), ("3.15", 10.0, 60.0, 12.0))
    printed = _run_summary(*runs)
    assert printed.returncode == 0, printed.stderr
    tables = printed.stdout.split("\n\n")
    no_tool, null_tool = ([line for line in table.splitlines() if line.startswith("mark('x')")] for table in tables[:2])
    # no tool (target 4): 3.0x with nvtx / floor 6x, a miss; 3.0x with 3.5x, at the floor; 6.0x, met
    assert [cell.strip() for cell in no_tool[0].split(" | ")[1:]] == [
        "20 60 10 3.0 !", "20 60 17 3.0 ~+3", "10 60 12 6.0"], no_tool
    # null tool (target 7): 6x, 3.5x, 5x over the floor: all at the floor, nvtx-cffi 10, 3, -2 ns above it
    assert [cell.strip() for cell in null_tool[0].split(" | ")[1:]] == [
        "20 60 10 3.0 ~+10", "20 60 17 3.0 ~+3", "10 60 12 6.0 ~-2"], null_tool
