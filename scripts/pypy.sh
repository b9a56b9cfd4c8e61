#!/usr/bin/env bash
# PyPy 3.9 (Debian's pypy3): build nvtx-cffi and run the test suite with scripts/test.sh.
# On PyPy, CFFI is the interpreter's own FFI (cffi 1.15.1, built in): the CFFI module is compiled
# for PyPy's cpyext-free backend and the shim's calls are JIT-inlined, no wrapper involved.
# Usage: scripts/pypy.sh [pytest args...]     (installs pypy3 pypy3-venv pypy3-dev with apt if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
PYPY="${PYPY:-pypy3}"
if ! command -v "$PYPY" >/dev/null || ! "$PYPY" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "installing Debian's PyPy 3.9 (pypy3 pypy3-venv pypy3-dev)"
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq pypy3 pypy3-venv pypy3-dev
fi
"$PYPY" --version
# PyPy before 7.3.16 (Debian bookworm's pypy3 is 7.3.11) has a bug in its incremental GC: an array
# memcopied into an array already marked is not traced again, so objects reachable only through it
# are freed while in use (pypy/pypy#3959 and #4925, fixed by pypy/pypy#4928 in 7.3.16). It shows as
# a SIGSEGV in pytest's assertion rewriting (_rewrite_test: ast.parse/compile), now and then, with
# nothing of nvtx-cffi involved. A marking step this big is the whole heap: marking never
# interleaves with the program, so the bug cannot happen. Set for this process and its children
# (the tests' subprocesses); an explicit PYPY_GC_INCREMENT_STEP wins.
if "$PYPY" -c 'import sys; sys.exit(sys.pypy_version_info[:3] >= (7, 3, 16))'; then
    export PYPY_GC_INCREMENT_STEP="${PYPY_GC_INCREMENT_STEP:-4GB}"
    echo "PyPy < 7.3.16: PYPY_GC_INCREMENT_STEP=$PYPY_GC_INCREMENT_STEP (non-incremental GC marking, pypy/pypy#3959)"
fi
PYTHON="$PYPY" exec scripts/test.sh "$@"
