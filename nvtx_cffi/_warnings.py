"""Warnings that point at the user's line, however many nvtx-cffi frames (or none: the
accelerator calls Python helpers straight from C) lie between it and the warning."""
from __future__ import annotations

import os
import sys
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Type

__all__ = ["warn_at_caller"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_caller(message: str, category: Type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside nvtx_cffi.

    A fixed ``stacklevel`` names an nvtx-cffi line on some paths (``mark`` is one Python frame deep,
    ``with annotate`` two, a C fast path none). Frames of importlib's bootstrap above an import-time
    warning are skipped by ``warnings`` itself.
    """
    frame = sys._getframe(1)
    level = 2  # stacklevel 2: the frame above this function's (frame 1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if "importlib" in filename and "_bootstrap" in filename:  # not counted by warnings either
            frame = frame.f_back
            continue
        if not filename.startswith(_PACKAGE_DIR):
            break
        frame = frame.f_back
        level += 1
    import warnings  # (here: importing nvtx_cffi need not import it)

    warnings.warn(message, category, stacklevel=level)
