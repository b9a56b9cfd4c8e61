"""The compiled C shim (private). Built by ``build_ffi.py``; see ``c/nvtx_shim.h`` for its API."""
from ._ffi import ffi, lib

__all__ = ["ffi", "lib"]
