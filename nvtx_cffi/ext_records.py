"""Decode the recorder's payload-extension records: schemas, counters, samples, binary payloads.

The recorder (``c/recorder/recorder_ext.c``) writes what NVTX's payload and counters extensions receive as
``blob`` events (:mod:`nvtx_cffi.recorder`): ``schema``, ``counter_group``, ``counter_sample``,
``payload`` and ``unknown(5)`` (a scope). :class:`ExtDecoder` follows them per process and turns
them into values::

    decoder = ExtDecoder()
    for event in recorder.iter_events(directory):
        for sample in decoder.feed(event):      # CounterSample objects
            ...
        decoder.payload_of(event)               # decoded binary payload of a push/start/mark

Counter samples come out with the counter's name, unit and scope and one value per field
(``{"value": v}`` for an int or float counter); binary payloads as Python values by their schema
(a list for arrays, a dict for structures, a number/str/bytes for scalars).

Registrations (schemas, counters, scopes) may be recorded by another thread than the one that uses
them, in a chunk read later: :meth:`ExtDecoder.preload` takes a process image's registrations,
gathered by the reader before its events (``ProcessInfo.registrations``), so decoding does not
depend on the order of the chunks. ``sample_no_value`` samples come out as nvtx's reasons mean
them: ZERO as 0 in every numeric field, UNCHANGED as the counter's previous values (as read),
UNAVAILABLE as None in every field (a gap); ``no_value`` says which. Batch timestamps are mapped
from the counter's time domain onto the trace's clock (:class:`Clocks`).
"""
from __future__ import annotations

import re
import struct
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

__all__ = ["Schema", "SchemaEntry", "CounterInfo", "CounterSample", "ExtDecoder", "Clocks", "parse_schema",
           "parse_counter", "decode", "decode_pending", "array_layout", "TIME_DOMAINS", "time_domain_name"]

_Q = struct.Struct("<Q")
_SCHEMA_HEAD = struct.Struct("<QQQQQII")
_ENTRY_HEAD = struct.Struct("<QQQQIIII")
_COUNTER_HEAD = struct.Struct("<QQIIII")
_SAMPLE_HEAD = struct.Struct("<BBHIQ")
_BATCH_CUT = 1  # a sample record's flags: samples of its batch beyond the recorder's bound were left out

# Predefined entry types (nvToolsExtPayload.h): struct format, size.
_SCALARS = {
    1: "b", 2: "B", 3: "h", 4: "H", 5: "i", 6: "I", 7: "q", 8: "Q", 9: "q", 10: "Q",
    11: "b", 12: "B", 13: "h", 14: "H", 15: "i", 16: "I", 17: "q", 18: "Q", 19: "f", 20: "d",
    22: "Q", 23: "Q", 42: "e", 43: "f", 44: "d", 67: "Q", 68: "I", 69: "I", 70: "Q", 71: "I", 72: "Q",
    73: "I", 74: "Q", 80: "Q",
}
_BYTE, _UTF32, _UTF8, _CHAR = 32, 78, 76, 1
_FIXED, _LENGTH_INDEX = 1 << 4, 3 << 4
_ARRAY_MASK = 7 << 4
_FLAG_COUNTER = 4 << 12
_FLAG_TIMESTAMP = 2 << 10
_SCHEMA_DYNAMIC = 2
_LIMITS = {1: "<q", 2: "<Q", 3: "<d"}


@dataclass
class SchemaEntry:
    flags: int
    type: int
    array_detail: int
    offset: int
    name: Optional[str]
    description: Optional[str]
    semantics: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class Schema:
    id: int
    field_mask: int
    type: int
    flags: int
    static_size: int
    name: Optional[str]
    entries: List[SchemaEntry]
    truncated: bool = False


@dataclass
class CounterInfo:
    id: int
    domain: Optional[str]
    schema_id: int
    scope_id: int
    name: str
    description: Optional[str]
    semantics: List[Dict[str, Any]]
    scope: Optional[str] = None
    truncated: bool = False
    """The recorder cut the registration (a name past 2048 bytes, a description past 1024, a unit
    past the semantics' 4 KiB) or the scope path (past 64 KiB): what is here is what was kept."""

    title: Optional[str] = None
    """The name its counter track goes by: ``"domain: name"`` (the name alone in the default domain),
    with the value type or the counter id added when another counter of the process has the same."""

    @property
    def unit(self) -> Optional[str]:
        for s in self.semantics:
            if s.get("unit"):
                return s["unit"]
        return None

    @property
    def time_domain(self) -> int:
        """The time domain of its batch timestamps (``TimestampType``; 0 when none was given)."""
        for s in self.semantics:
            if s.get("kind") == "time":
                return int(s["time_domain"])
        return 0


