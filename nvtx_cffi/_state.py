"""Is anyone listening? Decided once, at import, and never again.

NVTX initialises at its first call and loads the tool named by ``NVTX_INJECTION64_PATH`` then or
never. So we initialise it here, ask the dispatch table whether a tool filled the slots, and pick
the real or the do-nothing implementation of every call once. ``NVTX_DISABLE`` (strictly parsed)
skips NVTX entirely.
"""
from __future__ import annotations

from ._env import env_flag
from ._native import lib

__all__ = ["DISABLED", "TOOL_ATTACHED", "ACTIVE"]

#: ``NVTX_DISABLE`` is set to a true value: nvtx-cffi never calls NVTX.
DISABLED: bool = env_flag("NVTX_DISABLE")

#: An NVTX tool (Nsight Systems, the recorder, ...) filled NVTX's domain range and mark slots.
TOOL_ATTACHED: bool = False if DISABLED else bool(lib.nvtxcffi_initialize())

#: Annotations reach a tool: the real implementations are in use.
ACTIVE: bool = TOOL_ATTACHED and not DISABLED
