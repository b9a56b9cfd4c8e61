"""Run the traced program as a child process with the recorder in its environment.

NVTX reads ``NVTX_INJECTION64_PATH`` once, at a process's first NVTX call, so the recorder must be
in the environment before the program starts: the tracer never imports the program, it starts a
fresh interpreter. Children of the program inherit the environment (``subprocess``,
``multiprocessing`` spawn/forkserver) or the loaded recorder (fork), so the whole tree is recorded.

While the child runs, the tracer ignores SIGINT (a Ctrl-C reaches the whole foreground process
group, so the child gets it and decides) and forwards SIGTERM/SIGHUP/SIGQUIT to the child; then it
still writes the trace. A child killed by signal N is reported as exit status 128 + N, as shells do.

>>> import sys
>>> pid, returncode = run([sys.executable, "-c", "raise SystemExit(3)"], {})
>>> exit_status(returncode)
3
"""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Dict, List, Optional, Tuple

__all__ = ["command_for", "run", "exit_status"]

_FORWARDED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, name))


def command_for(python: str, script: Optional[str], module: Optional[str], args: List[str],
                profile: Optional[List[str]] = None) -> List[str]:
    """The child's command line: ``python script args...`` or ``python -m module args...``;
    with ``profile`` (``python -m nvtx_cffi`` flags), the Profile CLI runs the program.

    >>> command_for("python", None, "pkg.mod", ["-x"])
    ['python', '-m', 'pkg.mod', '-x']
    >>> command_for("python", "s.py", None, ["-x"], profile=["--no-linenos"])
    ['python', '-m', 'nvtx_cffi', '--no-linenos', 's.py', '-x']
    """
    if script is None and module is None:
        msg = "command_for() needs a script or a module"
        raise ValueError(msg)
    target = ["-m", module] if module is not None else [script]
    if profile is not None:
        return [python, "-m", "nvtx_cffi", *profile, *target, *args]
    return [python, *target, *args]


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

    try:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        for sig in _FORWARDED:
            previous[sig] = signal.signal(sig, forward)
    except ValueError:  # not the main thread: leave signal handling alone
        pass
    try:
        return proc.pid, proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_status(returncode: int) -> int:
    """Shell convention: a child killed by signal N becomes 128 + N.

    >>> exit_status(-9), exit_status(0), exit_status(2)
    (137, 0, 2)
    """
    return 128 - returncode if returncode < 0 else returncode
