#!/usr/bin/env bash
# asv_bench/compare.py on every supported CPython, one after the other: 3.11-3.13 from pyenv, 3.14
# and 3.15 in the Debian sid chroot (scripts/sid-chroot.sh). For each, a venv with this tree built
# and installed, nvtx==0.2.16 (its wheel for that Python, from PyPI), numpy, nvidia-nvtx and
# setuptools (the stock-CFFI row); then compare.py writes OUTDIR/compare-X.Y.txt (its table) and
# OUTDIR/compare-X.Y.json (raw results), and asv_bench/compare_summary.py puts the ratios of every
# Python side by side in OUTDIR/summary.txt (docs/overhead.md says how its tables are made from these).
#
# Usage: scripts/compare-pythons.sh [OUTDIR] [compare.py args...]      (default OUTDIR: compare-out)
#        VERSIONS="3.11 3.14" scripts/compare-pythons.sh out --quick
#
# The venvs are kept (.venv-compare-cpythonX.Y here; /src/nvtx-cffi-compare-venv-X.Y in the chroot)
# and nvtx-cffi is reinstalled into them from this tree at each run. The chroot needs root, and
# waits for its lock while another command (a CI run) holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-compare-out}"
[ $# -gt 0 ] && shift
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
VERSIONS="${VERSIONS:-3.11 3.12 3.13 3.14 3.15}"
PYENV_VERSIONS="${PYENV_ROOT:-$HOME/.pyenv}/versions"
PACKAGES="nvtx==0.2.16 numpy nvidia-nvtx>=13,<14 setuptools cffi"

# One interpreter, in the current directory (a copy of the tree): venv, install, compare.py.
# Also run inside the chroot (the function's text is passed to sh there).
# shellcheck disable=SC2016
RUN_ONE='
set -e
py="$1"; venv="$2"; out="$3"; pkgs="$4"; shift 4
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q $pkgs >"$venv/deps.log" 2>&1 || { tail -20 "$venv/deps.log" >&2; exit 1; }
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps . >"$venv/install.log" 2>&1 ||
    { tail -40 "$venv/install.log" >&2; exit 1; }
(cd / && "$venv/bin/python" -c "import nvtx_cffi, sys; from nvtx_cffi import _accel; print(sys.version.split()[0], \"accelerator:\", _accel.speedups is not None, _accel.why_not)") >&2 || true
exec "$venv/bin/python" asv_bench/compare.py --json "$out.json" "$@" >"$out.txt"
'

status=0
for v in $VERSIONS; do
    echo "=== CPython $v" >&2
    start=$SECONDS
    case "$v" in
        3.1[4-9])
            root="$(scripts/sid-chroot.sh)"
            dest="/src/nvtx-cffi-compare-$v"
            rm -rf "${root:?}$dest"
            mkdir -p "$root$dest/out"
            git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
                [ -e "$f" ] && printf '%s\0' "$f"
            done | tar --null -T - -cf - | tar -xf - -C "$root$dest"
            if scripts/sid-chroot.sh /bin/sh -c "cd $dest && $RUN_ONE" sh "python$v" \
                "/src/nvtx-cffi-compare-venv-$v" "$dest/out/compare-$v" "$PACKAGES" "$@"; then
                cp "$root$dest/out/compare-$v.txt" "$root$dest/out/compare-$v.json" "$OUT/"
            else
                echo "CPython $v: FAILED" >&2; status=1; continue
            fi
            ;;
        *)
            dir=$(ls -d "$PYENV_VERSIONS/$v".* 2>/dev/null | sort -V | tail -1)
            if [ -z "$dir" ] || [ ! -x "$dir/bin/python" ]; then
                echo "CPython $v: MISSING (no $PYENV_VERSIONS/$v.*)" >&2; status=1; continue
            fi
            if ! /bin/sh -c "$RUN_ONE" sh "$dir/bin/python" "$PWD/.venv-compare-cpython$v" \
                "$OUT/compare-$v" "$PACKAGES" "$@"; then
                echo "CPython $v: FAILED" >&2; status=1; continue
            fi
            ;;
    esac
    echo "CPython $v: $OUT/compare-$v.txt ($((SECONDS - start)) s)" >&2
done
shopt -s nullglob
jsons=("$OUT"/compare-3.*.json)
if [ ${#jsons[@]} -gt 0 ]; then
    python3 asv_bench/compare_summary.py "${jsons[@]}" >"$OUT/summary.txt"
    echo "summary: $OUT/summary.txt" >&2
fi
exit $status
