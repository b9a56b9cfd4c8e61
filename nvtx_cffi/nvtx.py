"""nvtx 0.2.16's ``nvtx.nvtx`` module, for programs that import from it by name
(``from nvtx.nvtx import annotate`` becomes ``from nvtx_cffi.nvtx import annotate``): the same
objects as the package's top level.
"""
from __future__ import annotations

from . import (Domain, annotate, enabled, end_range, get_domain, mark, numpy_dtype, pop_range, push_range,
               start_range)
from ._payload import NVTX_DTYPE_METADATA_KEY_NAME, NvtxWarning

TYPE_CHECKING = False
_LAZY = ("CounterSemantics", "EntryKind", "PayloadEntryType")

if TYPE_CHECKING:
    from ._counters import CounterSemantics
    from ._payload_enums import EntryKind, PayloadEntryType
else:
    def __getattr__(name: str):
        """``CounterSemantics``, ``EntryKind`` and ``PayloadEntryType``, the package's (imported at
        their first use: see nvtx_cffi/__init__.py)."""
        if name in _LAZY:
            from . import __getattr__ as package_attribute

            value = globals()[name] = package_attribute(name)
            return value
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

    def __dir__():
        return sorted({*globals(), *_LAZY})

__all__ = ["CounterSemantics", "Domain", "EntryKind", "PayloadEntryType", "annotate", "enabled", "end_range",
           "get_domain", "mark", "numpy_dtype", "pop_range", "push_range", "start_range",
           "NVTX_DTYPE_METADATA_KEY_NAME", "NvtxWarning"]