@dataclass
class CounterSample:
    """One sample of one counter (group): ``values`` maps field name to value (None: no value)."""

    pid: int
    tid: int
    time_ns: int
    counter: CounterInfo
    values: Dict[str, Any]
    no_value: Optional[int] = None
    """``CounterNoValueReason`` value of a ``sample_no_value`` sample (None otherwise): its ``values``
    are then 0 (ZERO), the counter's previous values (UNCHANGED) or None (UNAVAILABLE, or UNCHANGED
    before any value: a gap) in each field."""
    units: Dict[str, Optional[str]] = field(default_factory=dict)
    truncated: bool = False
    """The recorder cut the sample at its 64 KiB record bound: fields past the cut are missing
    (None) or short."""
    batch_cut: bool = False
    """The last sample recorded of a ``batch_submit`` whose values passed the recorder's bound
    (1 MiB of values per batch): the batch's samples after this one were not recorded."""


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _parse_semantics(data: bytes) -> List[Dict[str, Any]]:
    out = []
    off = 0
    while off + 8 <= len(data):
        sid, length = struct.unpack_from("<II", data, off)
        body = data[off + 8:off + 8 + length]
        off += 8 + length
        if sid == 5 and len(body) >= 48:
            flags, num, den, limit_type, lo, hi = struct.unpack_from("<QQQqQQ", body)
            item: Dict[str, Any] = {"kind": "counter", "flags": flags, "unit_scale": (num, den),
                                    "limit_type": limit_type, "unit": _text(body[48:]) or None}
            fmt = _LIMITS.get(limit_type)
            if fmt:
                if flags & (1 << 2):
                    item["min"] = struct.unpack(fmt, _Q.pack(lo))[0]
                if flags & (1 << 3):
                    item["max"] = struct.unpack(fmt, _Q.pack(hi))[0]
            out.append(item)
        elif sid == 2 and len(body) >= 8:
            out.append({"kind": "time", "time_domain": _Q.unpack_from(body)[0]})
        else:
            out.append({"kind": f"semantic({sid})"})
    return out


def parse_schema(schema_id: int, data: bytes, truncated: bool = False) -> Schema:
    mask, stype, flags, size, n, name_len, _ = _SCHEMA_HEAD.unpack_from(data)
    off = _SCHEMA_HEAD.size
    name = _text(data[off:off + name_len]) if name_len else None
    off += name_len
    entries = []
    for _ in range(n):
        if off + _ENTRY_HEAD.size > len(data):
            truncated = True
            break
        eflags, etype, detail, eoff, nl, dl, sl, _ = _ENTRY_HEAD.unpack_from(data, off)
        off += _ENTRY_HEAD.size
        ename = _text(data[off:off + nl]) if nl else None
        off += nl
        desc = _text(data[off:off + dl]) if dl else None
        off += dl
        sems = _parse_semantics(data[off:off + sl])
        off += sl
        entries.append(SchemaEntry(eflags, etype, detail, eoff, ename, desc, sems))
    return Schema(schema_id, mask, stype, flags, size, name, entries, truncated)


def parse_counter(counter_id: int, domain: Optional[str], data: bytes, truncated: bool = False) -> CounterInfo:
    schema_id, scope_id, nl, dl, sl, _ = _COUNTER_HEAD.unpack_from(data)
    off = _COUNTER_HEAD.size
    name = _text(data[off:off + nl])
    off += nl
    desc = _text(data[off:off + dl]) if dl else None
    off += dl
    return CounterInfo(counter_id, domain, schema_id, scope_id, name, desc, _parse_semantics(data[off:off + sl]),
                       truncated=truncated)


def _size_of(type_id: int, schemas: Dict[int, Schema]) -> int:
    fmt = _SCALARS.get(type_id)
    if fmt:
        return struct.calcsize("<" + fmt)
    if type_id in (_BYTE, _CHAR, 25):
        return 1
    if type_id == _UTF32:
        return 4
    schema = schemas.get(type_id)
    return schema.static_size if schema else 0


def _entry_value(entry: SchemaEntry, data: bytes, off: int, schemas: Dict[int, Schema], depth: int) -> Any:
    t = entry.type
    array = entry.flags & _ARRAY_MASK
    if t == _BYTE and array == _FIXED:
        return bytes(data[off:off + entry.array_detail])
    if t == _UTF32:
        raw = bytes(data[off:off + 4 * entry.array_detail])
        return raw.decode("utf-32-le", "replace").split("\x00", 1)[0]
    if array == _FIXED:
        size = _size_of(t, schemas)
        return [_scalar(t, data, off + i * size, schemas, depth) for i in range(entry.array_detail)
                if off + (i + 1) * size <= len(data)]
    return _scalar(t, data, off, schemas, depth)


