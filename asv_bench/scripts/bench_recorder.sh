#!/usr/bin/env bash
# What an NVTX push+pop costs with no tool, the null tool and the recorder, side by side in one run:
# from C (asv_bench/c/recorder_bench.c, N calls, best of 3) and from Python (nvtx_cffi.push_range +
# pop_range, timeit). Each (tool) runs in its own process. Needs the package installed in the venv
# that scripts/test.sh makes (or PY=/path/to/python).
# Usage: asv_bench/scripts/bench_recorder.sh [N]   (default 10000000; the Python loop runs N/10)
#        OLD_RECORDER=/path/to/an/older/libnvtx_recorder.so adds a row for it (before/after).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${1:-10000000}
PY=${PY:-$ROOT/.venv-cpython3.11/bin/python}
PKG=$(cd /tmp && "$PY" -c 'import nvtx_cffi, os; print(os.path.dirname(nvtx_cffi.__file__))')
INC=$(cd /tmp && "$PY" "$ROOT/asv_bench/benchmarks/building.py" nvtx-include)
WORK=$(mktemp -d /tmp/nvtx-bench-XXXXXX)
SHM=$(mktemp -d /dev/shm/nvtx-bench-XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$WORK" "$SHM"' EXIT
cc -std=c11 -O2 -Wall -Wextra -I "$INC" asv_bench/c/recorder_bench.c -o "$WORK/bench" -ldl
run() {  # $1: label, $2: record dir (or -), rest: env assignments
    local label=$1 rec=$2; shift 2
    [ "$rec" != - ] && rm -rf "$rec"
    local c py
    c=$(env "$@" "$WORK/bench" "$N" | tr '\n' ' ')
    local bytes=""
    [ "$rec" != - ] && [ -d "$rec" ] && bytes=" $(( $(du -sb "$rec" | cut -f1) / (6 * N + 2) )) B/range (C, both shapes)"
    [ "$rec" != - ] && rm -rf "$rec"
    py=$(cd /tmp && env "$@" "$PY" -c '
import sys, time, timeit, nvtx_cffi as n
n.push_range("warm-up"); n.pop_range()
k = int(sys.argv[1])
t = min(timeit.repeat("push(\"step\"); pop()", globals={"push": n.push_range, "pop": n.pop_range}, number=k, repeat=3, timer=time.thread_time))
print("%.1f" % (t / k * 1e9))' $((N / 10)))
    [ "$rec" != - ] && rm -rf "$rec"
    printf '%-26s C: %-26s Python push_range+pop_range: %6s ns  %s\n' "$label" "$c" "$py" "$bytes"
}
echo "CPU ns per push+pop (thread CPU time, best of 3), N=$N from C ($(uname -m), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
REC="$PKG/libnvtx_recorder.so"
run "no tool" - NVTX_INJECTION64_PATH=
run "null tool" - NVTX_INJECTION64_PATH="$PKG/libnvtx_null_tool.so"
run "recorder ($(df --output=fstype "$WORK" | tail -1))" "$WORK/rec" NVTX_INJECTION64_PATH="$REC" NVTX_CFFI_RECORD_DIR="$WORK/rec"
if [ -n "${OLD_RECORDER:-}" ]; then
    run "old recorder" "$WORK/rec" NVTX_INJECTION64_PATH="$OLD_RECORDER" NVTX_CFFI_RECORD_DIR="$WORK/rec"
fi
run "recorder, CLOCK_MONOTONIC" "$WORK/rec" NVTX_INJECTION64_PATH="$REC" NVTX_CFFI_RECORD_DIR="$WORK/rec" NVTX_CFFI_RECORD_CLOCK=monotonic
run "recorder ($(df --output=fstype "$SHM" | tail -1))" "$SHM/rec" NVTX_INJECTION64_PATH="$REC" NVTX_CFFI_RECORD_DIR="$SHM/rec"
