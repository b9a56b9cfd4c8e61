#!/usr/bin/env bash
# The test command (README, .ci/run): fresh venv, install nvtx-cffi with its test extras, run pytest.
# Usage: scripts/test.sh [pytest args...]      PYTHON=python3.13 scripts/test.sh   (another interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
make_venv ".[test]"
# Run from tests/ so the installed package is imported, not the source tree.
cd tests && exec "$VENV/bin/python" -m pytest "$@"
