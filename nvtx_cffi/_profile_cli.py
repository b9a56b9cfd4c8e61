"""``python -m nvtx_cffi [options] script.py [args]``: run a script with every call annotated.

nvtx's ``python -m nvtx`` flags keep their meaning (``--linenos`` on by default, ``--no-linenos``,
``--annotate-cfuncs`` off by default); nvtx-cffi adds ``--include``/``--exclude`` (repeatable),
``--max-depth`` and ``-m module``. The tracer reuses :func:`run_script_under_profile` for
``python -m nvtx_cffi trace --profile ...``.

    python -m nvtx_cffi --no-linenos --include mypkg train.py --epochs 3
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, Optional, Sequence

from ._profile import MAX_DEPTH, Profile

__all__ = ["main", "build_parser", "add_profile_options", "profile_from_options",
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


def build_parser(prog: str = "python -m nvtx_cffi") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, allow_abbrev=False, description="Run a Python script with an NVTX range around every function call.",
        epilog="Subcommand: 'trace' records and summarises NVTX events (python -m nvtx_cffi trace -h).")
    add_profile_options(parser)
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run the target as a module (like python -m)")
    parser.add_argument("target", help="script path (or module name with -m)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return parser


def profile_from_options(options: argparse.Namespace) -> Profile:
    """The :class:`Profile` that parsed :func:`add_profile_options` flags describe.

    ``runpy`` (which runs the script) is always excluded, so the timeline shows the script only.
    """
    return Profile(linenos=options.linenos, annotate_cfuncs=options.annotate_cfuncs,
                   include=options.include or None, exclude=[*options.exclude, "runpy"],
                   max_depth=options.max_depth)


def run_script_under_profile(argv: Sequence[str], profile: Profile, *, module: bool = False) -> int:
    """Run ``argv[0]`` (a script path, or a module name with ``module=True``) as ``__main__`` with
    ``sys.argv = argv``, under ``profile``; return its exit status.

    ``SystemExit`` becomes the status (a message is printed to stderr, status 1); any other
    exception propagates after the profile is disabled. ``sys.argv`` and ``sys.path[0]`` are
    restored afterwards.
    """
    argv = list(argv)
    if not argv:
        msg = "argv must name a script or module"
        raise ValueError(msg)
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = argv
    if not module:
        # What `python script.py` does: the script's directory first on sys.path.
        directory = os.path.dirname(os.path.abspath(argv[0]))
        if sys.path:
            sys.path[0] = directory
        else:
            sys.path.insert(0, directory)
    try:
        profile.enable()
        try:
            if module:
                runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(argv[0], run_name="__main__")
        finally:
            profile.disable()
    except SystemExit as exc:
        return _exit_status(exc.code)
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    return 0


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
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    target = [options.target, *options.args]
    if not options.module and not os.path.exists(options.target):
        parser.error(f"can't open file {options.target!r}: no such file")
    try:
        profile = profile_from_options(options)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return run_script_under_profile(target, profile, module=options.module)
