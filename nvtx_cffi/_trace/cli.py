"""``python -m nvtx_cffi trace``: run a program with the NVTX recorder, write a Chrome/Perfetto trace;
``python -m nvtx_cffi convert``: write the trace of a recording kept with ``--record-dir``.

Usage::

    python -m nvtx_cffi trace [-o trace.json] [--stats] [--png timeline.png] [--] script.py [args...]
    python -m nvtx_cffi trace [options] -m package.module [args...]
    python -m nvtx_cffi trace --profile [--no-linenos] [--annotate-cfuncs] [--include PAT]
                              [--exclude PAT] [--max-depth N] script.py [args...]
    python -m nvtx_cffi trace --stats --no-output script.py [args...]     # the summary, no trace file
    python -m nvtx_cffi convert RECORDING_DIR [-o out.json|out.pftrace|out.sqlite | --no-output]
                                [--stats] [--png PIC.png] [--progress] [--run ID|all]

``convert`` reads a directory that ``trace --record-dir DIR`` kept (or that processes started with
``nvtx_cffi.recorder.environment(DIR)`` wrote) and writes what ``trace -o`` would have written
for it: the same trace, summary, picture, lines and exit statuses, through the same output step
(:func:`_output_step`). A directory that is missing, empty, holds no record file, a file that is
not a recording, or the recordings of more than one run (:mod:`.runs`; ``--run ID`` picks one,
``--run all`` merges them) is one ``error:`` line naming it, exit status 2; the kept recording of
a program that recorded nothing (the tracer's note of the program alone) is the empty trace that
``trace`` wrote, with its "no NVTX events were recorded" line. Default output:
``<directory name>.trace.json``. Without NumPy a conversion runs on the slow path and, on CPython,
says so first (:data:`SLOW_PATH`).

``--no-output`` (with ``--stats`` and/or ``--png``: without either it would produce nothing, and
with ``-o`` it contradicts it, both usage errors) converts without writing a trace file.

``--profile`` runs the program under :class:`nvtx_cffi.Profile` (the child is
``python -m nvtx_cffi <profile options> -- script.py -- args...``), so every Python call becomes a
range without editing the program.

Everything after the script (or ``-m module``) belongs to the program, which runs with this
interpreter's flags (``-O``, ``-W``, ``-X`` ...); the script may be a directory or zip file with
``__main__.py``. Exit status: the program's
(128 + N when a signal N killed it); 2 for the tracer's own usage errors (script not found, output
not writable, recorder library or matplotlib missing), before the program runs. When the trace or
the ``--png`` picture cannot be written (a full disk, the recording removed by the program), the
program's status if it failed, else 2; a trace that cannot be written, or a record file the reader
refuses, leaves the recording in place and the message says where.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import warnings
from typing import Iterator, List, Optional, Tuple, Union

from .._profile_cli import add_profile_options
from .convert import RecordingError, open_source
from .convert import run as run_conversion
from .progress import Progress
from .runner import command_for, exit_status, interpreter_flags, run, wait_for_recording
from .runs import RecordingDirError, find_runs, read_run_info, select_run, write_run_info
from .stats import format_summary
from .writers import endings, format_for, open_writer

try:
    from sqlite3 import OperationalError as _SqliteWriteError  # a full disk, an I/O error
except ImportError:  # pragma: no cover - a Python without sqlite3 writes no .sqlite either
    _SqliteWriteError = OSError

__all__ = ["main", "convert_main", "TraceError"]

PROG = "python -m nvtx_cffi trace"
CONVERT_PROG = "python -m nvtx_cffi convert"
PERFETTO_URL = "https://ui.perfetto.dev"
#: What a conversion without NumPy says first (the same trace, on Python lists).
SLOW_PATH = ("NumPy is not installed: converting on the slow path (10-25x slower); "
             'pip install "nvtx-cffi[trace]" (or numpy) for the fast one')

# Options that take a value: needed to find where the program's command line starts.
_VALUE_OPTIONS = {"-o", "--output", "--png", "--max-bytes", "--record-dir", "--include", "--exclude",
                  "--max-depth", "--wait"}
#: Seconds to wait, after the program exits, for processes it left running that still record.
DEFAULT_WAIT = 10.0
#: --max-bytes, exactly as the recorder's parse_size (c/recorder/recorder_lifecycle.c) reads NVTX_CFFI_RECORD_MAX_BYTES:
#: blanks around, 1 to 19 ASCII digits, a binary k/m/g/t and any b's, case-insensitive
_SIZE = re.compile(r"[ \t]*([0-9]{1,19})([kmgt]?)b*[ \t\n]*", re.ASCII | re.IGNORECASE)
_SUFFIXES = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
#: the recorder's bound on a size (a uint64)
_MAX_SIZE = (1 << 64) - 1


class TraceError(Exception):
    """A usage problem reported as ``error: ...`` with exit status 2, never as a traceback."""


class _PngError(Exception):
    """The ``--png`` picture could not be written (the trace was)."""


#: What writing the trace may raise that is the disk's or the file system's fault, not a bug:
#: reported as one line, never as a traceback (SQLite reports a full disk as its own error).
_WRITE_ERRORS = (OSError, RuntimeError, _SqliteWriteError)


def _byte_size(text: str) -> int:
    """``"4096"``, ``"64k"``, ``"16M"``, ``"2G"``, ``"1T"`` → bytes (``--max-bytes``): what the
    recorder accepts, nothing else (it would warn and use its default while the program runs)."""
    match = _SIZE.fullmatch(text)
    if match is None or len(text.strip(" \t\n")) >= 64:  # the recorder's buffer
        msg = f"--max-bytes: expected a size like 4096, 64k, 16M, 2G or 1T, got {text[:50]!r}"
        raise argparse.ArgumentTypeError(msg)
    n = int(match.group(1)) << _SUFFIXES[match.group(2).lower()]
    if n == 0:
        msg = f"--max-bytes must be positive, got {text[:50]!r}"
        raise argparse.ArgumentTypeError(msg)
    if n > _MAX_SIZE:
        msg = f"--max-bytes: {text[:50]!r} is more than the recorder's largest size, 2**64-1 bytes"
        raise argparse.ArgumentTypeError(msg)
    return n


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        msg = f"--wait: expected a number of seconds >= 0, got {text[:50]!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        # No abbreviations: the splitter above must know each option (and whether it takes a
        # value) by its full name, or "--out x script.py" would run "x".
        allow_abbrev=False,
        usage=f"{PROG} [options] [--] script.py [args...]\n       {PROG} [options] -m module [args...]",
        description="Run a Python program with nvtx-cffi's NVTX recorder attached (child processes "
                    "included) and write its NVTX ranges and marks as a Chrome Trace Event JSON file "
                    f"for {PERFETTO_URL} or chrome://tracing.",
        epilog="Exit status: the program's (128+N if signal N killed it); 2 for usage errors.")
    _add_output_options(p, "<script or module name>")
    p.add_argument("--max-bytes", type=_byte_size, metavar="SIZE",
                   help="bound of each process's record file (e.g. 64M, 2G, 1T); events past it are dropped "
                        "and counted (default: the recorder's, 4G)")
    p.add_argument("--record-dir", metavar="DIR",
                   help="keep the raw per-process recordings in DIR (default: a temporary directory, removed)")
    p.add_argument("--wait", type=_seconds, default=DEFAULT_WAIT, metavar="SECONDS",
                   help="after the program exits, wait this long for processes it left running that "
                        f"still record (default {DEFAULT_WAIT:g}); the summary names any cut off")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    profile = p.add_argument_group(
        "profile", "--profile: a range around every Python call (nvtx_cffi.Profile, domain nvtx.py); "
                   "the other options of this group need it")
    profile.add_argument("--profile", action="store_true",
                         help="run the program under nvtx_cffi.Profile (python -m nvtx_cffi ...)")
    add_profile_options(profile)
    return p


def _add_output_options(p: argparse.ArgumentParser, default_name: str) -> None:
    """The options of what a conversion produces, the same for ``trace`` and ``convert``."""
    p.add_argument("-o", "--output", metavar="TRACE.json",
                   help=f"trace file to write (default: {default_name}.trace.json); its ending picks "
                        f"the format: {', '.join(endings())} (JSON, Perfetto protobuf, SQLite in Nsight's schema)")
    p.add_argument("--no-output", action="store_true",
                   help="write no trace file, only what --stats and/or --png produce (one of them is needed)")
    p.add_argument("--stats", action="store_true",
                   help="print a summary table per range name (count, total, avg, median, min, max, stddev)")
    p.add_argument("--png", metavar="TIMELINE.png", help="also draw a timeline picture (needs matplotlib)")
    p.add_argument("--progress", action="store_true", help="always report conversion progress on stderr")


def _check_outputs(opts: argparse.Namespace, default_name: str) -> Tuple[Optional[str], Optional[str]]:
    """(trace file or None for --no-output, PNG file or None), checked before anything runs:
    :class:`TraceError` for a contradiction, an unknown format or a file that cannot be written."""
    if opts.no_output and opts.output is not None:
        msg = "--no-output writes no trace file: leave out -o/--output, or --no-output"
        raise TraceError(msg)
    if opts.no_output and not (opts.stats or opts.png):
        msg = "--no-output without --stats or --png would produce nothing: add --stats and/or --png PIC.png"
        raise TraceError(msg)
    output = None
    if not opts.no_output:
        output = _check_writable(opts.output or f"{default_name}.trace.json", "trace")
        try:
            format_for(output)
        except ValueError as exc:
            raise TraceError(str(exc)) from None
    png = _check_writable(opts.png, "PNG") if opts.png else None
    if png is not None:
        from .png import _load_pyplot

        try:
            _load_pyplot()
        except RuntimeError as exc:
            raise TraceError(str(exc)) from None
    return output, png


def _profile_flags(opts: argparse.Namespace) -> List[str]:
    """The ``python -m nvtx_cffi`` flags that give the child the Profile that ``opts`` asks for."""
    flags = ["--linenos" if opts.linenos else "--no-linenos"]  # always first: never read as "trace"
    if opts.annotate_cfuncs:
        flags.append("--annotate-cfuncs")
    for pattern in opts.include:
        flags += ["--include", pattern]
    for pattern in opts.exclude:
        flags += ["--exclude", pattern]
    if opts.max_depth is not None:
        flags += ["--max-depth", str(opts.max_depth)]
    return flags


def _profile_options_given(opts: argparse.Namespace) -> bool:
    return (not opts.linenos or opts.annotate_cfuncs or bool(opts.include) or bool(opts.exclude)
            or opts.max_depth is not None)


def _split(argv: List[str]) -> Tuple[List[str], Optional[str], Optional[str], List[str]]:
    """Split ``argv`` into (tracer options, script, module, program arguments)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest = argv[i + 1:]
            return argv[:i], (rest[0] if rest else None), None, rest[1:]
        if arg == "-m":
            if i + 1 >= len(argv):
                return argv, None, None, []  # argparse reports the missing value
            return argv[:i], None, argv[i + 1], argv[i + 2:]
        if arg.startswith("-m") and not arg.startswith("--"):
            return argv[:i], None, arg[2:], argv[i + 1:]
        if arg.startswith("-") and arg != "-":
            if arg in _VALUE_OPTIONS:
                i += 1  # skip its value
            i += 1
            continue
        return argv[:i], arg, None, argv[i + 1:]
    return argv, None, None, []


