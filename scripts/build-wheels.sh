#!/usr/bin/env bash
# Build nvtx-cffi's release wheels: manylinux2014 (glibc 2.17) for x86_64 and aarch64, cross-built
# from this one x86_64 machine with `zig cc` (PyPI `ziglang`; no Docker, no system cross toolchain),
# into wheelhouse/; then check what came out.
#
# Usage: scripts/build-wheels.sh                     every CPython 3.11+ found, both archs, + abi3
#        PYTHONS="python3" ABI3=0 scripts/build-wheels.sh          one interpreter, no abi3 wheel
#        ARCHS="aarch64" OUT=/tmp/w ARM64_SMOKE=1 scripts/build-wheels.sh
#
# Wheels, per arch:
#   nvtx_cffi-V-cp3XX-cp3XX-manylinux2014_ARCH.whl   one per CPython in PYTHONS: the abi3 CFFI core
#       (_ffi.abi3.so) + the accelerator built for that version + the NVTX tools (recorder, null
#       tool, writer backend)
#   nvtx_cffi-V-cp311-abi3-manylinux2014_ARCH.whl    (ABI3=1, the default; built with NVTX_CFFI_SPEEDUPS=0
#       by the first interpreter): abi3 code only, for a CPython newer than every per-version wheel
#       (pip prefers a cp3XX-cp3XX wheel where one matches)
# PYTHONS defaults to python3 plus the newest patch release of each CPython 3.11+ that pyenv has
# (${PYENV_ROOT:-~/.pyenv}/versions/3.*; free-threaded builds are left out), one per version.
# The sdist is `python -m build --sdist` (scripts/sdist-check.sh builds and checks one).
#
# How: setuptools builds the CFFI module and the two NVTX tools with CC/LDSHARED = `zig cc -target
# <arch>-linux-gnu.2.17`, which links against glibc 2.17 symbol versions whatever this machine has.
# The extension suffix and platform tag are set for the target (SETUPTOOLS_EXT_SUFFIX, --plat-name).
# The CPython headers are the host's: fine between x86_64 and aarch64 Linux (both LP64, little-endian,
# same pyconfig.h answers for what a C extension uses). NVTX headers come from the nvidia-nvtx
# wheel; they are headers only, so the host's copy serves every target.
#
# Checks per wheel: `file`/`readelf -h` machine of every .so, the newest GLIBC_ symbol version it
# needs (<= 2.17), `auditwheel show` (manylinux2014 policy); an x86_64 wheel for the running
# interpreter is installed into a venv and imported; an aarch64 cp311 wheel (per-version or abi3)
# runs on Debian bookworm's aarch64 CPython 3.11 under qemu (scripts/arm64-smoke.sh: records with
# the wheel's own recorder) when the cached arm64 chroot exists or ARM64_SMOKE=1 (root; creating
# the chroot takes ~10 minutes once); otherwise that check is skipped with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/wheelhouse}"
ARCHS="${ARCHS:-x86_64 aarch64}"
ABI3="${ABI3:-1}"
ARM64_SMOKE="${ARM64_SMOKE:-auto}"
WORK="${WORK:-$ROOT/.venv-zig}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# One tool venv: ziglang + build requirements + auditwheel (build runs without isolation).
if [ ! -x "$WORK/bin/python" ]; then
    python3 -m venv "$WORK"
    "$WORK/bin/python" -m pip install -q --upgrade pip
    "$WORK/bin/python" -m pip install -q "ziglang<0.18" "nvidia-nvtx>=13,<14" auditwheel
fi
ZIG_PY="$WORK/bin/python"
NVTX_INCLUDE=$("$ZIG_PY" -c 'import glob, os, nvidia; print([os.path.dirname(os.path.dirname(p)) for r in nvidia.__path__ for p in glob.glob(os.path.join(r, "*", "include", "nvtx3", "nvToolsExt.h"))][0])')
export NVTX_CFFI_INCLUDE_DIR="$NVTX_INCLUDE"
echo "zig $("$ZIG_PY" -m ziglang version); NVTX headers: $NVTX_INCLUDE"

