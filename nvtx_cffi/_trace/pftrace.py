"""Write Perfetto's native protobuf trace (``.pftrace``) with a small protobuf encoder of its own.

Perfetto's UI and trace processor read it directly; it is ~10x smaller than the JSON. Layout:

* a ``Trace`` is a concatenation of ``packet`` fields (``TracePacket``, field 1);
* one packet sequence (``trusted_packet_sequence_id``) per (process, thread, domain): its first
  packet clears the incremental state, sets ``trace_packet_defaults`` (an incremental clock 64,
  the track) and a ``clock_snapshot`` tying clock 64 to CLOCK_MONOTONIC (3, the trace clock);
  every later packet's ``timestamp`` is then the ns since the previous packet of the sequence
  (1-3 bytes instead of 8), and carries no track uuid (the default);
* push/pop ranges are ``TrackEvent`` ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` on the thread's track
  (NVTX's default domain) or on a child track named after the domain; marks are
  ``TYPE_INSTANT``; names are interned (``InternedData.event_names``, ``name_iid``), as are
  categories (``category_iids``: the NVTX category's name) and colours (a ``color`` debug
  annotation with an interned string value ``#rrggbb``); payloads are ``payload`` debug
  annotations; a range still open when its process ended gets its END at the process's last
  event with an ``unterminated: true`` annotation;
* start/end ranges: one async track per range (child of the process track, named after the
  range), BEGIN/END with absolute timestamps, on sequence 1;
* counters (:meth:`PerfettoWriter.counter`): a counter track per (process, name), ``TYPE_COUNTER``
  events with ``double_counter_value`` and their ``track_uuid``, on a sequence of the process's
  counters (set up as a thread's is): a sample's ``timestamp`` is the ns since the latest sample
  before it on its incremental clock, or, earlier than that (another thread's sample, a batch's),
  its own time on the trace's clock (``timestamp_clock_id`` 3);
* process and thread tracks (``TrackDescriptor`` with ``process``/``thread``) are described when
  first used and again at the end with their final names;
* the packets go into the file zlib-compressed, about 1 MiB of them at a time, each lot as one
  packet's ``compressed_packets`` (a ``Trace`` of its own, which the trace processor and the UI
  inflate and read as if it stood there): a third to a fifth of the size. The lots end at batch
  boundaries only, so the file's bytes do not depend on how a batch was encoded.
  ``PerfettoWriter(..., compress=False)`` writes the packets as they are.

Each (thread, domain) sequence is encoded in bulk: in C (c/shim/trace_decode.c, scalar payloads
included), or, without the compiled module, with NumPy (varints by vectorised shifts, every
packet's bytes scattered into one buffer) when its events have no payload; otherwise, and
without NumPy, packet by packet in Python: the same bytes either way.

>>> _varint(300), _f_str(2, "hi")
(b'\\xac\\x02', b'\\x12\\x02hi')
"""
from __future__ import annotations

import itertools
import struct
import zlib
from typing import IO, Any, Dict, List, Optional, Tuple

from .. import _bulk
from .columns import MARK, POP, PUSH, payload_value
from .._fixedwidth import join_rows
from .grouping import group_rows
from .model import Timeline
from .scalars import DOUBLE, FLOAT, UINT64, scalar_payloads
from .writers import StreamWriter, register

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["PerfettoWriter"]

_MONOTONIC = 3  # BuiltinClocks.MONOTONIC: the recorder's clock, made the trace clock
_INCREMENTAL = 64  # a sequence-scoped clock of ours, delta-encoded
_SEQ_CLEARED = 1  # SEQ_INCREMENTAL_STATE_CLEARED
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_ANNOTATION_NAMES = ((1, "color"), (2, "payload"), (3, "unterminated"))
_Q = struct.Struct("<Q")
_D = struct.Struct("<d")


_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def _varint(n: int) -> bytes:
    if 0 <= n < 128:
        return _SMALL_VARINTS[n]
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64: two's complement, 10 bytes (as protobuf does)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _f_varint(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _f_bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _f_str(field: int, text: str) -> bytes:
    return _f_bytes(field, text.encode("utf-8"))


def _event_name(entry: Tuple[int, str]) -> bytes:
    """InternedData.event_names (field 2) entry: EventName {iid (1), name (2)}; names may never
    repeat, so this is spelt out (what _f_bytes(2, _f_varint(1, iid) + _f_str(2, name)) gives)."""
    iid, name = entry
    data = name.encode("utf-8")
    inner = b"\x08" + _varint(iid) + b"\x12" + _varint(len(data)) + data
    return b"\x12" + _varint(len(inner)) + inner


def _f_double(field: int, value: float) -> bytes:
    return _varint(field << 3 | 1) + _D.pack(value)


def _packet(body: bytes) -> bytes:
    return _f_bytes(1, body)


def _hex(argb: int) -> str:
    return f"#{argb & 0xFFFFFF:06x}"


