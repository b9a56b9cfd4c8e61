"""``python -m nvtx_cffi [options] script.py [args]``: run a script with every call annotated.

nvtx's ``python -m nvtx`` flags keep their meaning (``--linenos`` on by default, ``--no-linenos``,
``--annotate-cfuncs`` off by default); nvtx-cffi adds ``--include``/``--exclude`` (repeatable),
``--max-depth`` and ``-m module``. The tracer's ``--profile`` runs its program with this CLI
(``python -m nvtx_cffi <flags> -- script.py -- args...``) and shares :func:`add_profile_options`.

    python -m nvtx_cffi --no-linenos --include mypkg train.py --epochs 3

As with nvtx (optparse), unique abbreviations of the long options are taken, and so are the
options written after the script; anything else there goes to the script, and so does everything
after the first ``--`` following the script. The script runs as ``python script.py`` runs it.
"""
from __future__ import annotations

import argparse
import atexit
import builtins
import importlib.machinery
import importlib.util
import io
import marshal
import os
import pkgutil
import runpy
import sys
import types
from typing import Callable, List, Optional, Sequence

from ._profile import MAX_DEPTH, Profile, _enabled_lock

__all__ = ["main", "build_parser", "parse_command_line", "add_profile_options", "profile_from_options",
           "run_script_under_profile"]


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    """Add the Profile flags (``--linenos`` ... ``--max-depth``) to ``parser`` (the tracer uses it)."""
    parser.add_argument("--linenos", dest="linenos", action="store_true", default=True,
                        help="messages 'file.py:lineno(name)' (default)")
    parser.add_argument("--no-linenos", dest="linenos", action="store_false",
                        help="messages are the bare function names")
    parser.add_argument("--annotate-cfuncs", dest="annotate_cfuncs", action="store_true", default=False,
                        help="also annotate builtin and C-extension functions")
    parser.add_argument("--include", action="append", default=[], metavar="PAT",
                        help="annotate only code of these modules (a name covers its submodules) or "
                             "matching these globs over module names and file paths; repeatable")
    parser.add_argument("--exclude", action="append", default=[], metavar="PAT",
                        help="never annotate matching code (wins over --include); repeatable")
    parser.add_argument("--max-depth", type=_positive_int, default=None, metavar="N",
                        help="at most N nested ranges per thread")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text[:50]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    if value > MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_DEPTH}")
    return value


#: The long options (their unique prefixes are accepted, as by nvtx's optparse) and whether each
#: takes a value; with ``-h`` these are the options also taken after the script (see parse_command_line).
_LONG_OPTIONS = {"--linenos": False, "--no-linenos": False, "--annotate-cfuncs": False, "--include": True,
                 "--exclude": True, "--max-depth": True, "--help": False}

USAGE = ("%(prog)s [options] [--] script.py [args...]\n"
         "       %(prog)s [options] -m module [args...]")


def build_parser(prog: str = "python -m nvtx_cffi") -> argparse.ArgumentParser:
    """The parser of the options (the script and its arguments are split off by
    :func:`parse_command_line`, which gives the whole command line's meaning)."""
    parser = argparse.ArgumentParser(
        prog=prog, usage=USAGE,
        description="Run a Python script with an NVTX range around every function call. After the "
                    "script, these options are still taken (as by nvtx's python -m nvtx) and anything "
                    "else goes to the script; the first '--' after the script ends them.",
        epilog="Subcommand: 'trace' records and summarises NVTX events (python -m nvtx_cffi trace -h).")
    add_profile_options(parser)
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run a module (like python -m); before the script only")
    return parser


def _long_option(arg: str) -> Optional[str]:
    """The long option ``arg`` (``--name`` or ``--name=value``) names, exactly or as an abbreviation
    (a prefix of one or more options: argparse reports an ambiguous one), else None."""
    name = arg.split("=", 1)[0]
    if not name.startswith("--") or len(name) <= 2:
        return None
    if name in _LONG_OPTIONS:
        return name
    matches = [option for option in _LONG_OPTIONS if option.startswith(name)]
    return matches[0] if matches else None


