"""Record every NVTX event of a process, without Nsight, and read the recordings back.

The recorder is an NVTX injection library (``libnvtx_recorder.so``, shipped in this package).
Start a process with :func:`environment` added to its environment and every NVTX client in it
(nvtx-cffi, NVIDIA's ``nvtx`` package, C/C++ libraries with the NVTX v3 headers) is recorded::

    env = {**os.environ, **recorder.environment("/tmp/trace")}
    subprocess.run([sys.executable, "train.py"], env=env)
    rec = recorder.read("/tmp/trace")
    for event in rec.events: ...

Each process writes one file, ``<dir>/nvtx-<pid>-<stamp>.nvtxrec``, straight into a shared memory
mapping of the file: events survive ``os._exit()``, crashes and SIGKILL with no flush step, and a
forked child starts a file of its own. ``NVTX_CFFI_RECORD_MAX_BYTES`` bounds a file (default
4 GiB); events past the bound are dropped and counted (:attr:`ProcessInfo.dropped`). Without
``NVTX_CFFI_RECORD_DIR`` the recorder still answers NVTX (handles, range ids) but records nothing.

Inside a recorded process, :func:`capture` collects the events of a block of code.

:func:`read` loads a whole recording, sorted by time (memory grows with its length: some 700
bytes per event); :func:`iter_events` / :func:`stream` yield one event at a time instead, for
recordings of any length.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import glob
import io
import operator
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

__all__ = [
    "Capture",
    "Event",
    "EventStream",
    "ProcessInfo",
    "Recording",
    "capture",
    "current_file",
    "environment",
    "flush",
    "iter_events",
    "library_path",
    "loaded",
    "null_tool_path",
    "read",
    "read_file",
    "stream",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAGIC = b"NVTXREC1"
# struct nvtxrec_file_header / struct nvtxrec_record in c/recorder.h
_HEADER = struct.Struct("<8sIIIIIIQQQQQ")
_RECORD = struct.Struct("<IBBBBIIQIIiIQQ")
_RECORD_SIZE = _RECORD.size  # 56

_KINDS = (None, "push", "pop", "start", "end", "mark", "domain", "string", "category", "thread_name",
          "resource_name", "blob")
_EVENT_KINDS = frozenset((1, 2, 3, 4, 5))
_K_START, _K_END, _K_DOMAIN, _K_STRING, _K_CATEGORY, _K_THREAD, _K_RESOURCE, _K_BLOB = 3, 4, 6, 7, 8, 9, 10, 11
_APIS = ("ex", "ascii", "unicode", "domain")
_RESOURCES = (None, "cuda_device", "cuda_context", "cuda_stream", "cuda_event")
_F_COLOR, _F_TEXT, _F_TRUNCATED, _F_INHERITED = 1, 2, 4, 8
_PAYLOAD_EXT = struct.unpack("<i", struct.pack("<I", 0xDFBD0009))[0]
_D = struct.Struct("<d")
_Q = struct.Struct("<Q")
_F = struct.Struct("<f")
_I = struct.Struct("<I")

Payload = Union[int, float, None]


@dataclass(frozen=True)
class Event:
    """One recorded NVTX call (or naming/definition call) of one thread of one process."""

    kind: str
    """``push pop start end mark`` or ``domain string category thread_name resource_name``."""
    time_ns: int
    """CLOCK_MONOTONIC nanoseconds (comparable across processes, as ``time.monotonic_ns()``)."""
    pid: int
    tid: int
    """OS thread id (``gettid``, as ``threading.get_native_id()``)."""
    domain: Optional[str]
    """Domain name; ``None`` is NVTX's default domain. A ``domain`` event carries the new domain."""
    message: Optional[str]
    """Message of push/start/mark (registered strings resolved, wide strings decoded)."""
    color: Optional[int]
    """ARGB as given; ``None`` when no colour was given."""
    category: int
    """Category id, 0 for none (for a ``category`` event: the category being named)."""
    payload: Payload
    payload_type: Optional[str]
    """``int64 uint64 int32 uint32 double float``, ``ext`` (payload extension), ``unknown(N)``."""
    range_id: Optional[int]
    """Range id for ``start`` / ``end``."""
    api: str
    """Entry point: ``domain`` (nvtxDomain*), ``ex`` (nvtxMarkEx, nvtxRangePushEx, nvtxRangePop,
    nvtxRangeEnd...), ``ascii`` (...A), ``unicode`` (...W)."""
    name: Optional[str] = None
    """The name given, for domain / string (the text) / category / thread_name / resource_name."""
    target: Optional[int] = None
    """Category id, OS thread id, resource handle value, string id or domain id of a naming event."""
    resource: Optional[str] = None
    """``cuda_device cuda_context cuda_stream cuda_event`` for ``resource_name``."""
    truncated: bool = False
    """The message (or name) was longer than a record may carry (64 KiB) and was cut."""
    data: Optional[bytes] = None
    """Raw bytes of a ``blob`` event (payload extension: schemas, counters, binary payloads); its
    ``name`` is the blob kind (:data:`BLOB_KINDS`), ``target`` the 64-bit argument."""