class _Sequence:
    """One packet sequence: a (pid, tid, domain) track, its clock and its interning tables."""

    __slots__ = ("seq_id", "track", "last", "names", "categories", "colors", "seq_bytes")

    def __init__(self, seq_id: int, track: int) -> None:
        self.seq_id = seq_id
        self.track = track
        self.last = 0
        self.names: Dict[str, int] = {}
        self.categories: Dict[str, int] = {}
        self.colors: Dict[str, int] = {}
        self.seq_bytes = _f_varint(10, seq_id)

    def header(self, time_ns: int) -> bytes:
        """The packet that (re)starts the sequence at ``time_ns``: state cleared, defaults, clock."""
        self.last = time_ns
        self.names.clear()
        self.categories.clear()
        self.colors.clear()
        defaults = _f_varint(58, _INCREMENTAL) + _f_bytes(11, _f_varint(11, self.track))
        snapshot = (_f_bytes(1, _f_varint(1, _INCREMENTAL) + _f_varint(2, time_ns) + _f_varint(3, 1))
                    + _f_bytes(1, _f_varint(1, _MONOTONIC) + _f_varint(2, time_ns))
                    + _f_varint(2, _MONOTONIC))
        interned = b"".join(_f_bytes(3, _f_varint(1, iid) + _f_str(2, name)) for iid, name in _ANNOTATION_NAMES)
        return _packet(self.seq_bytes + _f_varint(13, _SEQ_CLEARED) + _f_bytes(59, defaults)
                       + _f_bytes(12, interned) + _f_bytes(6, snapshot))


#: Interned entries per sequence before it starts over (bounds memory with unique names).
_MAX_INTERNED = 1 << 16
#: Packet bytes gathered before they are compressed into one ``compressed_packets`` packet (checked
#: at the end of each batch): large enough for zlib to find the repeats, small enough to stream.
COMPRESS_CHUNK = 1 << 20
#: zlib's level: 3, the best of its fast levels, compresses a trace at ~170 MB/s, about as fast as the
#: packets are encoded; 6 (its default) saves another tenth of the size in twice the time.
_ZLIB_LEVEL = 3
_COMPRESSED_PACKETS = 50  # TracePacket.compressed_packets


