#!/usr/bin/env bash
# The benchmark dashboard as users run it (docs/overhead.md, "Benchmark dashboard"), on two commits, checked:
# a fresh venv with asv and virtualenv; `asv run --quick` builds HEAD and HEAD~1 in asv's own
# virtualenv, each with pip's ordinary build, and runs every benchmark once on HEAD and the ones
# matching ASV_SMOKE_OLD_BENCH (default "Baselines|push_pop") on HEAD~1; `asv publish`, and
# asv_bench/offline_html.py (the page's scripts and styles from asv_bench/www_vendor/, not CDNs).
# Then, from the files (no browser here):
#   * the published HTML loads no script or style from the web;
#   * HEAD: a result for every benchmark, and none failed (a benchmark that errors fails this);
#   * HEAD~1: built and run (its failures are listed, not fatal: benchmarks may be newer than it),
#     at least one benchmark has a value;
#   * html/index.json lists both commits, every benchmark has a graph JSON file, and every benchmark
#     with a value on both commits has a point for each in its graph.
# Usage: scripts/asv-smoke.sh [REV_OLD REV_NEW]       (default HEAD~1 HEAD; PYTHON picks the Python)
# Starts from scratch: .venv-asv and asv_bench/.asv are deleted first.
set -euo pipefail
cd "$(dirname "$0")/.."
old="${1:-HEAD~1}"; new="${2:-HEAD}"
PYTHON="${PYTHON:-python3}"
hashes=("$(git rev-parse --verify "$old^{commit}")" "$(git rev-parse --verify "$new^{commit}")") || {
    echo "asv-smoke: needs the commits $old and $new (a full clone, not a shallow one)" >&2; exit 1; }

rm -rf .venv-asv asv_bench/.asv
"$PYTHON" -m venv .venv-asv
.venv-asv/bin/python -m pip install -q --upgrade pip
.venv-asv/bin/python -m pip install -q asv virtualenv
asv="$PWD/.venv-asv/bin/asv"

cd asv_bench
mkdir -p .asv
"$asv" machine --yes --machine asv-smoke >/dev/null
# The newer commit runs every benchmark; the older one (to keep CI short) the benchmarks matching
# ASV_SMOKE_OLD_BENCH (an asv -b regex; "." for all): enough for a history of two points.
old_bench="${ASV_SMOKE_OLD_BENCH:-Baselines|push_pop}"
for spec in "${hashes[1]}^!" "${hashes[0]}^!"; do
    rc=0
    args=(--quick --show-stderr --machine asv-smoke)
    [ "$spec" = "${hashes[1]}^!" ] || args+=(-b "$old_bench")
    "$asv" run "${args[@]}" "$spec" || rc=$?
    # 2: some benchmark failed (judged below, per commit); anything else: asv itself failed.
    [ "$rc" = 0 ] || [ "$rc" = 2 ] || { echo "asv-smoke: asv run $spec failed ($rc)" >&2; exit 1; }
done
"$asv" publish >/dev/null
../.venv-asv/bin/python offline_html.py .asv/html

../.venv-asv/bin/python - "${hashes[@]}" <<'EOF'
import glob, json, math, os, re, sys

old, new = sys.argv[1:3]
problems = []

def load(commit):
    files = glob.glob(f".asv/results/asv-smoke/{commit[:8]}-*.json")
    if not files:
        problems.append(f"no results saved for {commit[:8]}")
        return {}
    out = {}
    for f in files:
        for name, row in json.load(open(f))["results"].items():
            values = row[0] if isinstance(row[0], list) else [row[0]]
            out[name] = values  # None: failed; NaN: skipped by the benchmark
    return out

def numeric(values):
    return any(isinstance(x, (int, float)) and not math.isnan(x) for x in values)

res_old, res_new = load(old), load(new)
index = json.load(open(".asv/html/index.json"))
benchmarks = sorted(index["benchmarks"])
if not benchmarks:
    problems.append("index.json lists no benchmarks")

missing = [b for b in benchmarks if b not in res_new]
if not any(numeric(v) for v in res_old.values()):
    problems.append(f"no benchmark has a value on {old[:8]}")
failed_new = sorted(b for b, v in res_new.items() if any(x is None for x in v))
failed_old = sorted(b for b, v in res_old.items() if any(x is None for x in v))
if missing:
    problems.append(f"{len(missing)} benchmark(s) without a result on {new[:8]}: {missing[:5]}")
if failed_new:
    problems.append(f"{len(failed_new)} benchmark(s) failed on {new[:8]}: {failed_new}")
if failed_old:
    print(f"asv-smoke: note: {len(failed_old)} benchmark(s) failed on {old[:8]} (older than the benchmarks?): {failed_old}")

for page in glob.glob(".asv/html/*.html"):
    remote = re.findall(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["'](https?://[^"']+)""", open(page).read())
    if remote:
        problems.append(f"{os.path.basename(page)} still loads from the web: {remote}")

revs = {h: int(r) for r, h in index["revision_to_hash"].items()}
for h in (old, new):
    if h not in revs:
        problems.append(f"index.json has no revision for {h[:8]}")

both = 0
for b in benchmarks:
    graphs = [g for g in glob.glob(f".asv/html/graphs/**/{b}.json", recursive=True)
              if "/graphs/summary/" not in g]
    if not graphs:
        problems.append(f"no graph file for {b}")
        continue
    points = {rev for g in graphs for rev, value in json.load(open(g))
              if value is not None and (not isinstance(value, list) or any(v is not None for v in value))}
    wanted = numeric(res_old.get(b, [])) and numeric(res_new.get(b, []))
    if wanted and not (old in revs and new in revs and {revs[old], revs[new]} <= points):
        problems.append(f"graph of {b} lacks a point for one of the commits")
    both += wanted
if both == 0:
    problems.append("no benchmark has values on both commits")

print(f"asv-smoke: {len(benchmarks)} benchmarks; {old[:8]}: {len(res_old)} results; "
      f"{new[:8]}: {len(res_new)} results, {len(failed_new)} failed; "
      f"{both} graphs with both commits; published {os.path.abspath('.asv/html')}")
for p in problems:
    print("asv-smoke: FAIL:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
