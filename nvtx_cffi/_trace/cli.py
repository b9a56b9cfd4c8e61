"""``python -m nvtx_cffi trace``: run a program with the NVTX recorder, write a Chrome/Perfetto trace.

Usage::

    python -m nvtx_cffi trace [-o trace.json] [--stats] [--png timeline.png] [--] script.py [args...]
    python -m nvtx_cffi trace [options] -m package.module [args...]
    python -m nvtx_cffi trace --profile [--no-linenos] [--annotate-cfuncs] [--include PAT]
                              [--exclude PAT] [--max-depth N] script.py [args...]

``--profile`` runs the program under :class:`nvtx_cffi.Profile` (the child is
``python -m nvtx_cffi <profile options> -- script.py -- args...``), so every Python call becomes a
range without editing the program.

Everything after the script (or ``-m module``) belongs to the program, which runs with this
interpreter's flags (``-O``, ``-W``, ``-X`` ...); the script may be a directory or zip file with
``__main__.py``. Exit status: the program's
(128 + N when a signal N killed it); 2 for the tracer's own usage errors (script not found, output
not writable, recorder library or matplotlib missing), before the program runs. When the trace or
the ``--png`` picture cannot be written (a full disk, the recording removed by the program), the
program's status if it failed, else 2.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
from typing import Iterator, List, Optional, Tuple

from .._profile_cli import add_profile_options
from .convert import FORMATS, convert, format_for
from .counters import CounterStats
from .progress import Progress
from .runner import command_for, exit_status, interpreter_flags, run, wait_for_recording
from .stats import StatsCollector, format_summary

try:
    from sqlite3 import OperationalError as _SqliteWriteError  # a full disk, an I/O error
except ImportError:  # pragma: no cover - a Python without sqlite3 writes no .sqlite either
    _SqliteWriteError = OSError

__all__ = ["main", "TraceError"]

PROG = "python -m nvtx_cffi trace"
PERFETTO_URL = "https://ui.perfetto.dev"

# Options that take a value: needed to find where the program's command line starts.
_VALUE_OPTIONS = {"-o", "--output", "--png", "--max-bytes", "--record-dir", "--include", "--exclude",
                  "--max-depth", "--wait"}
#: Seconds to wait, after the program exits, for processes it left running that still record.
DEFAULT_WAIT = 10.0
#: --max-bytes, exactly as the recorder's parse_size (c/recorder.c) reads NVTX_CFFI_RECORD_MAX_BYTES:
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
    p.add_argument("-o", "--output", metavar="TRACE.json",
                   help="trace file to write (default: <script or module name>.trace.json); its ending picks "
                        f"the format: {', '.join(FORMATS)} (JSON, Perfetto protobuf, SQLite in Nsight's schema)")
    p.add_argument("--stats", action="store_true",
                   help="print a summary table per range name (count, total, avg, median, min, max, stddev)")
    p.add_argument("--png", metavar="TIMELINE.png", help="also draw a timeline picture (needs matplotlib)")
    p.add_argument("--max-bytes", type=_byte_size, metavar="SIZE",
                   help="bound of each process's record file (e.g. 64M, 2G, 1T); events past it are dropped "
                        "and counted (default: the recorder's, 4G)")
    p.add_argument("--record-dir", metavar="DIR",
                   help="keep the raw per-process recordings in DIR (default: a temporary directory, removed)")
    p.add_argument("--progress", action="store_true", help="always report conversion progress on stderr")
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
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        msg = f"cannot write {what} {path!r}: permission denied"
        raise TraceError(msg)
    return path


def _recorder_environment(directory: str, max_bytes: Optional[int]) -> dict:
    try:
        from .. import recorder
    except ImportError as exc:
        msg = f"the NVTX recorder is not available in this nvtx-cffi installation ({exc})"
        raise TraceError(msg) from None
    path = recorder.library_path()
    if not os.path.isfile(path):
        msg = (f"the NVTX recorder library is missing: {path} (reinstall nvtx-cffi with a C compiler "
               "available: pip install --force-reinstall --no-binary nvtx-cffi nvtx-cffi)")
        raise TraceError(msg)
    return recorder.environment(directory, max_bytes=max_bytes)


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
    directory, name = os.path.split(output)
    partial = ""
    try:
        # The name is set before the file exists, and created inside the try: a SIGTERM (raised
        # as _Terminated at any bytecode) right after the creation still finds the file to remove.
        for _ in range(100):
            partial = os.path.join(directory or ".", f".{name}.{secrets.token_hex(6)}.partial")
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


def _convert(opts: argparse.Namespace, record_dir: str, root_pid: int, root_name: str, output: str,
             png: Optional[str]) -> None:
    """Convert the recording in batches into the trace file: memory for a batch and what is open."""
    progress = Progress(force=opts.progress)
    stats = StatsCollector() if opts.stats else None
    counter_stats = CounterStats() if opts.stats else None
    picture = None
    if png is not None:
        from .png import PngCollector

        picture = PngCollector()
    with _atomic_output(output) as partial:
        timeline = convert(record_dir, partial, format_for(output), stats=stats, picture=picture,
                           progress=lambda done, total: progress.update("converting", done, total),
                           root_pid=root_pid, root_name=root_name, counter_stats=counter_stats)
    progress.done()
    if stats is not None:
        summary = "\n" + format_summary(timeline, stats.rows())
        if counter_stats:
            summary += "\n" + counter_stats.format()
        _write_stdout(summary)
    # processes that recorded NVTX events or counter samples (a program may only sample counters)
    processes = len({pid for pid, _ in timeline.threads} | timeline.counter_pids)
    shown = os.path.relpath(output) if output.startswith(os.getcwd() + os.sep) else output
    if not timeline.event_count and not timeline.counter_samples:
        print(f"{PROG}: no NVTX events were recorded (does the program annotate with NVTX? is NVTX_DISABLE set?)",
              file=sys.stderr)
    elif timeline.dropped and not opts.stats:
        print(f"{PROG}: WARNING: {timeline.dropped} event(s) were dropped (raise --max-bytes)", file=sys.stderr)
    samples = f"{timeline.counter_samples} counter samples, " if timeline.counter_samples else ""
    print(f"{PROG}: wrote {shown} ({timeline.range_count} ranges, {timeline.mark_count} marks, {samples}"
          f"{processes} process(es)); open it at {PERFETTO_URL}", file=sys.stderr)
    if png is not None:
        from .png import write_png

        try:
            write_png(timeline, png, title=f"NVTX timeline: {root_name}", collected=picture)
        except (OSError, RuntimeError) as exc:  # the trace is written and said so: this is the picture's
            raise _PngError(str(exc)) from None
        print(f"{PROG}: wrote {png}", file=sys.stderr)


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
        output = _check_writable(opts.output or f"{name}.trace.json", "trace")
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
        with _terminate_cleanly():
            still = wait_for_recording(record_dir, opts.wait)
            if not os.path.isdir(record_dir):
                # The program (or a process it started) removed its recording: nothing to convert.
                print(f"{PROG}: error: the recording directory {record_dir} was removed while the program ran; "
                      f"{output} was not written", file=sys.stderr)
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
            try:
                _convert(opts, record_dir, root_pid, root_name, output, png)
            except _PngError as exc:
                print(f"{PROG}: error: could not write the PNG: {exc}", file=sys.stderr)
                return status or 2
            except _WRITE_ERRORS as exc:
                print(f"{PROG}: error: could not write the trace: {exc}", file=sys.stderr)
                return status or 2
        return status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; {output} was not written (a previous file there is left as it was)",
              file=sys.stderr)
        return 130
    except _Terminated as exc:
        print(f"{PROG}: terminated by signal {exc.signum}; {output} was not written", file=sys.stderr)
        return 128 + exc.signum
    finally:
        if remove:
            shutil.rmtree(record_dir, ignore_errors=True)
