#!/usr/bin/env bash
# `python -m build` makes an sdist and a wheel; the sdist alone, in a fresh venv, installs and works
# (it must carry build_ffi.py and every C source and header under c/: MANIFEST.in). Usage: scripts/sdist-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-$(mktemp -d)}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$PYTHON" -m venv "$OUT/tools"
"$OUT/tools/bin/python" -m pip install -q build
"$OUT/tools/bin/python" -m build -o "$OUT/dist" . >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ls "$OUT/dist"
sdist=$(ls "$OUT"/dist/nvtx_cffi-*.tar.gz)
listing=$(tar tzf "$sdist")
for f in build_ffi.py c/shim/nvtx_shim.c c/shim/nvtx_shim.h c/shim/keep_gil.h c/recorder/recorder.c c/recorder/recorder.h c/tools/null_tool.c setup.py; do
    grep -qx "nvtx_cffi-[^/]*/$f" <<<"$listing" || { echo "sdist lacks $f"; exit 1; }
done
"$PYTHON" -m venv "$OUT/fresh"
"$OUT/fresh/bin/python" -m pip install -q "$sdist"
# Away from the source tree; the recorder attached, so the real path runs and is checked.
cd "$OUT" && NVTX_INJECTION64_PATH="$("$OUT/fresh/bin/python" -c 'from nvtx_cffi import recorder; print(recorder.library_path())')" \
NVTX_CFFI_RECORD_DIR="$OUT/rec" "$OUT/fresh/bin/python" - <<'PY'
import nvtx_cffi as nvtx
from nvtx_cffi import recorder
assert nvtx.enabled(), "recorder not attached"
with recorder.capture() as events:
    with nvtx.annotate("from the sdist", color="red"):
        pass
assert [(e.kind, e.message) for e in events if e.kind in ("push", "pop")] == [("push", "from the sdist"), ("pop", None)]
print("sdist installed in a fresh venv: imports, attaches the recorder, records:", nvtx.__file__)
PY
