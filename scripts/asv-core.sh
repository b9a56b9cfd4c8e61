#!/usr/bin/env bash
# The benchmark dashboard's core subset over a few commits (docs/overhead.md, "Benchmark dashboard"): the
# plainest spelling of the seven main calls (bench_overhead.Shape_*), the baselines, and the annotated
# workload (bench_workload: NumPy everywhere, CuPy with a GPU), then `asv publish` and the offline
# step (asv_bench/offline_html.py: the page renders without a network).
# Usage: scripts/asv-core.sh [RANGE [asv run options...]]      (default HEAD~3..HEAD)
#   ASV=path/to/asv (default: asv on PATH); ASV_CORE_BENCH overrides the -b regex below.
set -euo pipefail
cd "$(dirname "$0")/../asv_bench"
range="${1:-HEAD~3..HEAD}"
[ $# -gt 0 ] && shift
asv="${ASV:-asv}"
core="${ASV_CORE_BENCH:-^bench_overhead\.(Shape_(decorated|with_new|with_reused|push_pop|mark|start_end|domain_attrs)\.|Baselines)|^bench_workload\.}"
"$asv" machine --yes >/dev/null
rc=0
"$asv" run -b "$core" "$@" "$range" || rc=$?
# 2: some benchmark failed (still published); anything else: asv itself failed.
[ "$rc" = 0 ] || [ "$rc" = 2 ] || exit "$rc"
"$asv" publish
python3 offline_html.py .asv/html
echo "asv-core: published $PWD/.asv/html (open index.html, or: $asv preview)"
exit "$rc"