@register("pftrace", ".pftrace", ".perfetto-trace")
class PerfettoWriter(StreamWriter):
    """Write a Perfetto protobuf trace to the binary stream ``out`` as batches come.

    A conversion's :class:`~.writers.Writer`: :meth:`batch` (a :class:`~.pairing.PairedBatch`),
    ``sample`` (as :meth:`counter` per track), :meth:`finish`, :meth:`close` (``out`` too when
    ``close=True``). ``compress=False`` writes the packets without wrapping them in zlib-compressed
    ``compressed_packets``, for readers that do not inflate them.
    """

    def __init__(self, out: IO[bytes], start_ns: int, close: bool = False, *, compress: bool = True) -> None:
        super().__init__(out, start_ns, close)
        self._compress = compress
        self._pending: List[bytes] = []  # packets not yet compressed and written
        self._pending_bytes = 0
        self.count = 0
        self._next_uuid = 1  # small uuids: 1-2 byte varints where events name their track
        self._sequences: Dict[Tuple[int, int, int], _Sequence] = {}
        self._next_seq = 2  # 1: tracks and async ranges (absolute timestamps)
        self._counter_sequences: Dict[int, _Sequence] = {}
        self._process_tracks: Dict[int, int] = {}
        self._thread_tracks: Dict[Tuple[int, int], int] = {}
        self._domain_names: Dict[Tuple[int, int, int], Optional[str]] = {}
        self._counter_tracks: Dict[Tuple[int, str], int] = {}
        self._async_names: Dict[str, int] = {}
        self._seq1 = _f_varint(10, 1)
        self._write(_packet(self._seq1 + _f_varint(13, _SEQ_CLEARED) + _f_bytes(
            6, _f_bytes(1, _f_varint(1, _MONOTONIC) + _f_varint(2, start_ns)) + _f_varint(2, _MONOTONIC))))

    def _write(self, data: bytes) -> None:
        if not self._compress:
            self._out.write(data)
            return
        self._pending.append(data)
        self._pending_bytes += len(data)

    def _flush(self, at_least: int) -> None:
        """Compress the pending packets into one packet and write it, if there are ``at_least`` bytes."""
        if self._pending_bytes < max(at_least, 1):
            return
        packed = zlib.compress(b"".join(self._pending), _ZLIB_LEVEL)
        self._pending.clear()
        self._pending_bytes = 0
        self._out.write(_packet(_f_bytes(_COMPRESSED_PACKETS, packed)))

    def _uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid - 1

    # ----------------------------------------------------------------- tracks

    def _process_track(self, pid: int, name: Optional[str] = None) -> int:
        uuid = self._process_tracks.get(pid)
        if uuid is None:
            uuid = self._process_tracks[pid] = self._uuid()
            self._describe_process(pid, uuid, name or f"process {pid}")
        return uuid

    def _describe_process(self, pid: int, uuid: int, name: str) -> None:
        desc = _f_varint(1, uuid) + _f_bytes(3, _f_varint(1, pid) + _f_str(6, name))
        self._write(_packet(self._seq1 + _f_bytes(60, desc)))

    def _describe_thread(self, pid: int, tid: int, uuid: int, name: str) -> None:
        desc = (_f_varint(1, uuid) + _f_varint(5, self._process_track(pid))
                + _f_bytes(4, _f_varint(1, pid) + _f_varint(2, tid) + _f_str(5, name)))
        self._write(_packet(self._seq1 + _f_bytes(60, desc)))

    def _thread_track(self, pid: int, tid: int, name: Optional[str]) -> int:
        uuid = self._thread_tracks.get((pid, tid))
        if uuid is None:
            uuid = self._thread_tracks[(pid, tid)] = self._uuid()
            self._describe_thread(pid, tid, uuid, name or ("main thread" if tid == pid else f"thread {tid}"))
        return uuid

    def _sequence(self, pb: Any, tid: int, dom: int, first_ns: int) -> _Sequence:
        key = (pb.pid, tid, dom)
        seq = self._sequences.get(key)
        if seq is None:
            thread = self._thread_track(pb.pid, tid, None)
            if dom:
                track = self._uuid()
                name = pb.domain_name(dom) or ""
                desc = _f_varint(1, track) + _f_varint(5, thread) + _f_str(2, name)
                self._write(_packet(self._seq1 + _f_bytes(60, desc)))
            else:
                track = thread
            seq = self._sequences[key] = _Sequence(self._next_seq, track)
            self._next_seq += 1
            self._write(seq.header(first_ns))
        return seq

    # ----------------------------------------------------------------- events

    def batch(self, pb: Any) -> None:
        """Write a :class:`~.pairing.PairedBatch`: thread events in order, then start/end ranges."""
        if pb.records is not None:
            self._thread_events(pb)
        elif len(pb.ranges):
            self._close_open(pb)
        if len(pb.asyncs):
            self._async_ranges(pb)
        self._flush(COMPRESS_CHUNK)

    def _thread_events(self, pb: Any) -> None:
        b = pb.records
        numpy = b.numpy and _np is not None
        if numpy:
            k = b.kind
            rows = _np.flatnonzero(((k == PUSH) | (k == POP) | (k == MARK)) & ~pb.skip)
            if not len(rows):
                return
            key = (b.tid[rows].astype(_np.int64) << 32) | b.domain[rows].astype(_np.int64)
            order = _np.argsort(key, kind="stable")
            rows = rows[order]
            key = key[order]
            cut = _np.flatnonzero(key[1:] != key[:-1]) + 1
            for part in _np.split(rows, cut):
                tid, dom = int(b.tid[part[0]]), int(b.domain[part[0]])
                seq = self._sequence(pb, tid, dom, int(b.time[part[0]]))
                if _native_encoder() is None and _np.any(b.ptype[part] != 0):  # (NumPy alone writes no payloads)
                    self._encode_python(pb, seq, part.tolist())
                else:
                    if len(seq.names) + len(seq.categories) + len(seq.colors) > _MAX_INTERNED:
                        self._write(seq.header(seq.last))  # as _encode_python starts over
                    self._encode_numpy(pb, seq, part)
        else:
            groups: Dict[Tuple[int, int], List[int]] = {}
            for i, k in enumerate(b.kind):
                if (k == PUSH or k == POP or k == MARK) and not pb.skip[i]:
                    groups.setdefault((b.tid[i], b.domain[i]), []).append(i)
            for (tid, dom), part in sorted(groups.items()):
                seq = self._sequence(pb, tid, dom, b.time[part[0]])
                self._encode_python(pb, seq, part)

    def _intern(self, seq: _Sequence, table: Dict[str, int], text: str, new: List[Tuple[int, str]]) -> int:
        iid = table.get(text)
        if iid is None:
            iid = table[text] = len(table) + 1
            new.append((iid, text))
        return iid

    def _interned_packet(self, seq: _Sequence, names: list, cats: list, colors: list,
                         names_bytes: Optional[bytes] = None) -> None:
        """InternedData of new categories, names (``names``, or their entries' bytes ``names_bytes``)
        and colours."""
        if not (names or cats or colors or names_bytes):
            return
        body = (b"".join(_f_bytes(1, _f_varint(1, i) + _f_str(2, s)) for i, s in cats)
                + (names_bytes if names_bytes is not None else b"".join(map(_event_name, names)))
                + b"".join(_f_bytes(29, _f_varint(1, i) + _f_bytes(2, s.encode("utf-8"))) for i, s in colors))
        self._write(_packet(seq.seq_bytes + _f_bytes(12, body)))

    def _encode_python(self, pb: Any, seq: _Sequence, rows: List[int]) -> None:
        b = pb.records
        if len(seq.names) + len(seq.categories) + len(seq.colors) > _MAX_INTERNED:
            self._write(seq.header(seq.last))
        new_names: list = []
        new_cats: list = []
        new_colors: list = []
        packets = []
        last = seq.last
        for i in rows:
            kind = int(b.kind[i])
            t = int(b.time[i])
            te = _f_varint(9, _BEGIN if kind == PUSH else _END if kind == POP else _INSTANT)
            if kind != POP:
                te += _f_varint(10, self._intern(seq, seq.names, pb.text(int(b.text[i])), new_names))
                cat = pb.category_name(int(b.domain[i]), int(b.category[i]))
                if cat is not None:
                    te += _f_varint(3, self._intern(seq, seq.categories, cat, new_cats))
                if b.has_color[i]:
                    color = self._intern(seq, seq.colors, _hex(int(b.color[i])), new_colors)
                    te += _f_bytes(4, _f_varint(1, 1) + _f_varint(17, color))
                if b.ptype[i]:
                    te += _annotation_payload(int(b.ptype[i]), int(b.payload[i]))
            packets.append(_packet(_f_varint(8, t - last) + _f_bytes(11, te) + seq.seq_bytes))
            last = t
        seq.last = last
        self._interned_packet(seq, new_names, new_cats, new_colors)
        self._write(b"".join(packets))
        self.count += len(rows)

    def _encode_numpy(self, pb: Any, seq: _Sequence, rows: Any) -> None:
        """The packets of ``rows`` (no payloads) as one buffer: same bytes as :meth:`_encode_python`."""
        np = _np
        b = pb.records
        n = len(rows)
        kind = b.kind[rows]
        time = b.time[rows].astype(np.int64)
        prev = np.empty(n, dtype=np.int64)
        prev[0] = seq.last
        prev[1:] = time[:-1]
        dt = (time - prev).astype(np.uint64)
        seq.last = int(time[-1])
        named = kind != POP
        new_names: list = []
        new_cats: list = []
        new_colors: list = []
        # interned ids, assigned in order of first use (as the Python encoder does)
        texts = b.text[rows]
        if hasattr(pb, "texts"):
            name_iid, names_bytes = self._name_iids(pb, seq, texts, named)
        else:
            names_bytes = None
            name_iid = self._iids(seq, seq.names, texts, named, lambda t: pb.text(int(t)), new_names)
        dom = b.domain[rows].astype(np.int64)
        cat_key = (dom << 32) | b.category[rows].astype(np.int64)
        cat_iid = self._iids(seq, seq.categories, cat_key, named & (b.category[rows] != 0),
                             lambda k: pb.category_name(int(k) >> 32, int(k) & 0xFFFFFFFF), new_cats)
        has_color = named & (b.has_color[rows] != 0)
        color_iid = self._iids(seq, seq.colors, b.color[rows].astype(np.int64), has_color,
                               lambda c: _hex(int(c)), new_colors)
        self._interned_packet(seq, new_names, new_cats, new_colors, names_bytes)
        ev_type = np.where(kind == PUSH, _BEGIN, np.where(kind == POP, _END, _INSTANT)).astype(np.uint64)
        native = _native_encoder()
        if native is not None:
            value_kind, value = _annotation_values(native[1], b.ptype[rows], b.payload[rows], named)
            self._write(_encode_native(native, n, dt, ev_type, named, name_iid, cat_iid, has_color, color_iid,
                                       value_kind, value, seq.seq_bytes))
            self.count += n
            return
        # TrackEvent: type, [name_iid], [category_iids], [color annotation]
        te = _Fields(n)
        te.const(b"\x48", None)
        te.varint(ev_type, None)
        te.const(b"\x50", named)
        te.varint(name_iid, named)
        has_cat = cat_iid != 0
        te.const(b"\x18", has_cat)
        te.varint(cat_iid, has_cat)
        # DebugAnnotation{name_iid: 1, string_value_iid: c}: 0x22 len 0x08 0x01 0x88 0x01 varint(c)
        ann_len = (4 + _varint_len(color_iid)).astype(np.uint64)
        te.const(b"\x22", has_color)
        te.varint(ann_len, has_color)
        te.const(b"\x08\x01\x88\x01", has_color)
        te.varint(color_iid, has_color)
        # TracePacket: timestamp, track_event, trusted_packet_sequence_id
        pk = _Fields(n)
        pk.const(b"\x40", None)
        pk.varint(dt, None)
        pk.const(b"\x5a", None)
        pk.varint(te.length().astype(np.uint64), None)
        pk.nested(te)
        pk.const(seq.seq_bytes, None)
        outer = _Fields(n)
        outer.const(b"\x0a", None)
        outer.varint(pk.length().astype(np.uint64), None)
        outer.nested(pk)
        self._write(outer.build())
        self.count += n

    def _name_iids(self, pb: Any, seq: _Sequence, keys: Any, mask: Any) -> Tuple[Any, Optional[bytes]]:
        """:meth:`_iids` for the event names, in bulk: the names looked up at once, the new ones
        interned in order of first use and their ``event_names`` entries built at once (the bytes
        of :func:`_event_name` for each). Returns the iids and the entries' bytes."""
        np = _np
        table = seq.names
        out = np.zeros(len(keys), dtype=np.uint64)
        idx = np.flatnonzero(mask)
        if not len(idx):
            return out, None
        uniq, first, inverse = np.unique(keys[idx], return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        in_order = uniq[order].tolist()
        text_list = getattr(pb, "text_list", None)
        if text_list is not None:
            texts = text_list(in_order)
        else:
            found = pb.texts(in_order)
            texts = [found[k] for k in in_order]
        if table.keys().isdisjoint(texts):  # all new (names that never repeat): no lookup each
            iids = np.zeros(len(texts), dtype=np.uint64)
            is_new = np.ones(len(texts), dtype=bool)
            new_texts = texts
        else:
            iids = np.fromiter(map(table.get, texts, itertools.repeat(0)), dtype=np.uint64, count=len(texts))
            is_new = iids == 0
            new_texts = list(itertools.compress(texts, is_new.tolist()))
        n = len(new_texts)
        base = len(table) + 1
        table.update(zip(new_texts, range(base, base + n)))
        if len(table) != base - 1 + n:  # two ids of one text: one entry, as _intern makes
            for t in new_texts:
                table.pop(t, None)
            new_list: List[Tuple[int, str]] = []
            iids = np.array([self._intern(seq, table, t, new_list) for t in texts], dtype=np.uint64)
            ids = np.empty(len(uniq), dtype=np.uint64)
            ids[order] = iids
            out[idx] = ids[inverse.reshape(-1)]
            return out, b"".join(map(_event_name, new_list)) if new_list else None
        iids[is_new] = np.arange(base, base + n, dtype=np.uint64)
        ids = np.empty(len(uniq), dtype=np.uint64)
        ids[order] = iids
        out[idx] = ids[inverse.reshape(-1)]
        if not n:
            return out, None
        joined = "".join(new_texts)
        if joined.isascii():
            data = joined.encode("ascii")
            length = np.fromiter(map(len, new_texts), dtype=np.int64, count=n)
        else:
            encoded = [t.encode("utf-8") for t in new_texts]
            data = b"".join(encoded)
            length = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
        iid = np.arange(base, base + n, dtype=np.uint64)
        # EventName entry: 0x12 varint(inner) 0x08 varint(iid) 0x12 varint(len) name
        inner = (2 + _varint_len(iid) + _varint_len(length) + length).astype(np.uint64)
        head = _Fields(n)
        head.const(b"\x12", None)
        head.varint(inner, None)
        head.const(b"\x08", None)
        head.varint(iid, None)
        head.const(b"\x12", None)
        head.varint(length.astype(np.uint64), None)
        head_len = head.length().astype(np.int64)
        heads = np.frombuffer(head.build(), dtype=np.uint8)
        entries = join_rows(heads, np.cumsum(head_len) - head_len, head_len,
                            np.frombuffer(data, dtype=np.uint8), np.cumsum(length) - length, length)
        return out, entries.tobytes()

    def _iids(self, seq: _Sequence, table: Dict[str, int], keys: Any, mask: Any, text_of: Any,
              new: List[Tuple[int, str]]) -> Any:
        np = _np
        out = np.zeros(len(keys), dtype=np.uint64)
        idx = np.flatnonzero(mask)
        if not len(idx):
            return out
        uniq, first, inverse = np.unique(keys[idx], return_index=True, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.uint64)
        for j in np.argsort(first, kind="stable").tolist():
            ids[j] = self._intern(seq, table, text_of(uniq[j]), new)
        out[idx] = ids[inverse.reshape(-1)]
        return out

    def _close_open(self, pb: Any) -> None:
        """END events, at their process's last event, for the push/pop ranges still open (innermost first)."""
        rows = sorted(range(len(pb.ranges)), key=lambda i: (pb.ranges.tid[i], pb.ranges.domain[i],
                                                             -pb.ranges.depth[i]))
        r = pb.ranges
        for i in rows:
            seq = self._sequence(pb, int(r.tid[i]), int(r.domain[i]), int(r.start[i]))
            t = int(r.end[i])
            te = _f_varint(9, _END) + _f_bytes(4, _f_varint(1, 3) + _f_varint(2, 1))
            self._write(_packet(_f_varint(8, max(0, t - seq.last)) + _f_bytes(11, te) + seq.seq_bytes))
            seq.last = max(seq.last, t)
            self.count += 1

    def _async_ranges(self, pb: Any) -> None:
        """Start/end ranges: a track each (child of the process's), its BEGIN and END, on sequence 1."""
        a = pb.asyncs
        process = self._process_track(pb.pid)
        native = _async_encoder()
        if native is not None and hasattr(a.start, "dtype"):
            self._async_native(native, pb, process)
            return
        for tid, end_tid, start, end, rid, text, dom, cat, color, has, ptype, payload in zip(*a.lists(
                "tid", "end_tid", "start", "end", "range_id", "text", "domain", "category", "color", "has_color",
                "ptype", "payload")):
            name = pb.text(text)
            track = self._uuid()
            self._write(_packet(self._seq1 + _f_bytes(60, _f_varint(1, track) + _f_varint(5, process)
                                                      + _f_str(2, name))))
            te = (_f_varint(9, _BEGIN) + _f_varint(11, track) + _f_str(23, name)
                  + _async_style(pb.domain_name(dom), pb.category_name(dom, cat), color if has else None))
            if ptype:
                value = payload_value(ptype, payload)
                if value is not None:
                    te += _f_bytes(4, _f_str(10, "payload") + _value_field(value))
            te += _f_bytes(4, _f_str(10, "range_id") + _f_varint(3, rid))
            self._write(_packet(_f_varint(8, start) + _f_varint(58, _MONOTONIC) + _f_bytes(11, te) + self._seq1))
            end_te = _f_varint(9, _END) + _f_varint(11, track)
            if pb.unterminated:
                end_te += _f_bytes(4, _f_str(10, "unterminated") + _f_varint(2, 1))
            self._write(_packet(_f_varint(8, end) + _f_varint(58, _MONOTONIC) + _f_bytes(11, end_te) + self._seq1))
            self.count += 2

    def _async_native(self, native: Any, pb: Any, process: int) -> None:
        """:meth:`_async_ranges`' packets made in C (NumPy columns): the names, and the bytes of each
        (domain, category, colour), spelt once."""
        np = _np
        ffi, lib = native
        a = pb.asyncs
        n = len(a)
        uniq, inverse = np.unique(np.asarray(a.text, dtype=np.int64), return_inverse=True)
        names, name_start, name_len = _byte_table([t.encode("utf-8") for t in pb.text_list(uniq.tolist())],
                                                  inverse.reshape(-1))
        style_keys = [np.asarray(c, dtype=np.int64) for c in (a.domain, a.category, a.color, a.has_color)]
        style = np.empty(n, dtype=np.int64)
        style_bytes = []
        for k, rows in enumerate(group_rows(style_keys, np.arange(n), True)):
            style[rows] = k
            dom, cat, color, has = (int(c[rows[0]]) for c in style_keys)
            style_bytes.append(_async_style(pb.domain_name(dom), pb.category_name(dom, cat), color if has else None))
        styles, style_start, style_len = _byte_table(style_bytes, style)
        value_kind, value = _annotation_values(lib, np.asarray(a.ptype, dtype=np.uint8),
                                               np.asarray(a.payload, dtype=np.uint64), np.ones(n, dtype=bool))
        first = self._next_uuid
        self._next_uuid += n
        capacity = (n * (lib.NVTXCFFI_PFTRACE_ASYNC_MAX + 3 * len(self._seq1)) + 2 * int(name_len.sum())
                    + int(style_len.sum()))
        out = np.empty(capacity, dtype=np.uint8)

        def buf(values: Any, ctype: str, dtype: Any) -> Any:
            return ffi.from_buffer(ctype + "[]", np.ascontiguousarray(values, dtype=dtype))

        size = lib.nvtxcffi_pftrace_async(
            n, first, process, buf(names, "uint8_t", np.uint8), buf(name_start, "int64_t", np.int64),
            buf(name_len, "int64_t", np.int64), buf(styles, "uint8_t", np.uint8), buf(style_start, "int64_t", np.int64),
            buf(style_len, "int64_t", np.int64), buf(value_kind, "uint8_t", np.uint8), buf(value, "uint64_t", np.uint64),
            buf(a.range_id, "uint64_t", np.uint64), buf(a.start, "int64_t", np.int64), buf(a.end, "int64_t", np.int64),
            1 if pb.unterminated else 0, ffi.from_buffer("uint8_t[]", self._seq1), len(self._seq1),
            ffi.from_buffer("uint8_t[]", out), capacity)
        if size < 0:  # pragma: no cover - the capacity above always suffices
            msg = "pftrace encoder: buffer too small"
            raise RuntimeError(msg)
        self._write(out[:size].tobytes())
        self.count += 2 * n

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: Optional[float],
                track: Any = None, no_value: Optional[str] = None) -> None:
        """One counter sample on the process's counter track ``name`` (created at its first sample).
        A gap (``value`` None: an unavailable sample) writes nothing: a Perfetto counter has no gaps."""
        if value is None:
            return
        track = self._counter_track(pid, name, unit)
        seq = self._counter_sequence(pid, time_ns)
        te = _f_bytes(11, _f_varint(9, _COUNTER) + _f_varint(11, track) + _f_double(44, float(value)))
        if time_ns >= seq.last:
            self._write(_packet(_f_varint(8, time_ns - seq.last) + te + seq.seq_bytes))
            seq.last = time_ns
        else:
            self._write(_packet(_f_varint(8, time_ns) + _f_varint(58, _MONOTONIC) + te + seq.seq_bytes))
        self.count += 1

    def _counter_sequence(self, pid: int, first_ns: int) -> _Sequence:
        """The sequence of the process's counter samples, started at its first one's time ``first_ns``
        (0 for one before the clock's start: that sample goes on the trace's clock)."""
        seq = self._counter_sequences.get(pid)
        if seq is None:
            seq = self._counter_sequences[pid] = _Sequence(self._next_seq, self._process_track(pid))
            self._next_seq += 1
            self._write(seq.header(max(first_ns, 0)))
        return seq

    def _counter_track(self, pid: int, name: str, unit: Optional[str]) -> int:
        """The uuid of the process's counter track ``name``, described at its first use."""
        key = (pid, name)
        track = self._counter_tracks.get(key)
        if track is None:
            track = self._counter_tracks[key] = self._uuid()
            counter = _f_str(6, unit) if unit else b""
            desc = (_f_varint(1, track) + _f_varint(5, self._process_track(pid)) + _f_str(2, name)
                    + _f_bytes(8, counter))
            self._write(_packet(self._seq1 + _f_bytes(60, desc)))
        return track

    def samples(self, block: Any) -> None:
        """:meth:`counter` of each sample of a :class:`~.counters.SampleBlock`, the packets made in C
        (each track described before its first sample, the sequence set up before the process's
        first sample, as :meth:`counter` does)."""
        native = _counter_encoder()
        if native is None:
            super().samples(block)
            return
        np = _np
        ffi, lib = native
        time, track, bits = block.time, block.track, block.numbers().view(np.uint64)
        if block.gap is not None:  # a gap writes nothing (a Perfetto counter has none)
            time, track, bits = time[~block.gap], track[~block.gap], bits[~block.gap]
        n = len(time)
        # a new track's description goes before its first sample: the rows are written in parts,
        # each one beginning where one of the block's tracks is first used (row 0 the first)
        first = np.full(len(block.tracks), n, dtype=np.int64)
        np.minimum.at(first, track, np.arange(n))
        uuids = np.zeros(len(block.tracks), dtype=np.uint64)
        starts = sorted(set(first.tolist()) - {n})  # (a track of gaps alone: none)
        seq = None

        def u64(a: Any) -> Any:
            return ffi.from_buffer("uint64_t[]", np.ascontiguousarray(a, dtype=np.uint64))

        for at, end in zip(starts, starts[1:] + [n]):
            for k in np.flatnonzero(first == at).tolist():
                described = block.tracks[k]
                uuids[k] = self._counter_track(block.pid, described.title, described.unit)
            if seq is None:
                seq = self._counter_sequence(block.pid, int(time[0]))
                # each sample against the latest one before it: the time since then, or its own
                latest = np.maximum.accumulate(np.concatenate(([seq.last], time)))
                ahead = time >= latest[:-1]
                stamp = np.where(ahead, time - latest[:-1], time)  # (a negative time: its 64 bits)
                seq.last = int(latest[-1])
            rows = slice(at, end)
            capacity = (end - at) * (lib.NVTXCFFI_PFTRACE_COUNTER_MAX + len(seq.seq_bytes))
            out = np.empty(capacity, dtype=np.uint8)
            size = lib.nvtxcffi_pftrace_counters(end - at, u64(stamp[rows]),
                                                 ffi.from_buffer("uint8_t[]", np.ascontiguousarray(~ahead[rows])),
                                                 u64(uuids[track[rows]]), u64(bits[rows]),
                                                 ffi.from_buffer("uint8_t[]", seq.seq_bytes), len(seq.seq_bytes),
                                                 ffi.from_buffer("uint8_t[]", out), capacity)
            if size < 0:  # pragma: no cover - the capacity above always suffices
                msg = "pftrace encoder: buffer too small"
                raise RuntimeError(msg)
            self._write(out[:size].tobytes())
        self.count += n

    def finish(self, timeline: Timeline, extra_metadata: Optional[Dict[str, Any]] = None) -> int:
        """Describe every process and thread track again with its final name; returns events written."""
        for pid, name in sorted(timeline.process_names.items()):
            uuid = self._process_track(pid, f"{name} ({pid})")
            self._describe_process(pid, uuid, f"{name} ({pid})")
        for pid, tid in sorted(timeline.threads | set(timeline.thread_names)):
            name = timeline.thread_names.get((pid, tid)) or ("main thread" if tid == pid else f"thread {tid}")
            uuid = self._thread_tracks.get((pid, tid))
            if uuid is None:
                self._thread_track(pid, tid, name)
            else:
                self._describe_thread(pid, tid, uuid, name)
        self._flush(0)
        return self.count

    def close(self) -> None:
        self._flush(0)  # what an interrupted conversion had: still a readable trace
        super().close()


