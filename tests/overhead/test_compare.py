"""asv_bench/compare.py, the overhead table: each shape's interpreter floor beside it and the verdict
rule that uses it (a shape below its target where nvtx's cost over the floor is below the target too
is "at floor"), on synthetic numbers; and one ``--quick`` run, which must measure a floor for every
shape. How fast anything is is never checked. The scripts run in children (they put asv_bench/ on
their sys.path); without the repository's asv_bench/ (an sdist) these skip.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.paths import SOURCE

ASV_BENCH = SOURCE / "asv_bench"
COMPARE = ASV_BENCH / "compare.py"
pytestmark = pytest.mark.skipif(not COMPARE.is_file(), reason="needs the repository's asv_bench/")


def _in_compare(program: str, data) -> str:
    """Runs ``program`` with ``compare`` imported and ``data`` (JSON on stdin) as ``data``; its stdout."""
    prelude = ("import json, sys; sys.path.insert(0, sys.argv[1]); import compare; "
               "from benchmarks import shapes; data = json.load(sys.stdin)\n")
    done = subprocess.run([sys.executable, "-c", prelude + program, str(ASV_BENCH)], input=json.dumps(data),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_floor_adds_nvtx_own_cost_of_the_calls_its_shape_makes():
    """The floor column: the no-op spelling's ns above the baseline plus, per NVTX call the shape
    makes, what nvtx_cost.c measured from C with the same tool; without that measurement, the
    spelling alone."""
    cost = {"push_pop": 3.0, "mark": 2.0, "start_end": 8.0, "sample": 1.5}
    entries = {name: {"plain": 10.0, "body": 50.0, "floor": 14.0}
               for name in ("with_new", "mark_twice", "domain_start_end", "int_sample")}
    program = ("print(json.dumps([compare.floor_overhead(data, n) for n in "
               "('with_new', 'mark_twice', 'domain_start_end', 'int_sample')]))")
    assert json.loads(_in_compare(program, {"shapes": entries, "nvtx_cost": cost})) == [7.0, 8.0, 12.0, 5.5]
    assert json.loads(_in_compare(program, {"shapes": entries})) == [4.0, 4.0, 4.0, 4.0]


def test_the_verdict_is_at_floor_only_where_the_floor_itself_misses_the_target():
    cases = [  # target, nvtx-cffi, nvtx, floor (ns above the baseline)
        (4, 10.0, 80.0, 5.0),   # met: 8x
        (4, 30.0, 60.0, 10.0),  # 2x; nvtx / floor 6x: a library could meet it here
        (4, 30.0, 60.0, 20.0),  # 2x; nvtx / floor 3x: no library could
        (4, 15.0, 45.0, 20.0),  # 3x, below the floor itself: still at the floor
        (4, 30.0, 60.0, None),  # no floor measured: a miss is a miss
        (4, 30.0, 60.0, 0.1),   # a floor within the noise counts as NOISE_NS
        (None, 30.0, 60.0, 20.0),  # no target: no verdict
        ("identity", 0.0, 0.0, 20.0),
        (4, None, 60.0, 20.0),  # nothing measured
    ]
    out = _in_compare("print(json.dumps([compare.verdict(*case) for case in data]))", cases)
    assert json.loads(out) == ["met", "NOT", "at floor", "at floor", "NOT", "NOT", "", "", ""]


def _info(library: str, tool: str, shapes: dict) -> dict:
    """compare.py's child result: per shape (plain, body, floor) ns per body; floor only for nvtx-cffi."""
    entries = {}
    for name, (plain, body, floor) in shapes.items():
        entries[name] = {"plain": plain, "body": body}
        if floor is not None:
            entries[name]["floor"] = floor
    return {"library": library, "tool": tool, "empty": 1.0, "version": "0.2.16", "shapes": entries}


