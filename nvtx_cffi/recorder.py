"""Record every NVTX event of a process, without Nsight, and read the recordings back.

The recorder is an NVTX injection library (``libnvtx_recorder.so``, shipped in this package).
Start a process with :func:`environment` added to its environment and every NVTX client in it
(nvtx-cffi, NVIDIA's ``nvtx`` package, C/C++ libraries with the NVTX v3 headers) is recorded::

    env = {**os.environ, **recorder.environment("/tmp/trace")}
    subprocess.run([sys.executable, "train.py"], env=env)
    rec = recorder.read("/tmp/trace")
    for event in rec.events: ...

Each process writes one file, ``<dir>/nvtx-<pid>-e<exec generation>-<stamp>.nvtxrec``, straight
into a shared memory mapping of the file: events survive ``os._exit()``, crashes and SIGKILL with
no flush step; a forked child starts a file of its own, and so does each ``exec()``ed image of a
process (``exec_gen`` 1, 2, ...). ``NVTX_CFFI_RECORD_MAX_BYTES`` bounds a file (default ``4G``;
``64k``, ``16M``... as ``--max-bytes``); events past the bound are dropped and counted
(:attr:`ProcessInfo.dropped`). Without ``NVTX_CFFI_RECORD_DIR`` the recorder still answers NVTX
(handles, range ids) but records nothing. A recording process holds a shared ``flock`` on its file
until it exits: :func:`active_files` lists the files still being written.

Inside a recorded process, :func:`capture` collects the events of a block of code.

:func:`read` loads a whole recording, sorted by time (memory grows with its length: some 700
bytes per event); :func:`iter_events` / :func:`stream` yield one event at a time instead, for
recordings of any length; :func:`blocks` yields NumPy structured arrays of events (the fast path
for converters: see the READER-API contract near the end of this module).
"""
from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import fcntl
import gc
import glob
import io
import operator
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

