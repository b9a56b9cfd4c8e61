#!/usr/bin/env bash
# The README's first command: fresh venv, install nvtx-cffi, trace examples/quickstart.py, print the summary.
# Usage: scripts/quickstart.sh [tracer options...]     PYTHON=python3.13 scripts/quickstart.sh
# Writes quickstart.trace.json (open it at https://ui.perfetto.dev).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv-$("$PYTHON" -c 'import sys; print(sys.implementation.name + "%d.%d" % sys.version_info[:2])')}"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q .
exec "$VENV/bin/python" -m nvtx_cffi trace --stats -o quickstart.trace.json "$@" examples/quickstart.py