def _synthetic_results() -> dict:
    """Without a tool: mark('x') met, Domain keyword push+pop missed above the floor, Domain mark
    with a payload missed at it; with the null tool, mark('x') missed (no floor there)."""
    ours = {"mark": (3.0, 13.0, 8.0), "domain_kw": (3.0, 43.0, 13.0), "domain_payload": (5.0, 30.0, 25.0)}
    theirs = {"mark": (3.0, 83.0, None), "domain_kw": (3.0, 63.0, None), "domain_payload": (5.0, 65.0, None)}
    return {"nvtx_cffi/none": _info("nvtx_cffi", "none", ours),
            "nvtx/none": _info("nvtx", "none", theirs),
            "nvtx_cffi/null": _info("nvtx_cffi", "null", {"mark": (3.0, 23.0, None)}),
            "nvtx/null": _info("nvtx", "null", {"mark": (3.0, 43.0, None)})}


TABLE_PROGRAM = """
results = {tuple(key.split("/")): info for key, info in data.items()}
print(compare.table(results))
print(json.dumps({name: shape.title for name, shape in shapes.SHAPES.items()}))
"""


def test_the_table_shows_the_floor_and_the_verdict_beside_each_shape():
    *table, titles = _in_compare(TABLE_PROGRAM, _synthetic_results()).splitlines()
    titles = json.loads(titles)
    columns = ["plain", "nvtx-cffi", "nvtx", "floor", "ratio", "target", "xplain", "cffi-floor"]
    assert [part.split()[-8:] for part in table[0].split(" | ")[1:]] == [columns, columns], table[0]
    rows = {line.split(" | ")[0].rstrip(): line.split(" | ")[1:] for line in table[2:]}
    assert set(rows) == {titles["mark"], titles["domain_kw"], titles["domain_payload"]}
    # plain, nvtx-cffi, nvtx, floor, ratio, target + verdict, cffi-floor (no tool; no plainest measured,
    # so no xplain): nvtx / floor is 16x, 6x (a miss a library could avoid) and 3x (no library could)
    assert rows[titles["mark"]][0].split() == ["-", "10.0", "80.0", "5.0", "8.0", ">=4", "met", "5.0"]
    assert rows[titles["domain_kw"]][0].split() == ["-", "40.0", "60.0", "10.0", "1.5", ">=4", "NOT", "30.0"]
    assert rows[titles["domain_payload"]][0].split() == ["-", "25.0", "60.0", "20.0", "2.4", ">=4", "at", "floor",
                                                         "5.0"]
    # null tool: no floor measured there, so a miss stays a miss and nvtx-cffi - floor is unknown
    assert rows[titles["mark"]][1].split() == ["-", "20.0", "40.0", "-", "2.0", ">=7", "NOT", "-"]


def test_a_quick_run_measures_a_floor_for_every_shape(tmp_path):
    """The real thing, once, rough: every shape nvtx-cffi runs has a floor in the JSON and in the table."""
    raw = tmp_path / "compare.json"
    done = subprocess.run([sys.executable, str(COMPARE), "--quick", "--json", str(raw)], capture_output=True,
                          text=True, timeout=600, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    if "floor columns empty" in done.stderr:
        pytest.skip(done.stderr.strip())
    results = json.loads(raw.read_text(encoding="utf-8"))
    names = _in_compare("print(json.dumps(list(shapes.SHAPES)))", None)
    for tool in ("none", "null"):
        measured = results[f"nvtx_cffi/{tool}"]["shapes"]
        assert set(measured) == set(json.loads(names)), tool
        missing = [name for name, entry in measured.items() if entry.get("body") is not None
                   and not isinstance(entry.get("floor"), float)]
        assert not missing, (tool, missing)
        cost = results[f"nvtx_cffi/{tool}"]["nvtx_cost"]
        assert sorted(cost) == ["mark", "push_pop", "sample", "start_end"] and min(cost.values()) > 0, cost
    table = done.stdout.splitlines()[3:]
    assert table, done.stdout
    for line in table:
        for part in line.split(" | ")[1:]:
            assert part.split()[3].replace(".", "", 1).lstrip("-").isdigit(), line  # the floor cell: ns
