# Sourced by scripts/test.sh, scripts/quickstart.sh, scripts/docs.sh and .ci/run: one place that knows the venv.
# PYTHON (default python3) picks the interpreter; VENV (default .venv-<implementation><X.Y>) the folder.

venv_path() {
    PYTHON="${PYTHON:-python3}"
    VENV="${VENV:-.venv-$("$PYTHON" -c 'import sys; print(sys.implementation.name + "%d.%d" % sys.version_info[:2])')}"
}

# make_venv TARGET...: create (or reuse) the venv and pip-install the TARGETs (".", ".[test]",
# "-r FILE") into it;
# leaves VENV as an absolute path. The install's log is kept in $VENV/install.log; compiler
# warnings/errors and Python deprecation warnings from the build are printed (pip -q hides them).
make_venv() {
    venv_path
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    local log="$VENV/install.log" rc=0
    "$VENV/bin/python" -m pip install -v "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
        tail -60 "$log" >&2
        echo "pip install $* failed (log: $log)" >&2
        return "$rc"
    fi
    grep -E "(warning|error): |Warning: " "$log" | grep -vE "^ *(Running|running) " | sort -u >&2 || true
    VENV="$(cd "$VENV" && pwd)"
}
