#!/usr/bin/env bash
# The abi3 core: `pip wheel .` and what its wheels hold, then one wheel on a newer CPython.
#   1. `pip wheel --no-deps .` (PYTHON, default python3 = 3.11): the CFFI shim is _ffi.abi3.so; the
#      optional accelerator nvtx_cffi/_speedups is the only per-version module.
#   2. NVTX_CFFI_SPEEDUPS=0 pip wheel --no-deps . in the same tree, as docs/install.md's two wheel commands run:
#      tagged cpXY-abi3, no per-version module at all (not even the accelerator step 1 left in build/).
#   2b. The sdist (python -m build --sdist) holds what rebuilding and testing need: c/, build_ffi.py,
#      tests/ with conftest.py and the C clients, examples/.
#   3. That abi3 wheel, built here, installed (no compiler involved) into CPython 3.15 in the Debian sid
#      chroot (scripts/sid-chroot.sh): imports, runs without the accelerator, and the tracer records
#      a small program's ranges. Skipped with NO_SID=1.
# Usage: scripts/abi3-check.sh        (root for step 3)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip

# Each build from its own copy of the tree: setuptools reuses build/, and a wheel must not pick up
# another build's modules.
src() {
    mkdir -p "$work/$1"
    git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
        [ -e "$f" ] && printf '%s\0' "$f"
    done | tar --null -T - -cf - | tar -xf - -C "$work/$1"
    echo "$work/$1"
}
# The wheel's file names, read whole before grep sees them: `python ... | grep -q` under pipefail
# fails when grep exits at its first match while python still writes; with PYTHONUNBUFFERED=1 (set
# on these machines) print() writes the text and its newline in two calls, so it did, now and then.
contents() { "$work/venv/bin/python" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"; }
fail() { echo "abi3-check: FAIL: $*" >&2; exit 1; }

"$work/venv/bin/python" -m pip wheel -q --no-deps -w "$work/default" "$(src src-default)"
whl=$(ls "$work"/default/*.whl)
echo "abi3-check: pip wheel . -> $(basename "$whl")"
names=$(contents "$whl")
grep -Eqx 'nvtx_cffi/_native/_ffi\.abi3(-[^.]+)?\.so' <<<"$names" || fail "no nvtx_cffi/_native/_ffi.abi3*.so in $(basename "$whl")"
per_version=$(grep -E '\.cpython-[0-9]+.*\.so$' <<<"$names" || true)
[ -z "$per_version" ] || [ "$per_version" = "$(grep -E '^nvtx_cffi/_speedups\.cpython-.*\.so$' <<<"$names")" ] ||
    fail "per-version modules besides the accelerator: $per_version"

NVTX_CFFI_SPEEDUPS=0 "$work/venv/bin/python" -m pip wheel -q --no-deps -w "$work/abi3" "$work/src-default"
whl=$(ls "$work"/abi3/*.whl)
echo "abi3-check: NVTX_CFFI_SPEEDUPS=0 pip wheel . -> $(basename "$whl")"
case "$(basename "$whl")" in *-cp3*-abi3-*.whl) ;; *) fail "not tagged abi3: $(basename "$whl")" ;; esac
names=$(contents "$whl")
! grep -E '\.cpython-[0-9]+.*\.so$' <<<"$names" || fail "per-version module in the abi3 wheel"

"$work/venv/bin/python" -m pip install -q build
"$work/venv/bin/python" -m build -q --sdist -o "$work/sdist" "$(src src-sdist)" >/dev/null
sdist=$(ls "$work"/sdist/*.tar.gz)
echo "abi3-check: python -m build --sdist -> $(basename "$sdist")"
names=$(tar -tzf "$sdist" | sed 's|^[^/]*/||')
for f in build_ffi.py setup.py c/shim/nvtx_shim.c c/shim/nvtx_shim.h c/recorder/recorder.c tests/conftest.py tests/support/hardening.py \
         tests/c/nvtx_client.c tests/api/test_events.py examples/quickstart.py examples/counters.py; do
    grep -qx "$f" <<<"$names" || fail "$f is not in the sdist"
done
! grep -E '(__pycache__|\.so$|\.pyc$)' <<<"$names" || fail "build droppings in the sdist"

if [ "${NO_SID:-0}" = 1 ]; then
    echo "abi3-check: NO_SID=1: not installing it on CPython 3.15"
    exit 0
fi
root="$(scripts/sid-chroot.sh)"
dest="$root/src/abi3-check"
rm -rf "$dest" && mkdir -p "$dest"
cp "$whl" "$dest/"
cat >"$dest/prog.py" <<'EOF'
import nvtx_cffi as nvtx

@nvtx.annotate("outer", color="purple")
def outer():
    for i in range(3):
        with nvtx.annotate("inner", color="red", payload=i):
            pass

outer()
EOF
scripts/sid-chroot.sh /bin/sh -ec '
    cd /src/abi3-check
    python3.15 -m venv venv
    venv/bin/python -m pip install -q ./*.whl
    venv/bin/python -c "
import importlib.util, sys, nvtx_cffi
assert importlib.util.find_spec(\"nvtx_cffi._speedups\") is None, \"accelerator in an abi3 wheel\"
print(\"abi3-check: CPython\", sys.version.split()[0], \"imports\", nvtx_cffi.__file__)
"
    venv/bin/python -m nvtx_cffi trace --stats -o trace.json prog.py | tee trace.log
    grep -q "^NVTX range summary: 2 range name(s), 4 range(s)" trace.log
'
echo "abi3-check: the abi3 wheel built with $("$PYTHON" -V) records on CPython 3.15"