# A zig cc wrapper per target (distutils wants one executable path, not "python -m ziglang").
mkdir -p "$OUT" "$WORK/cc"
for arch in $ARCHS; do
    cat >"$WORK/cc/zigcc-$arch" <<EOF
#!/bin/sh
# zig cc for $arch-linux-gnu.2.17. Drop flags zig's clang rejects or that only gcc knows.
for a do shift; case "\$a" in -fno-semantic-interposition|-Wl,--enable-new-dtags*) ;; *) set -- "\$@" "\$a";; esac; done
exec "$ZIG_PY" -m ziglang cc -target $arch-linux-gnu.2.17 "\$@"
EOF
    chmod +x "$WORK/cc/zigcc-$arch"
done

# Every CPython 3.11+ to build for, one per version: python3 first, then pyenv's, newest patch first.
explicit_pythons=${PYTHONS:+1}
if [ -z "${PYTHONS:-}" ]; then
    PYTHONS=python3
    for p in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.* 2>/dev/null | sort -rV); do
        [ -x "$p/bin/python3" ] && PYTHONS="$PYTHONS $p/bin/python3"
    done
fi
pythons=() seen=" "
for py in $PYTHONS; do
    py=$(eval echo "$py")  # expand ~ in PYTHONS entries
    tag=$("$py" -c 'import sys, sysconfig; ok = sys.implementation.name == "cpython" and sys.version_info >= (3, 11) and not sysconfig.get_config_var("Py_GIL_DISABLED"); print("cp%d%d" % sys.version_info[:2] if ok else "-")') ||
        { echo "$py does not run"; exit 1; }
    if [ "$tag" = - ]; then
        [ -z "$explicit_pythons" ] || echo "skipping $py: not a CPython 3.11+ with a GIL"
        continue
    fi
    case "$seen" in *" $tag "*) continue ;; esac
    seen="$seen$tag "
    pythons+=("$py")
