#!/usr/bin/env bash
# The test command (README, .ci/run): fresh venv, install nvtx-cffi with its test extras, run pytest.
# Usage: scripts/test.sh [pytest args...]      PYTHON=python3.13 scripts/test.sh   (another interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv-$("$PYTHON" -c 'import sys; print(sys.implementation.name + "%d.%d" % sys.version_info[:2])')}"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q ".[test]"
# Run from tests/ so the installed package is imported, not the source tree.
VENV="$(cd "$VENV" && pwd)"
cd tests && exec "$VENV/bin/python" -m pytest "$@"
