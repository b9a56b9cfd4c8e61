#!/usr/bin/env bash
# What an NVTX push+pop costs with no tool, the null tool and the recorder, side by side in one run:
# from C (benchmarks/recorder_bench.c, N calls, best of 3) and from Python (nvtx_cffi.push_range +
# pop_range, timeit). Each (tool) runs in its own process. Needs the package installed in the venv
# that scripts/test.sh makes (or PY=/path/to/python).
# Usage: scripts/bench_recorder.sh [N]   (default 10000000; the Python loop runs N/10)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
N=${1:-10000000}
PY=${PY:-$ROOT/.venv-cpython3.11/bin/python}
PKG=$(cd /tmp && "$PY" -c 'import nvtx_cffi, os; print(os.path.dirname(nvtx_cffi.__file__))')
INC=$(cd /tmp && "$PY" -c 'import importlib.util as u, os; s = u.spec_from_file_location("b", "'"$ROOT"'/build_ffi.py"); m = u.module_from_spec(s); s.loader.exec_module(m); print(m.nvtx_include_dir())')
WORK=$(mktemp -d /tmp/nvtx-bench-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -std=c11 -O2 -Wall -Wextra -I "$INC" benchmarks/recorder_bench.c -o "$WORK/bench" -ldl
run() {  # $1: label, rest: env assignments
    local label=$1; shift
    rm -rf "$WORK/rec"
    local c py
    c=$(env "$@" "$WORK/bench" "$N" | tr '\n' ' ')
    rm -rf "$WORK/rec"
    py=$(cd /tmp && env "$@" "$PY" -c '
import sys, timeit, nvtx_cffi as n
n.push_range("warm-up"); n.pop_range()
k = int(sys.argv[1])
t = min(timeit.repeat("push(\"step\"); pop()", globals={"push": n.push_range, "pop": n.pop_range}, number=k, repeat=3))
print("%.1f" % (t / k * 1e9))' $((N / 10)))
    local bytes=""
    [ -d "$WORK/rec" ] && bytes=" ($(du -sb "$WORK/rec" | cut -f1) bytes recorded)"
    printf '%-10s C: %-28s Python push_range+pop_range: %s ns%s\n' "$label" "$c" "$py" "$bytes"
}
echo "ns per push+pop, N=$N ($(uname -m), $(nproc) cores)"
run "no tool" NVTX_INJECTION64_PATH=
run "null tool" NVTX_INJECTION64_PATH="$PKG/libnvtx_null_tool.so"
run "recorder" NVTX_INJECTION64_PATH="$PKG/libnvtx_recorder.so" NVTX_CFFI_RECORD_DIR="$WORK/rec"
