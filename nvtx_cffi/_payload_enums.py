"""nvtx 0.2.16's payload and counter enums (``nvtx_cffi.EntryKind``, ``TimestampType``,
``CounterValueType``, ...).

A module of their own, imported at their first use through ``nvtx_cffi``, ``nvtx_cffi._payload`` and
``nvtx_cffi._counters`` (each enum names ``_payload`` or ``_counters`` as its module, where it is
documented and pickled from): importing nvtx_cffi does not import ``enum``.
"""
from __future__ import annotations

import enum

from ._ext_abi import (PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE, PAYLOAD_ENTRY_FLAG_MARK, PAYLOAD_ENTRY_FLAG_RANGE_BEGIN,
                       PAYLOAD_ENTRY_FLAG_RANGE_END, PAYLOAD_ENTRY_FLAG_TIMESTAMP)

__all__ = ["BatchOrdering", "EntryKind", "EventKind", "PayloadEntryType", "PredefinedScope", "TimestampType",
           "CounterNoValueReason", "CounterValueType", "CounterInterpolation"]


class TimestampType(enum.Enum):
    """Timestamp domains (``NVTX_TIMESTAMP_TYPE_*``), the ``time_domain`` of :meth:`Domain.get_counter`."""

    __module__ = "nvtx_cffi._payload"

    NONE = 0
    TOOL_PROVIDED = 1
    CPU_TSC = 10
    CPU_TSC_NONVIRTUALIZED = 11
    CPU_CLOCK_GETTIME_REALTIME = 12
    CPU_CLOCK_GETTIME_REALTIME_COARSE = 13
    CPU_CLOCK_GETTIME_MONOTONIC = 14
    CPU_CLOCK_GETTIME_MONOTONIC_RAW = 15
    CPU_CLOCK_GETTIME_MONOTONIC_COARSE = 16
    CPU_CLOCK_GETTIME_BOOTTIME = 17
    CPU_CLOCK_GETTIME_PROCESS_CPUTIME_ID = 18
    CPU_CLOCK_GETTIME_THREAD_CPUTIME_ID = 19
    WIN_QPC = 30
    WIN_GSTAFT = 31
    WIN_GSTAFTP = 32
    C_TIME = 40
    C_CLOCK = 41
    C_TIMESPEC_GET = 42
    CPP_STEADY_CLOCK = 50
    CPP_HIGH_RESOLUTION_CLOCK = 51
    CPP_SYSTEM_CLOCK = 52
    CPP_UTC_CLOCK = 53
    CPP_TAI_CLOCK = 54
    CPP_GPS_CLOCK = 55
    CPP_FILE_CLOCK = 56
    GPU_GLOBALTIMER = 80


class PredefinedScope(enum.Enum):
    """Predefined NVTX execution scopes (``NVTX_SCOPE_*``)."""

    __module__ = "nvtx_cffi._payload"

    NONE = 0
    ROOT = 1
    CURRENT_HW_MACHINE = 2
    CURRENT_HW_SOCKET = 3
    CURRENT_HW_CPU_PHYSICAL = 4
    CURRENT_HW_CPU_LOGICAL = 5
    CURRENT_HW_INNERMOST = 15
    CURRENT_HYPERVISOR = 16
    CURRENT_VM = 17
    CURRENT_KERNEL = 18
    CURRENT_CONTAINER = 19
    CURRENT_OS = 20
    CURRENT_SW_PROCESS = 21
    CURRENT_SW_THREAD = 22
    CURRENT_SW_INNERMOST = 31


class EntryKind(enum.Enum):
    """Role of a field in a structured payload dtype (attach with :func:`numpy_dtype`)."""

    __module__ = "nvtx_cffi._payload"

    RANGE_BEGIN = PAYLOAD_ENTRY_FLAG_RANGE_BEGIN | PAYLOAD_ENTRY_FLAG_TIMESTAMP
    RANGE_END = PAYLOAD_ENTRY_FLAG_RANGE_END | PAYLOAD_ENTRY_FLAG_TIMESTAMP
    MARK = PAYLOAD_ENTRY_FLAG_MARK | PAYLOAD_ENTRY_FLAG_TIMESTAMP
    MESSAGE = PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE
    COUNTER_TIMESTAMP = PAYLOAD_ENTRY_FLAG_TIMESTAMP


class PayloadEntryType(enum.Enum):
    """NVTX interpretation of a specially typed payload field (attach with :func:`numpy_dtype`)."""

    __module__ = "nvtx_cffi._payload"

    RANGE_ID = 67
    CATEGORY = 68
    COLOR_ARGB = 69
    SCOPE_ID = 70
    REGISTERED_STRING = 80


class EventKind(enum.Enum):
    """Schema-level event kinds (``NVTX_PAYLOAD_SCHEMA_FLAG_*``), as in nvtx."""

    __module__ = "nvtx_cffi._payload"

    MARK = 4 << 3
    RANGE_PUSHPOP = 2 << 3
    RANGE_STARTEND = 3 << 3
    RANGE_PUSH = 5 << 3
    RANGE_POP = 6 << 3
    RANGE_START = 7 << 3
    RANGE_END = 8 << 3


class BatchOrdering(enum.Enum):
    """Timestamp ordering within a batch (``NVTX_BATCH_FLAG_*``)."""

    __module__ = "nvtx_cffi._payload"

    SORTED = 0
    PARTIALLY_SORTED = 1 << 1
    SORTED_PER_SCOPE = 2 << 1
    UNSORTED = 3 << 1


class CounterNoValueReason(enum.Enum):
    """Why a sample has no value (``NVTX_COUNTER_SAMPLE_*``), for :meth:`Counter.sample_no_value`."""

    __module__ = "nvtx_cffi._counters"

    ZERO = 0
    UNCHANGED = 1
    UNAVAILABLE = 2


class CounterValueType(enum.Enum):
    """How samples relate to earlier ones (``NVTX_COUNTER_FLAG_VALUETYPE_*``)."""

    __module__ = "nvtx_cffi._counters"

    ABSOLUTE = 1 << 4
    DELTA = 2 << 4
    DELTA_SINCE_START = 3 << 4


class CounterInterpolation(enum.Enum):
    """How tools interpolate between samples (``NVTX_COUNTER_FLAG_INTERPOLATION_*``)."""

    __module__ = "nvtx_cffi._counters"

    POINT = 1 << 8
    SINCE_LAST = 2 << 8
    UNTIL_NEXT = 3 << 8
    LINEAR = 4 << 8