def _take_option(argv: List[str], i: int, options: List[str]) -> int:
    """Append the option at ``argv[i]`` (with its value) to ``options``; return the next index."""
    arg = argv[i]
    name = _long_option(arg)
    if name is not None and _LONG_OPTIONS[name] and "=" not in arg and i + 1 < len(argv):
        options.append(f"{arg}={argv[i + 1]}")  # "=": a value starting with "-" stays a value
        return i + 2
    options.append(arg)
    return i + 1


def parse_command_line(argv: Sequence[str], parser: Optional[argparse.ArgumentParser] = None
                       ) -> argparse.Namespace:
    """Parse ``python -m nvtx_cffi`` arguments as nvtx's optparse parser would where nvtx accepts
    them: the options (unique abbreviations of the long ones too), then the script (``-m module``,
    ``-mmodule``: nvtx-cffi's own); after the script, the Profile options (not ``-m``) are still
    taken, the first ``--`` is dropped and everything after it goes to the script as it is, and
    any other argument goes to the script. The result has ``target``, ``args`` and ``module``
    (True when the target is a module) besides the Profile options.
    """
    parser = parser or build_parser()
    argv = list(argv)
    options: List[str] = []
    target: Optional[str] = None
    module = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            if i + 1 < len(argv):
                target, i = argv[i + 1], i + 2
            else:
                i += 1
            break
        if arg == "-m" and i + 1 < len(argv):
            target, module, i = argv[i + 1], True, i + 2
            break
        if arg.startswith("-m") and len(arg) > 2:  # -mjson.tool, as python takes it
            target, module, i = arg[2:], True, i + 1
            break
        if arg.startswith("-") and arg != "-":
            i = _take_option(argv, i, options)
            continue
        target, i = arg, i + 1
        break
    args: List[str] = []
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args += argv[i + 1:]
            break
        if _long_option(arg) is not None or arg == "-h":
            i = _take_option(argv, i, options)
            continue
        args.append(arg)
        i += 1
    parsed = parser.parse_args(options)  # a "-m" left there has no module: argparse says so
    if target is None:
        parser.error("give a script to run (script.py [args...]) or a module (-m module [args...])")
    parsed.target, parsed.args, parsed.module = target, args, module
    return parsed


def profile_from_options(options: argparse.Namespace) -> Profile:
    """The :class:`Profile` that parsed :func:`add_profile_options` flags describe.

    ``runpy`` (which runs the script) is always excluded, so the timeline shows the script only.
    """
    return Profile(linenos=options.linenos, annotate_cfuncs=options.annotate_cfuncs,
                   include=options.include or None, exclude=[*options.exclude, "runpy"],
                   max_depth=options.max_depth)


def run_script_under_profile(argv: Sequence[str], profile: Profile, *, module: bool = False) -> int:
    """Run ``argv[0]`` (a script, a directory or zip file with ``__main__.py``, or a module name
    with ``module=True``) as ``__main__`` with ``sys.argv = argv``, under ``profile``, as
    ``python argv...`` (``python -m argv...``) would run it; return its exit status.

    As under ``python script.py``, the script's module stays ``sys.modules["__main__"]`` and
    ``sys.argv``/``sys.path`` stay as the script left them. ``profile`` stays enabled after the
    script returns: its threads are annotated until they end and its ``atexit`` handlers too; an
    ``atexit`` handler registered before the script runs (so it runs after the script's)
    disables it. ``SystemExit`` becomes the status (a message is printed to stderr, status 1);
    any other exception propagates.
    """
    argv = list(argv)
    if not argv:
        msg = "argv must name a script or module"
        raise ValueError(msg)
    sys.argv = argv
    run = _prepare_module(argv[0]) if module else _prepare_path(argv[0])
    atexit.register(_disable_at_exit, profile)
    try:
        profile.enable()
        run()
    except SystemExit as exc:
        return _exit_status(exc.code)
    return 0