def _async_style(domain: Optional[str], category: Optional[str], color: Optional[int]) -> bytes:
    """A start/end range's BEGIN fields after its name: ``categories`` (its domain and category
    name) and the ``color`` annotation, where it has them."""
    out = b""
    if domain is not None or category is not None:
        out += _f_str(22, ",".join(c for c in (domain, category) if c is not None))
    if color is not None:
        out += _f_bytes(4, _f_str(10, "color") + _f_str(6, _hex(color)))
    return out


def _byte_table(entries: List[bytes], index: Any) -> Tuple[Any, Any, Any]:
    """``entries[index[i]]`` for each row i as ``(data, start, length)`` (NumPy): the entries joined
    once, each row pointing into them."""
    np = _np
    length = np.fromiter(map(len, entries), dtype=np.int64, count=len(entries))
    start = np.cumsum(length) - length
    return np.frombuffer(b"".join(entries) or b"\0", dtype=np.uint8), start[index], length[index]


def _value_field(value: Any) -> bytes:
    """A DebugAnnotation value: ``int_value``/``uint_value``/``double_value``."""
    if isinstance(value, float):
        return _f_double(5, value)
    if value < 0:
        return _f_varint(4, value)
    return _f_varint(3, value) if value >= 1 << 63 else _f_varint(4, value)


