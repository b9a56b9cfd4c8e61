# Sourced by scripts/test.sh, scripts/quickstart.sh and .ci/run: one place that knows the venv.
# PYTHON (default python3) picks the interpreter; VENV (default .venv-<implementation><X.Y>) the folder.

venv_path() {
    PYTHON="${PYTHON:-python3}"
    VENV="${VENV:-.venv-$("$PYTHON" -c 'import sys; print(sys.implementation.name + "%d.%d" % sys.version_info[:2])')}"
}

# make_venv TARGET: create (or reuse) the venv and pip-install TARGET (".", ".[test]") into it;
# leaves VENV as an absolute path.
make_venv() {
    venv_path
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "$1"
    VENV="$(cd "$VENV" && pwd)"
}