@dataclass
class ProcessInfo:
    """What a record file says about its process."""

    pid: int
    ppid: int
    path: str
    dropped: int
    """Events the process could not record (file bound reached, write errors)."""
    thread_names: Dict[int, str] = field(default_factory=dict)
    category_names: Dict[Tuple[Optional[str], int], str] = field(default_factory=dict)
    write_errors: int = 0
    """Failed chunk allocations (disk full...); the events they cost are in ``dropped``."""


@dataclass
class Recording:
    """Events of all processes of a recording directory, sorted by time (stable)."""

    events: List[Event]
    processes: Dict[int, ProcessInfo]
    dropped: int


class Capture(List[Event]):
    """The list :func:`capture` fills: this process's events of the block, sorted by time."""

    start_ns: int = 0
    end_ns: int = 0
    dropped: int = 0
    """Events this process dropped during the block."""


# --------------------------------------------------------------------------- paths, environment


def library_path() -> str:
    """Absolute path of ``libnvtx_recorder.so`` in the installed package."""
    return os.path.join(_HERE, "libnvtx_recorder.so")


def null_tool_path() -> str:
    """Absolute path of ``libnvtx_null_tool.so``: an NVTX tool that does nothing (benchmarks)."""
    return os.path.join(_HERE, "libnvtx_null_tool.so")


def environment(directory: Union[str, "os.PathLike[str]"], *, max_bytes: Optional[int] = None) -> Dict[str, str]:
    """Environment variables that attach the recorder to a process started with them.

    ``directory`` receives one file per process (made absolute here; created if missing).
    ``max_bytes`` bounds each process's file; past it, events are dropped and counted.
    """
    env = {
        "NVTX_INJECTION64_PATH": library_path(),
        "NVTX_CFFI_RECORD_DIR": os.path.abspath(os.fspath(directory)),
    }
    if max_bytes is not None:
        env["NVTX_CFFI_RECORD_MAX_BYTES"] = str(int(max_bytes))
    return env


# --------------------------------------------------------------------------- in-process API

_lib_cache: Optional[ctypes.CDLL] = None


def _loaded_lib() -> Optional[ctypes.CDLL]:
    global _lib_cache
    if _lib_cache is not None:
        return _lib_cache
    candidates = [library_path()]
    injected = os.environ.get("NVTX_INJECTION64_PATH")
    if injected and injected not in candidates:
        candidates.append(injected)
    for path in candidates:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
            lib.nvtx_recorder_file.restype = ctypes.c_char_p
        except (OSError, AttributeError):
            continue
        lib.nvtx_recorder_flush.restype = ctypes.c_int
        lib.nvtx_recorder_dropped.restype = ctypes.c_uint64
        _lib_cache = lib
        return lib
    return None


def loaded() -> bool:
    """Is the recorder loaded in this process (NVTX loads it at the process's first NVTX call)?"""
    return _loaded_lib() is not None


def flush() -> None:
    """Make this process's events so far visible to readers; a no-op when the recorder is not loaded.

    Records go to a shared mapping of the file, so they are visible at once; this also creates the
    file if it is still due (a forked child creates its file at its first event).
    """
    lib = _loaded_lib()
    if lib is not None:
        lib.nvtx_recorder_flush()


