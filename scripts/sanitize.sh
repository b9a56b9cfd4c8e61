#!/usr/bin/env bash
# The C shim and the recorder under AddressSanitizer + UBSan while the whole test suite runs.
#
# Builds nvtx-cffi in its own venv (.venv-asan) with NVTX_CFFI_CFLAGS (read by build_ffi.py for the
# CFFI module and, through build_ffi.C_FLAGS, by setup.py for the recorder and null tool) set to
# -fsanitize=address,undefined, then runs pytest with libasan preloaded (CPython itself is not
# instrumented; ASan must be the first library loaded) and PYTHONMALLOC=malloc so that Python's
# buffers handed to C are ASan-tracked too. Every test's recorded child inherits the environment,
# so the recorder runs instrumented in those children as well. Any ASan or UBSan report aborts the
# process that hit it, which fails the test.
# Leaks: LeakSanitizer would report CPython's own deliberate at-exit leaks by the thousand, so it is
# off by default; SANITIZE_LEAKS=1 turns it on with scripts/lsan.supp (which hides only
# leaks allocated by the interpreter, not by nvtx-cffi's or the recorder's code).
# Usage: scripts/sanitize.sh [pytest args...]     (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv-asan}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "cffi>=1.15.1" "setuptools>=77" wheel "nvidia-nvtx>=13,<14" pytest hypothesis numpy
# No build isolation: the flags must reach this build, and a cached non-sanitized wheel must not be reused.
# setuptools keeps objects in ./build and reuses them when sources are older: clear it before (so the
# flags apply) and after (so the next ordinary build does not link instrumented objects).
rm -rf build
NVTX_CFFI_CFLAGS="$SAN" LDFLAGS="-fsanitize=address,undefined" \
    "$VENV/bin/python" -m pip install -q --no-build-isolation --no-cache-dir --force-reinstall --no-deps .
rm -rf build
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
for so in "$SITE"/nvtx_cffi/_native/_ffi*.so "$SITE"/nvtx_cffi/_speedups*.so "$SITE"/nvtx_cffi/libnvtx_recorder.so; do
    # no grep -q: it exits at the first match, nm dies of SIGPIPE and pipefail fails the check
    nm -D "$so" | grep __asan_report >/dev/null || { echo "not instrumented: $so"; exit 1; }
done
echo "instrumented: $(ls "$SITE"/nvtx_cffi/_native/_ffi*.so "$SITE"/nvtx_cffi/_speedups*.so "$SITE"/nvtx_cffi/lib*.so | xargs -n1 basename | tr '\n' ' ')"

# Compilers the tests run (a C test client) must not inherit the preloaded ASan runtime.
printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "${CC:-cc}" >"$VENV/bin/cc-without-asan"
chmod +x "$VENV/bin/cc-without-asan"
export CC="$PWD/$VENV/bin/cc-without-asan"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) ${LD_PRELOAD:-}"
export PYTHONMALLOC=malloc
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if [ "${SANITIZE_LEAKS:-0}" = 1 ]; then
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
    export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
else
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
fi
cd tests && exec "../$VENV/bin/python" -m pytest "$@"
