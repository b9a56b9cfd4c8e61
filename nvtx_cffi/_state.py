"""Is anyone listening? Decided once, at nvtx-cffi's first NVTX call, and never again.

NVTX initialises at its first call and loads the tool named by ``NVTX_INJECTION64_PATH`` then or
never; NVIDIA's ``nvtx`` makes that first call at the first annotation. So does nvtx-cffi: importing
it makes no NVTX call, and a tool named in ``os.environ`` after ``import nvtx_cffi`` but before the
first annotation, decoration, domain, range, mark or ``tool_attached()`` is used. ``enabled()``
decides nothing (nvtx's reads only ``NVTX_DISABLE``): see :func:`enabled`.

:func:`decide` then initialises NVTX, asks its dispatch table whether a tool filled the slots, and
hands the answer to the binder that the package registered with :func:`bind_with`
(nvtx_cffi/_dispatch.py), which binds the real or do-nothing implementations for good. After that
nothing here runs on a hot path. ``NVTX_DISABLE`` (strictly parsed, read at that first call) skips
NVTX entirely.
"""
from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional, Tuple

from ._env import env_flag
from ._locks import hold_across_fork
from ._native import lib

__all__ = ["DISABLED", "TOOL_ATTACHED", "ACTIVE", "decide", "active", "enabled", "tool_attached", "decided",
           "bind_with"]

#: ``NVTX_DISABLE`` is set to a true value: nvtx-cffi never calls NVTX. (False until decided.)
DISABLED: bool = False

#: An NVTX tool (Nsight Systems, the recorder, ...) filled NVTX's domain range and mark slots.
#: (False until decided.)
TOOL_ATTACHED: bool = False

#: Annotations reach a tool: the real implementations are in use. (False until decided; read it
#: only where a decision has been made, e.g. after an object that needed one exists.)
ACTIVE: bool = False

#: Where NVTX looks for the tool to load at its first call (the variable of this pointer size).
_INJECTION_PATH = "NVTX_INJECTION64_PATH" if sys.maxsize > 1 << 32 else "NVTX_INJECTION32_PATH"

_decision: Optional[Tuple[bool, bool]] = None  # (tool attached, active), once decided
_deciding: Optional[Tuple[bool, bool]] = None  # the same while the binder runs
_binder: Optional[Callable[[bool], None]] = None
_lock = _thread.RLock()
hold_across_fork(_lock)


def bind_with(binder: Callable[[bool], None]) -> None:
    """Have ``binder(active)`` bind the implementations once, at the decision (at once when it was
    made already). The package's binder is nvtx_cffi/_dispatch.py's ``bind``, registered at import:
    this module sits below the modules it binds, so it is handed the binder rather than importing it."""
    global _binder
    with _lock:
        _binder = binder
        if _decision is None:
            return
    binder(_decision[1])


def decide() -> bool:
    """Initialise NVTX (first call only) and return whether annotations reach a tool."""
    decision = _decision
    if decision is not None:
        return decision[1]
    return _decide_slowly()


def _decide_slowly() -> bool:
    global DISABLED, TOOL_ATTACHED, ACTIVE, _decision, _deciding
    with _lock:
        if _decision is not None:
            return _decision[1]
        if _deciding is not None:  # a callback of this thread asks again
            return _deciding[1]
        disabled = env_flag("NVTX_DISABLE")
        attached = False if disabled else bool(lib.nvtxcffi_initialize())
        DISABLED, TOOL_ATTACHED, ACTIVE = disabled, attached, attached and not disabled
        _deciding = (TOOL_ATTACHED, ACTIVE)
        try:
            if _binder is not None:
                _binder(ACTIVE)
        finally:
            _decision, _deciding = _deciding, None
        return ACTIVE


def active() -> bool:
    """Annotations reach a tool (decides first)."""
    return decide()


def enabled() -> bool:
    """nvtx_cffi.enabled(): once decided, whether annotations reach a tool; before, whether they
    would if NVTX's first call came now (``NVTX_DISABLE`` is off and a tool is named), read
    without initialising NVTX, so a tool named later is still loaded at that first call."""
    decision = _decision
    if decision is not None:
        return decision[1]
    if env_flag("NVTX_DISABLE"):
        return False
    return bool(os.environ.get(_INJECTION_PATH))


def tool_attached() -> bool:
    """An NVTX tool was loaded in this process (decides first)."""
    decide()
    return TOOL_ATTACHED


def decided() -> bool:
    """Whether the first NVTX call happened (for tests and diagnostics; decides nothing)."""
    return _decision is not None

