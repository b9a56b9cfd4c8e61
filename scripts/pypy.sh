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
PYTHON="$PYPY" exec scripts/test.sh "$@"
