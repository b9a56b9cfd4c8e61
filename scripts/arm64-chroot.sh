#!/usr/bin/env bash
# A Debian bookworm arm64 (aarch64) chroot with its python3 and cffi backend, run on this x86_64 machine under
# qemu-user-static: a real aarch64 CPython to run the aarch64 wheels on (.ci/run's wheels stage,
# scripts/arm64-smoke.sh).
#
# Usage: scripts/arm64-chroot.sh                          create the chroot if needed, print its path
#        scripts/arm64-chroot.sh [VAR=value...] PROG [ARGS...]
#                                     ... then run the aarch64 PROG (a path inside the chroot, or a
#                                     name in its /usr/bin) there, in a clean env plus the VARs
#
# The chroot lives OUTSIDE the clone, in ${NVTX_CFFI_ARM64_CHROOT:-/var/cache/nvtx-cffi/arm64}, and
# is reused across runs and clones; it is rebuilt when its completion marker (written last) is
# missing or names another package list. Creating it: `debootstrap --arch=arm64 --foreign` (the
# downloads; retried once) from the Debian mirror this machine's apt sources name
# (NVTX_CFFI_ARM64_MIRROR overrides), then the second stage, which runs the chroot's own dpkg under
# qemu: ~6-10 minutes on a busy machine, ~260 MB. Needs root; installs qemu-user-static,
# binfmt-support and debootstrap with apt when missing.
#
# How aarch64 programs run: with binfmt_misc when it can be used (mounted if it is not, and
# `update-binfmts --enable qemu-aarch64`; qemu-user-static registers with the F flag, so the
# kernel runs aarch64 ELF files anywhere, chroots included, with the host's qemu). Where it cannot
# (a container without binfmt_misc), each program is started through qemu explicitly:
# `chroot ROOT /usr/bin/qemu-aarch64-static PROG` (the static qemu is copied into the chroot).
# qemu-user does not follow exec(), so then PROG must not start other programs, and the second
# stage (a shell script running dpkg) cannot run: the downloaded packages are instead unpacked
# with the host's dpkg-deb (no maintainer scripts; enough for python3 and its standard library).
# NVTX_CFFI_ARM64_QEMU=explicit takes that path even where binfmt_misc works (to test it).
set -euo pipefail
. "$(dirname "$0")/_debian.sh"

ROOT="${NVTX_CFFI_ARM64_CHROOT:-/var/cache/nvtx-cffi/arm64}"
SUITE=bookworm
# No pip needed: a wheel is unzipped onto PYTHONPATH. Its one run-time dependency, cffi (only its
# compiled _cffi_backend module, which the CFFI core imports), comes from Debian (1.15.1).
PACKAGES="python3,python3-cffi-backend"
MARKER="$ROOT/.nvtx-cffi-arm64-complete"
QEMU=/usr/bin/qemu-aarch64-static
CHROOT=$(command -v chroot || echo /usr/sbin/chroot)   # run_in's env -i has no /usr/sbin on PATH

log() { echo "arm64-chroot: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, binfmt)"
case "$ROOT" in /|"") die "refusing NVTX_CFFI_ARM64_CHROOT='$ROOT'" ;; esac

