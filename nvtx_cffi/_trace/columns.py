"""Read a recording as columns, one batch of events at a time: NumPy arrays or Python lists.

The tracer's conversion reads a recording this way instead of one :class:`~nvtx_cffi.recorder.Event`
object at a time: a :class:`RecordBatch` holds the NVTX events (push, pop, start, end, mark) of
part of one process's file as parallel columns, so the pairing (:mod:`.pairing`) and the writers
work on whole arrays. Memory is that of one batch whatever the recording's length.

Sources:

* ``recorder.blocks()`` — the recorder's columnar reader (READER-API in :mod:`nvtx_cffi.recorder`):
  its :data:`EVENT_DTYPE` blocks become batches (field views, no copy);
* without NumPy (PyPy), the Event API (``recorder.stream``): the same columns as Python lists.

Conventions (those of the READER-API): ``text`` indexes ``strings`` and 0 means no text
(``strings[0] is None``); ``ptype`` is the reader's payload code (``PT_*``, the recording format's
NVTXREC_PT_*: uint64, int64, double, uint32, int32, float, extension, unknown), ``payload`` its raw
64 bits;
``domain`` is the file's domain id (``batch.domains`` names it, 0 the default domain).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .. import _recording_format as _format, recorder as _rec

try:  # CPython fast path; PyPy and NumPy-less installs use lists
    import numpy as _np
except ImportError:  # pragma: no cover - exercised on PyPy
    _np = None

__all__ = ["RecordBatch", "Source", "ReadAt", "open_recording", "open_events", "HAVE_NUMPY", "BATCH_EVENTS",
           "payload_value", "PUSH", "POP", "START", "END", "MARK"]

HAVE_NUMPY = _np is not None

PUSH, POP, START, END, MARK = _rec.KIND_PUSH, _rec.KIND_POP, _rec.KIND_START, _rec.KIND_END, _rec.KIND_MARK
_KIND_CODES = {name: code for code, name in _format.KINDS.items()}
_F_COLOR = _rec.FLAG_COLOR
PT_EXT, PT_UNKNOWN = _rec.PT_EXT, _rec.PT_UNKNOWN
_PAYLOAD_VALUES = _format.PAYLOAD_VALUES  # value type code -> its value from the raw bits

#: Events per batch: big enough that NumPy's per-call costs vanish, small enough that a batch and
#: the temporaries of its pairing and formatting stay some tens of MB.
BATCH_EVENTS = 1 << 16



def payload_value(ptype: int, raw: int) -> Any:
    """The payload as a Python number from its ``PT_*`` code and raw bits (None: none or extension)."""
    value = _PAYLOAD_VALUES.get(ptype)
    if value is not None:
        return value(raw)
    return raw if ptype == PT_UNKNOWN else None


class RecordBatch:
    """NVTX events of part of one process's file, as parallel columns.

    Columns (NumPy arrays, or lists without NumPy): ``kind`` (1..5), ``tid``, ``time`` (ns),
    ``domain``, ``text``, ``color`` (ARGB), ``has_color`` (0/1), ``category``, ``ptype``,
    ``payload``, ``arg`` (range id of start/end). Within a thread, events are in time order;
    threads interleave by chunk. ``strings``, ``domains`` and ``category_names`` resolve the ids.
    """

    __slots__ = ("pid", "image", "numpy", "strings", "domains", "category_names", "kind", "tid", "time", "domain",
                 "text", "color", "has_color", "category", "ptype", "payload", "arg", "blobs", "samples",
                 "blob_order", "info")

    def __init__(self, pid: int, numpy: bool, strings: Any, domains: Dict[int, Optional[str]],
                 category_names: Dict[Tuple[Optional[str], int], str], image: int = 0) -> None:
        self.pid = pid
        #: exec generation: a program that exec()s itself keeps its pid, not its ranges
        self.image = image
        #: the reader's variable-length records of this batch (``recorder.Blob``: counter groups and
        #: samples, payload schemas): what counter tracks are made of
        self.blobs: List[Any] = []
        #: the small counter samples that ``blobs`` leaves out, as the reader's columns
        #: (``recorder.blocks(samples=True)``: ``EventBlock.samples``), and the place of each blob
        #: among them and the others (``EventBlock.blob_order``); None from the other sources
        self.samples: Any = None
        self.blob_order: Any = None
        #: the image's ``recorder.ProcessInfo`` (its payload-extension registrations, its clocks)
        self.info: Any = None
        self.numpy = numpy
        self.strings = strings
        self.domains = domains
        self.category_names = category_names

    def __len__(self) -> int:
        return len(self.kind)


class ReadAt:
    """Where a source's reader is: ``done`` of ``total`` bytes, noted as it reads (the reader calls it)."""

    __slots__ = ("done", "total")

    def __init__(self) -> None:
        self.done = self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total