def current_file() -> Optional[str]:
    """This process's record file, when the recorder is loaded and recording."""
    lib = _loaded_lib()
    if lib is None:
        return None
    path = lib.nvtx_recorder_file()
    return os.fsdecode(path) if path else None


def _dropped_here() -> int:
    lib = _loaded_lib()
    return int(lib.nvtx_recorder_dropped()) if lib is not None else 0


def _initialize_nvtx() -> None:
    """Make NVTX load its tool now (it would at the first NVTX call), through nvtx-cffi's shim."""
    if not os.environ.get("NVTX_INJECTION64_PATH"):
        return
    try:
        from nvtx_cffi._native._ffi import lib  # type: ignore[import-not-found]

        lib.nvtxcffi_initialize()
    except (ImportError, AttributeError):
        pass


@contextlib.contextmanager
def capture() -> Iterator[Capture]:
    """Collect this process's events recorded inside the ``with`` block::

        with recorder.capture() as events:
            work()
        assert [e.message for e in events if e.kind == "push"] == [...]

    The list is filled on exit, sorted by time; its ``dropped`` attribute counts events this
    process dropped during the block. Raises :class:`RuntimeError` if the recorder is not loaded
    in this process or not recording (no ``NVTX_CFFI_RECORD_DIR``).
    """
    if not loaded():
        _initialize_nvtx()
    if not loaded():
        raise RuntimeError(
            "the NVTX recorder is not loaded in this process: start the process with "
            "nvtx_cffi.recorder.environment(directory) in its environment "
            "(NVTX_INJECTION64_PATH must name libnvtx_recorder.so before the first NVTX call)"
        )
    flush()
    path = current_file()
    if path is None:
        raise RuntimeError("the NVTX recorder is loaded but not recording: NVTX_CFFI_RECORD_DIR is not set")
    result = Capture()
    dropped_before = _dropped_here()
    result.start_ns = time.monotonic_ns()
    try:
        yield result
    finally:
        flush()
        result.end_ns = time.monotonic_ns()
        result.dropped = _dropped_here() - dropped_before
        pid = os.getpid()
        start, end = result.start_ns, result.end_ns
        result[:] = [
            e for e in read_file(path).events if e.pid == pid and start <= e.time_ns <= end
        ]


# --------------------------------------------------------------------------- reading

ProgressFn = Callable[[int, int], None]


def _payload(ptype: int, raw: int) -> Tuple[Payload, Optional[str]]:
    if ptype == 0:
        return None, None
    if ptype == 1:
        return raw, "uint64"
    if ptype == 2:
        return raw - (1 << 64) if raw >= 1 << 63 else raw, "int64"
    if ptype == 3:
        return _D.unpack(_Q.pack(raw))[0], "double"
    if ptype == 4:
        return raw & 0xFFFFFFFF, "uint32"
    if ptype == 5:
        v = raw & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v, "int32"
    if ptype == 6:
        return _F.unpack(_I.pack(raw & 0xFFFFFFFF))[0], "float"
    if ptype == _PAYLOAD_EXT:
        return None, "ext"
    return raw, f"unknown({ptype})"


_MISSING = object()
_time_key = operator.attrgetter("time_ns")
_set = object.__setattr__


class _FileScan:
    """What the definitions pass learnt about one record file (see :func:`_scan`)."""

    __slots__ = ("path", "size", "info", "domains", "first_ns", "last_ns")

    def __init__(self, path: str, size: int, info: ProcessInfo, domains: Dict[int, Optional[str]],
                 first_ns: Optional[int], last_ns: Optional[int]) -> None:
        self.path = path
        self.size = size
        self.info = info
        self.domains = domains
        self.first_ns = first_ns
        self.last_ns = last_ns


