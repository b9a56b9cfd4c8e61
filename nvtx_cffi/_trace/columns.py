"""Read a recording as columns, one batch of events at a time: NumPy arrays or Python lists.

The tracer's conversion reads a recording this way instead of one :class:`~nvtx_cffi.recorder.Event`
object at a time: a :class:`RecordBatch` holds the NVTX events (push, pop, start, end, mark) of
part of one process's file as parallel columns, so the pairing (:mod:`.pairing`) and the writers
work on whole arrays. Memory is that of one batch whatever the recording's length.

Sources, best first (:func:`open_recording`):

* ``recorder.blocks()`` — the recorder's columnar reader (READER-API in :mod:`nvtx_cffi.recorder`):
  its :data:`EVENT_DTYPE` blocks become batches without a copy of the record file's contents;
* until that reader is implemented, :class:`_InterimBlocks` reads today's record format itself
  (a walk over the record sizes in Python, then NumPy gathers of the fields);
* without NumPy (PyPy), the Event API (``recorder.stream``): the same columns as Python lists.

Conventions (those of the READER-API): ``text`` indexes ``strings`` and 0 means no text
(``strings[0] is None``); ``ptype`` is the reader's payload code (``PT_*``: 1 uint64, 2 int64,
3 double, 4 uint32, 5 int32, 6 float, 7 extension, 8 unknown), ``payload`` its raw 64 bits;
``domain`` is the file's domain id (``batch.domains`` names it, 0 the default domain).
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .. import recorder as _rec

try:  # CPython fast path; PyPy and NumPy-less installs use lists
    import numpy as _np
except ImportError:  # pragma: no cover - exercised on PyPy
    _np = None

__all__ = ["RecordBatch", "Source", "open_recording", "HAVE_NUMPY", "BATCH_EVENTS", "payload_value",
           "PUSH", "POP", "START", "END", "MARK"]

HAVE_NUMPY = _np is not None

PUSH, POP, START, END, MARK = 1, 2, 3, 4, 5
_KIND_CODES = {"push": PUSH, "pop": POP, "start": START, "end": END, "mark": MARK}
_F_COLOR, _F_TEXT, _F_INHERITED = 1, 2, 8
PT_EXT, PT_UNKNOWN = 7, 8
_PT_CODES = {"uint64": 1, "int64": 2, "double": 3, "uint32": 4, "int32": 5, "float": 6, "ext": PT_EXT}

#: Events per batch: big enough that NumPy's per-call costs vanish, small enough that a batch and
#: the temporaries of its pairing and formatting stay some tens of MB.
BATCH_EVENTS = 1 << 18

_D, _Q, _F, _I = struct.Struct("<d"), struct.Struct("<Q"), struct.Struct("<f"), struct.Struct("<I")


def payload_value(ptype: int, raw: int) -> Any:
    """The payload as a Python number from its ``PT_*`` code and raw bits (None: none or extension)."""
    if ptype == 1 or ptype == PT_UNKNOWN:
        return raw
    if ptype == 2:
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if ptype == 3:
        return _D.unpack(_Q.pack(raw))[0]
    if ptype == 4:
        return raw & 0xFFFFFFFF
    if ptype == 5:
        v = raw & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    if ptype == 6:
        return _F.unpack(_I.pack(raw & 0xFFFFFFFF))[0]
    return None


class RecordBatch:
    """NVTX events of part of one process's file, as parallel columns.

    Columns (NumPy arrays, or lists without NumPy): ``kind`` (1..5), ``tid``, ``time`` (ns),
    ``domain``, ``text``, ``color`` (ARGB), ``has_color`` (0/1), ``category``, ``ptype``,
    ``payload``, ``arg`` (range id of start/end). Within a thread, events are in time order;
    threads interleave by chunk. ``strings``, ``domains`` and ``category_names`` resolve the ids.
    """

    __slots__ = ("pid", "numpy", "strings", "domains", "category_names", "kind", "tid", "time", "domain",
                 "text", "color", "has_color", "category", "ptype", "payload", "arg")

    def __init__(self, pid: int, numpy: bool, strings: Any, domains: Dict[int, Optional[str]],
                 category_names: Dict[Tuple[Optional[str], int], str]) -> None:
        self.pid = pid
        self.numpy = numpy
        self.strings = strings
        self.domains = domains
        self.category_names = category_names

    def __len__(self) -> int:
        return len(self.kind)


class Source:
    """What the pairing needs of a recording: process infos, bounds, and :meth:`batches`."""

    numpy = False
    processes: Dict[int, Any]
    dropped = 0
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    total_bytes = 0

    def batches(self) -> Iterator[RecordBatch]:
        raise NotImplementedError


def open_recording(source: str, numpy: Optional[bool] = None,
                   progress: Optional[Callable[[int, int], None]] = None) -> Source:
    """The best :class:`Source` for a directory (every ``*.nvtxrec``) or one record file.

    ``numpy=False`` forces the pure-Python source (what PyPy gets); ``None``: NumPy when importable.
    ``progress(done_bytes, total_bytes)`` is called as the batches are read.
    """
    if numpy is None:
        numpy = HAVE_NUMPY
    if not numpy or not HAVE_NUMPY:
        return _EventSource(source, progress)
    try:
        stream = _rec.blocks(source, progress=progress, max_events=BATCH_EVENTS)  # type: ignore[attr-defined]
    except (AttributeError, NotImplementedError):
        return _InterimBlocks(_rec._paths(source), progress)
    return _BlockSource(stream)


# --------------------------------------------------------------------------- recorder.blocks()


class _BlockSource(Source):
    numpy = True

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.processes = stream.processes
        self.dropped = stream.dropped
        self.start_ns = stream.start_ns
        self.end_ns = stream.end_ns
        self.total_bytes = stream.total_bytes

    def batches(self) -> Iterator[RecordBatch]:
        for block in self._stream:
            ev = block.events
            info = block.info
            b = RecordBatch(block.pid, True, block.strings, block.domains,
                            dict(getattr(info, "category_names", None) or {}))
            b.kind = ev["kind"]
            b.tid = ev["tid"]
            b.time = ev["time_ns"]
            b.domain = ev["domain"]
            b.text = ev["message"]
            b.color = ev["color"]
            b.has_color = ev["flags"] & _F_COLOR
            b.category = ev["category"]
            b.ptype = ev["payload_type"]
            b.payload = ev["payload"]
            b.arg = ev["range_id"]
            yield b


# --------------------------------------------------------------------------- today's format, NumPy

_RS = _rec._RECORD_SIZE  # 56: the record head; the text follows, padded to 8
#: File bytes per interim batch (some 70k records).
_BATCH_BYTES = 4 << 20


class _InterimBlocks(Source):
    """Today's record files read in bulk: until ``recorder.blocks`` is implemented.

    One pass: a Python walk finds the records (their sizes chain), NumPy gathers the fields.
    Definitions (domains, categories, thread names) apply from where they are read, so a domain
    used by one thread in a batch before another thread's later batch defines it is shown as
    ``<unknown domain N>`` (rare; ``recorder.blocks`` reads the whole file's table first).
    """

    numpy = True

    def __init__(self, paths: List[str], progress: Optional[Callable[[int, int], None]] = None) -> None:
        self._progress = progress
        self._files = []
        self.processes = {}
        firsts = []
        for path in paths:
            try:
                opened = _rec._open(path)
            except FileNotFoundError:
                continue
            if opened is None:
                continue
            f, size, header_size, chunk, pid, ppid, dropped, errors = opened
            try:
                first = self._first_time(f, header_size, chunk, size)
            finally:
                f.close()
            if first is not None:
                firsts.append(first)
            info = _rec.ProcessInfo(pid=pid, ppid=ppid, path=path, dropped=dropped, write_errors=errors)
            self.processes[pid] = info
            self._files.append((path, size, info))
            self.total_bytes += size
        self.dropped = sum(p.dropped for p in self.processes.values())
        self.start_ns = min(firsts) if firsts else None

    @staticmethod
    def _first_time(f: Any, header_size: int, chunk: int, size: int) -> Optional[int]:
        """Earliest record of a file: each chunk's first record is its earliest (one thread, in order)."""
        first = None
        for pos in range(header_size, size, chunk):
            f.seek(pos)
            head = f.read(_RS)
            if len(head) < _RS:
                break
            n = int.from_bytes(head[:4], "little")
            if n < _RS or n & 7:
                continue
            t = int.from_bytes(head[16:24], "little")
            if first is None or t < first:
                first = t
        return first

    def batches(self) -> Iterator[RecordBatch]:
        progress = self._progress
        done = 0
        for path, size, info in self._files:
            try:
                yield from self._file(path, info, progress, done)
            except FileNotFoundError:
                pass
            done += size
            if progress is not None:
                progress(done, self.total_bytes)

    def _file(self, path: str, info: Any, progress: Any, done: int) -> Iterator[RecordBatch]:
        opened = _rec._open(path)
        if opened is None:
            return
        f, size, header_size, chunk, pid, _ppid, _dropped, _errors = opened
        per_batch = max(1, _BATCH_BYTES // chunk) * chunk
        domains: Dict[int, Optional[str]] = {0: None}
        categories: Dict[Tuple[Optional[str], int], str] = info.category_names
        try:
            f.seek(header_size)
            pos = header_size
            while pos < size:
                buf = f.read(min(per_batch, size - pos))
                if not buf:
                    return
                pos += len(buf)
                batch = _gather(buf, _walk(buf, chunk), pid, domains, categories, info.thread_names)
                if len(batch):
                    yield batch
                if progress is not None:
                    progress(min(done + pos, self.total_bytes), self.total_bytes)
        finally:
            f.close()


def _walk(buf: bytes, chunk: int) -> List[int]:
    """Offsets (in 4-byte words) of the records in ``buf`` (whole chunks): each chunk's size chain.

    A chunk ends at a size of 0 (its unused rest) or one that is not a multiple of 8, is below a
    record head or would leave the chunk (a torn record), as :mod:`nvtx_cffi.recorder` reads it.
    """
    words = memoryview(buf)[: len(buf) & ~3].cast("I")
    starts: List[int] = []
    append = starts.append
    blen = len(buf)
    for cstart in range(0, blen, chunk):
        off = cstart >> 2
        end = min(cstart + chunk, blen) >> 2
        last = end - (_RS >> 2)
        while off <= last:
            n = words[off]
            if n < _RS or n & 7 or off + (n >> 2) > end:
                break
            append(off)
            off += n >> 2
    return starts


def _gather(buf: bytes, word_starts: List[int], pid: int, domains: Dict[int, Optional[str]],
            categories: Dict[Tuple[Optional[str], int], str], thread_names: Dict[int, str]) -> RecordBatch:
    np = _np
    batch = RecordBatch(pid, True, [None], domains, categories)
    usable = len(buf) & ~7
    u8 = np.frombuffer(buf, dtype=np.uint8, count=usable)
    u32 = u8.view("<u4")
    w = np.asarray(word_starts, dtype=np.int64)
    tlen = u32[w + 9]
    w = w[(_RS + tlen) <= u32[w]]  # a torn record (text past its size) is skipped
    head = u8[(w << 2) + 4]
    flags = u8[(w << 2) + 6]
    definition = np.flatnonzero(head >= 6)
    if len(definition):
        _definitions(buf, u8, u32, w[definition], domains, categories, thread_names)
    w = w[head < 6]
    flags = flags[head < 6]
    tlen = u32[w + 9]
    u64 = u8.view("<u8")
    w2 = w >> 1  # in 8-byte words
    batch.kind = u8[(w << 2) + 4]
    batch.tid = u32[w + 2]
    batch.category = u32[w + 3]
    batch.time = u64[w2 + 2].astype(np.int64)
    batch.domain = u32[w + 6]
    batch.color = u32[w + 7]
    raw_type = u8.view("<i4")[w + 8]
    batch.ptype = np.where((raw_type >= 0) & (raw_type <= 6), raw_type,
                           np.where(raw_type == _rec._PAYLOAD_EXT, PT_EXT, PT_UNKNOWN)).astype(np.uint8)
    batch.payload = u64[w2 + 5]
    batch.arg = u64[w2 + 6]
    batch.has_color = flags & _F_COLOR
    batch.text = _texts(buf, u64, w, w2, tlen, (flags & _F_TEXT) != 0, batch.strings)
    return batch


def _definitions(buf: bytes, u8: Any, u32: Any, w: Any, domains: Dict[int, Optional[str]],
                 categories: Dict[Tuple[Optional[str], int], str], thread_names: Dict[int, str]) -> None:
    """Apply the batch's definition records (few): domains, category and thread names."""
    unpack = _rec._RECORD.unpack_from
    for off in (w << 2).tolist():
        (_n, kind, _api, flags, _aux, _tid, _cat, _t, dom, _color, _pt, tlen, _payload, arg) = unpack(buf, off)
        text = buf[off + _RS:off + _RS + tlen].decode("utf-8", "replace") if flags & _F_TEXT else None
        if kind == _rec._K_DOMAIN:
            domains[arg] = text if text is not None else ""
        elif kind == _rec._K_CATEGORY:
            categories[(_rec._domain_name(domains, dom) if dom else None, arg)] = text or ""
        elif kind == _rec._K_THREAD:
            thread_names[arg] = text or ""


def _texts(buf: bytes, u64: Any, w: Any, w2: Any, tlen: Any, has_text: Any, strings: List[Any]) -> Any:
    """Per record: index into ``strings`` (0: no text); texts of up to 7 bytes interned as integers."""
    np = _np
    text = np.zeros(len(w), dtype=np.int64)
    with_text = np.flatnonzero(has_text)
    if not len(with_text):
        return text
    lens = tlen[with_text].astype(np.uint64)
    short = lens <= 7
    sidx = with_text[short]
    if len(sidx):
        # Up to 7 bytes of text plus the length in the top byte: one uint64 names the text exactly.
        slen = lens[short]
        first = u64[np.minimum(w2[sidx] + 7, len(u64) - 1)]  # the text starts 56 bytes (7 words) in
        mask = (np.uint64(1) << (slen * np.uint64(8))) - np.uint64(1)
        keys = (first & mask) | (slen << np.uint64(56))
        uniq, inverse = np.unique(keys, return_inverse=True)
        base = len(strings)
        for key in uniq.tolist():
            n = key >> 56
            strings.append((key & ((1 << (8 * n)) - 1)).to_bytes(n, "little").decode("utf-8", "replace"))
        text[sidx] = inverse.reshape(-1) + base
    lidx = with_text[~short]
    if len(lidx):
        ids: Dict[bytes, int] = {}
        out = []
        for off, n in zip(((w[lidx] << 2) + _RS).tolist(), tlen[lidx].tolist()):
            raw = buf[off:off + n]
            i = ids.get(raw)
            if i is None:
                i = ids[raw] = len(strings)
                strings.append(raw.decode("utf-8", "replace"))
            out.append(i)
        text[lidx] = out
    return text


# --------------------------------------------------------------------------- pure Python: the Event API


def _raw_payload(ptype: Optional[str], value: Any) -> Tuple[int, int]:
    """The (``PT_*`` code, raw bits) of a decoded :class:`~nvtx_cffi.recorder.Event` payload."""
    if ptype is None:
        return 0, 0
    code = _PT_CODES.get(ptype)
    if code is None:
        return PT_UNKNOWN, int(value) & 0xFFFFFFFFFFFFFFFF
    if code == 3:
        return code, _Q.unpack(_D.pack(value))[0]
    if code == 6:
        return code, _I.unpack(_F.pack(value))[0]
    if code == PT_EXT:
        return code, 0
    return code, int(value) & 0xFFFFFFFFFFFFFFFF


class _EventSource(Source):
    """Batches of Python lists from the Event API (no NumPy needed): PyPy's path."""

    def __init__(self, source: str, progress: Optional[Callable[[int, int], None]] = None) -> None:
        self._source = source
        stream = _rec.stream(source, progress=progress)
        self._stream = stream
        self.processes = stream.processes
        self.dropped = stream.dropped
        self.start_ns = stream.start_ns
        self.end_ns = stream.end_ns
        self.total_bytes = stream.total_bytes

    def batches(self) -> Iterator[RecordBatch]:
        domain_ids: Dict[int, Dict[Optional[str], int]] = {}
        batch: Optional[RecordBatch] = None
        ids: Dict[str, int] = {}
        for ev in self._stream:
            kind = _KIND_CODES.get(ev.kind)
            if kind is None:
                continue
            pid = ev.pid
            if batch is None or batch.pid != pid or len(batch.kind) >= BATCH_EVENTS:
                if batch is not None:
                    yield batch
                info = self.processes.get(pid)
                per_pid = domain_ids.setdefault(pid, {None: 0})
                batch = RecordBatch(pid, False, [None], {i: name for name, i in per_pid.items()},
                                    dict(getattr(info, "category_names", None) or {}))
                for name in ("kind", "tid", "time", "domain", "text", "color", "has_color", "category", "ptype",
                             "payload", "arg"):
                    setattr(batch, name, [])
                ids = {}
            per_pid = domain_ids[pid]
            dom = per_pid.get(ev.domain)
            if dom is None:
                dom = per_pid[ev.domain] = len(per_pid)
                batch.domains[dom] = ev.domain
            message = ev.message
            if message is None:
                text = 0
            else:
                text = ids.get(message)
                if text is None:
                    text = ids[message] = len(batch.strings)
                    batch.strings.append(message)
            ptype, raw = _raw_payload(ev.payload_type, ev.payload)
            batch.kind.append(kind)
            batch.tid.append(ev.tid)
            batch.time.append(ev.time_ns)
            batch.domain.append(dom)
            batch.text.append(text)
            batch.color.append(ev.color or 0)
            batch.has_color.append(1 if ev.color is not None else 0)
            batch.category.append(ev.category)
            batch.ptype.append(ptype)
            batch.payload.append(raw)
            batch.arg.append(ev.range_id or 0)
        if batch is not None:
            yield batch
