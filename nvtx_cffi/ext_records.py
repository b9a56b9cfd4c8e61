"""Decode the recorder's payload-extension records: schemas, counters, samples, binary payloads.

The recorder (``c/recorder_ext.c``) writes what NVTX's payload and counters extensions receive as
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
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

__all__ = ["Schema", "SchemaEntry", "CounterInfo", "CounterSample", "ExtDecoder", "parse_schema",
           "parse_counter", "decode"]

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

    @property
    def unit(self) -> Optional[str]:
        for s in self.semantics:
            if s.get("unit"):
                return s["unit"]
        return None


@dataclass
class CounterSample:
    """One sample of one counter (group): ``values`` maps field name to value (None: no value)."""

    pid: int
    tid: int
    time_ns: int
    counter: CounterInfo
    values: Dict[str, Any]
    no_value: Optional[int] = None
    """``CounterNoValueReason`` value for ``sample_no_value`` (values are then empty)."""
    units: Dict[str, Optional[str]] = field(default_factory=dict)
    truncated: bool = False
    """The recorder cut the sample at its 64 KiB record bound: fields past the cut are missing
    (None) or short."""
    batch_cut: bool = False
    """The last sample recorded of a ``batch_submit`` whose values passed the recorder's bound
    (1 MiB of values per batch): the batch's samples after this one were not recorded."""


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def parse_semantics(data: bytes) -> List[Dict[str, Any]]:
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
        sems = parse_semantics(data[off:off + sl])
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
    return CounterInfo(counter_id, domain, schema_id, scope_id, name, desc, parse_semantics(data[off:off + sl]),
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


class ExtDecoder:
    """Follows the blob events of a recording (any order of processes; per process in time order)."""

    def __init__(self) -> None:
        self.schemas: Dict[Tuple[int, Optional[str]], Dict[int, Schema]] = {}
        self.counters: Dict[Tuple[int, Optional[str], int], CounterInfo] = {}
        self.scopes: Dict[Tuple[int, Optional[str], int], str] = {}
        self.truncated_scopes: Set[Tuple[int, Optional[str], int]] = set()  # scopes whose path the recorder cut
        self._pending: Dict[Tuple[int, int], List[Tuple[int, bytes, bool]]] = {}
        self._payloads: Dict[int, Any] = {}

    def _schemas(self, pid: int, domain: Optional[str]) -> Dict[int, Schema]:
        return self.schemas.setdefault((pid, domain), {})

    def feed(self, event: Any) -> List[CounterSample]:
        """Take one event; returns the counter samples it carries (usually none)."""
        kind = event.kind
        if kind != "blob":
            if kind in ("push", "start", "mark"):
                pending = self._pending.pop((event.pid, event.tid), None)
                if pending:
                    schemas = self._schemas(event.pid, event.domain)
                    values = [decode(sid, data, schemas) for sid, data, _ in pending]
                    self._payloads[id(event)] = (values[0] if len(values) == 1 else values,
                                                 any(t for *_, t in pending))
            return []
        name, pid, domain, arg, data = event.name, event.pid, event.domain, event.target, event.data or b""
        if name == "schema":
            self._schemas(pid, domain)[arg] = parse_schema(arg, data, event.truncated)
        elif name == "counter_group":
            info = parse_counter(arg, domain, data, event.truncated)
            info.scope = self.scopes.get((pid, domain, info.scope_id))
            info.truncated = info.truncated or (pid, domain, info.scope_id) in self.truncated_scopes
            self.counters[(pid, domain, arg)] = info
        elif name == "unknown(5)" or name == "scope":
            self.scopes[(pid, domain, arg)] = _text(data)
            if event.truncated:
                self.truncated_scopes.add((pid, domain, arg))
            else:
                self.truncated_scopes.discard((pid, domain, arg))
        elif name == "payload":
            self._pending.setdefault((pid, event.tid), []).append((arg, data, event.truncated))
        elif name == "counter_sample":
            info = self.counters.get((pid, domain, arg))
            if info is not None:
                return self._samples(event, info, data)
        return []

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

    def _units(self, info: CounterInfo, pid: int) -> Dict[str, Optional[str]]:
        schema, _ = self._fields(info, pid)
        units: Dict[str, Optional[str]] = {}
        if schema is not None and info.schema_id not in _SCALARS:
            for i, e in enumerate(schema.entries):
                unit = next((s.get("unit") for s in e.semantics if s.get("unit")), None)
                units[e.name or f"field{i}"] = unit or info.unit
        else:
            units["value"] = info.unit
        return units

    def _samples(self, event: Any, info: CounterInfo, data: bytes) -> List[CounterSample]:
        if len(data) < _SAMPLE_HEAD.size:
            return []
        mode, flags, _, item, n = _SAMPLE_HEAD.unpack_from(data)
        body = data[_SAMPLE_HEAD.size:]
        units = self._units(info, event.pid)
        base = dict(pid=event.pid, tid=event.tid, counter=info, units=units)
        truncated = bool(event.truncated)
        if mode in (0, 1, 2):
            return [CounterSample(time_ns=event.time_ns, values=self._value(info, event.pid, body), truncated=truncated,
                                  **base)]
        if mode == 3:
            return [CounterSample(time_ns=event.time_ns, values={}, no_value=body[0] if body else None, **base)]
        if mode == 4 and item:
            out = []
            for i in range(n):
                off = i * (8 + item)
                end = off + 8 + item
                cut = end > len(body)
                # a cut record (an item past the record bound goes alone, cut to fit) keeps what fits
                if off + 8 > len(body) or cut and not truncated:
                    break
                ts = struct.unpack_from("<q", body, off)[0]
                out.append(CounterSample(time_ns=ts, values=self._value(info, event.pid, body[off + 8:end]),
                                         truncated=cut, **base))
                if cut:
                    break
            if out and flags & _BATCH_CUT:  # the batch's last record: the recorder left the rest out
                out[-1].batch_cut = True
            return out
        return []
