"""Argument checks shared by every public call: clear errors that name the argument."""
from __future__ import annotations

import numbers
from typing import Tuple, Union

from ._native import lib

__all__ = ["Payload", "to_utf8", "to_category_id", "payload_fields"]

Payload = Union[int, float, None]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_UINT32_MAX = (1 << 32) - 1


def to_utf8(text: object, argument: str) -> bytes:
    """``text`` as NUL-free UTF-8 bytes for NVTX's char* entry points."""
    if not isinstance(text, str):
        msg = f"{argument} must be a str, not {type(text).__name__}"
        raise TypeError(msg)
    if "\x00" in text:
        msg = f"{argument} must not contain NUL characters"
        raise ValueError(msg)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"{argument} is not valid Unicode ({exc.reason} at index {exc.start})"
        raise ValueError(msg) from None


def to_category_id(category: object) -> int:
    """A numeric category: an int in [0, 2**32)."""
    if isinstance(category, bool) or not isinstance(category, numbers.Integral):
        msg = f"category must be a str, a non-negative int or None, not {type(category).__name__}"
        raise TypeError(msg)
    category = int(category)
    if category < 0:
        msg = f"category must be non-negative, not {category}"
        raise ValueError(msg)
    if category > _UINT32_MAX:
        msg = f"category {category} is out of range (at most {_UINT32_MAX})"
        raise OverflowError(msg)
    return category


_INT64 = lib.NVTXCFFI_PAYLOAD_INT64
_DOUBLE = lib.NVTXCFFI_PAYLOAD_DOUBLE


def payload_fields(payload: object) -> Tuple[int, int, float]:
    """(kind, int64 bits, double) for the C calls; ints become int64, or uint64 where only that fits."""
    # Exact int and float first: a per-call payload is nearly always one, and isinstance against
    # the numbers ABCs costs far more than the rest of the call.
    cls = payload.__class__
    if cls is int and _INT64_MIN <= payload <= _INT64_MAX:
        return _INT64, payload, 0.0
    if cls is float or isinstance(payload, float):
        return _DOUBLE, 0, payload
    if isinstance(payload, numbers.Integral):
        value = int(payload)
        if _INT64_MIN <= value <= _INT64_MAX:
            return lib.NVTXCFFI_PAYLOAD_INT64, value, 0.0
        if 0 <= value <= _UINT64_MAX:
            return lib.NVTXCFFI_PAYLOAD_UINT64, value - (1 << 64), 0.0
        msg = f"payload {value} is out of range: it must fit in int64 or uint64"
        raise OverflowError(msg)
    if isinstance(payload, numbers.Real):
        return lib.NVTXCFFI_PAYLOAD_DOUBLE, 0, float(payload)
    msg = f"payload must be an int, a float or None, not {type(payload).__name__}"
    raise TypeError(msg)