def _check_writable(path: str, what: str) -> str:
    path = os.path.abspath(path)
    if os.path.isdir(path):
        msg = f"{what} {path!r} is a directory; give a file name"
        raise TraceError(msg)
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        msg = f"cannot write {what} {path!r}: directory {parent!r} does not exist"
        raise TraceError(msg)
    length, name_max = len(os.fsencode(os.path.basename(path))), _name_max(parent)
    if length > name_max:
        msg = f"cannot write {what} {path!r}: file name too long ({length} bytes; the file system takes {name_max})"
        raise TraceError(msg)
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        msg = f"cannot write {what} {path!r}: permission denied"
        raise TraceError(msg)
    return path


def _name_max(directory: str) -> int:
    """The longest file name (bytes) ``directory``'s file system takes."""
    try:
        return int(os.pathconf(directory or ".", "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):  # unknown: the common bound
        return 255


def _partial_name(output: str, token: str) -> str:
    """The temporary file beside ``output``: ``.NAME.<token>.partial``, or, where that is longer
    than the file system takes, ``.nvtx-cffi-<hash of NAME>.<token>.partial`` (48 bytes), so any
    name :func:`_check_writable` lets through before the program runs can be written."""
    directory, name = os.path.split(output)
    partial = f".{name}.{token}.partial"
    if len(os.fsencode(partial)) > _name_max(directory or "."):
        partial = f".nvtx-cffi-{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}.{token}.partial"
    return os.path.join(directory or ".", partial)


def _recorder_environment(directory: str, max_bytes: Optional[int]) -> dict:
    """The recorder's environment for the program: a new run id, or, for a tracer run inside a
    traced program (whose recordings are shared with the enclosing one), the enclosing run's id,
    so that the enclosing recording stays one run."""
    try:
        from .. import recorder
    except ImportError as exc:
        msg = f"the NVTX recorder is not available in this nvtx-cffi installation ({exc})"
        raise TraceError(msg) from None
    try:
        path = recorder.library_path()
    except FileNotFoundError as exc:
        path = exc.filename
    if not os.path.isfile(path):
        msg = (f"the NVTX recorder library is missing: {path} (reinstall nvtx-cffi with a C compiler "
               "available: pip install --force-reinstall --no-binary nvtx-cffi nvtx-cffi)")
        raise TraceError(msg)
    run_id = None
    outer = os.environ.get("NVTX_CFFI_RECORD_DIR")
    if outer and os.path.isdir(outer) and os.path.realpath(outer) != os.path.realpath(directory):
        with contextlib.suppress(ValueError):
            run_id = int(os.environ.get("NVTX_CFFI_RECORD_RUN", ""), 16) or None
            if run_id is not None and run_id >> 64:
                run_id = None
    return recorder.environment(directory, max_bytes=max_bytes, run_id=run_id)


def _prepare_record_dir(record_dir: Optional[str]) -> Tuple[str, bool]:
    """The directory the recorder writes to, and whether to remove it afterwards."""
    if record_dir is None:
        return tempfile.mkdtemp(prefix="nvtx-cffi-trace-"), True
    record_dir = os.path.abspath(record_dir)
    try:
        os.makedirs(record_dir, exist_ok=True)
    except OSError as exc:
        msg = f"cannot create --record-dir {record_dir!r}: {exc.strerror}"
        raise TraceError(msg) from None
    if any(name.endswith(".nvtxrec") for name in os.listdir(record_dir)):
        msg = f"--record-dir {record_dir!r} already holds recordings; use an empty directory"
        raise TraceError(msg)
    if not os.access(record_dir, os.W_OK | os.X_OK):
        msg = f"cannot write to --record-dir {record_dir!r}: permission denied"
        raise TraceError(msg)
    return record_dir, False


@contextlib.contextmanager
def _atomic_output(output: str) -> Iterator[str]:
    """A temporary file beside ``output`` to write; renamed over ``output`` only when complete.

    An interrupted or failed conversion leaves the previous ``output`` as it was and removes the
    partial file; two tracers writing the same ``output`` each rename a complete file (the last
    one wins), never a mix.
    """
    partial = ""
    try:
        # The name is set before the file exists, and created inside the try: a SIGTERM (raised
        # as _Terminated at any bytecode) right after the creation still finds the file to remove.
        for _ in range(100):
            partial = _partial_name(output, secrets.token_hex(6))
            try:
                os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600))
                break
            except FileExistsError:  # another's file: never ours to remove
                partial = ""
        else:
            msg = f"could not create a temporary file beside {output!r}"
            raise FileExistsError(msg)
        yield partial
        try:
            os.chmod(partial, 0o666 & ~_umask())  # as open(output, "w") would have made it
        except OSError:
            pass
        os.replace(partial, output)
    except BaseException:
        if partial:
            with contextlib.suppress(OSError):
                os.unlink(partial)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _Terminated(Exception):
    """SIGTERM/SIGHUP/SIGQUIT reached the tracer while it converted: clean up and exit 128+N."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """While converting, turn SIGTERM/SIGHUP/SIGQUIT into an exception: temporary files (the
    recording, the partial trace) are removed on the way out instead of left behind."""
    def raise_terminated(signum, _frame):
        raise _Terminated(signum)

    previous = {}
    try:
        for name in ("SIGTERM", "SIGHUP", "SIGQUIT"):
            sig = getattr(signal, name, None)
            if sig is not None:
                previous[sig] = signal.signal(sig, raise_terminated)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _share_with_enclosing_trace(record_dir: str) -> Optional[str]:
    """Under another tracer (a traced program running ``python -m nvtx_cffi trace``), put this
    run's recordings into the enclosing recording too, so both traces hold the program's events.
    Returns that directory, or None when there is none (or it cannot be written)."""
    outer = os.environ.get("NVTX_CFFI_RECORD_DIR")
    if not outer or not os.path.isdir(outer) or os.path.realpath(outer) == os.path.realpath(record_dir):
        return None
    shared = False
    for path in glob.glob(os.path.join(glob.escape(record_dir), "*.nvtxrec")):
        target = os.path.join(outer, os.path.basename(path))
        if os.path.exists(target):
            continue
        try:
            try:
                os.link(path, target)  # same file system: no copy
            except OSError:
                shutil.copyfile(path, target)
            shared = True
        except OSError:
            return None
    return outer if shared else None


def _convert(opts: argparse.Namespace, source: Union[str, List[str]], root_pid: Optional[int],
             root_name: Optional[str], output: Optional[str], png: Optional[str], *, prog: str = PROG,
             title: Optional[str] = None) -> None:
    """Convert the recording in batches into the trace file (``output`` None: none, ``--no-output``),
    the summary and the picture (titled ``title``, default ``root_name``): memory for a batch and
    what is open. Lines start with ``prog``, the command's name."""
    progress = Progress(prog, force=opts.progress)
    written = _atomic_output(output) if output is not None else contextlib.nullcontext(None)
    with written as partial, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        recording = open_source(source)
        if not recording.numpy and sys.implementation.name == "cpython":
            # (PyPy runs the list path under its JIT, and NumPy is no way to a faster one there)
            print(f"{prog}: {SLOW_PATH}", file=sys.stderr)
        # the writers by name: what the options ask for, the trace file's format by its ending
        stats = open_writer("stats", None, recording) if opts.stats else None
        picture = open_writer("png", png, recording) if png is not None else None
        writers = [w for w in (stats, picture) if w is not None]
        if partial is not None:
            writers.append(open_writer(format_for(output), partial, recording))
        timeline = run_conversion(recording, writers,
                                  progress=lambda done, total: progress.update("converting", done, total),
                                  root_pid=root_pid, root_name=root_name)
    progress.done()
    for w in caught:  # the decoder's (counter samples it could not place): one line each, as ours
        if issubclass(w.category, RuntimeWarning):
            print(f"{prog}: WARNING: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if stats is not None:
        summary = "\n" + format_summary(timeline, stats.ranges.rows())
        if stats.counters:
            summary += "\n" + stats.counters.format()
        _write_stdout(summary)
    # processes that recorded NVTX events or counter samples (a program may only sample counters)
    processes = len({pid for pid, _ in timeline.threads} | timeline.counter_pids)
    if not timeline.event_count and not timeline.counter_samples:
        print(f"{prog}: no NVTX events were recorded (does the program annotate with NVTX? is NVTX_DISABLE set?)",
              file=sys.stderr)
    elif timeline.dropped and not opts.stats:
        print(f"{prog}: WARNING: {timeline.dropped} event(s) were dropped (raise --max-bytes)", file=sys.stderr)
    samples = f"{timeline.counter_samples} counter samples, " if timeline.counter_samples else ""
    counts = f"{timeline.range_count} ranges, {timeline.mark_count} marks, {samples}{processes} process(es)"
    if output is None:
        print(f"{prog}: no trace file written (--no-output; {counts})", file=sys.stderr)
    else:
        shown = os.path.relpath(output) if output.startswith(os.getcwd() + os.sep) else output
        print(f"{prog}: wrote {shown} ({counts}); open it at {PERFETTO_URL}", file=sys.stderr)
    if png is not None:
        from .png import write_png

        try:
            write_png(timeline, png, title=f"NVTX timeline: {title or root_name}", collected=picture)
        except (OSError, RuntimeError) as exc:  # the trace is written and said so: this is the picture's
            raise _PngError(str(exc)) from None
        print(f"{prog}: wrote {png}", file=sys.stderr)


def _output_step(prog: str, opts: argparse.Namespace, source: Union[str, List[str]], root_pid: Optional[int],
                 root_name: Optional[str], output: Optional[str], png: Optional[str], *, title: str,
                 kept: str = "") -> Tuple[bool, bool]:
    """Write the trace, summary and picture of ``source``, as ``trace`` and ``convert`` both do;
    a failure is one ``error:`` line (``kept``: what to add about the recording left in place).
    Returns (written, keep the recording): (False, True) when the recording is whole but the
    trace could not be made from it (kept, to convert again), (False, False) for the picture."""
    not_written = f"; {output} was not written" if output is not None else ""
    try:
        _convert(opts, source, root_pid, root_name, output, png, prog=prog, title=title)
    except _PngError as exc:
        print(f"{prog}: error: could not write the PNG: {exc}", file=sys.stderr)
        return False, False
    except RecordingError as exc:  # a record file the reader refuses: kept to look at
        print(f"{prog}: error: cannot read the recording: {exc}{not_written}{kept}", file=sys.stderr)
        return False, True
    except _WRITE_ERRORS as exc:  # the recording is whole: kept, to convert again
        print(f"{prog}: error: could not write the trace: {exc}{kept}", file=sys.stderr)
        return False, True
    return True, False


def _stopped(prog: str, output: Optional[str], exc: BaseException) -> int:
    """The line and exit status of a conversion stopped by Ctrl-C (130) or a signal N (128 + N)."""
    if isinstance(exc, _Terminated):
        tail = f"; {output} was not written" if output is not None else ""
        print(f"{prog}: terminated by signal {exc.signum}{tail}", file=sys.stderr)
        return 128 + exc.signum
    tail = f"; {output} was not written (a previous file there is left as it was)" if output is not None else ""
    print(f"{prog}: interrupted{tail}", file=sys.stderr)
    return 130


def _write_stdout(text: str) -> None:
    """Print ``text``; a closed stdout (``... --stats | head``) is no error of the trace: the rest
    of stdout goes to os.devnull (no "Exception ignored ... BrokenPipeError" at exit)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):  # not a file descriptor's stream: drop it
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        finally:
            os.close(devnull)


def _runnable(path: str) -> Optional[str]:
    """Why ``python path`` cannot run ``path`` (None: it can): not there, or a directory without
    a ``__main__`` module (a zip file is a file: python says if it has none)."""
    if os.path.isfile(path):
        return None
    if not os.path.isdir(path):
        return "not found"
    import pkgutil

    importer = pkgutil.get_importer(path)
    if importer is None or importer.find_spec("__main__") is None:
        return "is a directory without __main__.py"
    return None


def main(argv: Optional[List[str]] = None) -> int:
    """Run the tracer with ``argv`` (without the ``trace`` word); returns the exit status."""
    if argv is None:
        argv = sys.argv[2:]
    options, script, module, program_args = _split(list(argv))
    parser = _parser()
    opts = parser.parse_args(options)
    if opts.module is not None:  # "-m" inside the options part only happens without a value
        module = opts.module
    if script is None and module is None:
        parser.error("give a script to run (script.py [args...]) or a module (-m module [args...])")
    if not opts.profile and _profile_options_given(opts):
        parser.error("--no-linenos, --annotate-cfuncs, --include, --exclude and --max-depth need --profile")
    try:
        problem = None if script is None else _runnable(script)
        if problem is not None:
            msg = f"script {script!r} {problem}"
            raise TraceError(msg)
        name = module if module is not None else os.path.splitext(os.path.basename(os.path.abspath(script)))[0]
        output, png = _check_outputs(opts, name)
        record_dir, remove = _prepare_record_dir(opts.record_dir)
    except TraceError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            env = _recorder_environment(record_dir, opts.max_bytes)
        except TraceError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 2
        command = command_for(sys.executable, script, module, program_args,
                              profile=_profile_flags(opts) if opts.profile else None, flags=interpreter_flags())
        root_pid, returncode = run(command, env)
        status = exit_status(returncode)
        if returncode < 0:
            print(f"{PROG}: the program was killed by signal {-returncode}; writing what it recorded",
                  file=sys.stderr)
        root_name = " ".join(["python", "-m", module] if module else ["python", script or ""])
        # for `convert` of a kept recording: the program's name, as this trace gives it
        write_run_info(record_dir, int(env["NVTX_CFFI_RECORD_RUN"], 16), root_pid, root_name)
        with _terminate_cleanly():
            still = wait_for_recording(record_dir, opts.wait)
            if not os.path.isdir(record_dir):
                # The program (or a process it started) removed its recording: nothing to convert.
                print(f"{PROG}: error: the recording directory {record_dir} was removed while the program ran"
                      + (f"; {output} was not written" if output is not None else ""), file=sys.stderr)
                return status or 2
            if still:
                # Processes the program left running (daemons, background children): what they
                # record from now on is not in this trace; their recording is left in place.
                remove = False
                print(f"{PROG}: WARNING: {len(still)} process(es) still recording {opts.wait:g} s after "
                      f"the program exited (pid {', '.join(map(str, still[:10]))}"
                      f"{', ...' if len(still) > 10 else ''}): the trace holds their events up to now; "
                      f"their recordings stay in {record_dir}", file=sys.stderr)
            outer = _share_with_enclosing_trace(record_dir)
            if outer is not None:
                print(f"{PROG}: traced inside another trace: these events are also in its recording "
                      f"({outer})", file=sys.stderr)
            written, keep = _output_step(PROG, opts, record_dir, root_pid, root_name, output, png,
                                         title=root_name, kept=f"; the recording is kept in {record_dir}")
            if keep:
                remove = False
            if not written:
                return status or 2
        return status
    except (KeyboardInterrupt, _Terminated) as exc:
        return _stopped(PROG, output, exc)
    finally:
        if remove:
            shutil.rmtree(record_dir, ignore_errors=True)


# --------------------------------------------------------------------------- convert


def _convert_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=CONVERT_PROG,
        allow_abbrev=False,
        description="Write the trace of a recording kept with `python -m nvtx_cffi trace --record-dir DIR` "
                    "(or written by processes started with nvtx_cffi.recorder.environment(DIR)): the same "
                    "trace, --stats summary and --png picture as the trace command's.",
        epilog="Exit status: 0; 2 for usage errors and recordings that cannot be read or written.")
    p.add_argument("recording", metavar="RECORDING_DIR", help="the directory of *.nvtxrec record files")
    _add_output_options(p, "<directory name>")
    p.add_argument("--run", metavar="ID",
                   help="the run to convert when the directory holds several (its id, or a prefix of it, as "
                        "the error lists them; 'none' for files without one), or 'all' to merge them")
    return p


def convert_main(argv: Optional[List[str]] = None) -> int:
    """``python -m nvtx_cffi convert`` with ``argv`` (without the ``convert`` word); returns the exit status."""
    if argv is None:
        argv = sys.argv[2:]
    opts = _convert_parser().parse_args(list(argv))
    output: Optional[str] = None
    try:
        directory = os.path.abspath(opts.recording)
        runs = select_run(directory, find_runs(directory), opts.run)
        output, png = _check_outputs(opts, os.path.basename(directory) or "recording")
    except (TraceError, RecordingDirError) as exc:
        print(f"{CONVERT_PROG}: error: {exc}", file=sys.stderr)
        return 2
    paths = [path for r in runs for path in r.paths]
    root_pid, root_name = read_run_info(directory, runs)
    from .. import recorder

    with contextlib.suppress(OSError, AttributeError):
        still = set(recorder.active_files(directory)) & set(paths)
        if still:
            print(f"{CONVERT_PROG}: WARNING: {len(still)} process(es) still record into {directory}: the trace "
                  "holds their events up to now", file=sys.stderr)
    try:
        with _terminate_cleanly():
            written, _keep = _output_step(CONVERT_PROG, opts, paths, root_pid, root_name, output, png,
                                          title=root_name or directory)
        return 0 if written else 2
    except (KeyboardInterrupt, _Terminated) as exc:
        return _stopped(CONVERT_PROG, output, exc)