# Try to make the kernel run aarch64 ELF files through qemu; no error if it cannot.
enable_binfmt() {
    [ "${NVTX_CFFI_ARM64_QEMU:-}" != explicit ] || return 0
    [ -f /proc/sys/fs/binfmt_misc/status ] ||
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || return 0
    [ -f /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 ||
        update-binfmts --enable qemu-aarch64 2>/dev/null || true
}

# MODE: "binfmt" when the chroot's aarch64 programs start by themselves, else "explicit".
detect_mode() {
    if [ "${NVTX_CFFI_ARM64_QEMU:-}" = explicit ]; then MODE=explicit
    elif chroot "$ROOT" /bin/true 2>/dev/null; then MODE=binfmt; else MODE=explicit; fi
}

unmount_all() {
    local m
    for m in $(mounts_under "$ROOT"); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    done
}

first_stage() {
    local mirror="$1" try
    for try in 1 2; do
        unmount_all
        [ -z "$(mounts_under "$ROOT")" ] || die "$ROOT still has mounts; not deleting it"
        rm -rf "$ROOT"
        mkdir -p "$ROOT"
        if debootstrap --arch=arm64 --foreign --variant=minbase --include="$PACKAGES" \
                "$SUITE" "$ROOT" "$mirror" >"$ROOT.debootstrap.log" 2>&1; then
            return 0
        fi
        tail -15 "$ROOT.debootstrap.log" >&2
        [ "$try" = 1 ] && { log "debootstrap (downloads from $mirror) failed; retrying in 15 s"; sleep 15; }
    done
    die "debootstrap --foreign of $SUITE arm64 from $mirror failed twice (full log: $ROOT.debootstrap.log)"
}

build() {
    local mirror start=$SECONDS deb
    mirror="${NVTX_CFFI_ARM64_MIRROR:-$(find_mirror)}" ||
        die "no Debian mirror (a URIs: or deb line ending in /debian) in /etc/apt/sources*; set NVTX_CFFI_ARM64_MIRROR"
    log "debootstrap $SUITE arm64 from $mirror into $ROOT (6-10 minutes, ~260 MB)"
    rm -f "$ROOT.debootstrap.log"
    first_stage "$mirror"
    cp "$QEMU" "$ROOT/usr/bin/"
    enable_binfmt
    detect_mode
    if [ "$MODE" = binfmt ]; then
        log "second stage (the chroot's dpkg under qemu via binfmt_misc)"
        # It mounts /proc and /sys inside; unmounted again on any exit.
        trap unmount_all EXIT
        chroot "$ROOT" /debootstrap/debootstrap --second-stage >>"$ROOT.debootstrap.log" 2>&1 || {
            tail -30 "$ROOT.debootstrap.log" >&2
            die "debootstrap --second-stage in $ROOT failed (full log: $ROOT.debootstrap.log)"
        }
        unmount_all
        trap - EXIT
    else
        log "binfmt_misc not usable here (or NVTX_CFFI_ARM64_QEMU=explicit): unpacking the downloaded packages with dpkg-deb instead of the second stage"
        for deb in "$ROOT"/var/cache/apt/archives/*.deb; do
            dpkg-deb -x "$deb" "$ROOT" || die "dpkg-deb -x $deb failed"
        done
    fi
    run_in /usr/bin/python3 -c 'import _cffi_backend, ctypes, json, sys; assert sys.maxsize > 2**32' ||
        die "python3 in $ROOT does not run (mode: $MODE)"
    rm -rf "$ROOT/var/cache/apt/archives/"*.deb
    echo "$SUITE $PACKAGES" >"$MARKER"   # last: a chroot without it is rebuilt
    log "built in $((SECONDS - start)) s ($(du -sh "$ROOT" 2>/dev/null | cut -f1)), programs run by $MODE qemu"
}

# run_in [VAR=value...] PROG [ARGS...]: the environment is set by the host's env, outside, so that
# no aarch64 program has to start another one in explicit mode.
run_in() {
    local envs=(PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8)
    while [ $# -gt 0 ] && [[ "$1" == [A-Za-z_]*=* ]]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] || die "no program to run"
    local prog="$1"; shift
    case "$prog" in /*) ;; *) prog="/usr/bin/$prog" ;; esac
    log "running $prog (aarch64, $MODE qemu)"
    if [ "$MODE" = binfmt ]; then
        env -i "${envs[@]}" "$CHROOT" "$ROOT" "$prog" "$@"
    else
        env -i "${envs[@]}" "$CHROOT" "$ROOT" "$QEMU" "$prog" "$@"
    fi
}

apt_install qemu-user-static binfmt-support debootstrap || die "could not install qemu-user-static binfmt-support debootstrap"

# One user at a time: a build never overlaps a run.
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9

if [ ! -f "$MARKER" ] || [ "$(cat "$MARKER")" != "$SUITE $PACKAGES" ]; then
    build
else
    [ -x "$ROOT$QEMU" ] || cp "$QEMU" "$ROOT/usr/bin/"
    enable_binfmt
    detect_mode
fi

if [ $# = 0 ]; then
    echo "$ROOT"
    exit 0
fi
set +e
run_in "$@"