def _open(path: str) -> Optional[tuple]:
    """``(file, size, header_size, chunk, pid, ppid, dropped, write_errors)``; None if not a record file.

    The file is read chunk by chunk with plain reads, not mapped: pages of a mapping that were read
    would count in the reader's resident memory until it unmaps the whole file.
    """
    f = open(path, "rb")
    try:
        size = os.fstat(f.fileno()).st_size
        head = f.read(_HEADER.size)
        if size < _HEADER.size or len(head) < _HEADER.size:
            f.close()
            return None
        (magic, _version, header_size, chunk, pid, ppid, rsize, _start, _rt, _max, dropped,
         write_errors) = _HEADER.unpack(head)
    except BaseException:
        f.close()
        raise
    if magic != _MAGIC or chunk == 0 or rsize != _RECORD_SIZE:
        f.close()
        return None
    return f, size, header_size, chunk, pid, ppid, dropped, write_errors


def _chunks(f: "io.BufferedReader", header_size: int, chunk: int, size: int) -> Iterator[bytes]:
    """The file's chunks (one thread's records each, then zero padding), one buffer at a time."""
    f.seek(header_size)
    for _cstart in range(header_size, size, chunk):
        data = f.read(chunk)
        if not data:
            return
        yield data


def _domain_name(domains: Dict[int, Optional[str]], i: int) -> Optional[str]:
    name = domains.get(i, _MISSING)
    return f"<unknown domain {i}>" if name is _MISSING else name  # type: ignore[return-value]


def _scan(path: str) -> Optional[_FileScan]:
    """First pass over one file: definitions (domains, categories, thread names) and time bounds.

    Only definition records are decoded; the rest is a header walk. It lets the event pass name
    every event's domain as it goes (a domain may be defined by another thread whose chunk comes
    later in the file) and gives the recording's first timestamp before any event is converted.
    """
    opened = _open(path)
    if opened is None:
        return None
    f, size, header_size, chunk, pid, ppid, dropped, write_errors = opened
    info = ProcessInfo(pid=pid, ppid=ppid, path=path, dropped=dropped, write_errors=write_errors)
    domains: Dict[int, Optional[str]] = {0: None}
    categories: list = []
    first: Optional[int] = None
    last: Optional[int] = None
    unpack = _RECORD.unpack_from
    try:
        for buf in _chunks(f, header_size, chunk, size):
            cend = len(buf)
            off = 0
            while off + _RECORD_SIZE <= cend:
                (n, kind, _api, flags, _aux, _tid, _category, time_ns, dom, _color, _ptype, tlen, _payload,
                 arg) = unpack(buf, off)
                if n < _RECORD_SIZE or n & 7 or off + n > cend or _RECORD_SIZE + tlen > n:
                    break  # unused rest of the chunk, or a torn/cut record (as in _events)
                if kind >= _K_DOMAIN:
                    text = (buf[off + _RECORD_SIZE:off + _RECORD_SIZE + tlen].decode("utf-8", "replace")
                            if flags & _F_TEXT else None)
                    if kind == _K_DOMAIN:
                        domains[arg] = text if text is not None else ""
                    elif kind == _K_CATEGORY:
                        categories.append((dom, arg, text or ""))
                    elif kind == _K_THREAD:
                        info.thread_names[arg] = text or ""
                    if flags & _F_INHERITED:
                        off += n
                        continue  # a definition copied from the parent at fork: no event
                off += n
                if first is None or time_ns < first:
                    first = time_ns
                if last is None or time_ns > last:
                    last = time_ns
    finally:
        f.close()
    for dom, cat, name in categories:
        info.category_names[(_domain_name(domains, dom) if dom else None, cat)] = name
    return _FileScan(path, size, info, domains, first, last)


