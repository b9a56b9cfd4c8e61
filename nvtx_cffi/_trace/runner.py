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
ones were cut off. Only processes that record are waited for (they hold a record file or have the
recorder loaded); one that merely inherited the environment (a ``sleep``, a server that never calls
NVTX) is waited for only while it is young enough to be a child still starting (``STARTUP_GRACE``).

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
from typing import Dict, List, Optional, Sequence, Set, Tuple

from .. import _tools

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

#: A process that inherited the recorder's environment but has not loaded the recorder (not made
#: its first NVTX call) is waited for only until it is this many seconds old: a Python child still
#: importing is, a ``sleep`` or a server that never calls NVTX is not.
STARTUP_GRACE = 3.0

_RECORDER_LIBRARY = _tools.RECORDER  # the file name, as /proc/PID/maps shows it


def recording_pids(record_dir: str) -> List[int]:
    """Pids of processes that record into ``record_dir``: they hold their record file, or their
    environment names ``record_dir`` and they have the recorder library loaded (Linux /proc)."""
    recording, _starting = _recorder_processes(record_dir)
    return sorted(recording)


def _recorder_processes(record_dir: str) -> Tuple[Set[int], Dict[int, Optional[float]]]:
    """(pids recording into ``record_dir``, {pid: age in seconds or None} of the processes whose
    environment names ``record_dir`` but that have not loaded the recorder yet)."""
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
    recording = set()
    for path in paths:
        match = _RECORD_FILE.search(os.path.basename(path))
        if match:
            recording.add(int(match.group(1)))
    starting: Dict[int, Optional[float]] = {}
    for pid in _pids_with_record_dir(record_dir):
        if pid in recording:
            continue
        loaded = _has_recorder_loaded(pid)
        if loaded:
            recording.add(pid)
        elif loaded is not None:  # (None: gone meanwhile)
            starting[pid] = _age(pid)
    me = os.getpid()
    recording.discard(me)
    starting.pop(me, None)
    return recording, starting


def _has_recorder_loaded(pid: int) -> Optional[bool]:
    """Has process ``pid`` mapped the recorder library (made its first NVTX call)? None: it is gone.
    Where its memory map cannot be read, it is taken as recording (waiting is the safe side)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            for line in f:
                if line.rstrip().endswith(b"/" + _RECORDER_LIBRARY.encode()) or \
                        (_RECORDER_LIBRARY.encode() + b" (deleted)") in line:
                    return True
    except FileNotFoundError:
        return None
    except OSError:  # not ours to read
        return True
    return False


def _age(pid: int) -> Optional[float]:
    """Seconds since process ``pid`` started (Linux /proc); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        start_ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22: starttime
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _pids_with_record_dir(record_dir: str) -> List[int]:
    """Processes whose environment records into ``record_dir`` (Linux /proc): the program's
    descendants, whether they record (or will: not made their first NVTX call yet) or not."""
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


def wait_for_recording(record_dir: str, timeout: float, grace: float = STARTUP_GRACE) -> List[int]:
    """Wait until no process records into ``record_dir`` (the program's background children),
    at most ``timeout`` seconds; returns the pids still recording then (empty: all done).

    A process that inherited the recorder's environment without loading the recorder yet is waited
    for only until it is ``grace`` seconds old (or, where its age cannot be read, ``grace`` seconds
    from now): it may be a child still starting, which records once it makes its first NVTX call;
    one that has not by then (a ``sleep``, a server) is not recording, is not waited for and is not
    named.
    """
    now = time.monotonic()
    deadline = now + timeout
    first_seen: Dict[int, float] = {}
    delay = 0.01
    while True:
        recording, starting = _recorder_processes(record_dir)
        now = time.monotonic()
        young = False
        for pid, age in starting.items():
            seen = first_seen.setdefault(pid, now)
            if (age if age is not None else now - seen) < grace:
                young = True
        if not (recording or young) or now >= deadline:
            return sorted(recording)
        time.sleep(min(delay, max(0.0, deadline - now)))
        delay = min(delay * 2, 0.2)


def exit_status(returncode: int) -> int:
    """Shell convention: a child killed by signal N becomes 128 + N.

    >>> exit_status(-9), exit_status(0), exit_status(2)
    (137, 0, 2)
    """
    return 128 - returncode if returncode < 0 else returncode
