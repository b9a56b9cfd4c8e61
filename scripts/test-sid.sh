#!/usr/bin/env bash
# The README's test command (scripts/test.sh) on CPython 3.14 or 3.15, Debian sid's python3.14 /
# python3.15, inside the chroot scripts/sid-chroot.sh makes (and caches outside the clone).
# Usage: scripts/test-sid.sh 3.14|3.15 [pytest args...]          (root; see scripts/sid-chroot.sh)
#
# The working tree (tracked and untracked-but-not-ignored files: no venvs, no build outputs) is
# copied to /src/nvtx-cffi in the chroot, fresh each run, so the venv is fresh too; then
# `PYTHON=python3.1X scripts/test.sh ARGS` runs there. Compiler output goes to the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 3.14|3.15 [pytest args...]" >&2; exit 2; }
v="$1"; shift
case "$v" in 3.1[4-9]) ;; *) echo "$0: $v: not a sid CPython (3.14, 3.15)" >&2; exit 2 ;; esac

root="$(scripts/sid-chroot.sh)"
dest="$root/src/nvtx-cffi-$v"
rm -rf "$dest"
mkdir -p "$dest"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
        [ -e "$f" ] && printf '%s\0' "$f"       # skip files deleted but not yet committed
    done | tar --null -T - -cf - | tar -xf - -C "$dest"
else
    tar --exclude='./.venv*' --exclude='./.git' --exclude='./build' -cf - . | tar -xf - -C "$dest"
fi

# scripts/test.sh (scripts/_venv.sh) prints the build's compiler and deprecation warnings.
exec scripts/sid-chroot.sh /bin/sh -c '
    set -e
    cd "$1"; v="$2"; shift 2
    echo "=== CPython $("python$v" -c "import platform; print(platform.python_version())") (Debian sid chroot)"
    PYTHON="python$v" exec scripts/test.sh "$@"
' sh "/src/nvtx-cffi-$v" "$v" "$@"
