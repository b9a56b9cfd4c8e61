"""The frozen dataclasses: :class:`CounterSemantics` and the payload metadata of ``numpy_dtype``.

A module of their own, imported at their first use (``nvtx_cffi.CounterSemantics``, ``numpy_dtype``
with metadata): ``dataclasses`` imports ``inspect`` (``ast``, ``dis``, ``re``, ...), which importing
nvtx_cffi must not cost. Each class names the module it is documented (and pickled) from, whose
``__getattr__`` imports this one.
"""
from __future__ import annotations

import dataclasses

from ._ext_abi import COUNTER_LIMIT_F64, COUNTER_LIMIT_I64, COUNTER_LIMIT_U64, COUNTER_LIMIT_UNDEFINED
from ._payload_enums import CounterInterpolation, CounterValueType, EntryKind, PayloadEntryType
from ._validate import _INT64_MAX, _INT64_MIN, _UINT64_MAX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Union

__all__ = ["CounterSemantics"]


@dataclasses.dataclass(frozen=True)
class CounterSemantics:
    """How a counter's values are to be read (``nvtxSemanticsCounter_t``): unit, value type,
    interpolation, limits and unit scale. Same fields, checks and errors as nvtx's."""

    __module__ = "nvtx_cffi._counters"  # where it is documented (and pickled) from

    unit: Optional[Union[str, bytes]] = None
    value_type: CounterValueType = CounterValueType.ABSOLUTE
    interpolation: CounterInterpolation = CounterInterpolation.POINT
    min: Optional[Union[int, float]] = None
    max: Optional[Union[int, float]] = None
    unit_scale_numerator: int = 1
    unit_scale_denominator: int = 1
    _limit_type: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.unit is not None and not isinstance(self.unit, (str, bytes)):
            raise TypeError("Counter semantic unit must be str, bytes, or None.")
        if not isinstance(self.value_type, CounterValueType):
            raise TypeError("Counter semantic value_type must be a CounterValueType.")
        if not isinstance(self.interpolation, CounterInterpolation):
            raise TypeError("Counter semantic interpolation must be a CounterInterpolation.")
        for name in ("unit_scale_numerator", "unit_scale_denominator"):
            value = getattr(self, name)
            if not isinstance(value, int):
                raise TypeError(f"Counter semantic {name} must be an int.")
            if value <= 0 or value > _UINT64_MAX:
                raise ValueError(f"Counter semantic {name} must be in range [1, 2**64 - 1].")
        if isinstance(self.unit, str):
            if "\x00" in self.unit:
                raise ValueError("Counter semantic unit must not contain NUL characters.")
            object.__setattr__(self, "unit", self.unit.encode())
        elif isinstance(self.unit, bytes) and b"\x00" in self.unit:
            raise ValueError("Counter semantic unit must not contain NUL bytes.")
        integer_limits = []
        signed = False
        limit_type = COUNTER_LIMIT_UNDEFINED
        for limit in (self.min, self.max):
            if limit is None:
                continue
            if isinstance(limit, int):
                integer_limits.append(limit)
                signed = signed or limit < 0
            elif isinstance(limit, float):
                limit_type = COUNTER_LIMIT_F64
            else:
                raise TypeError("Counter semantic limits must be int, float, or None.")
        if integer_limits and limit_type == COUNTER_LIMIT_F64:
            raise ValueError("Counter semantic min and max must have the same type.")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("Counter semantic min cannot exceed max.")
        if integer_limits:
            if signed:
                if any(v < _INT64_MIN or v > _INT64_MAX for v in integer_limits):
                    raise ValueError("Signed counter semantic limits must fit in int64.")
                limit_type = COUNTER_LIMIT_I64
            else:
                if any(v > _UINT64_MAX for v in integer_limits):
                    raise ValueError("Unsigned counter semantic limits must fit in uint64.")
                limit_type = COUNTER_LIMIT_U64
        object.__setattr__(self, "_limit_type", limit_type)


@dataclasses.dataclass(frozen=True)
class _PayloadMetadata:
    """What ``numpy_dtype`` attaches to a dtype (under nvtx's metadata key)."""

    __module__ = "nvtx_cffi._payload"

    counter_semantics: Optional[object] = None
    entry_kind: Optional[EntryKind] = None
    entry_type: Optional[PayloadEntryType] = None