def _annotation_payload(ptype: int, raw: int) -> bytes:
    value = payload_value(ptype, raw)
    if value is None:
        return b""
    return _f_bytes(4, _f_varint(1, 2) + _value_field(value))


# --------------------------------------------------------------------------- vectorised encoding

_NATIVE: List[Any] = []


def _native_encoder() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the packet encoder (nvtxcffi_pftrace_events), else None."""
    return _bulk.helper(_NATIVE, "nvtxcffi_pftrace_events")


def _async_encoder() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the start/end range encoder (nvtxcffi_pftrace_async)
    too, else None."""
    native = _native_encoder()
    return native if native is not None and hasattr(native[1], "nvtxcffi_pftrace_async") else None


def _counter_encoder() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the counter packet encoder
    (nvtxcffi_pftrace_counters) too, else None."""
    native = _native_encoder()
    return native if native is not None and hasattr(native[1], "nvtxcffi_pftrace_counters") else None


def _annotation_values(lib: Any, ptype: Any, raw: Any, named: Any) -> Tuple[Any, Any]:
    """The payload annotation of each row as the C encoder takes it: (value kind, 64 bits), the
    value :func:`_value_field` writes for :func:`~.columns.payload_value`'s number. An unnamed
    row (a pop) or an extension payload: none."""
    np = _np
    if not ptype.any():
        return np.zeros(len(ptype), dtype=np.uint8), raw
    slot, bits = scalar_payloads(ptype, raw)
    if not _VALUE_KIND:
        _VALUE_KIND.append(np.array([lib.NVTXCFFI_VALUE_INT] * 6 + [lib.NVTXCFFI_VALUE_NONE], dtype=np.uint8))
        _VALUE_KIND[0][[DOUBLE, FLOAT]] = lib.NVTXCFFI_VALUE_DOUBLE
    kind = np.where(named, _VALUE_KIND[0].take(slot), lib.NVTXCFFI_VALUE_NONE).astype(np.uint8)  # (slot -1: the last)
    past = (slot == UINT64) & (bits >= np.uint64(1 << 63))  # past int64's range: uint_value
    if past.any():
        kind[past & named] = lib.NVTXCFFI_VALUE_UINT
    return kind, bits


#: value kind by slot (the last entry: slot -1, none)
_VALUE_KIND: List[Any] = []


def _encode_native(native: Any, n: int, dt: Any, ev_type: Any, named: Any, name_iid: Any, cat_iid: Any,
                   has_color: Any, color_iid: Any, value_kind: Any, value: Any, seq_bytes: bytes) -> bytes:
    """The bytes :meth:`PerfettoWriter._encode_python` writes, from C; payloads given by
    :func:`_annotation_values`."""
    np = _np
    ffi, lib = native

    def u64(a: Any) -> Any:
        return ffi.from_buffer("uint64_t[]", np.ascontiguousarray(a, dtype=np.uint64))

    def u8(a: Any) -> Any:
        return ffi.from_buffer("uint8_t[]", np.ascontiguousarray(a, dtype=np.uint8))

    capacity = n * (lib.NVTXCFFI_PFTRACE_ROW_MAX + len(seq_bytes))
    out = np.empty(capacity, dtype=np.uint8)
    size = lib.nvtxcffi_pftrace_events(n, u64(dt), u64(ev_type), u8(named), u64(name_iid), u64(cat_iid),
                                       u8(has_color), u64(color_iid), u8(value_kind), u64(value),
                                       ffi.from_buffer("uint8_t[]", seq_bytes), len(seq_bytes),
                                       ffi.from_buffer("uint8_t[]", out), capacity)
    if size < 0:  # pragma: no cover - the capacity above always suffices
        msg = "pftrace encoder: buffer too small"
        raise RuntimeError(msg)
    return out[:size].tobytes()


def _varint_len(v: Any) -> Any:
    """Bytes of each value's varint (1..10)."""
    np = _np
    v = np.asarray(v, dtype=np.uint64)
    n = np.ones(len(v), dtype=np.int64)
    top = int(v.max()) if len(v) else 0
    k = 1
    while k < 10 and top >= 1 << (7 * k):  # only as many passes as the largest value needs
        n += v >= np.uint64(1 << (7 * k))
        k += 1
    return n


