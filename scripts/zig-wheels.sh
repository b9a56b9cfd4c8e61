#!/usr/bin/env bash
# Cross-build nvtx-cffi wheels with `zig cc` (PyPI `ziglang`) for manylinux2014 (glibc 2.17), x86_64
# and aarch64, from this one x86_64 machine; check what came out.
#
# Usage: scripts/zig-wheels.sh                      wheels for the default python3 into dist-zig/
#        PYTHONS="~/.pyenv/versions/3.9.18/bin/python python3" scripts/zig-wheels.sh
#        ARCHS="aarch64" OUT=/tmp/w scripts/zig-wheels.sh
#
# How: setuptools builds the CFFI module and the two NVTX tools with CC/LDSHARED = `zig cc -target
# <arch>-linux-gnu.2.17`, which links against glibc 2.17 symbol versions whatever this machine has.
# The extension suffix and platform tag are set for the target (SETUPTOOLS_EXT_SUFFIX, --plat-name).
# The CPython headers are the host's: fine between x86_64 and aarch64 Linux (both LP64, little-endian,
# same pyconfig.h answers for what a C extension uses). NVTX headers come from the nvidia-nvtx
# wheel; they are headers only, so the host's copy serves every target.
#
# Checks per wheel: `file`/`readelf -h` machine of every .so, the newest GLIBC_ symbol version it
# needs (<= 2.17), `auditwheel show` (manylinux2014 policy), and, when the wheel is for this
# interpreter: x86_64 is installed into a venv and imported; aarch64 runs under qemu-user (apt
# `qemu-user libc6-arm64-cross`): scripts/zig_probe.c + the shim source, with the wheel's aarch64
# recorder as NVTX tool, must produce a recording (skipped with a note when qemu is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT="${OUT:-$ROOT/dist-zig}"
ARCHS="${ARCHS:-x86_64 aarch64}"
PYTHONS="${PYTHONS:-python3}"
WORK="${WORK:-$ROOT/.venv-zig}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# One tool venv: ziglang + build requirements + auditwheel (build runs without isolation).
if [ ! -x "$WORK/bin/python" ]; then
    python3 -m venv "$WORK"
    "$WORK/bin/python" -m pip install -q --upgrade pip
    "$WORK/bin/python" -m pip install -q ziglang nvidia-nvtx auditwheel
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

status=0
for py in $PYTHONS; do
    py=$(eval echo "$py")  # expand ~ in PYTHONS entries
    tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    # Each interpreter builds in its own venv (cffi, setuptools, wheel for that Python).
    bvenv="$WORK/build-$tag"
    if [ ! -x "$bvenv/bin/python" ]; then
        "$py" -m venv "$bvenv"
        "$bvenv/bin/python" -m pip install -q --upgrade pip
        "$bvenv/bin/python" -m pip install -q "cffi>=1.15.1" "setuptools>=77" wheel
    fi
    for arch in $ARCHS; do
        echo "== $tag $arch"
        rm -rf build "$ROOT"/*.egg-info
        suffix=".cpython-${tag#cp}-$arch-linux-gnu.so"
        CC="$WORK/cc/zigcc-$arch" LDSHARED="$WORK/cc/zigcc-$arch -shared" \
        LDFLAGS="" CFLAGS="" CPPFLAGS="" \
        SETUPTOOLS_EXT_SUFFIX="$suffix" _PYTHON_HOST_PLATFORM="linux-$arch" \
            "$bvenv/bin/python" setup.py -q bdist_wheel --plat-name "manylinux2014_$arch" \
            --dist-dir "$OUT" >"$WORK/build-$tag-$arch.log" 2>&1 \
            || { echo "build failed: see $WORK/build-$tag-$arch.log"; tail -20 "$WORK/build-$tag-$arch.log"; status=1; continue; }
        wheel=$(ls -t "$OUT"/nvtx_cffi-*-"$tag"-"$tag"-manylinux2014_"$arch".whl | head -1)
        echo "wheel: $wheel"
        x=$(mktemp -d)
        (cd "$x" && "$ZIG_PY" -m zipfile -e "$wheel" .)
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
        "$WORK/bin/auditwheel" show "$wheel" | tr '\n' ' ' | grep -o 'consistent with the following platform tag: "[^"]*"' \
            | sed 's/^/  auditwheel: /' || { echo "  auditwheel show failed"; status=1; }
        host_arch=$(uname -m)
        if [ "$arch" = "$host_arch" ]; then
            tvenv="$WORK/test-$tag"
            rm -rf "$tvenv"; "$py" -m venv "$tvenv"
            "$tvenv/bin/python" -m pip install -q "$wheel"
            (cd /tmp && "$tvenv/bin/python" -c 'import nvtx_cffi, nvtx_cffi._native as n; nvtx_cffi.push_range("x"); nvtx_cffi.pop_range(); assert n.lib.nvtxcffi_initialize() in (0, 1); print("  imported and called on", n.__file__.split("site-packages/")[1])') || status=1
        elif command -v "qemu-$arch" >/dev/null && [ -d "${QEMU_LD_PREFIX:=/usr/$arch-linux-gnu}/lib" ]; then
            # The CFFI module needs libpython (no aarch64 Python here), so run what has no Python in
            # it: a C probe built from the shim's own source (same zig, same flags) that loads the
            # wheel's aarch64 recorder as its NVTX tool, annotates, and checks a recording appeared.
            export QEMU_LD_PREFIX
            recorder_so=$(find "$x" -name 'libnvtx_recorder*.so' | head -1)
            "$WORK/cc/zigcc-$arch" -O2 -std=c11 -I"$NVTX_INCLUDE" -Ic -o "$x/probe" scripts/zig_probe.c c/nvtx_shim.c -ldl -lpthread
            rm -rf "$x/rec"; mkdir "$x/rec"
            if NVTX_INJECTION64_PATH="$recorder_so" NVTX_CFFI_RECORD_DIR="$x/rec" "qemu-$arch" "$x/probe" \
                    && [ -n "$(ls "$x/rec")" ]; then
                echo "  qemu-$arch: shim + recorder ran; recorded $(cat "$x/rec"/* | wc -c) bytes"
            else
                echo "  qemu-$arch: probe FAILED"; status=1
            fi
        else
            echo "  not run: no qemu-$arch or no $arch libc (apt: qemu-user libc6-arm64-cross)"
        fi
        rm -rf "$x"
    done
done
rm -rf build "$ROOT"/*.egg-info
exit $status