def _scalar(t: int, data: bytes, off: int, schemas: Dict[int, Schema], depth: int) -> Any:
    fmt = _SCALARS.get(t)
    if fmt:
        size = struct.calcsize("<" + fmt)
        if off + size > len(data):
            return None
        return struct.unpack_from("<" + fmt, data, off)[0]
    schema = schemas.get(t)
    if schema is None or depth > 16:
        return None
    return _decode(schema, data, off, schemas, depth + 1)


def _decode(schema: Schema, data: bytes, off: int, schemas: Dict[int, Schema], depth: int) -> Any:
    entries = schema.entries
    if schema.type == _SCHEMA_DYNAMIC and len(entries) == 2 and entries[1].flags & _ARRAY_MASK == _LENGTH_INDEX:
        count = _scalar(entries[0].type, data, off, schemas, depth) or 0
        item = _size_of(entries[1].type, schemas)
        start = off + _size_of(entries[0].type, schemas)
        if item <= 0:
            return []
        count = min(count, max(0, (len(data) - start) // item))
        element = SchemaEntry(0, entries[1].type, 0, 0, None, None)
        return [_entry_value(element, data, start + i * item, schemas, depth) for i in range(count)]
    if len(entries) == 1 and (entries[0].name is None or schema.name is None and not schema.flags):
        if entries[0].name is None or entries[0].offset == 0:
            return _entry_value(entries[0], data, off + entries[0].offset, schemas, depth)
    return {e.name or f"field{i}": _entry_value(e, data, off + e.offset, schemas, depth)
            for i, e in enumerate(entries)}


def decode(schema_id: int, data: bytes, schemas: Dict[int, Schema]) -> Any:
    """A binary payload as a Python value, by its schema (None when the schema is unknown)."""
    if schema_id in _SCALARS:
        return _scalar(schema_id, data, 0, schemas, 0)
    schema = schemas.get(schema_id)
    if schema is None:
        return None
    return _decode(schema, data, 0, schemas, 0)


def decode_pending(pending: List[Tuple[int, bytes, bool]], schemas: Dict[int, Schema]) -> Tuple[Any, bool]:
    """(decoded value, truncated) of the payload blobs ``pending`` (schema id, data, truncated) of
    one push/start/mark: one blob's value, or the list of several blobs' values."""
    values = [decode(sid, data, schemas) for sid, data, _ in pending]
    return values[0] if len(values) == 1 else values, any(t for *_, t in pending)


#: a field of an array element :func:`array_layout` gives: its key in the element's dict (None: the
#: element is this field's value), byte offset in the element, struct format, and count (0: a number,
#: else a fixed-size array of as many)
ElementField = Tuple[Optional[str], int, str, int]


def array_layout(schema_id: int, schemas: Dict[int, Schema]
                 ) -> Optional[Tuple[str, int, int, Tuple[ElementField, ...]]]:
    """Where the numbers are in a payload of schema ``schema_id`` that :func:`decode` reads as a list
    of elements made of numbers only (a dynamic schema: an integer count, then a length-indexed array
    whose elements are a number, or a struct of numbers and fixed-size arrays of numbers):
    ``(count's struct format, the array's offset, an element's size, its fields)``; None for the others
    (keys that JSON would escape or that repeat included)."""
    schema = schemas.get(schema_id)
    if schema is None or schema_id in _SCALARS or schema.type != _SCHEMA_DYNAMIC or len(schema.entries) != 2:
        return None
    count, array = schema.entries
    count_fmt = _SCALARS.get(count.type)
    if array.flags & _ARRAY_MASK != _LENGTH_INDEX or count_fmt is None or count_fmt in "efd":
        return None
    item = _size_of(array.type, schemas)
    fields = _element_fields(array.type, schemas, item)
    if fields is None or item <= 0:
        return None
    return count_fmt, struct.calcsize("<" + count_fmt), item, fields


def _element_fields(type_id: int, schemas: Dict[int, Schema], item: int) -> Optional[Tuple[ElementField, ...]]:
    """The fields of an array element of type ``type_id`` (``item`` bytes) for :func:`array_layout`, as
    :func:`_decode` reads them; None where one is not a number or a fixed-size array of numbers, or
    ends past the element."""
    schema = schemas.get(type_id)
    fields: List[ElementField] = []
    if type_id in _SCALARS or schema is not None and _one_entry(schema):
        one = _numbers(type_id, schemas, 0)
        if one is None:
            return None
        fields.append((None,) + one)
    else:
        if schema is None or schema.type == _SCHEMA_DYNAMIC or not schema.entries:
            return None
        keys = [e.name or f"field{i}" for i, e in enumerate(schema.entries)]
        if len(set(keys)) != len(keys) or not all(_PLAIN_KEY.fullmatch(k) for k in keys):
            return None
        for key, entry in zip(keys, schema.entries):
            found = _entry_numbers(entry, schemas, 0)
            if found is None:
                return None
            offset, fmt, n = found
            fields.append((key, entry.offset + offset, fmt, n))
    for _key, offset, fmt, n in fields:
        if offset + struct.calcsize("<" + fmt) * max(n, 1) > item:
            return None
    return tuple(fields)


def _one_entry(schema: Schema) -> bool:
    """Whether :func:`_decode` reads a (static) value of ``schema`` as its one entry's value."""
    entries = schema.entries
    return (schema.type != _SCHEMA_DYNAMIC and len(entries) == 1
            and (entries[0].name is None or schema.name is None and not schema.flags and entries[0].offset == 0))


def _numbers(type_id: int, schemas: Dict[int, Schema], depth: int) -> Optional[Tuple[int, str, int]]:
    """``(offset, struct format, count)`` where :func:`_scalar` reads a value of type ``type_id`` as a
    number (count 0) or a fixed-size array of numbers: a scalar type, or a schema :func:`_decode`
    reads as its one entry's value, such a value; else None."""
    fmt = _SCALARS.get(type_id)
    if fmt is not None:
        return 0, fmt, 0
    schema = schemas.get(type_id)
    if schema is None or not _one_entry(schema) or depth > 8:
        return None
    entry = schema.entries[0]
    found = _entry_numbers(entry, schemas, depth + 1)
    return None if found is None else (entry.offset + found[0],) + found[1:]


def _entry_numbers(entry: SchemaEntry, schemas: Dict[int, Schema], depth: int) -> Optional[Tuple[int, str, int]]:
    """``(offset in the entry, struct format, count)`` of the numbers :func:`_entry_value` reads for
    ``entry`` (see :func:`_numbers`); None where it reads something else."""
    array = entry.flags & _ARRAY_MASK
    found = _numbers(entry.type, schemas, depth)
    if found is None or array not in (0, _FIXED):
        return None
    if array == 0:
        return found
    # a fixed-size array of numbers: each element its type's size after the one before
    offset, fmt, n = found
    if offset or n or entry.array_detail <= 0 or _size_of(entry.type, schemas) != struct.calcsize("<" + fmt):
        return None
    return 0, fmt, entry.array_detail


#: a key JSON writes as it is, holding no bracket: the tracer finds the elements in its text by them
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_ .:#@$%&*+/<=>?!|~^-]*")


#: ``NVTX_TIMESTAMP_TYPE_*`` names (nvToolsExtPayload.h), for messages
TIME_DOMAINS = {
    0: "NONE", 1: "TOOL_PROVIDED", 10: "CPU_TSC", 11: "CPU_TSC_NONVIRTUALIZED", 12: "CPU_CLOCK_GETTIME_REALTIME",
    13: "CPU_CLOCK_GETTIME_REALTIME_COARSE", 14: "CPU_CLOCK_GETTIME_MONOTONIC", 15: "CPU_CLOCK_GETTIME_MONOTONIC_RAW",
    16: "CPU_CLOCK_GETTIME_MONOTONIC_COARSE", 17: "CPU_CLOCK_GETTIME_BOOTTIME",
    18: "CPU_CLOCK_GETTIME_PROCESS_CPUTIME_ID", 19: "CPU_CLOCK_GETTIME_THREAD_CPUTIME_ID", 30: "WIN_QPC",
    31: "WIN_GSTAFT", 32: "WIN_GSTAFTP", 40: "C_TIME", 41: "C_CLOCK", 42: "C_TIMESPEC_GET", 50: "CPP_STEADY_CLOCK",
    51: "CPP_HIGH_RESOLUTION_CLOCK", 52: "CPP_SYSTEM_CLOCK", 53: "CPP_UTC_CLOCK", 54: "CPP_TAI_CLOCK",
    55: "CPP_GPS_CLOCK", 56: "CPP_FILE_CLOCK", 80: "GPU_GLOBALTIMER",
}
# CLOCK_MONOTONIC ns already (the recorder's nvtxTimestampGet, Linux's steady_clock)
_MONOTONIC_DOMAINS = frozenset((0, 1, 14, 16, 50))
# ns since the Unix epoch (CLOCK_REALTIME, libstdc++'s system_clock)
_REALTIME_DOMAINS = frozenset((12, 13, 52))
_FILETIME_EPOCH = 116444736000000000  # 1601-01-01 to 1970-01-01 in 100 ns


class Clocks:
    """Maps a batch timestamp of a counter's time domain onto the trace's clock (CLOCK_MONOTONIC ns)
    for one process image, from its record file's header.

    * NONE, TOOL_PROVIDED (the recorder's ``nvtxTimestampGet``), CLOCK_MONOTONIC(_COARSE) and
      ``std::chrono::steady_clock``: the trace's clock already;
    * CLOCK_REALTIME(_COARSE) and ``std::chrono::system_clock`` (ns), ``time()`` (s) and Windows'
      FILETIME (100 ns since 1601): by the (monotonic, realtime) pair the recorder read at its start
      (a wall-clock step during the run shifts them by the step);
    * CPU_TSC: by the recorder's TSC calibration, when it recorded with the TSC;
    * the others (CPU_TSC_NONVIRTUALIZED, MONOTONIC_RAW, BOOTTIME, CPU time, QPC, GPU timer, C++
      high_resolution (system or steady, by library)/utc/tai/gps/file clocks, ``clock()``,
      ``timespec_get``, a registered time domain) have no known relation to it:
      :meth:`to_trace` answers None (the decoder leaves those samples out, with a warning).
    """

    __slots__ = ("monotonic_ns", "realtime_ns", "tsc_to_ns")

    def __init__(self, monotonic_ns: int, realtime_ns: int, tsc_to_ns: Any = None) -> None:
        self.monotonic_ns = monotonic_ns
        self.realtime_ns = realtime_ns
        self.tsc_to_ns = tsc_to_ns

    def to_trace(self, time_domain: int, ts: int) -> Optional[int]:
        """``ts`` of ``time_domain`` as the trace's CLOCK_MONOTONIC ns; None when it cannot be mapped."""
        if time_domain in _MONOTONIC_DOMAINS:
            return ts
        if time_domain == 10:
            return self.tsc_to_ns(ts & 0xFFFFFFFFFFFFFFFF) if self.tsc_to_ns is not None else None
        if not self.realtime_ns:
            return None
        if time_domain in _REALTIME_DOMAINS:
            wall = ts
        elif time_domain == 40:
            wall = ts * 1_000_000_000
        elif time_domain in (31, 32):
            wall = (ts - _FILETIME_EPOCH) * 100
        else:
            return None
        return wall - self.realtime_ns + self.monotonic_ns


_NO_HEADER = Clocks(0, 0)


def time_domain_name(time_domain: int) -> str:
    """``NVTX_TIMESTAMP_TYPE_*`` name of a time domain id (a registered one says so)."""
    return TIME_DOMAINS.get(time_domain, f"registered time domain {time_domain}")


def _type_label(info: CounterInfo) -> str:
    fmt = _SCALARS.get(info.schema_id)
    if fmt is None:
        return f"schema {info.schema_id}"
    bits = 8 * struct.calcsize("<" + fmt)
    return (f"float{bits}" if fmt in "efd" else f"uint{bits}" if fmt.isupper() else f"int{bits}")


_NO_ZERO, _NO_UNCHANGED, _NO_UNAVAILABLE = 0, 1, 2


class ExtDecoder:
    """Follows the blob events of a recording (any order of processes; per process in time order):
    :meth:`feed` takes :class:`~nvtx_cffi.recorder.Event` objects, :meth:`blob` and
    :meth:`take_payload` the same records given by their fields (the tracer's columnar batches).

    Give it each process image's registrations first (:meth:`preload`): then a schema or counter
    registered by a thread whose chunk is read later still decodes the samples and payloads of the
    threads read before.
    """

    def __init__(self) -> None:
        self.schemas: Dict[Tuple[int, Optional[str]], Dict[int, Schema]] = {}
        self.counters: Dict[Tuple[int, Optional[str], int], CounterInfo] = {}
        self.scopes: Dict[Tuple[int, Optional[str], int], str] = {}
        self.truncated_scopes: Set[Tuple[int, Optional[str], int]] = set()  # scopes whose path the recorder cut
        #: (pid, counter title, time domain) -> batch samples left out: their time domain has no
        #: known relation to the trace's clock
        self.unmapped: Dict[Tuple[int, str, int], int] = {}
        self._pending: Dict[Tuple[int, int], List[Tuple[int, bytes, bool]]] = {}
        self._payloads: Dict[int, Any] = {}
        self._clocks: Dict[int, Clocks] = {}
        self._preloaded: Set[int] = set()
        self._last: Dict[Tuple[int, Optional[str], int], Dict[str, Any]] = {}  # values held for UNCHANGED
        self._alike: Dict[Tuple[int, Optional[str], str], List[CounterInfo]] = {}  # counters by (pid, domain, name)
        #: array_layout() by (pid, domain, schema id), until a schema is registered
        self._layouts: Dict[Tuple[int, Optional[str], int], Any] = {}

    def _schemas(self, pid: int, domain: Optional[str]) -> Dict[int, Schema]:
        return self.schemas.setdefault((pid, domain), {})

    def preload(self, info: Any) -> None:
        """Take a process image's registrations (``info``: a :class:`~nvtx_cffi.recorder.ProcessInfo`,
        its ``registrations`` and ``clocks``) before its events: what an earlier image of the same
        pid registered is forgotten, and registrations met again in the events change nothing."""
        pid = info.pid
        tables: Tuple[Dict[Any, Any], ...] = (self.schemas, self.counters, self.scopes, self._last, self._alike)
        for table in tables:
            for key in [k for k in table if k[0] == pid]:
                del table[key]
        self.truncated_scopes = {k for k in self.truncated_scopes if k[0] != pid}
        self._preloaded.discard(pid)
        self._layouts.clear()
        regs = list(getattr(info, "registrations", None) or ())
        order = {"scope": 0, "unknown(5)": 0, "schema": 1, "counter_group": 2}
        regs.sort(key=lambda e: order.get(e.name, 3))  # scopes before the counters naming them
        for event in regs:
            self.feed(event)
        self._preloaded.add(pid)
        clocks = getattr(info, "clocks", None)
        if clocks is not None:
            self._clocks[pid] = clocks
        else:
            self._clocks.pop(pid, None)

    def _add_counter(self, pid: int, info: CounterInfo) -> None:
        """Keep ``info`` and give it (and the counters of the process named alike) a track title
        unique within the process."""
        old = self.counters.get((pid, info.domain, info.id))
        if old is not None:
            group = self._alike.get((pid, old.domain, old.name), [])
            group[:] = [i for i in group if i is not old]
        self.counters[(pid, info.domain, info.id)] = info
        infos = self._alike.setdefault((pid, info.domain, info.name), [])
        infos.append(info)
        base = info.name if info.domain is None else f"{info.domain}: {info.name}"
        if len(infos) == 1:
            info.title = base
            return
        labels = [_type_label(i) for i in infos]
        unique = len(set(labels)) == len(labels)
        for other, label in zip(infos, labels):
            other.title = f"{base} ({label if unique else f'counter {other.id}'})"

    def feed(self, event: Any) -> List[CounterSample]:
        """Take one event; returns the counter samples it carries (usually none)."""
        kind = event.kind
        if kind != "blob":
            if kind in ("push", "start", "mark"):
                decoded = self.take_payload(event.pid, event.tid, event.domain)
                if decoded is not None:
                    self._payloads[id(event)] = decoded
            return []
        return self.blob(event.name, event.pid, event.tid, event.time_ns, event.domain, event.target, event.data,
                         event.truncated)

    def blob(self, name: str, pid: int, tid: int, time_ns: int, domain: Optional[str], arg: int,
             data: Optional[bytes], truncated: bool) -> List[CounterSample]:
        """Take one blob record, given by its fields (``name``: its kind, ``arg``: its target id);
        returns the counter samples it carries (usually none)."""
        data = data or b""
        known = pid in self._preloaded  # registrations taken already: those met again change nothing
        if name == "schema":
            schemas = self._schemas(pid, domain)
            if not known or arg not in schemas:
                schemas[arg] = parse_schema(arg, data, truncated)
                self._layouts.clear()  # (an array's elements may be of this schema)
        elif name == "counter_group":
            if known and (pid, domain, arg) in self.counters:
                return []
            info = parse_counter(arg, domain, data, truncated)
            info.scope = self.scopes.get((pid, domain, info.scope_id))
            info.truncated = info.truncated or (pid, domain, info.scope_id) in self.truncated_scopes
            self._add_counter(pid, info)
        elif name == "unknown(5)" or name == "scope":
            if known and (pid, domain, arg) in self.scopes:
                return []
            self.scopes[(pid, domain, arg)] = _text(data)
            if truncated:
                self.truncated_scopes.add((pid, domain, arg))
            else:
                self.truncated_scopes.discard((pid, domain, arg))
        elif name == "payload":
            self._pending.setdefault((pid, tid), []).append((arg, data, truncated))
        elif name == "counter_sample":
            counter = self.counters.get((pid, domain, arg))
            if counter is not None:
                return self._samples(pid, tid, time_ns, truncated, counter, data)
        return []

    def take_payload(self, pid: int, tid: int, domain: Optional[str]) -> Optional[Tuple[Any, bool]]:
        """(decoded binary payload, truncated) of the push/start/mark that thread ``tid`` of ``pid``
        records next, from the payload blobs it recorded since its last one; None when there were none."""
        taken = self.take_pending(pid, tid, domain)
        return None if taken is None else decode_pending(*taken)

    def take_pending(self, pid: int, tid: int, domain: Optional[str]
                     ) -> Optional[Tuple[List[Tuple[int, bytes, bool]], Dict[int, Schema]]]:
        """What :meth:`take_payload` decodes, not decoded: the payload blobs (schema id, data,
        truncated) and the schemas of the domain; None when there were none."""
        pending = self._pending.pop((pid, tid), None)
        if not pending:
            return None
        return pending, self._schemas(pid, domain)

    def array_layout(self, pid: int, domain: Optional[str], schema_id: int
                     ) -> Optional[Tuple[str, int, int, Tuple[ElementField, ...]]]:
        """:func:`array_layout` of a payload of ``schema_id`` in ``domain`` of ``pid``."""
        key = (pid, domain, schema_id)
        try:
            return self._layouts[key]
        except KeyError:
            layout = self._layouts[key] = array_layout(schema_id, self._schemas(pid, domain))
            return layout

    def hold(self, pid: int, info: CounterInfo, values: Dict[str, Any]) -> None:
        """Take ``values`` as the latest of the counter ``info`` of ``pid`` (what an UNCHANGED sample
        repeats), for a sample decoded without :meth:`blob` (the tracer's bulk path)."""
        self._last[(pid, info.domain, info.id)] = values

    def payload_of(self, event: Any) -> Tuple[Any, bool]:
        """(decoded binary payload, truncated) of a push/start/mark fed before, else (None, False)."""
        return self._payloads.pop(id(event), (None, False))

    def _fields(self, info: CounterInfo, pid: int) -> Tuple[Optional[Schema], Dict[int, Schema]]:
        schemas = self._schemas(pid, info.domain)
        return schemas.get(info.schema_id), schemas

    def _value(self, info: CounterInfo, pid: int, data: bytes) -> Dict[str, Any]:
        if info.schema_id in _SCALARS:
            return {"value": _scalar(info.schema_id, data, 0, {}, 0)}
        schema, schemas = self._fields(info, pid)
        if schema is None:
            return {}
        if not schema.entries or not any(e.flags & _FLAG_COUNTER for e in schema.entries):
            value = _decode(schema, data, 0, schemas, 0)
            return value if isinstance(value, dict) else {"value": value}
        return {e.name or f"field{i}": _entry_value(e, data, e.offset, schemas, 0)
                for i, e in enumerate(schema.entries) if not e.flags & _FLAG_TIMESTAMP}

    def field_layout(self, info: CounterInfo, pid: int) -> Optional[List[Tuple[str, str, int]]]:
        """Where the values of a sample of the counter ``info`` are, when its samples (mode 0 to 2)
        decode to numbers only, a number a field: ``[(field, struct format, byte offset)]``, in the
        order of the values :meth:`_value` reads; None for the other counters (arrays, strings,
        nested or unknown schemas), and for one whose ``sample_no_value(ZERO)`` sample would not
        decode to a number in each field."""
        fmt = _SCALARS.get(info.schema_id)
        if fmt:
            return [("value", fmt, 0)]
        schema, schemas = self._fields(info, pid)
        if schema is None or not schema.entries:
            return None
        entries = schema.entries
        if any(e.flags & _FLAG_COUNTER for e in entries):
            fields = [(e.name or f"field{i}", e) for i, e in enumerate(entries) if not e.flags & _FLAG_TIMESTAMP]
        elif schema.type == _SCHEMA_DYNAMIC and len(entries) == 2 and entries[1].flags & _ARRAY_MASK == _LENGTH_INDEX:
            return None  # (a list)
        elif (len(entries) == 1 and (entries[0].name is None or schema.name is None and not schema.flags)
              and (entries[0].name is None or entries[0].offset == 0)):
            fields = [("value", entries[0])]  # (what _decode unwraps)
        else:
            fields = [(e.name or f"field{i}", e) for i, e in enumerate(entries)]
        layout = []
        for name, entry in fields:
            fmt = _SCALARS.get(entry.type)
            if fmt is None or entry.flags & _ARRAY_MASK == _FIXED:
                return None
            layout.append((name, fmt, entry.offset))
        zero_size = _size_of(info.schema_id, schemas) or 4096  # what _no_value decodes ZERO from
        if (not layout or len({name for name, _, _ in layout}) != len(layout)
                or any(offset + struct.calcsize("<" + fmt) > zero_size for _, fmt, offset in layout)):
            return None
        return layout

    def held(self, pid: int, info: CounterInfo) -> Optional[Dict[str, Any]]:
        """The values an UNCHANGED sample of the counter ``info`` of ``pid`` repeats now (None: none yet)."""
        return self._last.get((pid, info.domain, info.id))

    def units(self, info: CounterInfo, pid: int) -> Dict[str, Optional[str]]:
        """The unit of each field of the counter's samples (the counter's own where a field has none)."""
        schema, _ = self._fields(info, pid)
        units: Dict[str, Optional[str]] = {}
        if schema is not None and info.schema_id not in _SCALARS:
            for i, e in enumerate(schema.entries):
                unit = next((s.get("unit") for s in e.semantics if s.get("unit")), None)
                units[e.name or f"field{i}"] = unit or info.unit
        else:
            units["value"] = info.unit
        return units

    def _no_value(self, info: CounterInfo, pid: int, reason: Optional[int]) -> Dict[str, Any]:
        """A ``sample_no_value`` sample's values: ZERO 0 in every numeric field, UNCHANGED the values
        held, UNAVAILABLE (and UNCHANGED before the counter had values) None in every field: a gap."""
        key = (pid, info.domain, info.id)
        held = self._last.get(key)
        if reason == _NO_UNCHANGED and held is not None:
            return dict(held)
        # the fields a sample of zero bytes decodes to: the same names as the counter's samples
        size = _size_of(info.schema_id, self._schemas(pid, info.domain)) or 4096
        fields = self._value(info, pid, bytes(size))
        if reason == _NO_ZERO:
            self._last[key] = fields
            return dict(fields)
        # UNAVAILABLE, or UNCHANGED before any value: a gap
        return {name: None for name in fields} if reason in (_NO_UNAVAILABLE, _NO_UNCHANGED) else {}

    def _samples(self, pid: int, tid: int, time_ns: int, truncated: bool, info: CounterInfo,
                 data: bytes) -> List[CounterSample]:
        if len(data) < _SAMPLE_HEAD.size:
            return []
        mode, flags, _, item, n = _SAMPLE_HEAD.unpack_from(data)
        body = data[_SAMPLE_HEAD.size:]
        units = self.units(info, pid)
        base = dict(pid=pid, tid=tid, counter=info, units=units)
        truncated = bool(truncated)
        key = (pid, info.domain, info.id)
        if mode in (0, 1, 2):
            values = self._value(info, pid, body)
            self._last[key] = values
            return [CounterSample(time_ns=time_ns, values=values, truncated=truncated, **base)]
        if mode == 3:
            reason = body[0] if body else None
            return [CounterSample(time_ns=time_ns, values=self._no_value(info, pid, reason), no_value=reason,
                                  **base)]
        if mode == 4 and item:
            out = []
            time_domain = info.time_domain
            clocks = self._clocks.get(pid)
            if clocks is None:  # no header known (no preload): only the trace's own clock is placed
                clocks = _NO_HEADER
            unmapped = 0
            for i in range(n):
                off = i * (8 + item)
                end = off + 8 + item
                cut = end > len(body)
                # a cut record (an item past the record bound goes alone, cut to fit) keeps what fits
                if off + 8 > len(body) or cut and not truncated:
                    break
                ts = clocks.to_trace(time_domain, struct.unpack_from("<q", body, off)[0])
                if ts is None:
                    unmapped += 1
                else:
                    values = self._value(info, pid, body[off + 8:end])
                    out.append(CounterSample(time_ns=ts, values=values, truncated=cut, **base))
                if cut:
                    break
            if unmapped:
                self._unmapped(pid, info, time_domain, unmapped)
            if out:
                self._last[key] = out[-1].values
                if flags & _BATCH_CUT:  # the batch's last record: the recorder left the rest out
                    out[-1].batch_cut = True
            return out
        return []

    def _unmapped(self, pid: int, info: CounterInfo, time_domain: int, count: int) -> None:
        title = info.title or info.name
        key = (pid, title, time_domain)
        if key not in self.unmapped:
            if self._clocks.get(pid) is None:
                why = "the decoder was given no record file header for the process (ExtDecoder.preload)"
            elif time_domain == 10:
                why = "the recording has no TSC calibration (the recorder used CLOCK_MONOTONIC)"
            else:
                why = "it has no known relation to the trace's clock (CLOCK_MONOTONIC)"
            warnings.warn(f"counter {title!r} (process {pid}): batch timestamps of time domain "
                          f"{time_domain_name(time_domain)} ({time_domain}) cannot be placed on the trace: {why}; "
                          "those samples are left out", RuntimeWarning, stacklevel=2)
        self.unmapped[key] = self.unmapped.get(key, 0) + count