__all__ = [
    "Capture",
    "Event",
    "EventStream",
    "ProcessInfo",
    "Recording",
    "Blob",
    "BlockStream",
    "EventBlock",
    "StringTable",
    "active_files",
    "blocks",
    "decode_payloads",
    "event_dtype",
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
_MAGIC = b"NVTXREC2"
_HEADER_SIZE = 4096
# struct nvtxrec_file_header in c/recorder.h
_HEADER = struct.Struct("<8sIIIIIIQQQQIIQdQQ")
_KINDS = (None, "push", "pop", "start", "end", "mark")
_APIS = ("ex", "ascii", "unicode", "domain")
_RESOURCES = (None, "cuda_device", "cuda_context", "cuda_stream", "cuda_event")
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
    exec_gen: int = 0
    """Which image of the process recorded it: 0, then +1 after each ``exec()`` (same pid)."""


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
    exec_gen: int = 0
    """0 for a process's first image; +1 for each image after an ``exec()`` (same pid, own file)."""
    skipped_bytes: int = 0
    """Bytes of the file the reader stepped over as corrupt."""
    skipped_chunks: int = 0
    """Corrupt chunk headers met (reading resumed at the next valid chunk)."""


@dataclass
class Recording:
    """Events of all processes of a recording directory, sorted by time (stable)."""

    events: List[Event]
    processes: Dict[int, ProcessInfo]
    """pid -> its file's information; for a process that exec()ed, its latest image (see images)."""
    dropped: int
    """Events not recorded, summed over every file (every process image)."""
    images: List[ProcessInfo] = field(default_factory=list)
    """One entry per record file: every process image, exec()ed ones included."""
    skipped_bytes: int = 0
    """Corrupt bytes stepped over (a damaged chunk is skipped, reading resumes at the next one)."""
    skipped_chunks: int = 0


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
    ``max_bytes`` bounds each process's file; past it, events are dropped and counted (1 to
    2**64-1 bytes, as the recorder reads sizes; ValueError for one it would not take).
    """
    env = {
        "NVTX_INJECTION64_PATH": library_path(),
        "NVTX_CFFI_RECORD_DIR": os.path.abspath(os.fspath(directory)),
    }
    if max_bytes is not None:
        env["NVTX_CFFI_RECORD_MAX_BYTES"] = _size_text(int(max_bytes))
    return env


def _size_text(n: int) -> str:
    """``n`` bytes as the recorder reads a size (c/recorder.c parse_size: at most 19 digits, then
    an optional k/m/g/t): plain digits, or past 19 digits in the largest unit that divides ``n``.
    A size the recorder would not take (it would warn and use its default) is a ValueError.

    >>> _size_text(4096), _size_text((1 << 64) - (1 << 40))
    ('4096', '16777215t')
    """
    text = str(n)
    if n > 0 and len(text) > 19:
        for shift, suffix in ((40, "t"), (30, "g"), (20, "m"), (10, "k")):
            if n % (1 << shift) == 0:
                text = f"{n >> shift}{suffix}"
                break
    if not 0 < n < 1 << 64 or len(text.rstrip("tgmk")) > 19:
        msg = f"max_bytes must be a size of 1 to 2**64-1 bytes that the recorder can read, got {n}"
        raise ValueError(msg)
    return text


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


# --------------------------------------------------------------------------- reading (file format 2, c/recorder.h)

ProgressFn = Callable[[int, int], None]

_CHUNK_HDR = struct.Struct("<QIIQQ")
_CHUNK_TAG = 0x30
_CHUNK_CHECK = 0x4E565443
_W_ATTR, _W_COLOR, _W_CATEGORY, _W_PAYLOAD, _W_PAYLOAD_HI, _W_RANGE_ID, _W_PTYPE_RAW, _W_RANGE_ID_HI = range(0x10, 0x18)
_D_STRING, _D_DOMAIN, _D_CATEGORY, _D_THREAD, _D_RESOURCE, _D_BLOB, _D_CLOCK = range(0x20, 0x27)
_W_CONT = 0xFF
_DF_INHERITED, _DF_TRUNCATED, _DF_MESSAGE = 1, 2, 8
_DATA_FIXED = struct.Struct("<QQB")
_STRING_OVERFLOW = 0xFFFFFFFF
_M56 = (1 << 56) - 1
_OVERFLOW_TEXT = "<nvtx-cffi recorder: string table full>"
_DEF_KINDS = {_D_STRING: "string", _D_DOMAIN: "domain", _D_CATEGORY: "category", _D_THREAD: "thread_name",
              _D_RESOURCE: "resource_name", _D_BLOB: "blob"}
_PT_NAMES = (None, "uint64", "int64", "double", "uint32", "int32", "float", "ext", "unknown")


def _decode_payload(code: int, raw: int, raw_type: int = 0) -> Tuple[Payload, Optional[str]]:
    if code == 0:
        return None, None
    if code == 1:
        return raw, "uint64"
    if code == 2:
        return raw - (1 << 64) if raw >= 1 << 63 else raw, "int64"
    if code == 3:
        return _D.unpack(_Q.pack(raw))[0], "double"
    if code == 4:
        return raw & 0xFFFFFFFF, "uint32"
    if code == 5:
        v = raw & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v, "int32"
    if code == 6:
        return _F.unpack(_I.pack(raw & 0xFFFFFFFF))[0], "float"
    if code == 7:
        return None, "ext"
    signed = raw_type - (1 << 32) if raw_type >= 1 << 31 else raw_type
    return raw, f"unknown({signed})"


class _Header:
    """The header of one record file (struct nvtxrec_file_header)."""

    __slots__ = ("path", "size", "pid", "ppid", "exec_gen", "page", "start_ns", "clock", "tsc0",
                 "ns_per_tick", "dropped", "write_errors", "proc_start")


def _read_header(f: "io.BufferedReader", path: str) -> Optional[_Header]:
    """The header; None for a file still being created (empty, or its reserved header all zeros).

    Raises ValueError, naming the path, for a file that is not a recording or is cut inside its header.
    """
    size = os.fstat(f.fileno()).st_size
    head = f.read(_HEADER.size)
    if size == 0 or (len(head) == _HEADER.size and not any(head)):
        return None
    if head[:7] != _MAGIC[:7]:
        raise ValueError(f"{path}: not an NVTX recording (no {_MAGIC.decode()} magic)")
    if head[:8] != _MAGIC:
        raise ValueError(f"{path}: NVTX recording of another format version ({head[:8]!r}; this reader "
                         f"reads {_MAGIC.decode()})")
    if len(head) < _HEADER.size or size < _HEADER_SIZE:
        raise ValueError(f"{path}: NVTX recording cut inside its header ({size} of {_HEADER_SIZE} bytes)")
    (_magic, _version, header_size, page, pid, ppid, exec_gen, start_ns, _rt, _max, proc_start, clock,
     _cmax, tsc0, ns_per_tick, dropped, write_errors) = _HEADER.unpack(head)
    if header_size != _HEADER_SIZE or page == 0 or page & (page - 1) or page % 8:
        raise ValueError(f"{path}: corrupt NVTX recording header (header size {header_size}, page {page})")
    h = _Header()
    h.path, h.size, h.pid, h.ppid, h.exec_gen, h.page = path, size, pid, ppid, exec_gen, page
    h.start_ns, h.clock, h.tsc0, h.ns_per_tick = start_ns, clock, tsc0, ns_per_tick
    h.dropped, h.write_errors, h.proc_start = dropped, write_errors, proc_start
    return h


def _open(path: str) -> Tuple[Optional["io.BufferedReader"], Optional[_Header]]:
    f = open(path, "rb")
    try:
        h = _read_header(f, path)
    except BaseException:
        f.close()
        raise
    if h is None:
        f.close()
        return None, None
    return f, h


class _Skips:
    __slots__ = ("bytes", "chunks")

    def __init__(self) -> None:
        self.bytes = 0
        self.chunks = 0


def _chunks(f: "io.BufferedReader", h: _Header, skips: _Skips) -> Iterator[Tuple[int, int, bytes]]:
    """``(done, tid, data)`` of every valid chunk, in the order threads took them; ``done``: the bytes
    of chunks read before this one (for progress).

    The order is the chunk headers' ``seq`` (file order for files that carry none): file offsets are
    claim order, and the recorder's pool hands out chunks it claimed ahead, so one thread's chunks
    need not lie at increasing offsets. A chunk whose header does not check out counts as corrupt
    (``skips``) and the walk resumes at the next page that starts a valid chunk; zero pages (claimed,
    never written) are stepped over.
    """
    page, size = h.page, h.size
    off = _HEADER_SIZE
    bad_since = -1
    index = []  # (seq, offset, tid, size) of the valid chunks: headers first, then data in seq order
    while off + _CHUNK_HDR.size <= size:
        f.seek(off)
        head = f.read(_CHUNK_HDR.size)
        if len(head) < _CHUNK_HDR.size:
            break
        tag_size, tid, check, coff, seq = _CHUNK_HDR.unpack(head)
        csize = tag_size >> 32
        if (tag_size & 0xFFFFFFFF == _CHUNK_TAG and csize >= page and csize % page == 0 and coff == off
                and check == (_CHUNK_CHECK ^ csize ^ tid ^ (off & 0xFFFFFFFF) ^ (seq & 0xFFFFFFFF))):
            if bad_since >= 0:
                skips.bytes += off - bad_since
                bad_since = -1
            index.append((seq, off, tid, csize))
            off += csize
            continue
        if bad_since < 0 and any(head):
            bad_since = off
            skips.chunks += 1
        off += page
    if bad_since >= 0:
        skips.bytes += size - bad_since
    index.sort()
    done = _HEADER_SIZE
    for _seq, off, tid, csize in index:
        f.seek(off)
        data = f.read(csize)
        if len(data) < csize:  # a file cut inside the chunk: its last record may be incomplete
            data = _cut_chunk(data)
        yield done, tid, data
        done += csize


def _cut_chunk(data: bytes) -> bytes:
    """A chunk cut short by the end of the file, without its last (possibly incomplete) record."""
    data = data[:len(data) & ~7]
    for end in range(len(data) - 8, _CHUNK_HDR.size - 8, -8):
        tag = data[end]
        if tag == 0:
            return data  # the chunk's records ended before the cut
        if 1 <= tag <= 5 or 0x20 <= tag <= 0x26:
            return data[:end]
    return data[:_CHUNK_HDR.size]


class _Defs:
    """What the definitions pass learnt about one file: names, strings, clock pairs, time bounds."""

    __slots__ = ("header", "info", "strings", "string_truncated", "domains", "cal_x", "cal_y", "slope",
                 "first", "last", "skips", "np_strings")

    def to_ns(self, t: int) -> int:
        h = self.header
        if h.clock != 1:
            return h.start_ns + t
        xs, ys = self.cal_x, self.cal_y
        i = bisect.bisect_right(xs, t) - 1
        if i < 0:
            return h.start_ns + int(round(ys[0] + (t - xs[0]) * self.slope))
        if i + 1 < len(xs) and xs[i + 1] > xs[i]:
            x0, x1 = xs[i], xs[i + 1]
            return h.start_ns + int(round(ys[i] + (t - x0) * (ys[i + 1] - ys[i]) / (x1 - x0)))
        return h.start_ns + int(round(ys[i] + (t - xs[i]) * self.slope))


def _segment_converter(d: "_Defs") -> Callable[[int], int]:
    """d.to_ns, with the interpolation segment of the last call cached (a chunk's times increase)."""
    h = d.header
    if h.clock != 1:
        start = h.start_ns
        return lambda t: start + t
    xs, ys, slope, start = d.cal_x, d.cal_y, d.slope, h.start_ns
    seg = [1, 0, 0.0, 0.0, 0.0]  # valid, x0, x1 (exclusive), y0, slope

    def to_ns(t: int) -> int:
        if seg[1] <= t < seg[2]:
            return start + int(round(seg[3] + (t - seg[1]) * seg[4]))
        i = bisect.bisect_right(xs, t) - 1
        if 0 <= i and i + 1 < len(xs) and xs[i + 1] > xs[i]:
            seg[1], seg[2], seg[3] = xs[i], xs[i + 1], ys[i]
            seg[4] = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
        elif i >= 0:
            seg[1], seg[2], seg[3], seg[4] = xs[i], float("inf"), ys[i], slope
        else:
            return d.to_ns(t)
        return start + int(round(seg[3] + (t - seg[1]) * seg[4]))

    return to_ns


def _data_record(words: Tuple[int, ...], i: int, n: int) -> Optional[Tuple[int, int, int, int, bytes, int]]:
    """``(flags, domain, time, arg, aux, bytes, next index)`` of the data record at words[i]; None if torn."""
    w = words[i]
    length = (w >> 32) & 0xFFFFFFFF
    k = (length + 6) // 7
    if length < _DATA_FIXED.size or i + 1 + k > n:
        return None
    parts = []
    for m in range(i + 1, i + 1 + k):
        c = words[m]
        if c & 0xFF != _W_CONT:
            return None
        parts.append(((c >> 8) & _M56).to_bytes(7, "little"))
    data = b"".join(parts)[:length]
    time, arg, aux = _DATA_FIXED.unpack_from(data)
    return (w >> 8) & 0xFF, (w >> 16) & 0xFFFF, time, arg, aux, data[_DATA_FIXED.size:], i + 1 + k


def _np_data_words(w, k: int) -> Tuple[int, ...]:
    """The words of the data record at ``w[k]`` (a chunk's words as a NumPy array), as many as its
    head's length claims: fewer at the chunk's end when a corrupt length claims more, which
    :func:`_data_record` then finds torn."""
    return tuple(w[k:k + 1 + ((int(w[k]) >> 32) + 6) // 7].tolist())


def _torn_words(words: Tuple[int, ...], i: int, n: int) -> int:
    """Words of the torn data record at words[i] (its head and the continuation words after it):
    what a reader skips and counts as corrupt."""
    j = i + 1
    while j < n and words[j] & 0xFF == _W_CONT:
        j += 1
    return j - i


def _chunk_words(data: bytes) -> Tuple[int, ...]:
    # signed: every word stays a machine-sized int (PyPy); fields are masked out of it
    return struct.unpack_from(f"<{len(data) // 8}q", data)


def _numpy():
    try:
        import numpy
    except ImportError:  # the Event API works without it (PyPy)
        return None
    return numpy


def _scan(path: str) -> Optional[_Defs]:
    """First pass over one file: definitions, clock pairs and time bounds (no Event objects)."""
    f, h = _open(path)
    if f is None or h is None:
        return None
    d = _Defs()
    d.header = h
    d.skips = _Skips()
    info = ProcessInfo(pid=h.pid, ppid=h.ppid, path=path, dropped=h.dropped, write_errors=h.write_errors,
                       exec_gen=h.exec_gen)
    d.info = info
    strings: Dict[int, str] = {_STRING_OVERFLOW: _OVERFLOW_TEXT}
    truncated: set = set()
    domains: Dict[int, Optional[str]] = {0: None}
    categories: list = []
    pairs = [(0, 0)]
    bounds: list = []  # event times (ticks) seen: (min, max) per chunk

    def definition(tag: int, r: tuple) -> None:
        flags, dom, t, arg, _aux, raw, _i = r
        if tag == _D_CLOCK:
            pairs.append((t, arg - h.start_ns))
            return
        text = raw.decode("utf-8", "replace")
        if tag == _D_STRING:
            strings[arg] = text
            if flags & _DF_TRUNCATED:
                truncated.add(arg)
        elif tag == _D_DOMAIN:
            domains[arg] = text
        elif tag == _D_CATEGORY:
            categories.append((dom, arg, text))
        elif tag == _D_THREAD:
            info.thread_names[arg] = text
        if not (flags & _DF_INHERITED or (tag == _D_STRING and flags & _DF_MESSAGE)):
            bounds.append((t, t))

    np = _numpy()
    try:
        for _off, _tid, data in _chunks(f, h, d.skips):
            if np is not None:
                w, tags = _np_valid(np, data, d.skips)
                heads = np.flatnonzero((tags >= 1) & (tags <= 5))
                if heads.size:  # a chunk is one thread's, in time order
                    bounds.append((int(w[heads[0]]) >> 8, int(w[heads[-1]]) >> 8))
                for k in np.flatnonzero((tags >= 0x20) & (tags <= 0x26)).tolist():
                    words = _np_data_words(w, k)
                    r = _data_record(words, 0, len(words))
                    if r is None:
                        d.skips.bytes += 8 * _torn_words(words, 0, len(words))
                    else:
                        definition(int(tags[k]), r)
                continue
            words = _chunk_words(data)
            n = len(words)
            i = 4
            lo = hi = None
            while i < n:
                w = words[i]
                tag = w & 0xFF
                if 1 <= tag <= 5:
                    if lo is None:
                        lo = (w >> 8) & _M56
                    hi = (w >> 8) & _M56
                    i += 1
                elif 0x10 <= tag <= 0x17:
                    i += 1
                elif 0x20 <= tag <= 0x26:
                    r = _data_record(words, i, n)
                    if r is None:  # skipped, as the NumPy path skips it: the records after it stay
                        torn = _torn_words(words, i, n)
                        d.skips.bytes += 8 * torn
                        i += torn
                        continue
                    i = r[-1]
                    definition(tag, r)
                else:
                    if w:  # corrupt word: the rest of the chunk's records is lost
                        j = i
                        while j < n and words[j]:
                            j += 1
                        d.skips.bytes += (j - i) * 8
                    break
            if lo is not None:
                bounds.append((lo, hi))
    finally:
        f.close()
    first = min(b[0] for b in bounds) if bounds else None
    last = max(b[1] for b in bounds) if bounds else None
    for dom, cat, name in categories:
        info.category_names[(_domain_name(domains, dom) if dom else None, cat)] = name
    pairs.sort()
    xs, ys = [], []
    top = 0
    for x, y in pairs:
        top = max(top, y)
        xs.append(x)
        ys.append(top)
    d.cal_x, d.cal_y = xs, ys
    span_ns = ys[-1] - ys[0]
    if h.clock == 1 and span_ns >= 10_000_000 and xs[-1] > xs[0]:
        d.slope = span_ns / (xs[-1] - xs[0])
    else:
        d.slope = h.ns_per_tick or 1.0
    d.strings, d.string_truncated, d.domains = strings, truncated, domains
    d.first = d.to_ns(first) if first is not None else None
    d.last = d.to_ns(last) if last is not None else None
    info.skipped_bytes, info.skipped_chunks = d.skips.bytes, d.skips.chunks
    return d


def _domain_name(domains: Dict[int, Optional[str]], i: int) -> Optional[str]:
    name = domains.get(i, _MISSING)
    return f"<unknown domain {i}>" if name is _MISSING else name  # type: ignore[return-value]


_MISSING = object()
_time_key = operator.attrgetter("time_ns")
_set = object.__setattr__


def _string(strings: Dict[int, str], i: int) -> str:
    s = strings.get(i)
    return s if s is not None else f"<unknown string {i}>"


def _events(d: _Defs, progress: Optional[ProgressFn], done: int, total: int) -> Iterator[Event]:
    """Second pass over one file: its events, in file order (per thread: time order)."""
    f, h = _open(d.header.path)
    if f is None or h is None:
        return
    pid, gen = h.pid, h.exec_gen
    strings, truncated, domains = d.strings, d.string_truncated, d.domains
    to_ns = _segment_converter(d)
    new = object.__new__
    set_ = _set
    skips = _Skips()
    step = 0
    try:
        for done_here, tid, data in _chunks(f, h, skips):
            words = _chunk_words(data)
            n = len(words)
            i = 4
            while i < n:
                w = words[i]
                tag = w & 0xFF
                if 1 <= tag <= 5:
                    t = (w >> 8) & _M56
                    i += 1
                    api = dom = msg = category = ptype = raw_type = 0
                    color = None
                    payload_raw = 0
                    range_id = None
                    while i < n:
                        x = words[i]
                        xt = x & 0xFF
                        if xt < 0x10 or xt > 0x17:
                            break
                        hi = (x >> 32) & 0xFFFFFFFF
                        if xt == _W_ATTR:
                            api, dom, msg = (x >> 8) & 3, (x >> 16) & 0xFFFF, hi
                        elif xt == _W_COLOR:
                            color = hi
                        elif xt == _W_CATEGORY:
                            category = hi
                        elif xt == _W_PAYLOAD:
                            ptype, payload_raw = (x >> 8) & 0xFF, payload_raw | hi
                        elif xt == _W_PAYLOAD_HI:
                            payload_raw |= hi << 32
                        elif xt == _W_RANGE_ID:
                            range_id = (range_id or 0) | ((x >> 8) & _M56)
                        elif xt == _W_RANGE_ID_HI:
                            range_id = (range_id or 0) | (((x >> 8) & 0xFF) << 56)
                        else:
                            raw_type = hi
                        i += 1
                    value, vtype = _decode_payload(ptype, payload_raw, raw_type) if ptype else (None, None)
                    ev = new(Event)
                    set_(ev, "__dict__", {
                        "kind": _KINDS[tag], "time_ns": to_ns(t), "pid": pid, "tid": tid,
                        "domain": _domain_name(domains, dom) if dom else None,
                        "message": _string(strings, msg) if msg else None, "color": color,
                        "category": category, "payload": value, "payload_type": vtype,
                        "range_id": (range_id or 0) if tag == 3 or tag == 4 else None, "api": _APIS[api],
                        "name": None, "target": None, "resource": None, "truncated": msg in truncated,
                        "data": None, "exec_gen": gen})
                    yield ev
                elif 0x20 <= tag <= 0x26:
                    r = _data_record(words, i, n)
                    if r is None:  # torn: skipped (and counted by _scan)
                        i += _torn_words(words, i, n)
                        continue
                    flags, dom, t, arg, aux, raw, i = r
                    if tag == _D_CLOCK or flags & _DF_INHERITED or (tag == _D_STRING and flags & _DF_MESSAGE):
                        continue
                    api = _APIS[(flags >> 4) & 3]
                    domain = _domain_name(domains, dom) if dom else None
                    data_bytes = None
                    if tag == _D_BLOB:
                        name: Optional[str] = BLOB_KINDS.get(aux, f"unknown({aux})")
                        data_bytes, api, target, resource = raw, "ex", arg, None
                    else:
                        name = raw.decode("utf-8", "replace")
                        if tag == _D_RESOURCE:
                            target = arg - (1 << 64) if aux == 1 and arg >= 1 << 63 else arg
                            resource = _RESOURCES[aux] if aux < len(_RESOURCES) else f"unknown({aux})"
                        else:
                            target, resource = arg, None
                        if tag == _D_DOMAIN:
                            domain = name
                    ev = new(Event)
                    set_(ev, "__dict__", {
                        "kind": _DEF_KINDS[tag], "time_ns": to_ns(t), "pid": pid, "tid": tid,
                        "domain": domain, "message": None, "color": None,
                        "category": arg if tag == _D_CATEGORY else 0, "payload": None, "payload_type": None,
                        "range_id": None, "api": api, "name": name, "target": target, "resource": resource,
                        "truncated": bool(flags & _DF_TRUNCATED), "data": data_bytes, "exec_gen": gen})
                    yield ev
                elif 0x10 <= tag <= 0x17:
                    i += 1  # an extension word without its head: skip
                else:
                    break
            if progress is not None:
                step += len(data)
                if step >= 1 << 24:
                    progress(min(done + done_here + len(data), total), total)
                    step = 0
    finally:
        f.close()


def _files(directory: Union[str, "os.PathLike[str]"]) -> List[str]:
    path = os.fspath(directory)
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such recording directory", path)
        raise NotADirectoryError(errno.ENOTDIR, "not a recording directory", path)
    return sorted(glob.glob(os.path.join(glob.escape(path), "*.nvtxrec")))


def _paths(source: Union[str, "os.PathLike[str]"]) -> List[str]:
    path = os.fspath(source)
    if os.path.isfile(path):
        return [path]
    return _files(path)


def _scan_all(paths: List[str], strict: bool) -> List[_Defs]:
    scans = []
    for path in paths:
        try:
            scan = _scan(path)
        except FileNotFoundError:
            if strict:
                raise
            scan = None  # removed while we read
        if scan is not None:
            scans.append(scan)
    return scans


class EventStream:
    """The events of a recording, one at a time: memory for one event, not for the recording.

    Built by :func:`stream`. Creating it reads the record files once for their definitions (domain,
    category and thread names, strings, clock pairs) and time bounds, so :attr:`processes`,
    :attr:`start_ns` and :attr:`end_ns` are known before the first event. Iterating reads the files
    again and yields :class:`Event` objects file by file (a file is one process image), in file
    order: one thread's events come in time order (a thread writes its chunks in order), but threads
    and processes interleave only by chunk, so the stream as a whole is *not* sorted by time.

    >>> s = stream("/tmp/trace")  # doctest: +SKIP
    >>> pushes = sum(1 for e in s if e.kind == "push")  # doctest: +SKIP
    """

    def __init__(self, paths: List[str], progress: Optional[ProgressFn] = None, *, strict: bool = False) -> None:
        scans = _scan_all(paths, strict)
        self._scans = scans
        self._progress = progress
        #: one ProcessInfo per record file (process image), in file order
        self.images: List[ProcessInfo] = [s.info for s in scans]
        #: pid -> what its file says; for a process that exec()ed: its latest image
        self.processes: Dict[int, ProcessInfo] = {}
        for info in sorted(self.images, key=lambda p: p.exec_gen):
            self.processes[info.pid] = info
        #: events the processes could not record (every image)
        self.dropped: int = sum(p.dropped for p in self.images)
        #: corrupt bytes / chunk headers the reader stepped over
        self.skipped_bytes: int = sum(p.skipped_bytes for p in self.images)
        self.skipped_chunks: int = sum(p.skipped_chunks for p in self.images)
        firsts = [s.first for s in scans if s.first is not None]
        lasts = [s.last for s in scans if s.last is not None]
        #: time of the earliest / latest event of the recording (None when there is none)
        self.start_ns: Optional[int] = min(firsts) if firsts else None
        self.end_ns: Optional[int] = max(lasts) if lasts else None
        #: bytes the iteration reads (what ``progress(done, total)`` counts up to)
        self.total_bytes: int = sum(s.header.size for s in scans)

    def __iter__(self) -> Iterator[Event]:
        progress = self._progress
        total = self.total_bytes
        done = 0
        for scan in self._scans:
            try:
                yield from _events(scan, progress, done, total)
            except FileNotFoundError:
                pass
            done += scan.header.size
            if progress is not None:
                progress(done, total)


def stream(source: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None) -> EventStream:
    """An :class:`EventStream` over a recording directory (every ``*.nvtxrec``) or one record file.

    ``progress(done_bytes, total_bytes)`` is called as the iteration reads the files::

        s = recorder.stream("/tmp/trace")
        print(s.start_ns, sorted(s.processes))
        for event in s:   # one Event at a time, per file, per thread chunk
            ...

    Raises :class:`FileNotFoundError` for a missing source and :class:`ValueError` (naming the file)
    for a file that is not a recording or is cut inside its header.
    """
    return EventStream(_paths(source), progress, strict=os.path.isfile(os.fspath(source)))


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


def _combine(paths: List[str], progress: Optional[ProgressFn], strict: bool) -> Recording:
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would dominate the parse
    try:
        events_stream = EventStream(paths, progress, strict=strict)
        events = list(events_stream)
        events.sort(key=_time_key)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Recording(events=events, processes=events_stream.processes, dropped=events_stream.dropped,
                     images=events_stream.images, skipped_bytes=events_stream.skipped_bytes,
                     skipped_chunks=events_stream.skipped_chunks)


def read(directory: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None) -> Recording:
    """Parse every record file (``*.nvtxrec``) in ``directory``: all processes of a recording.

    Files may still be written to: what is complete is returned, a torn final record is skipped,
    a file still being created is left out. A missing directory raises :class:`FileNotFoundError`;
    a file that is not a recording, or is cut inside its header, :class:`ValueError` naming it; an
    empty directory is an empty recording. Corrupt chunks are stepped over and counted
    (:attr:`Recording.skipped_bytes`, :attr:`Recording.skipped_chunks`).
    ``progress(done_bytes, total_bytes)`` is called as the files are parsed.
    """
    return _combine(_files(directory), progress, False)


def read_file(path: Union[str, "os.PathLike[str]"]) -> Recording:
    """Parse one process's record file (errors as :func:`read`; a missing file: FileNotFoundError)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such record file", path)
    return _combine([path], None, True)


def active_files(directory: Union[str, "os.PathLike[str]"]) -> List[str]:
    """The record files in ``directory`` whose process still records (holds its ``flock``).

    A recording process holds a shared ``flock`` on its file until it exits (SIGKILL included) or
    exec()s; this tries an exclusive one without blocking. An empty list: every process is done.
    """
    active = []
    for path in _files(directory):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            active.append(path)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return active


# --------------------------------------------------------------------------- columnar reading (READER-API)
#
# Contract for bulk readers (the tracer's converters). NumPy is needed for this API only; the
# Event API above works without it.
#
#   blocks(source, *, progress=None, max_events=1 << 16) -> BlockStream
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
#       .strings   StringTable (a dict): string id -> text, the file's whole table; [0] -> None (no
#                  message), an id the file does not define -> "<unknown string N>".
#                  Registered strings and messages share it.
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
#       message      uint32  key of .strings (0: none)
#       color        uint32  ARGB (valid when flags & FLAG_COLOR)
#       category     uint32  category id (names: info.category_names[(domain name, id)])
#       payload      uint64  raw bits: int64 -> .view("<i8"), double -> .view("<f8"),
#                            uint32/int32/float in the low 32 bits (decode_payloads() does it)
#       range_id     uint64  start/end range id (0 otherwise)
#   Blob (namedtuple): kind (str, BLOB_KINDS), kind_id (int), time_ns, tid, domain (id),
#       arg (int), data (bytes), truncated (bool).

KIND_PUSH, KIND_POP, KIND_START, KIND_END, KIND_MARK = 1, 2, 3, 4, 5
FLAG_COLOR, FLAG_TRUNCATED = 1, 4
PT_NONE, PT_UINT64, PT_INT64, PT_DOUBLE, PT_UINT32, PT_INT32, PT_FLOAT, PT_EXT, PT_UNKNOWN = range(9)
#: names of the blob kinds (c/recorder_internal.h NVTXREC_BLOB_*)
BLOB_KINDS = {1: "schema", 2: "counter_group", 3: "counter_sample", 4: "payload", 5: "scope"}

_EVENT_FIELDS = [
    ("time_ns", "<i8"), ("kind", "u1"), ("api", "u1"), ("flags", "u1"), ("payload_type", "u1"),
    ("tid", "<u4"), ("domain", "<u4"), ("message", "<u4"), ("color", "<u4"), ("category", "<u4"),
    ("payload", "<u8"), ("range_id", "<u8"),
]


class Blob(NamedTuple):
    """A variable-length extension record (payload extension: schema, counters, binary payload)."""

    kind: str
    kind_id: int
    time_ns: int
    tid: int
    domain: int
    arg: int
    data: bytes
    truncated: bool


class StringTable(dict):
    """String id -> text of one record file; id 0 -> None, an undefined id -> a placeholder."""

    def __missing__(self, key: int) -> Optional[str]:
        return None if key == 0 else f"<unknown string {key}>"


def event_dtype():
    """The NumPy dtype of :attr:`EventBlock.events` (imports NumPy)."""
    import numpy as np

    return np.dtype(_EVENT_FIELDS)


def decode_payloads(events):
    """``(values, valid)``: each event's payload as float64 (NaN where there is none) — the int
    types converted exactly up to 2**53 — and a bool mask of events that have one."""
    import numpy as np

    pt = events["payload_type"]
    raw = events["payload"]
    out = np.full(len(events), np.nan)
    low = (raw & 0xFFFFFFFF).astype(np.uint32)
    for code, values in ((PT_UINT64, lambda m: raw[m].astype(np.float64)),
                         (PT_INT64, lambda m: raw[m].view(np.int64).astype(np.float64)),
                         (PT_DOUBLE, lambda m: raw[m].view(np.float64)),
                         (PT_UINT32, lambda m: low[m].astype(np.float64)),
                         (PT_INT32, lambda m: low[m].view(np.int32).astype(np.float64)),
                         (PT_FLOAT, lambda m: low[m].view(np.float32).astype(np.float64))):
        m = pt == code
        if m.any():
            out[m] = values(m)
    return out, (pt >= PT_UINT64) & (pt <= PT_FLOAT)


class EventBlock:
    """Up to ``max_events`` events of one record file as a NumPy structured array (see READER-API)."""

    __slots__ = ("info", "pid", "exec_gen", "events", "strings", "domains", "blobs")

    def __repr__(self) -> str:
        return f"EventBlock(pid={self.pid}, exec_gen={self.exec_gen}, events={len(self.events)}, blobs={len(self.blobs)})"


def _np_times(np, d: _Defs, raw):
    h = d.header
    if h.clock != 1:
        return raw.astype(np.int64) + h.start_ns
    xs = np.asarray(d.cal_x, dtype=np.float64)
    ys = np.asarray(d.cal_y, dtype=np.float64)
    x = raw.astype(np.float64)
    y = np.interp(x, xs, ys)
    after = x > xs[-1]
    if after.any():
        y[after] = ys[-1] + (x[after] - xs[-1]) * d.slope
    before = x < xs[0]
    if before.any():
        y[before] = ys[0] + (x[before] - xs[0]) * d.slope
    return np.rint(y).astype(np.int64) + h.start_ns


def _np_valid(np, data: bytes, skips: _Skips):
    """The chunk's record words up to its first zero word (or first corrupt one, counted)."""
    w = np.frombuffer(data, dtype="<u8", offset=32)
    zero = np.flatnonzero(w == 0)
    if zero.size:
        w = w[:zero[0]]
    tags = (w & 0xFF).astype(np.uint8)
    bad = np.flatnonzero(((tags > 5) & (tags < 0x10)) | ((tags > 0x17) & (tags < 0x20)) | ((tags > 0x26) & (tags < 0xFF)))
    if bad.size:
        skips.bytes += (len(w) - bad[0]) * 8
        w, tags = w[:bad[0]], tags[:bad[0]]
    return w, tags


_NATIVE: list = []


def _native_decoder():
    """The CFFI module's ``(ffi, lib)`` when it has the tracer's decoder (c/trace_decode.c), else None."""
    if not _NATIVE:
        try:
            from nvtx_cffi._native._ffi import ffi, lib  # type: ignore[import-not-found]

            _NATIVE.append((ffi, lib) if hasattr(lib, "nvtxcffi_decode_events") else None)
        except ImportError:
            _NATIVE.append(None)
    return _NATIVE[0]


def _np_decode(np, words, n_events: int, dtype):
    """``(events, ticks)`` of a block's words, decoded in C; None without the native decoder."""
    native = _native_decoder()
    if native is None:
        return None
    ffi, lib = native
    words = np.ascontiguousarray(words, dtype="<u8")
    ev = np.zeros(n_events, dtype=dtype)
    ticks = np.empty(n_events, dtype=np.uint64)
    got = lib.nvtxcffi_decode_events(ffi.from_buffer("uint64_t[]", words), len(words), ffi.from_buffer(ev),
                                     ffi.from_buffer("uint64_t[]", ticks), n_events)
    if got != n_events:  # cannot happen: the heads were counted from the same words
        return None
    return ev, ticks


def _np_block(np, d: _Defs, parts, dtype, skips: _Skips) -> EventBlock:
    words = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
    tags = np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]
    is_head = (tags >= 1) & (tags <= 5)
    counts = [int(np.count_nonzero(is_head[s:e])) for s, e in _spans(parts)]
    decoded = _np_decode(np, words, sum(counts), dtype)
    if decoded is not None:
        ev, ticks = decoded
        ev["time_ns"] = _np_times(np, d, ticks)
        ev["tid"] = np.repeat(np.asarray([p[0] for p in parts], dtype=np.uint32), counts)
    else:
        ev = _np_fields(np, d, words, tags, is_head, parts, counts, dtype)
    return _np_finish(np, d, ev, parts, skips)


def _np_fields(np, d: _Defs, words, tags, is_head, parts, counts, dtype):
    """The event columns of a block's words with NumPy alone (no native decoder)."""
    head_pos = np.flatnonzero(is_head)
    ev = np.zeros(len(head_pos), dtype=dtype)
    ev["kind"] = tags[head_pos]
    ev["time_ns"] = _np_times(np, d, words[head_pos] >> np.uint64(8))
    ev["tid"] = np.repeat(np.asarray([p[0] for p in parts], dtype=np.uint32), counts)
    evidx = np.cumsum(is_head) - 1
    sh8, sh16, sh32 = np.uint64(8), np.uint64(16), np.uint64(32)
    for tag in range(_W_ATTR, _W_RANGE_ID_HI + 1):
        pos = np.flatnonzero(tags == tag)
        if not pos.size:
            continue
        e = evidx[pos]
        keep = e >= 0
        if not keep.all():
            pos, e = pos[keep], e[keep]
        w = words[pos]
        hi = (w >> sh32).astype(np.uint32)
        if tag == _W_ATTR:
            ev["api"][e] = ((w >> sh8) & np.uint64(3)).astype(np.uint8)
            ev["domain"][e] = ((w >> sh16) & np.uint64(0xFFFF)).astype(np.uint32)
            ev["message"][e] = hi
        elif tag == _W_COLOR:
            ev["color"][e] = hi
            ev["flags"][e] |= FLAG_COLOR
        elif tag == _W_CATEGORY:
            ev["category"][e] = hi
        elif tag == _W_PAYLOAD:
            ev["payload_type"][e] = ((w >> sh8) & np.uint64(0xFF)).astype(np.uint8)
            ev["payload"][e] |= hi.astype(np.uint64)
        elif tag == _W_PAYLOAD_HI:
            ev["payload"][e] |= hi.astype(np.uint64) << sh32
        elif tag == _W_RANGE_ID:
            ev["range_id"][e] |= w >> sh8
        elif tag == _W_RANGE_ID_HI:
            ev["range_id"][e] |= ((w >> sh8) & np.uint64(0xFF)) << np.uint64(56)
    return ev


def _np_finish(np, d: _Defs, ev, parts, skips: _Skips) -> EventBlock:
    if d.string_truncated:
        cut = np.isin(ev["message"], np.fromiter(d.string_truncated, dtype=np.uint32))
        ev["flags"][cut] |= FLAG_TRUNCATED
    blobs: List[Blob] = []
    start = 0
    for tid, w, t in parts:
        for i in np.flatnonzero(t == _D_BLOB).tolist():
            words = _np_data_words(w, i)
            r = _data_record(words, 0, len(words))
            if r is None:  # torn: skipped (and counted by _scan)
                continue
            flags, dom, tt, arg, aux, raw, _next = r
            blobs.append(Blob(BLOB_KINDS.get(aux, f"unknown({aux})"), aux, d.to_ns(tt), tid, dom, arg, raw,
                              bool(flags & _DF_TRUNCATED)))
        start += len(w)
    b = EventBlock()
    b.info, b.pid, b.exec_gen = d.info, d.header.pid, d.header.exec_gen
    b.events, b.strings, b.domains, b.blobs = ev, d.np_strings, d.domains, blobs
    return b


def _spans(parts) -> Iterator[Tuple[int, int]]:
    s = 0
    for p in parts:
        e = s + len(p[1])
        yield s, e
        s = e


class BlockStream:
    """A recording read as :class:`EventBlock` objects (see the READER-API contract). Built by :func:`blocks`."""

    def __init__(self, paths: List[str], progress: Optional[ProgressFn], max_events: int, strict: bool) -> None:
        import numpy  # noqa: F401  (fail here, not halfway through)

        self._stream = EventStream(paths, None, strict=strict)
        s = self._stream
        self.processes, self.images, self.dropped = s.processes, s.images, s.dropped
        self.skipped_bytes, self.skipped_chunks = s.skipped_bytes, s.skipped_chunks
        self.start_ns, self.end_ns, self.total_bytes = s.start_ns, s.end_ns, s.total_bytes
        self._progress = progress
        self._max = max(1, int(max_events))

    def __iter__(self) -> Iterator[EventBlock]:
        import numpy as np

        dtype = np.dtype(_EVENT_FIELDS)
        done = 0
        for d in self._stream._scans:
            d.np_strings = StringTable(d.strings)
            try:
                f, h = _open(d.header.path)
            except FileNotFoundError:
                continue
            if f is None or h is None:
                continue
            skips = _Skips()
            try:
                parts: list = []
                n = 0
                for done_here, tid, data in _chunks(f, h, skips):
                    w, t = _np_valid(np, data, skips)
                    while len(w):
                        head_pos = np.flatnonzero((t >= 1) & (t <= 5))
                        room = self._max - n
                        if len(head_pos) > room:  # split the chunk at a head: at most max_events per block
                            cut = int(head_pos[room]) if room > 0 else 0
                            if cut:
                                parts.append((tid, w[:cut], t[:cut]))
                            if parts:
                                yield _np_block(np, d, parts, dtype, skips)
                            parts, n = [], 0
                            w, t = w[cut:], t[cut:]
                            if self._progress is not None:
                                self._progress(min(done + done_here, self.total_bytes), self.total_bytes)
                            continue
                        parts.append((tid, w, t))
                        n += len(head_pos)
                        break
                if parts:
                    yield _np_block(np, d, parts, dtype, skips)
            finally:
                f.close()
            done += d.header.size
            if self._progress is not None:
                self._progress(done, self.total_bytes)


def blocks(source: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None,
           max_events: int = 1 << 16) -> BlockStream:
    """Read a recording directory or record file as NumPy blocks of events (see READER-API above)::

        s = recorder.blocks("/tmp/trace")
        for b in s:
            pushes = b.events[b.events["kind"] == recorder.KIND_PUSH]
            names = [b.strings[i] for i in pushes["message"]]
    """
    path = os.fspath(source)
    return BlockStream(_paths(path), progress, max_events, os.path.isfile(path))
