#!/usr/bin/env bash
# How fast nvtx_cffi.recorder reads N push/pop ranges back: recorder.blocks (NumPy) and the Event
# iterator, time and peak RSS, each in its own process.
# Usage: asv_bench/scripts/bench_reader.sh [N...]
#        (default 1000000 10000000; the Event iterator only up to 1e6)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv-cpython3.11/bin/python}
PKG=$(cd /tmp && "$PY" -c 'import nvtx_cffi, os; print(os.path.dirname(nvtx_cffi.__file__))')
INC=$(cd /tmp && "$PY" "$ROOT/asv_bench/benchmarks/building.py" nvtx-include)
WORK=$(mktemp -d /tmp/nvtx-read-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -std=c11 -O2 -I "$INC" asv_bench/c/push_pop.c -o "$WORK/push_pop" -ldl
[ $# -eq 0 ] && set -- 1000000 10000000
for n in "$@"; do
    rm -rf "$WORK/rec"
    NVTX_INJECTION64_PATH="$PKG/libnvtx_recorder.so" NVTX_CFFI_RECORD_DIR="$WORK/rec" "$WORK/push_pop" "$n"
    echo "$n ranges: $(du -sb "$WORK/rec" | cut -f1) bytes recorded"
    modes="blocks"
    [ "$n" -le 1000000 ] && modes="blocks events"
    for mode in $modes; do
        (cd /tmp && "$PY" - "$WORK/rec" "$mode" <<'PYEOF'
import resource, sys, time
t = time.perf_counter()
import numpy as np
from nvtx_cffi import recorder
d, mode = sys.argv[1], sys.argv[2]
n = pushes = 0
if mode == "blocks":
    for b in recorder.blocks(d):
        n += len(b.events)
        pushes += int(np.count_nonzero(b.events["kind"] == recorder.KIND_PUSH))
else:
    for e in recorder.iter_events(d):
        n += 1
        pushes += e.kind == "push"
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"  {mode:7s} {n} events ({pushes} pushes) in {dt:.2f} s (imports included), peak RSS {rss:.0f} MB")
PYEOF
        )
    done
done