_PYPY = sys.implementation.name == "pypy"
_replaced_main = []  # the modules replaced as __main__: kept alive (our caller runs in one)


def _new_main() -> dict:
    """Put a new, empty ``__main__`` module in sys.modules (left there afterwards, as the script's
    module stays under ``python script.py``); return its namespace."""
    _replaced_main.append(sys.modules.get("__main__"))
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    return module.__dict__


def _set_path0(entry: str) -> None:
    """Put ``entry`` first on sys.path where ``python TARGET`` has it: in place of the entry that
    ``python -m nvtx_cffi`` added (the current directory), or before all with ``-P``."""
    if sys.path and not getattr(sys.flags, "safe_path", False):
        sys.path[0] = entry
    else:
        sys.path.insert(0, entry)


def _prepare_module(name: str) -> Callable[[], object]:
    """``python -m name``: sys.path[0] is already the current directory (ours, as we run as
    ``python -m``; none with ``-P``); runpy sets argv[0] to the module's file."""
    _new_main()
    return lambda: runpy._run_module_as_main(name, alter_argv=True)


def _prepare_path(path: str) -> Callable[[], object]:
    """What ``python path`` does (Modules/main.c): a directory or zip file is put first on sys.path
    and its ``__main__`` module is run; a script's real directory (symlinks resolved) is put first
    unless ``-P`` is given, and the script runs in ``__main__`` with ``__file__`` absolute. All is
    prepared before the profile is enabled, so only the script's own calls are annotated."""
    if pkgutil.get_importer(path) is not None:  # a directory or a zip file, put first even with -P
        _set_path0(_absolute(path))
        _new_main()
        return lambda: runpy._run_module_as_main("__main__", alter_argv=False)
    filename = _absolute(path)
    with io.open_code(filename) as f:
        data = f.read()
    if data[:4] == importlib.util.MAGIC_NUMBER:  # a .pyc, as python runs one
        code = marshal.loads(data[16:])
        loader = importlib.machinery.SourcelessFileLoader("__main__", filename)
    else:
        code = compile(data, filename, "exec", dont_inherit=True)
        loader = importlib.machinery.SourceFileLoader("__main__", filename)
    if not getattr(sys.flags, "safe_path", False):
        _set_path0(os.path.dirname(os.path.realpath(path)))
    namespace = _new_main()
    namespace.update(__file__=filename, __cached__=None, __loader__=loader, __builtins__=builtins)

    def run() -> None:
        exiting = False
        try:
            exec(code, namespace)
        except SystemExit:
            exiting = True
            raise
        finally:
            if not exiting and not _PYPY:  # as CPython does when the script ends (not at sys.exit())
                namespace.pop("__file__", None)
                namespace.pop("__cached__", None)

    return run


def _absolute(path: str) -> str:
    """``path`` made absolute as python makes its script's (joined to the current directory, not
    normalised: ``__file__`` of ``python a/../b.py`` is ``/cwd/a/../b.py``; PyPy normalises it)."""
    if _PYPY:
        return os.path.abspath(path)
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _disable_at_exit(profile: Profile) -> None:
    """At interpreter exit, after the script's threads and atexit handlers: stop without warnings
    (daemon threads still running keep their ranges open: they are killed now)."""
    with _enabled_lock:
        profile._stop()


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m nvtx_cffi [options] script.py [args]``; returns the exit status."""
    parser = build_parser()
    options = parse_command_line(sys.argv[1:] if argv is None else argv, parser)
    if not options.module and not os.path.exists(options.target):
        parser.error(f"can't open file {options.target!r}: no such file")
    try:
        profile = profile_from_options(options)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return run_script_under_profile([options.target, *options.args], profile, module=options.module)
