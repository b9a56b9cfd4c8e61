"""The tracer's bulk C helpers (``c/shim/trace_decode.c``), found in the CFFI module by name.

Each user keeps its own one-item cache list, so that a test can switch one helper off
(``monkeypatch.setattr(module, "_NATIVE", [None])``) and compare the NumPy path against it.
"""
from __future__ import annotations

from typing import Any, List


def helper(cache: List[Any], symbol: str) -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the C function ``symbol``, else None (a
    source tree without its compiled module, or a module built without it); kept in ``cache``."""
    if not cache:
        try:
            from ._native import ffi, lib
        except ImportError:  # pragma: no cover - a source tree without its compiled module
            cache.append(None)
        else:
            cache.append((ffi, lib) if hasattr(lib, symbol) else None)
    return cache[0]
