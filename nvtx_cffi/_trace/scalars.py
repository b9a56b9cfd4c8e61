"""Scalar payloads of many rows at once (NumPy): the column each belongs to and its 64 bits.

The writers' bulk paths print a scalar payload (NVTX's uint64, int64, double, uint32, int32, float;
a payload type code the reader does not know keeps its raw 64 bits, as a uint64) from two columns:

* ``slot``: the type's place among Nsight's payload columns (:data:`SLOT_NAMES`: ``UINT64`` ...
  ``FLOAT``); -1 for no payload and for an extension (binary) payload;
* ``bits``: the value as 64 bits: an integer's (a uint32 zero-extended, an int32 sign-extended;
  read as unsigned in slot ``UINT64``, signed in the others) or an IEEE double's (a float widened).

:func:`~.columns.payload_value` reads the same values one row at a time.

For example, the codes ``[0, 2, 5, 6]`` (none, int64, int32, float) with the raw bits ``[9,
2**64 - 3, 2**32 - 3, 0x3FC00000]`` have the slots ``[-1, INT64, INT32, FLOAT]`` and the values
``-3``, ``-3`` and ``1.5``. (NumPy only: no example here runs without it.)
"""
from __future__ import annotations

from typing import Any, List, Tuple

from .. import recorder as _rec

__all__ = ["scalar_payloads", "slot_of", "SLOT_NAMES", "UINT64", "INT64", "DOUBLE", "UINT32", "INT32", "FLOAT"]

#: Nsight's payload columns (``NVTX_EVENTS``), in its order: what a slot numbers
SLOT_NAMES = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value", "floatValue")
UINT64, INT64, DOUBLE, UINT32, INT32, FLOAT = range(6)


_SLOT_OF: List[Any] = []


def slot_of(ptype: Any) -> Any:
    """The slot of each of the reader's payload codes ``ptype`` (a NumPy int array, codes 0..255):
    int8, -1 for none."""
    import numpy as np

    if not _SLOT_OF:
        table = np.full(256, -1, dtype=np.int8)
        table[_rec.PT_UINT64:_rec.PT_FLOAT + 1] = np.arange(6)  # the codes of the six types are in Nsight's order
        table[_rec.PT_UNKNOWN] = UINT64
        _SLOT_OF.append(table)
    return _SLOT_OF[0].take(ptype)


def scalar_payloads(ptype: Any, raw: Any) -> Tuple[Any, Any]:
    """``(slot, bits)`` of the rows' payloads: ``ptype`` the reader's codes (``PT_*``), ``raw`` their
    raw 64 bits (NumPy arrays). ``slot`` is int8 (:func:`slot_of`), ``bits`` uint64 (``raw`` itself
    when it needs no change)."""
    import numpy as np

    slot = slot_of(ptype)
    bits = np.asarray(raw, dtype=np.uint64)
    if (slot >= UINT32).any():  # the 32-bit types: their value is in the low 32 bits
        bits = bits.copy()
        low = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        widened = (low, low.view(np.int32).astype(np.int64).view(np.uint64),
                   low.view(np.float32).astype(np.float64).view(np.uint64))
        for wanted, value in zip((UINT32, INT32, FLOAT), widened):
            rows = slot == wanted
            bits[rows] = value[rows]
    return slot, bits
