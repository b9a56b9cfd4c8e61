"""``python -m nvtx_cffi``: ``trace`` runs the tracer, ``convert`` converts a kept recording,
``overhead`` measures what annotations cost a function; anything else is the Profile CLI.

    python -m nvtx_cffi trace [--stats] [-o trace.json] script.py [args...]   # see nvtx_cffi._trace.cli
    python -m nvtx_cffi convert RECORDING_DIR [-o trace.json] [--stats]       # the same module
    python -m nvtx_cffi overhead mypkg.mod:fn [--budget 1%] [--json]          # see nvtx_cffi.overhead
    python -m nvtx_cffi [--linenos] script.py [args...]                        # see nvtx_cffi._profile_cli

Each is imported only when asked for, so one's import cost or absence never affects the others.
"""
from __future__ import annotations

import sys
from typing import List, Optional

__all__ = ["main"]


def main(argv: Optional[List[str]] = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "trace":
        from ._trace.cli import main as trace_main

        return trace_main(argv[1:])
    if argv and argv[0] == "convert":
        from ._trace.cli import convert_main

        return convert_main(argv[1:])
    if argv and argv[0] == "overhead":
        from .overhead import main as overhead_main

        return overhead_main(argv[1:])
    try:
        from . import _profile_cli
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}._profile_cli":
            raise  # a missing dependency of the Profile CLI is its own bug: show it
        print("python -m nvtx_cffi: the Profile CLI (python -m nvtx_cffi [--linenos] script.py) is not "
              "part of this installation; use: python -m nvtx_cffi trace [--stats] script.py [args...]",
              file=sys.stderr)
        return 2
    return _profile_cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