class _Fields:
    """Per-row byte strings made of fields (constants, varints, nested rows), built with NumPy.

    Writes go to every row at once; rows where a field is absent (or a varint byte past its
    length) write to a scratch byte past the end, so no per-field row selection is needed.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: List[Tuple[str, Any, Any, Any]] = []  # (kind, data, mask, lengths)
        self._length: Any = None

    def const(self, data: bytes, mask: Any) -> None:
        lengths = _np.where(mask, len(data), 0) if mask is not None else len(data)
        self.parts.append(("const", data, mask, lengths))

    def varint(self, values: Any, mask: Any) -> None:
        values = _np.asarray(values, dtype=_np.uint64)
        lengths = _varint_len(values)
        if mask is not None:
            lengths = _np.where(mask, lengths, 0)
        self.parts.append(("varint", values, mask, lengths))

    def nested(self, other: "_Fields") -> None:
        self.parts.append(("nested", other, None, other.length()))

    def length(self) -> Any:
        if self._length is None:
            total = _np.zeros(self.n, dtype=_np.int64)
            for part in self.parts:
                total += part[3]
            self._length = total
        return self._length

    def build(self) -> bytes:
        lengths = self.length()
        ends = _np.cumsum(lengths)
        size = int(ends[-1]) if self.n else 0
        out = _np.zeros(size + 1, dtype=_np.uint8)  # + the scratch byte
        self._scatter(out, ends - lengths, size)
        return out[:size].tobytes()

    def _scatter(self, out: Any, pos: Any, scratch: int) -> None:
        np = _np
        pos = pos.copy()
        for kind, data, mask, lengths in self.parts:
            if kind == "const":
                for j, byte in enumerate(data):
                    out[pos + j if mask is None else np.where(mask, pos + j, scratch)] = byte
            elif kind == "varint":
                v = data
                for k in range(int(lengths.max()) if self.n else 0):
                    byte = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
                    byte |= (lengths > k + 1).astype(np.uint8) << 7
                    out[np.where(lengths > k, pos + k, scratch)] = byte
            else:
                data._scatter(out, pos, scratch)
            pos += lengths
