"""Which runs a recording directory holds: read from the record files' headers, before converting.

A *run* is one call of :func:`nvtx_cffi.recorder.environment` (one ``python -m nvtx_cffi trace``):
every process started with that environment, and every child of theirs (which inherits it), writes
the run's id (``NVTX_CFFI_RECORD_RUN``) into its file's header. A directory that holds files of
two runs (two programs recorded into one ``NVTX_CFFI_RECORD_DIR``, two kept recordings copied
together) would merge unrelated timelines into one trace: ``python -m nvtx_cffi convert`` refuses
it and names the runs, and ``--run ID`` picks one (``--run all`` merges them anyway). Files
written without an id (older recordings, the NVTXW writer backend, an environment set by hand) form
one run of their own, ``none``.

The tracer also leaves ``nvtx-cffi-trace-<run id>.json`` beside a recording: the pid and the name
(``python prog.py``) of the program it started, so a conversion of the kept recording names that
process as the tracer's own conversion did.

>>> Run(0x5f, ["a.nvtxrec"], [7], 0, 0).label, Run(0, [], [], 0, 0).label
('000000000000005f', 'none')
"""
from __future__ import annotations

import json
import os
import re
import time
from typing import Dict, List, Optional, Tuple

from .. import recorder as _rec

__all__ = ["Run", "RecordingDirError", "find_runs", "select_run", "write_run_info", "read_run_info"]

#: The tracer's note of the program it started (``{"run": label, "pid": N, "name": "python p.py"}``).
RUN_INFO = "nvtx-cffi-trace-{label}.json"
_RUN_INFO_NAME = re.compile(re.escape(RUN_INFO).replace(re.escape("{label}"), "([0-9a-f]{16}|none)"))
#: Runs named in the message that refuses a mix (the rest are counted).
_LISTED = 4


class RecordingDirError(ValueError):
    """A directory that cannot be converted as it is: missing, empty, not a recording, runs mixed.
    The message names the path (the command prints it as one ``error:`` line, exit status 2)."""


class Run:
    """The record files of one run: ids, paths, pids and when its first file was created."""

    __slots__ = ("run_id", "paths", "pids", "start_ns", "start_realtime_ns")

    def __init__(self, run_id: int, paths: List[str], pids: List[int], start_ns: int, start_realtime_ns: int) -> None:
        self.run_id = run_id
        self.paths = paths
        self.pids = pids
        self.start_ns = start_ns
        #: CLOCK_REALTIME of the first file (0: not known)
        self.start_realtime_ns = start_realtime_ns

    @property
    def label(self) -> str:
        """The id as ``--run`` takes it: 16 hex digits, or ``none`` for files without one."""
        return f"{self.run_id:016x}" if self.run_id else "none"

    def describe(self) -> str:
        pids = sorted(set(self.pids))
        shown = ", ".join(map(str, pids[:3])) + (", ..." if len(pids) > 3 else "")
        when = ""
        if self.start_realtime_ns:
            when = time.strftime(", started %Y-%m-%d %H:%M:%S", time.localtime(self.start_realtime_ns / 1e9))
        return f"run {self.label}: {len(self.paths)} file(s), pid {shown}{when}"


