#!/usr/bin/env bash
# The README's first command: fresh venv, install nvtx-cffi with the tracer's extra, trace examples/quickstart.py, print the summary.
# Usage: scripts/quickstart.sh [tracer options...]     PYTHON=python3.13 scripts/quickstart.sh
# Writes quickstart.trace.json (open it at https://ui.perfetto.dev).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
make_venv ".[trace]"  # the tracer's extra: NumPy, its fast conversion
# Run from examples/: from the repository root, `python -m` would import the source tree's
# nvtx_cffi/ (no compiled module) instead of the package just installed.
cd examples
exec "$VENV/bin/python" -m nvtx_cffi trace --stats -o ../quickstart.trace.json "$@" quickstart.py