def _events(scan: _FileScan, progress: Optional[ProgressFn], done: int, total: int) -> Iterator[Event]:
    """Second pass over one file: its events, in file order (per thread: time order)."""
    opened = _open(scan.path)
    if opened is None:
        return
    f, size, header_size, chunk, pid, _ppid, _dropped, _write_errors = opened
    try:
        unpack = _RECORD.unpack_from
        new = object.__new__
        set_ = _set
        domains = dict(scan.domains)
        texts: Dict[bytes, str] = {}
        step = 0
        pos = header_size
        for buf in _chunks(f, header_size, chunk, size):
            cend = len(buf)
            pos += cend
            off = 0
            while off + _RECORD_SIZE <= cend:
                (n, kind, api, flags, aux, tid, category, time_ns, dom, color, ptype, tlen, payload,
                 arg) = unpack(buf, off)
                if n < _RECORD_SIZE or n & 7 or off + n > cend or _RECORD_SIZE + tlen > n:
                    break  # unused rest of the chunk, or a torn/cut record
                if kind == _K_BLOB:
                    off += n
                    ev = new(Event)
                    set_(ev, "__dict__", {
                        "kind": "blob", "time_ns": time_ns, "pid": pid, "tid": tid,
                        "domain": _domain_name(domains, dom) if dom else None, "message": None,
                        "color": None, "category": 0, "payload": None, "payload_type": None,
                        "range_id": None, "api": "ex", "name": BLOB_KINDS.get(aux, f"unknown({aux})"),
                        "target": arg, "resource": None, "truncated": bool(flags & _F_TRUNCATED),
                        "data": bytes(buf[off - n + _RECORD_SIZE:off - n + _RECORD_SIZE + tlen])})
                    yield ev
                    continue
                if flags & _F_TEXT:
                    raw = buf[off + _RECORD_SIZE:off + _RECORD_SIZE + tlen]
                    text = texts.get(raw)
                    if text is None:
                        if len(texts) > 100000:
                            texts.clear()
                        text = texts[raw] = raw.decode("utf-8", "replace")
                else:
                    text = None
                off += n
                if dom:
                    domain = domains.get(dom, _MISSING)
                    if domain is _MISSING:  # defined after the scan (file still being written)
                        domain = _domain_name(domains, dom)
                else:
                    domain = None
                if kind < 6:  # push pop start end mark
                    if ptype:
                        value, vtype = _payload(ptype, payload)
                    else:
                        value = vtype = None
                    values = {
                        "kind": _KINDS[kind], "time_ns": time_ns, "pid": pid, "tid": tid,
                        "domain": domain, "message": text,
                        "color": color if flags & _F_COLOR else None, "category": category,
                        "payload": value, "payload_type": vtype,
                        "range_id": arg if kind == _K_START or kind == _K_END else None,
                        "api": _APIS[api] if api < 4 else str(api), "name": None, "target": None,
                        "resource": None, "truncated": bool(flags & _F_TRUNCATED), "data": None,
                    }
                else:
                    if kind == _K_DOMAIN:
                        domain = domains[arg] = text if text is not None else ""
                    if flags & _F_INHERITED:
                        continue
                    if kind == _K_RESOURCE:
                        target = arg - (1 << 64) if aux == 1 and arg >= 1 << 63 else arg
                        resource = _RESOURCES[aux] if aux < len(_RESOURCES) else f"unknown({aux})"
                    else:
                        target, resource = arg, None
                    values = {
                        "kind": _KINDS[kind] if kind < len(_KINDS) else f"unknown({kind})",
                        "time_ns": time_ns, "pid": pid, "tid": tid, "domain": domain,
                        "message": None, "color": None,
                        "category": category if kind == _K_CATEGORY else 0, "payload": None,
                        "payload_type": None, "range_id": None,
                        "api": _APIS[api] if api < 4 else str(api), "name": text, "target": target,
                        "resource": resource, "truncated": bool(flags & _F_TRUNCATED), "data": None,
                    }
                ev = new(Event)
                set_(ev, "__dict__", values)  # frozen: skip the per-field __setattr__ of __init__
                yield ev
            if progress is not None:
                step += cend
                if step >= 1 << 24:
                    progress(min(done + pos, total), total)
                    step = 0
    finally:
        f.close()


def _files(directory: Union[str, "os.PathLike[str]"]) -> List[str]:
    return sorted(glob.glob(os.path.join(os.fspath(directory), "*.nvtxrec")))


