#!/usr/bin/env bash
# Run the test command (scripts/test.sh: fresh venv, install, pytest) on every supported CPython
# that pyenv has here, 3.11 through 3.13, one after the other; then print a pass/fail line each.
# (3.14 and 3.15: scripts/test-sid.sh, in a Debian sid chroot.)
# Usage: scripts/all-pythons.sh [pytest args...]        VERSIONS="3.12 3.13" scripts/all-pythons.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PYENV_VERSIONS="${PYENV_ROOT:-$HOME/.pyenv}/versions"
VERSIONS="${VERSIONS:-3.11 3.12 3.13}"
summary=()
status=0
for v in $VERSIONS; do
    # The newest installed patch release of each minor version (3.12 -> 3.12.1).
    dir=$(ls -d "$PYENV_VERSIONS/$v".* 2>/dev/null | sort -V | tail -1)
    if [ -z "$dir" ] || [ ! -x "$dir/bin/python" ]; then
        summary+=("$v: MISSING (no $PYENV_VERSIONS/$v.*)"); status=1; continue
    fi
    echo "=== CPython $(basename "$dir")"
    start=$SECONDS
    if PYTHON="$dir/bin/python" scripts/test.sh "$@"; then
        summary+=("$(basename "$dir"): passed ($((SECONDS - start)) s)")
    else
        summary+=("$(basename "$dir"): FAILED ($((SECONDS - start)) s)"); status=1
    fi
done
printf '%s\n' "${summary[@]}"
exit $status
