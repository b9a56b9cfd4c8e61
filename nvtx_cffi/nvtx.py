"""nvtx 0.2.16's ``nvtx.nvtx`` module, for programs that import from it by name
(``from nvtx.nvtx import annotate`` becomes ``from nvtx_cffi.nvtx import annotate``): the same
objects as the package's top level.
"""
from __future__ import annotations

from . import (CounterSemantics, Domain, EntryKind, PayloadEntryType, annotate, enabled, end_range, get_domain,
               mark, numpy_dtype, pop_range, push_range, start_range)
from ._payload import NVTX_DTYPE_METADATA_KEY_NAME, NvtxWarning

__all__ = ["CounterSemantics", "Domain", "EntryKind", "PayloadEntryType", "annotate", "enabled", "end_range",
           "get_domain", "mark", "numpy_dtype", "pop_range", "push_range", "start_range",
           "NVTX_DTYPE_METADATA_KEY_NAME", "NvtxWarning"]
