"""Run the traced program as a child process with the recorder in its environment.

NVTX reads ``NVTX_INJECTION64_PATH`` once, at a process's first NVTX call, so the recorder must be
in the environment before the program starts: the tracer never imports the program, it starts a
fresh interpreter. Children of the program inherit the environment (``subprocess``,
``multiprocessing`` spawn/forkserver) or the loaded recorder (fork), so the whole tree is recorded.

While the child runs, a Ctrl-C (SIGINT from the terminal, which reaches the whole foreground process
group, so the child gets it too and decides) is left to the child, while a SIGINT sent to the
tracer alone (``kill -INT <tracer pid>``) is passed on to it: the tracer tells them apart by the
signal's origin (``sigtimedwait``: sent by ``kill()`` or by the kernel; where that is missing, as on
PyPy, a SIGINT is the terminal's when the tracer is in the terminal's foreground process group). SIGTERM/SIGHUP/SIGQUIT are
forwarded to the child; then the tracer still writes the trace. A child killed by signal N is
reported as exit status 128 + N, as shells do.

Programs may leave processes running in the background (a daemon grandchild) that still record
after the program exits: :func:`wait_for_recording` waits for them, up to a timeout, and says which
ones were cut off.

>>> import sys
>>> pid, returncode = run([sys.executable, "-c", "raise SystemExit(3)"], {})
>>> exit_status(returncode)
3
"""
from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["command_for", "interpreter_flags", "run", "exit_status", "wait_for_recording", "recording_pids"]

_SI_USER = 0  # si_code of a signal sent by kill(): the terminal's SIGINT comes from the kernel

_FORWARDED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


def command_for(python: str, script: Optional[str], module: Optional[str], args: List[str],
                profile: Optional[List[str]] = None, flags: Sequence[str] = ()) -> List[str]:
    """The child's command line: ``python [flags] -- script args...`` or ``python [flags] -m module
    args...``; with ``profile`` (``python -m nvtx_cffi`` flags), the Profile CLI runs the program,
    its arguments after a ``--`` (so none is taken as a Profile option). ``flags`` are the
    interpreter's (:func:`interpreter_flags`); ``--`` keeps a script named like ``-c.py`` a script.

    >>> command_for("python", None, "pkg.mod", ["-x"])
    ['python', '-m', 'pkg.mod', '-x']
    >>> command_for("python", "s.py", None, ["-x"], flags=["-O"])
    ['python', '-O', '--', 's.py', '-x']
    >>> command_for("python", "s.py", None, ["-x"], profile=["--no-linenos"])
    ['python', '-m', 'nvtx_cffi', '--no-linenos', '--', 's.py', '--', '-x']
    """
    if script is None and module is None:
        msg = "command_for() needs a script or a module"
        raise ValueError(msg)
    target = ["-m", module] if module is not None else ["--", script]
    if profile is not None:
        return [python, *flags, "-m", "nvtx_cffi", *profile, *target, "--", *args]
    return [python, *flags, *target, *args]


def interpreter_flags() -> List[str]:
    """This interpreter's command-line flags (``-O``, ``-W error``, ``-X dev``, ``-P`` ...), to give
    the program the same: what ``subprocess`` gives its Python children (multiprocessing too)."""
    try:
        return list(subprocess._args_from_interpreter_flags())
    except Exception:  # noqa: BLE001 - a private helper: missing or changed, use what sys says
        args = ["-" + "O" * sys.flags.optimize] if sys.flags.optimize else []
        for flag, option in (("dont_write_bytecode", "-B"), ("ignore_environment", "-E"),
                             ("no_user_site", "-s"), ("safe_path", "-P")):
            if getattr(sys.flags, flag, 0):
                args.append(option)
        args += ["-b" * sys.flags.bytes_warning] if sys.flags.bytes_warning else []
        args += [f"-W{option}" for option in sys.warnoptions]
        for name, value in getattr(sys, "_xoptions", {}).items():
            args += ["-X", name if value is True else f"{name}={value}"]
        return args


