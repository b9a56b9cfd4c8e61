#!/usr/bin/env bash
# The documentation site (mkdocs.yml, docs/): a venv of its own (.venv-docs) with the pinned
# docs/requirements.txt and nvtx-cffi installed (the API reference is read from the installed
# package), then mkdocs build --strict into site/: any warning fails, a broken link or anchor, a
# missing included file or a docstring that does not render included.
# Usage: scripts/docs.sh [mkdocs build args...]     (.ci/run's docs stage runs it as it is)
set -euo pipefail
cd "$(dirname "$0")/.."
export VENV="${VENV:-.venv-docs}" NO_MKDOCS_2_WARNING=1
. scripts/_venv.sh
make_venv -r docs/requirements.txt .
exec "$VENV/bin/mkdocs" build --strict "$@"