def find_runs(directory: str) -> List[Run]:
    """The runs of ``directory``'s record files, earliest first; :class:`RecordingDirError` when it
    is missing, not a directory, unreadable, holds no ``*.nvtxrec`` file, or a file is not a
    recording (the reader's message, naming the file). Files still being created (an all-zero
    header) are left out, as the reader leaves them out. A directory whose only record of a run
    is the tracer's note of its program (:func:`write_run_info`: the program recorded nothing)
    holds that run, without files."""
    if not os.path.exists(directory):
        msg = f"recording directory {directory!r} does not exist"
        raise RecordingDirError(msg)
    if not os.path.isdir(directory):
        msg = f"{directory!r} is not a directory: give the directory of a recording (trace --record-dir DIR)"
        raise RecordingDirError(msg)
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        msg = f"cannot read the recording directory {directory!r}: {exc.strerror}"
        raise RecordingDirError(msg) from None
    files = [n for n in names if n.endswith(".nvtxrec")]
    if not names:
        msg = f"recording directory {directory!r} is empty"
        raise RecordingDirError(msg)
    if not files:
        noted = [Run(run_id, [], [], 0, 0) for run_id in map(_noted_run, names) if run_id is not None]
        if noted:  # the tracer's note of a program that recorded nothing: an empty recording
            return sorted(noted, key=lambda r: r.run_id)
        msg = f"{directory!r} holds no recording: none of its {len(names)} file(s) is a *.nvtxrec record file"
        raise RecordingDirError(msg)
    runs: Dict[int, Run] = {}
    for name in files:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                h = _rec._read_header(f, path)  # noqa: SLF001 - the reader's own header check
        except FileNotFoundError:  # removed meanwhile: as the reader does, left out
            continue
        except OSError as exc:
            msg = f"cannot read {path!r}: {exc.strerror}"
            raise RecordingDirError(msg) from None
        except ValueError as exc:  # not a recording, another version, cut inside its header
            raise RecordingDirError(f"cannot read the recording: {exc}") from None
        if h is None:  # still being created
            continue
        run = runs.get(h.run_id)
        if run is None:
            run = runs[h.run_id] = Run(h.run_id, [], [], h.start_ns, h.start_realtime_ns)
        run.paths.append(path)
        run.pids.append(h.pid)
        if h.start_ns < run.start_ns:
            run.start_ns, run.start_realtime_ns = h.start_ns, h.start_realtime_ns
    if not runs:
        msg = f"{directory!r} holds no recording yet: its {len(files)} record file(s) are still being created"
        raise RecordingDirError(msg)
    return sorted(runs.values(), key=lambda r: (r.start_ns, r.run_id))


def _noted_run(name: str) -> Optional[int]:
    """The run id of a file named as the tracer's note of its program (:data:`RUN_INFO`; 0 for
    ``none``), else None."""
    match = _RUN_INFO_NAME.fullmatch(name)
    if match is None:
        return None
    return 0 if match.group(1) == "none" else int(match.group(1), 16)


def select_run(directory: str, runs: List[Run], choice: Optional[str]) -> List[Run]:
    """The runs to convert: the only one; with ``choice`` (``--run``) the one whose id it is (or
    begins: any unique prefix), ``all`` for every run. Several runs and no choice, or a choice
    that names none, is a :class:`RecordingDirError` that lists them."""
    listed = "; ".join(r.describe() for r in runs[:_LISTED])
    if len(runs) > _LISTED:
        listed += f"; and {len(runs) - _LISTED} more"
    if choice is None:
        if len(runs) == 1:
            return runs
        msg = (f"{directory!r} holds the recordings of {len(runs)} runs ({listed}); convert one with "
               f"--run ID, or all as one trace with --run all")
        raise RecordingDirError(msg)
    if choice == "all":
        return runs
    wanted = choice.lower()
    matches = [r for r in runs if r.label == wanted] or [r for r in runs if wanted and r.label.startswith(wanted)]
    if len(matches) == 1:
        return matches
    why = "names more than one run" if matches else "names no run"
    msg = f"--run {choice!r} {why} of {directory!r} ({listed})"
    raise RecordingDirError(msg)


def write_run_info(directory: str, run_id: int, pid: int, name: str) -> None:
    """Note, beside the recording, the program the tracer started (best effort: a directory the
    program removed, or a full disk, only costs the name)."""
    label = Run(run_id, [], [], 0, 0).label
    try:
        with open(os.path.join(directory, RUN_INFO.format(label=label)), "w", encoding="utf-8") as f:
            json.dump({"run": label, "pid": pid, "name": name}, f)
            f.write("\n")
    except OSError:
        pass


def read_run_info(directory: str, runs: List[Run]) -> Tuple[Optional[int], Optional[str]]:
    """(pid, name) of the program the tracer started, from the first of ``runs`` with a note of
    it (:func:`write_run_info`); (None, None) when none has one or it does not read as one."""
    for run in runs:
        try:
            with open(os.path.join(directory, RUN_INFO.format(label=run.label)), encoding="utf-8") as f:
                info = json.load(f)
            pid, name = info["pid"], info["name"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(pid, int) and isinstance(name, str):
            return pid, name
    return None, None
