#!/usr/bin/env bash
# A Debian sid chroot with CPython 3.14 and 3.15 (python3.1X-dev, -venv), gcc and libc6-dev: the
# newest CPythons, which this machine's Debian (bookworm) cannot install. scripts/test-sid.sh runs
# the README's test command in it; .ci/run uses that for 3.14 and 3.15.
#
# Usage: scripts/sid-chroot.sh                  create the chroot if needed, print its path
#        scripts/sid-chroot.sh CMD [ARGS...]    ... then run CMD inside it (with /proc and /dev/shm
#                                               mounted, unmounted again on exit), in a clean env
#
# The chroot lives OUTSIDE the clone, in ${NVTX_CFFI_SID_CHROOT:-/var/cache/nvtx-cffi/sid}, and is
# reused across runs and clones; it is rebuilt when its completion marker is missing (an interrupted
# build) or names another package list. Creating it takes ~2 minutes and ~600 MB (debootstrap
# --variant=minbase from the Debian mirror this machine's apt sources name; NVTX_CFFI_SID_MIRROR
# overrides). Needs root; installs debootstrap with apt if missing.
#
# Inside, commands run as `env -i PATH=/usr/bin:/bin HOME=/root ...` plus the host's PIP_* settings
# whose paths exist in the chroot, CI, and the CA-bundle variables: the host's CA bundle, pip.conf
# and resolv.conf are copied in before each use.
set -euo pipefail
. "$(dirname "$0")/_debian.sh"

ROOT="${NVTX_CFFI_SID_CHROOT:-/var/cache/nvtx-cffi/sid}"
PACKAGES="python3.14-dev,python3.14-venv,python3.15-dev,python3.15-venv,gcc,libc6-dev"
MARKER="$ROOT/.nvtx-cffi-sid-complete"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

log() { echo "sid-chroot: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount)"
case "$ROOT" in /|"") die "refusing NVTX_CFFI_SID_CHROOT='$ROOT'" ;; esac

mounts_under_root() { mounts_under "$ROOT"; }

unmount_all() {
    local m
    for m in $(mounts_under_root); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    done
}

build() {
    local mirror start=$SECONDS
    mirror="${NVTX_CFFI_SID_MIRROR:-$(find_mirror)}" ||
        die "no Debian mirror (a URIs: or deb line ending in /debian) in /etc/apt/sources*; set NVTX_CFFI_SID_MIRROR"
    command -v debootstrap >/dev/null || apt_install debootstrap || die "could not install debootstrap"
    unmount_all
    [ -z "$(mounts_under_root)" ] || die "$ROOT still has mounts; not deleting it"
    rm -rf "$ROOT"
    mkdir -p "$(dirname "$ROOT")"
    log "debootstrap sid from $mirror into $ROOT (about 2 minutes, 600 MB)"
    debootstrap --variant=minbase --include="$PACKAGES" sid "$ROOT" "$mirror" >"$ROOT.debootstrap.log" 2>&1 || {
        tail -30 "$ROOT.debootstrap.log" >&2
        die "debootstrap failed (full log: $ROOT.debootstrap.log)"
    }
    for v in 3.14 3.15; do
        chroot "$ROOT" "/usr/bin/python$v" -c 'import venv, ensurepip, sysconfig' ||
            die "python$v in the chroot is incomplete"
    done
    rm -rf "$ROOT/var/cache/apt/archives/"*.deb
    echo "$PACKAGES" >"$MARKER"   # last: a chroot without it is rebuilt
    log "built in $((SECONDS - start)) s ($(du -sh "$ROOT" 2>/dev/null | cut -f1))"
}

# One user at a time: a build, or a run that mounts and unmounts /proc, never overlaps another.
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9

if [ ! -f "$MARKER" ] || [ "$(cat "$MARKER")" != "$PACKAGES" ]; then
    build
fi

if [ $# = 0 ]; then
    echo "$ROOT"
    exit 0
fi

# Host configuration the network needs: DNS, the CA bundle (a proxy's CA may be in it), pip.conf.
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
if [ -f "$CA_BUNDLE" ]; then
    mkdir -p "$ROOT/etc/ssl/certs"
    cp -L "$CA_BUNDLE" "$ROOT$CA_BUNDLE"
fi
[ -f /etc/pip.conf ] && cp -L /etc/pip.conf "$ROOT/etc/pip.conf"

envs=(PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8)
# PIP_* and CA variables pass when their value is not a path, or a path that exists inside.
while IFS='=' read -r name value; do
    case "$name" in
        PIP_*|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|CI|PYTEST_ADDOPTS) ;;
        *) continue ;;
    esac
    case "$value" in
        /*) [ -e "$ROOT$value" ] || continue ;;
    esac
    envs+=("$name=$value")
done < <(env)

trap unmount_all EXIT
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mkdir -p "$ROOT/dev/shm"
# multiprocessing's semaphores live in /dev/shm.
mountpoint -q "$ROOT/dev/shm" || mount -t tmpfs -o mode=1777 shm "$ROOT/dev/shm"
set +e
chroot "$ROOT" /usr/bin/env -i "${envs[@]}" "$@"
rc=$?
exit $rc
