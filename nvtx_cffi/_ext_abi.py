"""The numbers of NVTX's payload and counters extensions that the Python side spells
(``nvToolsExtPayload.h``, ``nvToolsExtSemanticsCounters.h``).

A module of their own, below every module that uses them (``_payload``, ``_payload_enums``,
``_semantics``, ``_counters``): each takes them from here without importing another (the enums need
``enum``, which importing nvtx_cffi does not import).
"""
from __future__ import annotations

# nvToolsExtPayload.h
PAYLOAD_ENTRY_FLAG_UNUSED = 0
PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE = 1 << 4
PAYLOAD_ENTRY_FLAG_ARRAY_LENGTH_INDEX = 3 << 4
PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE = 1 << 10
PAYLOAD_ENTRY_FLAG_TIMESTAMP = 2 << 10
PAYLOAD_ENTRY_FLAG_RANGE_BEGIN = 1 << 12
PAYLOAD_ENTRY_FLAG_RANGE_END = 2 << 12
PAYLOAD_ENTRY_FLAG_MARK = 3 << 12
PAYLOAD_ENTRY_FLAG_COUNTER = 4 << 12
ENTRY_TYPE_INT8, ENTRY_TYPE_UINT8, ENTRY_TYPE_INT16, ENTRY_TYPE_UINT16 = 11, 12, 13, 14
ENTRY_TYPE_INT32, ENTRY_TYPE_UINT32, ENTRY_TYPE_INT64, ENTRY_TYPE_UINT64 = 15, 16, 17, 18
ENTRY_TYPE_BYTE = 32
ENTRY_TYPE_FLOAT16, ENTRY_TYPE_FLOAT32, ENTRY_TYPE_FLOAT64 = 42, 43, 44
ENTRY_TYPE_CSTRING_UTF32 = 78
SCHEMA_TYPE_STATIC, SCHEMA_TYPE_DYNAMIC = 1, 2
SCHEMA_FLAG_COUNTER_GROUP = 1 << 3
ATTR_FIELD_TYPE, ATTR_FIELD_FLAGS, ATTR_FIELD_ENTRIES = 1 << 2, 1 << 3, 1 << 4
ATTR_FIELD_NUM_ENTRIES, ATTR_FIELD_STATIC_SIZE = 1 << 5, 1 << 6

# nvToolsExtSemanticsCounters.h: the limits of a counter's semantics (NVTX_COUNTER_LIMIT_*, and
# the flags that say which limits are set)
COUNTER_LIMIT_UNDEFINED, COUNTER_LIMIT_I64, COUNTER_LIMIT_U64, COUNTER_LIMIT_F64 = 0, 1, 2, 3
COUNTER_FLAG_LIMIT_MIN, COUNTER_FLAG_LIMIT_MAX = 1 << 2, 1 << 3