def run(command: List[str], extra_env: Dict[str, str]) -> Tuple[int, int]:
    """Run ``command`` with ``extra_env`` added to this environment; returns (pid, ``Popen.returncode``)."""
    env = dict(os.environ)
    env.update(extra_env)
    proc = subprocess.Popen(command, env=env)
    previous = {}

    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except OSError:  # already gone
            pass

    waited = hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")
    try:
        for sig in _FORWARDED:
            previous[sig] = signal.signal(sig, forward)
        if not waited:  # (PyPy has no sigtimedwait) a SIGINT is the terminal's when we are its foreground
            previous[signal.SIGINT] = signal.signal(
                signal.SIGINT, lambda signum, frame: None if _in_terminal_foreground() else forward(signum, frame))
    except ValueError:  # not the main thread: leave signal handling alone
        waited = False
    try:
        if waited:
            return proc.pid, _wait_passing_on_sigint(proc)
        return proc.pid, proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _in_terminal_foreground() -> bool:
    """Is this process in its terminal's foreground process group (where a Ctrl-C goes)?"""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _wait_passing_on_sigint(proc: subprocess.Popen) -> int:
    """Wait for ``proc``; a SIGINT sent to this process alone (kill) is passed on to it, one from
    the terminal (which the child got as well) is not. SIGINT and SIGCHLD are blocked meanwhile and
    taken with sigtimedwait, which says where each came from."""
    watched = {signal.SIGINT, signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        while proc.poll() is None:
            info = signal.sigtimedwait(watched, 0.5)  # SIGCHLD wakes it when the child ends
            if info is not None and info.si_signo == signal.SIGINT and info.si_code == _SI_USER \
                    and info.si_pid != proc.pid:
                try:
                    proc.send_signal(signal.SIGINT)
                except OSError:  # already gone
                    pass
        while signal.sigtimedwait(watched, 0) is not None:  # drop what is pending: it was handled
            pass
        return proc.returncode
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


_RECORD_FILE = re.compile(r"nvtx-(\d+)-[0-9a-f]+.*\.nvtxrec$")


def recording_pids(record_dir: str) -> List[int]:
    """Pids of processes that still record into ``record_dir`` (hold their record file)."""
    from .. import recorder

    active_files = getattr(recorder, "active_files", None)
    if active_files is not None:  # the recorder's own signal (an flock held while recording)
        try:
            paths = active_files(record_dir)
        except OSError:  # the program removed the directory: no file there is held
            paths = []
    else:  # which processes hold a record file open (Linux /proc)
        paths = []
        wanted = set(glob.glob(os.path.join(glob.escape(record_dir), "*.nvtxrec")))
        if wanted:
            for fd_dir in glob.glob("/proc/[0-9]*/fd"):
                try:
                    targets = {os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)}
                except OSError:  # gone, or not ours to look at
                    continue
                paths.extend(wanted & targets)
    pids = set()
    for path in paths:
        match = _RECORD_FILE.search(os.path.basename(path))
        if match:
            pids.add(int(match.group(1)))
    pids.update(_pids_with_record_dir(record_dir))
    pids.discard(os.getpid())
    return sorted(pids)


def _pids_with_record_dir(record_dir: str) -> List[int]:
    """Processes whose environment records into ``record_dir`` (Linux /proc): descendants of the
    program that may not have made their first NVTX call (and created their file) yet."""
    needle = b"\0NVTX_CFFI_RECORD_DIR=" + os.fsencode(record_dir) + b"\0"
    found = []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as f:
                data = b"\0" + f.read() + b"\0"
        except OSError:  # gone, or not ours to read
            continue
        if needle in data:
            found.append(int(environ.split("/")[2]))
    return found


def wait_for_recording(record_dir: str, timeout: float) -> List[int]:
    """Wait until no process records into ``record_dir`` (the program's background children),
    at most ``timeout`` seconds; returns the pids still recording then (empty: all done)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        pids = recording_pids(record_dir)
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.2)


def exit_status(returncode: int) -> int:
    """Shell convention: a child killed by signal N becomes 128 + N.

    >>> exit_status(-9), exit_status(0), exit_status(2)
    (137, 0, 2)
    """
    return 128 - returncode if returncode < 0 else returncode