class EventStream:
    """The events of a recording, one at a time: memory for one event, not for the recording.

    Built by :func:`stream`. Creating it reads the record files once for their definitions (domain,
    category and thread names) and time bounds, so :attr:`processes`, :attr:`start_ns` and
    :attr:`end_ns` are known before the first event. Iterating reads the files again and yields
    :class:`Event` objects file by file (a file is one process), in file order: one thread's events
    come in time order (a thread writes its chunks in order), but threads and processes interleave
    only by chunk, so the stream as a whole is *not* sorted by time. Iterate again to re-read.

    >>> s = stream("/tmp/trace")  # doctest: +SKIP
    >>> pushes = sum(1 for e in s if e.kind == "push")  # doctest: +SKIP
    """

    def __init__(self, paths: List[str], progress: Optional[ProgressFn] = None) -> None:
        scans: List[_FileScan] = []
        for path in paths:
            try:
                scan = _scan(path)
            except FileNotFoundError:
                scan = None
            if scan is not None:
                scans.append(scan)
        self._scans = scans
        self._progress = progress
        #: pid -> what its file says (names complete: from the whole file)
        self.processes: Dict[int, ProcessInfo] = {s.info.pid: s.info for s in scans}
        #: events the processes could not record
        self.dropped: int = sum(p.dropped for p in self.processes.values())
        firsts = [s.first_ns for s in scans if s.first_ns is not None]
        lasts = [s.last_ns for s in scans if s.last_ns is not None]
        #: time of the earliest / latest event of the recording (None when there is none)
        self.start_ns: Optional[int] = min(firsts) if firsts else None
        self.end_ns: Optional[int] = max(lasts) if lasts else None
        #: bytes the iteration reads (what ``progress(done, total)`` counts up to)
        self.total_bytes: int = sum(s.size for s in scans)

    def __iter__(self) -> Iterator[Event]:
        progress = self._progress
        total = self.total_bytes
        done = 0
        for scan in self._scans:
            try:
                yield from _events(scan, progress, done, total)
            except FileNotFoundError:
                pass
            done += scan.size
            if progress is not None:
                progress(done, total)


def _paths(source: Union[str, "os.PathLike[str]"]) -> List[str]:
    path = os.fspath(source)
    return [path] if os.path.isfile(path) else _files(path)


def stream(source: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None) -> EventStream:
    """An :class:`EventStream` over a recording directory (every ``*.nvtxrec``) or one record file.

    ``progress(done_bytes, total_bytes)`` is called as the iteration reads the files::

        s = recorder.stream("/tmp/trace")
        print(s.start_ns, sorted(s.processes))
        for event in s:   # one Event at a time, per file, per thread chunk
            ...
    """
    return EventStream(_paths(source), progress)


def iter_events(source: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None
                ) -> Iterator[Event]:
    """Yield the events of a recording directory or record file one at a time (see :class:`EventStream`).

    Memory stays that of one event whatever the recording's length; the order is per file and per
    thread chunk (each thread in time order), not globally by time: sort yourself if you need it,
    or use :func:`read`::

        for event in recorder.iter_events("/tmp/trace"):
            if event.kind == "mark":
                print(event.time_ns, event.message)
    """
    return iter(stream(source, progress=progress))


def _combine(paths: List[str], progress: Optional[ProgressFn]) -> Recording:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would dominate the parse
    try:
        events_stream = EventStream(paths, progress)
        events = list(events_stream)
        events.sort(key=_time_key)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Recording(events=events, processes=events_stream.processes, dropped=events_stream.dropped)


def read(directory: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None) -> Recording:
    """Parse every record file (``*.nvtxrec``) in ``directory``: all processes of a recording.

    Files may still be written to: what is complete is returned, a torn or cut final record is
    skipped. ``progress(done_bytes, total_bytes)`` is called as the files are parsed.
    """
    return _combine(_files(directory), progress)


def read_file(path: Union[str, "os.PathLike[str]"]) -> Recording:
    """Parse one process's record file."""
    return _combine([os.fspath(path)], None)


