"""Is anyone listening? Decided once, at nvtx-cffi's first NVTX call, and never again.

NVTX initialises at its first call and loads the tool named by ``NVTX_INJECTION64_PATH`` then or
never; NVIDIA's ``nvtx`` makes that first call at the first annotation. So does nvtx-cffi: importing
it makes no NVTX call, and a tool named in ``os.environ`` after ``import nvtx_cffi`` but before the
first annotation, decoration, domain, range, mark or ``tool_attached()`` is used. ``enabled()``
decides nothing (nvtx's reads only ``NVTX_DISABLE``): see :func:`enabled`.

:func:`decide` then initialises NVTX, asks its dispatch table whether a tool filled the slots, and
runs the callbacks that the modules registered with :func:`on_decide`: each binds its real or
do-nothing implementations for good (module-level functions get the chosen ``__code__``, so names
imported with ``from nvtx_cffi import push_range`` follow; the C accelerator gets ``install``).
After that nothing here runs on a hot path. ``NVTX_DISABLE`` (strictly parsed, read at that first
call) skips NVTX entirely.
"""
from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Tuple

from ._env import env_flag
from ._locks import hold_across_fork
from ._native import lib

__all__ = ["DISABLED", "TOOL_ATTACHED", "ACTIVE", "decide", "active", "enabled", "tool_attached", "decided",
           "on_decide", "rebind"]

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
_deciding: Optional[Tuple[bool, bool]] = None  # the same while the callbacks run
_callbacks: List[Callable[[bool], None]] = []
_lock = _thread.RLock()
hold_across_fork(_lock)


def on_decide(callback: Callable[[bool], None]) -> None:
    """Call ``callback(active)`` once, at the decision (at once when it was made already)."""
    with _lock:
        if _decision is None:
            _callbacks.append(callback)
            return
    callback(_decision[1])


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
        failure = None
        for callback in _callbacks:  # every module binds, even if one fails
            try:
                callback(ACTIVE)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                failure = failure or exc
        _callbacks.clear()
        _decision, _deciding = _deciding, None
        if failure is not None:
            raise failure
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


def rebind(function, implementation) -> None:
    """Give ``function`` the body of ``implementation`` (same parameters, no closure), keeping its
    name in errors and tracebacks; every reference to ``function`` runs the new body."""
    code = implementation.__code__
    changes = {"co_name": function.__code__.co_name}
    if hasattr(code, "co_qualname"):  # 3.11+: argument errors name the code's qualname
        changes["co_qualname"] = function.__code__.co_qualname
    function.__code__ = code.replace(**changes)
