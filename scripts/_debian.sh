# Sourced by scripts/sid-chroot.sh and scripts/arm64-chroot.sh: what a Debian chroot build needs
# to know about this machine.

# The Debian archive this machine's apt uses: the first URIs:/deb entry whose path ends in /debian,
# from /etc/apt/sources.list.d/*.sources (deb822), *.list and /etc/apt/sources.list.
find_mirror() {
    local f uris=()
    shopt -s nullglob
    for f in /etc/apt/sources.list.d/*.sources; do
        uris+=($(awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"))
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI suite components...
        uris+=($(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i !~ /=/) { print $i; break } }' "$f"))
    done
    shopt -u nullglob
    for f in "${uris[@]}"; do
        case "${f%/}" in */debian) echo "${f%/}"; return 0 ;; esac
    done
    return 1
}

# apt_install PACKAGE...: install what is missing (dpkg's view), with one retry after a fresh
# `apt-get update` (a mirror hiccup on a fresh machine should not fail a run).
apt_install() {
    local p missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    echo "apt-get install ${missing[*]}" >&2
    local try
    for try in 1 2; do
        if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
            return 0
        fi
        [ "$try" = 1 ] && { echo "apt-get install ${missing[*]} failed; retrying in 10 s" >&2; sleep 10; }
    done
    echo "apt-get install ${missing[*]} failed twice" >&2
    return 1
}

# Mount points at or under $1, deepest first (from /proc/self/mountinfo; field 5 is the mount
# point, with spaces escaped as \040, which a path of ours never contains).
mounts_under() {
    awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
