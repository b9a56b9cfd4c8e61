"""Names for CUDA devices, contexts, streams and events (NVTX's ``nvtxNameCu*A``).

Nsight Systems shows these names on its CUDA rows instead of bare handles. Handles come from any
library: CuPy objects (``cupy.cuda.Stream``/``Event`` via ``.ptr``, ``cupy.cuda.Device`` via
``.id``), PyTorch (``torch.cuda.Stream.cuda_stream``, ``torch.cuda.Event.cuda_event``,
``torch.device("cuda:0").index``), or raw integer handles. nvtx-cffi itself never calls CUDA.

>>> import nvtx_cffi
>>> nvtx_cffi.name_cuda_device(0, "GPU 0")
>>> nvtx_cffi.name_cuda_stream(0, "default stream")   # the legacy default stream
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from . import _state
from ._native import lib
from ._validate import ArgumentRangeError, as_index, describe_int, to_utf8

__all__ = ["name_cuda_device", "name_cuda_context", "name_cuda_stream", "name_cuda_event"]

_HANDLE_MAX = (1 << 64) - 1
_DEVICE_MAX = (1 << 31) - 1


def _as_int(value: Any, argument: str, maximum: int, attributes: tuple) -> int:
    """An int handle from ``value`` (integer-like: int, NumPy integer, ``__index__``) or from the
    first of ``attributes`` it has. An attribute that is None (``torch.device("cuda").index``) or a
    method (``str.index``, ``list.index``: not a handle object's) counts as absent."""
    raw = as_index(value)
    if raw is None:
        for attribute in attributes:
            found = getattr(value, attribute, None)
            if found is None:
                continue
            raw = as_index(found)
            if raw is not None:
                break
            if callable(found):  # a method of the value's type (str.index): not a handle attribute
                continue
            msg = f"{argument} handle must be an int, not {type(found).__name__}"
            raise TypeError(msg)
        else:
            accepted = ", ".join(f".{a}" for a in attributes)
            msg = f"{argument} must be an int handle or an object with {accepted}, not {type(value).__name__}"
            raise TypeError(msg)
    if not 0 <= raw <= maximum:
        msg = f"{argument} {describe_int(raw)} is out of range (0 to {maximum})"
        raise ArgumentRangeError(msg)
    return raw


def name_cuda_device(device: Any, name: str) -> None:
    """Name CUDA device ``device``: an ordinal (int), ``cupy.cuda.Device`` or ``torch.device``."""
    ordinal = _as_int(device, "device", _DEVICE_MAX, ("id", "index"))
    data = to_utf8(name, "name")
    if _state.active():
        lib.nvtxcffi_name_cuda_device(ordinal, data)


def name_cuda_context(context: Any, name: str) -> None:
    """Name a CUDA driver context (``CUcontext``): an int handle or an object with ``.ptr``/``.handle``."""
    handle = _as_int(context, "context", _HANDLE_MAX, ("ptr", "handle"))
    data = to_utf8(name, "name")
    if _state.active():
        lib.nvtxcffi_name_cuda_context(handle, data)


def name_cuda_stream(stream: Any, name: str) -> None:
    """Name a CUDA stream: ``cupy.cuda.Stream``, ``torch.cuda.Stream`` or an int ``CUstream`` handle.

    >>> name_cuda_stream(0, "default")
    """
    handle = _as_int(stream, "stream", _HANDLE_MAX, ("ptr", "cuda_stream", "handle"))
    data = to_utf8(name, "name")
    if _state.active():
        lib.nvtxcffi_name_cuda_stream(handle, data)


def name_cuda_event(event: Any, name: str) -> None:
    """Name a CUDA event: ``cupy.cuda.Event``, ``torch.cuda.Event`` or an int ``CUevent`` handle."""
    handle = _as_int(event, "event", _HANDLE_MAX, ("ptr", "cuda_event", "handle"))
    data = to_utf8(name, "name")
    if _state.active():
        lib.nvtxcffi_name_cuda_event(handle, data)
