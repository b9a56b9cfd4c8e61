"""nvtx-cffi: NVIDIA NVTX annotations for Python, a drop-in replacement for ``nvtx`` 0.2.x.

>>> import nvtx_cffi as nvtx
>>> @nvtx.annotate("f()", color="purple")
... def f():
...     with nvtx.annotate("loop", color="red"):
...         pass

Without a profiler attached every call does nothing (the decorator returns the function itself);
with one (Nsight Systems, or ``python -m nvtx_cffi trace``), each call is a dict lookup and one C call.
"""
from __future__ import annotations

from ._version import __version__
from . import _state
from ._annotate import annotate
from ._colors import to_argb
from ._domain import Domain, EventAttributes, RegisteredString, get_domain
from ._ranges import end_range, mark, pop_range, push_range, start_range
from ._cuda import name_cuda_context, name_cuda_device, name_cuda_event, name_cuda_stream
from ._payload import numpy_dtype
from ._tools import null_tool_path, recorder_path
# What NVTX's first call binds, real or do-nothing (registered with _state: importing makes no NVTX
# call, so a tool named later still counts).
from . import _dispatch  # noqa: F401

__all__ = [
    "annotate",
    "push_range",
    "pop_range",
    "start_range",
    "end_range",
    "mark",
    "get_domain",
    "Domain",
    "EventAttributes",
    "RegisteredString",
    "RangeId",
    "enabled",
    "tool_attached",
    "to_argb",
    "Profile",
    "name_cuda_stream",
    "name_cuda_device",
    "name_cuda_event",
    "name_cuda_context",
    # counters and extended payloads (nvtx 0.2.16)
    "Counter", "Int64Counter", "Float64Counter", "ExtCounter", "CounterSemantics", "CounterValueType",
    "CounterInterpolation", "CounterNoValueReason", "TimestampType", "numpy_dtype", "EntryKind",
    "PayloadEntryType", "EventKind", "BatchOrdering", "PredefinedScope",
    # the bundled NVTX tools, for NVTX_INJECTION64_PATH
    "null_tool_path", "recorder_path",
]


def enabled() -> bool:
    """True when annotations reach an NVTX tool: one is attached and ``NVTX_DISABLE`` is not set.

    (nvtx's ``enabled()`` only reflects ``NVTX_DISABLE``; this also tells whether anyone listens.)
    It never initialises NVTX, so it decides nothing: before the first annotation (NVTX's first
    call, which loads the tool or none for good) it answers whether one would reach a tool if it
    came now, that is ``NVTX_DISABLE`` is off and ``NVTX_INJECTION64_PATH`` names a tool; a tool
    named afterwards is still loaded by that first annotation, as with nvtx. (A path that loads
    nothing then makes it false from that annotation on.)
    """
    return _state.enabled()


def tool_attached() -> bool:
    """True when an NVTX tool (Nsight Systems, the recorder, ...) was loaded in this process."""
    return _state.tool_attached()


# nvtx 0.2.16's submodules, as attributes too (``nvtx.colors.color_to_hex``): last, they import the above.
from . import colors, nvtx  # noqa: E402

# Imported at their first use, so that importing nvtx_cffi costs little (~4 ms, not ~25: no ``typing``,
# ``dataclasses``, ``inspect``, ``enum`` or ``re``): ``RangeId`` (``typing.Tuple[int, int]``), the
# counters and payload enums (``enum``), ``CounterSemantics`` (a frozen dataclass), ``Profile`` and the
# ``writer`` submodule (nvtx's ``nvtx.writer``, NVTXW). Each is the same object whichever way it is reached.
_LAZY = {
    "RangeId": "._ranges",
    "Profile": "._profile",
    **dict.fromkeys(("Counter", "Int64Counter", "Float64Counter", "ExtCounter", "CounterSemantics", "CounterValueType",
                     "CounterInterpolation", "CounterNoValueReason"), "._counters"),
    **dict.fromkeys(("BatchOrdering", "EntryKind", "EventKind", "PayloadEntryType", "PredefinedScope",
                     "TimestampType"), "._payload_enums"),
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import writer as writer  # noqa: F401
    from ._counters import (Counter, CounterInterpolation, CounterNoValueReason, CounterSemantics, CounterValueType,
                            ExtCounter, Float64Counter, Int64Counter)
    from ._payload_enums import (BatchOrdering, EntryKind, EventKind, PayloadEntryType, PredefinedScope,
                                 TimestampType)
    from ._profile import Profile
    from ._ranges import RangeId
else:  # (hidden from type checkers, so that a misspelt name stays an error for them)
    def __getattr__(name: str):
        """The names of ``_LAZY`` and ``writer``, imported at their first use."""
        import importlib

        if name in _LAZY:
            value = globals()[name] = getattr(importlib.import_module(_LAZY[name], __name__), name)
            return value
        if name == "writer":
            return importlib.import_module(".writer", __name__)
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

    def __dir__():
        return sorted({*globals(), *_LAZY})