# --------------------------------------------------------------------------- columnar reading (READER-API)
#
# Contract for bulk readers (the tracer's converters). NumPy is needed for this API only; the
# Event API above works without it.
#
#   blocks(source, *, progress=None, max_events=1 << 20) -> BlockStream
#       source: a recording directory (every *.nvtxrec) or one record file.
#       Raises FileNotFoundError for a missing source, ValueError (naming the path) for a file that
#       is not a recording or is cut inside its header. An empty directory is an empty stream.
#   BlockStream: like EventStream, known before iterating:
#       .processes  Dict[int, ProcessInfo]   pid -> info of its latest exec image (see .images)
#       .images     List[ProcessInfo]        one per record file (pid, exec_gen, ...), file order
#       .dropped    int                      events the processes could not record (all images)
#       .skipped_bytes / .skipped_chunks     corrupt data the reader stepped over (never silent)
#       .start_ns / .end_ns                  earliest / latest event (None when there is none)
#       .total_bytes                         what progress(done, total) counts up to
#     iterating yields EventBlock objects, file by file, at most max_events events each.
#   EventBlock:
#       .info      ProcessInfo of the file (pid, ppid, exec_gen, thread_names, category_names)
#       .pid       int;  .exec_gen int (0 for the first image of a pid; +1 per exec())
#       .events    numpy array of EVENT_DTYPE; each thread's events in time order, threads
#                  interleaved by chunk (not globally sorted: np.argsort(kind="stable") yourself)
#       .strings   Sequence[Optional[str]]: string id -> text, the file's whole table
#                  (index 0 -> None: no message). Registered strings and messages share it.
#       .domains   Dict[int, Optional[str]]: domain id -> name (0 -> None: NVTX's default domain)
#       .blobs     List[Blob]: the block's variable-length extension records (see Blob)
#   EVENT_DTYPE fields (little-endian, packed, 48 bytes):
#       time_ns      int64   CLOCK_MONOTONIC ns (as time.monotonic_ns(); comparable across processes)
#       kind         uint8   1 push, 2 pop, 3 start, 4 end, 5 mark  (KIND_* constants)
#       api          uint8   0 ex, 1 ascii, 2 unicode, 3 domain     (as Event.api)
#       flags        uint8   FLAG_COLOR (1): colour given; FLAG_TRUNCATED (4): message was cut
#       payload_type uint8   PT_NONE 0, PT_UINT64 1, PT_INT64 2, PT_DOUBLE 3, PT_UINT32 4,
#                            PT_INT32 5, PT_FLOAT 6, PT_EXT 7 (payload extension), PT_UNKNOWN 8
#       tid          uint32  OS thread id
#       domain       uint32  key of .domains
#       message      uint32  index of .strings (0: none)
#       color        uint32  ARGB (valid when flags & FLAG_COLOR)
#       category     uint32  category id (names: info.category_names[(domain name, id)])
#       payload      uint64  raw bits: int64 -> .view("<i8"), double -> .view("<f8"),
#                            uint32/int32/float in the low 32 bits (decode_payloads() does it)
#       range_id     uint64  start/end range id (0 otherwise)
#   Blob (namedtuple): kind (str, BLOB_KINDS), kind_id (int), time_ns, tid, domain (id),
#       arg (int), data (bytes), truncated (bool).
#
# Figures the implementation is held to: 1e6 push/pop ranges read in well under a second, memory
# bounded by max_events (not by the recording).

KIND_PUSH, KIND_POP, KIND_START, KIND_END, KIND_MARK = 1, 2, 3, 4, 5
FLAG_COLOR, FLAG_TRUNCATED = 1, 4
PT_NONE, PT_UINT64, PT_INT64, PT_DOUBLE, PT_UINT32, PT_INT32, PT_FLOAT, PT_EXT, PT_UNKNOWN = range(9)
#: names of the blob kinds (c/recorder_internal.h NVTXREC_BLOB_*)
BLOB_KINDS = {1: "schema", 2: "counter_group", 3: "counter_sample", 4: "payload"}

_EVENT_FIELDS = [
    ("time_ns", "<i8"), ("kind", "u1"), ("api", "u1"), ("flags", "u1"), ("payload_type", "u1"),
    ("tid", "<u4"), ("domain", "<u4"), ("message", "<u4"), ("color", "<u4"), ("category", "<u4"),
    ("payload", "<u8"), ("range_id", "<u8"),
]


def event_dtype():
    """The NumPy dtype of :attr:`EventBlock.events` (imports NumPy)."""
    import numpy as np

    return np.dtype(_EVENT_FIELDS)


def blocks(source, *, progress=None, max_events=1 << 20):
    """Columnar reading of a recording: see the READER-API contract above. (Being implemented.)"""
    raise NotImplementedError("recorder.blocks: contract committed, implementation follows")