class Source:
    """What the pairing needs of a recording: process infos, bounds, and :meth:`batches`.

    ``read_at`` (a :class:`ReadAt`) follows the reader through the record files as the batches are read.
    """

    numpy = False
    processes: Dict[int, Any]
    dropped = 0
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    total_bytes = 0

    def __init__(self, stream: Any, read_at: ReadAt) -> None:
        self._stream = stream
        self.read_at = read_at
        self.processes = stream.processes
        self.dropped = stream.dropped
        self.start_ns = stream.start_ns
        self.end_ns = stream.end_ns
        self.total_bytes = stream.total_bytes

    def batches(self) -> Iterator[RecordBatch]:
        raise NotImplementedError


def open_recording(source: Union[str, Sequence[str]], numpy: Optional[bool] = None, samples: bool = False) -> Source:
    """The best :class:`Source` for a directory (every ``*.nvtxrec``), one record file, or a list of
    record files (one run of a directory that holds several: :mod:`.runs`).

    ``numpy=False`` forces the pure-Python source (what PyPy gets); ``None``: NumPy when importable.
    ``samples``: the NumPy source's batches hold the small counter samples as columns
    (:attr:`RecordBatch.samples`).
    """
    if numpy is None:
        numpy = HAVE_NUMPY
    read_at = ReadAt()
    if isinstance(source, str):
        if not numpy or not HAVE_NUMPY:
            return _EventSource(_rec.stream(source, progress=read_at), read_at)
        return _BlockSource(_rec.blocks(source, progress=read_at, max_events=BATCH_EVENTS, samples=samples), read_at)
    paths = [str(p) for p in source]
    if not numpy or not HAVE_NUMPY:
        return _EventSource(_rec.EventStream(paths, read_at), read_at)
    return _BlockSource(_rec.BlockStream(paths, read_at, BATCH_EVENTS, False, samples), read_at)


def open_events(events: Sequence[Any], processes: Dict[int, Any], dropped: int = 0) -> Source:
    """A :class:`Source` of :class:`~nvtx_cffi.recorder.Event` objects held in memory (those of
    ``recorder.read()``, or made by hand), with the ``processes`` and ``dropped`` count a reader
    would give; its bounds are the events' earliest and latest times."""
    return _EventSource(_EventList(events, processes, dropped), ReadAt())


# --------------------------------------------------------------------------- recorder.blocks()


class _BlockSource(Source):
    numpy = True

    def batches(self) -> Iterator[RecordBatch]:
        for block in self._stream:
            ev = block.events
            info = block.info
            b = RecordBatch(block.pid, True, block.strings, block.domains,
                            dict(getattr(info, "category_names", None) or {}), getattr(block, "exec_gen", 0))
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
            b.blobs = list(getattr(block, "blobs", None) or [])
            b.samples, b.blob_order = block.samples, block.blob_order
            b.info = info
            yield b


# --------------------------------------------------------------------------- pure Python: the Event API


def _raw_payload(ptype: Optional[str], value: Any) -> Tuple[int, int]:
    """The (``PT_*`` code, raw bits) of a decoded :class:`~nvtx_cffi.recorder.Event` payload."""
    if ptype is None:
        return 0, 0
    if ptype in _format.PAYLOAD_FORMATS:
        return _format.PAYLOAD_CODES[ptype], _format.payload_bits(ptype, value)
    if ptype == "ext":
        return PT_EXT, 0
    return PT_UNKNOWN, int(value) & 0xFFFFFFFFFFFFFFFF  # "unknown(N)": the raw bits


class _EventSource(Source):
    """Batches of Python lists from the Event API (no NumPy needed): PyPy's path."""

    def batches(self) -> Iterator[RecordBatch]:
        domain_ids: Dict[int, Dict[Optional[str], int]] = {}
        images = {(i.pid, i.exec_gen): i for i in getattr(self._stream, "images", ())}
        batch: Optional[RecordBatch] = None
        ids: Dict[str, int] = {}
        for ev in self._stream:
            kind = _KIND_CODES.get(ev.kind)
            if kind is None and ev.kind != "blob":
                continue
            pid = ev.pid
            image = getattr(ev, "exec_gen", 0)
            if (batch is None or batch.pid != pid or batch.image != image or len(batch.kind) >= BATCH_EVENTS
                    or len(batch.blobs) >= BATCH_EVENTS):
                if batch is not None:
                    yield batch
                info = self.processes.get(pid)
                per_pid = domain_ids.setdefault(pid, {None: 0})
                batch = RecordBatch(pid, False, [None], {i: name for name, i in per_pid.items()},
                                    dict(getattr(info, "category_names", None) or {}), image)
                batch.info = images.get((pid, image))
                for name in ("kind", "tid", "time", "domain", "text", "color", "has_color", "category", "ptype",
                             "payload", "arg"):
                    setattr(batch, name, [])
                ids = {}
            if kind is None:  # counters, schemas, binary payloads (as Event objects): .counters
                batch.blobs.append(ev)
                continue
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


class _EventList:
    """Events held in memory, with what an :class:`~nvtx_cffi.recorder.EventStream` tells before its events."""

    images = ()
    total_bytes = 0

    def __init__(self, events: Sequence[Any], processes: Dict[int, Any], dropped: int) -> None:
        self._events = events
        self.processes = processes
        self.dropped = dropped
        times = [e.time_ns for e in events]
        self.start_ns = min(times) if times else None
        self.end_ns = max(times) if times else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._events)
