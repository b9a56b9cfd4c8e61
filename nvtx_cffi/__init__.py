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
from ._ranges import RangeId, end_range, mark, pop_range, push_range, start_range
from ._profile import Profile
from ._cuda import name_cuda_context, name_cuda_device, name_cuda_event, name_cuda_stream
from . import _threads
from ._payload import (BatchOrdering, EntryKind, EventKind, PayloadEntryType, PredefinedScope, TimestampType,
                       numpy_dtype)
from ._counters import (Counter, CounterInterpolation, CounterNoValueReason, CounterSemantics, CounterValueType,
                        ExtCounter, Float64Counter, Int64Counter)

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
]

# Name Python threads in NVTX (existing ones then, new ones at start, renames); only with a tool,
# once NVTX's first call found one (importing makes no NVTX call: a tool named later still counts).
_state.on_decide(lambda active: _threads.install() if active else None)



def enabled() -> bool:
    """True when annotations reach an NVTX tool: one is attached and ``NVTX_DISABLE`` is not set.

    (nvtx's ``enabled()`` only reflects ``NVTX_DISABLE``; this also tells whether anyone listens.)
    """
    return _state.active()


def tool_attached() -> bool:
    """True when an NVTX tool (Nsight Systems, the recorder, ...) was loaded in this process."""
    return _state.tool_attached()


# nvtx 0.2.16's submodules, as attributes too (``nvtx.colors.color_to_hex``): last, they import the above.
from . import colors, nvtx  # noqa: E402