done
[ ${#pythons[@]} -gt 0 ] || { echo "no CPython 3.11+ in PYTHONS='$PYTHONS'"; exit 1; }
echo "building for: ${pythons[*]}; archs: $ARCHS; abi3 wheel: $([ "$ABI3" = 1 ] && echo yes || echo no)"

arm64_chroot_ready() {
    [ "$ARM64_SMOKE" = 1 ] || { [ "$ARM64_SMOKE" = auto ] && [ "$(id -u)" = 0 ] &&
        [ -f "${NVTX_CFFI_ARM64_CHROOT:-/var/cache/nvtx-cffi/arm64}/.nvtx-cffi-arm64-complete" ]; }
}

status=0
built=()
# build_wheel PYTHON ARCH VARIANT: VARIANT "full" (the accelerator, tagged cp3XX-cp3XX) or "abi3".
build_wheel() {
    local py="$1" arch="$2" variant="$3" tag bvenv abi speedups suffix log wheel x so machine glibc
    tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    # Each interpreter builds in its own venv (cffi, setuptools, wheel for that Python).
    bvenv="$WORK/build-$tag"
    if [ ! -x "$bvenv/bin/python" ]; then
        "$py" -m venv "$bvenv"
        "$bvenv/bin/python" -m pip install -q --upgrade pip
        "$bvenv/bin/python" -m pip install -q "cffi>=1.15.1" "setuptools>=77" wheel
    fi
    if [ "$variant" = abi3 ]; then abi=abi3 speedups=0 tag=cp311; else abi=$tag speedups=1; fi
    echo "== $tag-$abi $arch"
    rm -rf build "$ROOT"/*.egg-info
    suffix=".cpython-$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')-$arch-linux-gnu.so"
    log="$WORK/build-$tag-$abi-$arch.log"
    rm -f "$OUT"/nvtx_cffi-*-"$tag"-"$abi"-manylinux2014_"$arch".whl
    CC="$WORK/cc/zigcc-$arch" LDSHARED="$WORK/cc/zigcc-$arch -shared" \
    LDFLAGS="" CFLAGS="" CPPFLAGS="" NVTX_CFFI_SPEEDUPS="$speedups" \
    SETUPTOOLS_EXT_SUFFIX="$suffix" _PYTHON_HOST_PLATFORM="linux-$arch" \
        "$bvenv/bin/python" setup.py -q bdist_wheel --plat-name "manylinux2014_$arch" \
        --dist-dir "$OUT" >"$log" 2>&1 \
        || { echo "build failed: see $log"; tail -20 "$log"; status=1; return 0; }
    wheel=$(ls -t "$OUT"/nvtx_cffi-*-"$tag"-"$abi"-manylinux2014_"$arch".whl 2>/dev/null | head -1)
    [ -n "$wheel" ] || { echo "no $tag-$abi $arch wheel in $OUT after the build: see $log"; status=1; return 0; }
    echo "wheel: $wheel"
    built+=("$(basename "$wheel")")
    x=$(mktemp -d)
    (cd "$x" && "$ZIG_PY" -m zipfile -e "$wheel" .)
    if [ "$variant" = full ] && ! ls "$x"/nvtx_cffi/_speedups.*.so >/dev/null 2>&1; then
        echo "  no accelerator in a per-version wheel (its compile failed? see $log)"; status=1
    fi
    for so in $(find "$x" -name '*.so' | sort); do
        machine=$(readelf -h "$so" | sed -n 's/ *Machine: *//p')
        glibc=$(objdump -T "$so" | { grep -o 'GLIBC_[0-9.]*' || true; } | sort -uV | tail -1)
        echo "  $(basename "$so"): $machine; newest glibc symbol ${glibc:-none}; $(file -b "$so" | cut -d, -f1-2)"
        case "$arch:$machine" in
            x86_64:*X86-64*|aarch64:*AArch64*) ;;
            *) echo "  WRONG MACHINE for $arch"; status=1;;
        esac
        if [ -n "$glibc" ] && [ "$(printf '%s\nGLIBC_2.17\n' "$glibc" | sort -V | tail -1)" != "GLIBC_2.17" ]; then
            echo "  needs a glibc newer than 2.17"; status=1
        fi
    done
    rm -rf "$x"
    "$WORK/bin/auditwheel" show "$wheel" | tr '\n' ' ' | grep -o 'consistent with the following platform tag: "[^"]*"' \
        | sed 's/^/  auditwheel: /' || { echo "  auditwheel show failed"; status=1; }
    if [ "$arch" = "$(uname -m)" ]; then
        local tvenv="$WORK/test-$tag-$abi"
        rm -rf "$tvenv"; "$py" -m venv "$tvenv"
        "$tvenv/bin/python" -m pip install -q "$wheel"
        (cd /tmp && "$tvenv/bin/python" -c 'import nvtx_cffi, nvtx_cffi._native as n; nvtx_cffi.push_range("x"); nvtx_cffi.pop_range(); assert n.lib.nvtxcffi_initialize() in (0, 1); print("  imported and called on", n.__file__.split("site-packages/")[1])') || status=1
    elif [ "$arch" = aarch64 ] && [ "$tag" = cp311 ] && arm64_chroot_ready; then
        local smoke
        if smoke=$(scripts/arm64-smoke.sh "$wheel"); then echo "  $smoke"; else echo "  $smoke"; status=1; fi
    elif [ "$arch" = aarch64 ] && arm64_chroot_ready; then
        echo "  not run on aarch64: the arm64 chroot's CPython is 3.11, which runs the cp311 and abi3 wheels only"
    else
        echo "  not run here (ARM64_SMOKE=1 runs an aarch64 cp311 or abi3 wheel on a real aarch64 CPython: scripts/arm64-smoke.sh, root)"
    fi
}

for py in "${pythons[@]}"; do
    for arch in $ARCHS; do build_wheel "$py" "$arch" full; done
done
if [ "$ABI3" = 1 ]; then
    for arch in $ARCHS; do build_wheel "${pythons[0]}" "$arch" abi3; done
fi
rm -rf build "$ROOT"/*.egg-info
echo "built ${#built[@]} wheel(s) in $OUT: ${built[*]}"
[ "$status" = 0 ] || echo "build-wheels: some wheel failed a build or a check (see above)"
exit $status
