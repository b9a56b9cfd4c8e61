#!/usr/bin/env bash
# Run an aarch64 nvtx-cffi wheel on a real aarch64 CPython: Debian bookworm's python3 (3.11) in the
# cached arm64 chroot (scripts/arm64-chroot.sh, under qemu-user-static), with the wheel's own
# aarch64 recorder attached. Prints one line; exit status non-zero if anything did not hold.
#
# Usage: scripts/arm64-smoke.sh WHEEL       (a cp311-cp311 or cp311-abi3 ..._aarch64.whl; root)
#
# No pip in the chroot: a wheel is a zip of the installed files (no compilation step at install),
# so it is unzipped into a folder that goes on PYTHONPATH. Three aarch64 Python processes, each
# started from the host (qemu-user without binfmt_misc cannot follow exec()):
#   1. nvtx_cffi.recorder.environment(DIR): the variables that attach the wheel's recorder;
#   2. with them: 100 push/pop ranges and a mark, checking that the CFFI core (and the accelerator,
#      in a per-version wheel) came from the wheel;
#   3. nvtx_cffi.recorder.read(DIR): exactly those events, with their messages, from one process.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "arm64-smoke: FAILED: $*" >&2; exit 1; }

[ $# = 1 ] || die "usage: scripts/arm64-smoke.sh WHEEL"
wheel=$(realpath "$1") || die "no wheel $1"
case "$(basename "$wheel")" in
    *-cp311-cp311-*aarch64.whl) accel=1 ;;
    *-cp311-abi3-*aarch64.whl) accel=0 ;;
    *) die "$(basename "$wheel") is not a cp311 aarch64 wheel (the chroot's python3 is bookworm's 3.11)" ;;
esac

ROOT=$(scripts/arm64-chroot.sh) || die "no arm64 chroot (scripts/arm64-chroot.sh failed, see above)"
work=$(mktemp -d "$ROOT/tmp/nvtx-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
in=/tmp/$(basename "$work")   # the same folder, as the chroot sees it
python3 -m zipfile -e "$wheel" "$work/site" || die "could not unzip $wheel"

run() { scripts/arm64-chroot.sh PYTHONPATH="$in/site" "$@"; }

env_json=$(run /usr/bin/python3 -c '
import json, sys
from nvtx_cffi import recorder
print(json.dumps(recorder.environment(sys.argv[1])))' "$in/rec") || die "nvtx_cffi.recorder.environment() did not run"
mapfile -t attach < <(python3 -c 'import json, sys; [print("%s=%s" % kv) for kv in json.loads(sys.argv[1]).items()]' "$env_json")

run "${attach[@]}" /usr/bin/python3 -c '
import platform, sys
import nvtx_cffi as nvtx, nvtx_cffi._native._ffi as ffi
site, accel = sys.argv[1], sys.argv[2] == "1"
assert platform.machine() == "aarch64", platform.machine()
assert ffi.__file__.startswith(site) and ffi.__file__.endswith("_ffi.abi3.so"), ffi.__file__
if accel:
    import nvtx_cffi._speedups as s
    assert s.__file__.startswith(site), s.__file__
for i in range(100):
    nvtx.push_range("arm64-smoke")
    nvtx.pop_range()
nvtx.mark("arm64-smoke done")
' "$in/site" "$accel" || die "annotating with the wheel on aarch64 failed"

summary=$(run /usr/bin/python3 -c '
import collections, platform, sys
import nvtx_cffi
from nvtx_cffi import recorder
r = recorder.read(sys.argv[1])
kinds = collections.Counter(e.kind for e in r.events if e.kind in ("push", "pop", "mark"))
assert kinds == {"push": 100, "pop": 100, "mark": 1}, kinds
assert {e.message for e in r.events if e.kind == "push"} == {"arm64-smoke"}
assert [e.message for e in r.events if e.kind == "mark"] == ["arm64-smoke done"]
assert len(r.processes) == 1 and r.dropped == 0, (r.processes, r.dropped)
print("nvtx_cffi %s on CPython %s %s: 100 ranges + 1 mark recorded by the wheel'"'"'s recorder and read back"
      % (nvtx_cffi.__version__, platform.python_version(), platform.machine()))
' "$in/rec") || die "the recording made on aarch64 is not what was annotated"
echo "arm64 smoke ok: $(basename "$wheel"): $summary"
