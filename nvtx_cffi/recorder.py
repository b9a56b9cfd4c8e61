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

import array
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
import secrets
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from . import _bulk, _recording_format as _format, _tools
from ._recording_format import lib as _lib

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
    # the columnar reader's constants (READER-API, near the end of this module)
    "KIND_PUSH", "KIND_POP", "KIND_START", "KIND_END", "KIND_MARK", "FLAG_COLOR", "FLAG_TRUNCATED",
    "PT_NONE", "PT_UINT64", "PT_INT64", "PT_DOUBLE", "PT_UINT32", "PT_INT32", "PT_FLOAT", "PT_EXT", "PT_UNKNOWN",
    "BLOB_KINDS",
    # the types that the signatures above name (Event.payload, progress=)
    "Payload", "ProgressFn",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
# The recording format: c/recorder/nvtxrec_format.h, through nvtx_cffi/_recording_format.py.
_MAGIC = _format.MAGIC
_HEADER_SIZE = _lib.NVTXREC_HEADER_SIZE
_HEADER = _format.FILE_HEADER  # struct nvtxrec_file_header


def _by_code(names: Dict[int, str]) -> Tuple[Optional[str], ...]:
    """A code -> name map as a tuple indexed by the code (None where no name)."""
    return tuple(names.get(code) for code in range(max(names) + 1))


_KINDS = _by_code(_format.KINDS)
_APIS = _by_code(_format.APIS)
_RESOURCES = _by_code(_format.RESOURCES)
_Q = struct.Struct("<Q")

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
    ``name`` is the blob kind (:data:`BLOB_KINDS`), ``target`` the 64-bit argument. A forked child's
    events start with copies of the schema, counter group and scope registrations it inherited (at
    its file's start time), so its samples and payloads decode on their own."""
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
    start_ns: int = 0
    """CLOCK_MONOTONIC ns when the file was created (the trace's clock)."""
    start_realtime_ns: int = 0
    """CLOCK_REALTIME ns read together with ``start_ns`` (0: not known): maps wall-clock time onto the trace."""
    run_id: int = 0
    """The run the process belongs to (``NVTX_CFFI_RECORD_RUN``, one per :func:`environment` call;
    0: recorded without one)."""
    registrations: List["Event"] = field(default_factory=list, repr=False, compare=False)
    """The file's payload-extension registrations (``blob`` events ``schema``, ``counter_group``,
    ``scope``) of every thread, gathered before its events are read, so a decoder
    (:meth:`nvtx_cffi.ext_records.ExtDecoder.preload`) knows them whatever the order of the chunks."""
    clocks: Any = field(default=None, repr=False, compare=False)
    """The :class:`nvtx_cffi.ext_records.Clocks` mapping counter time domains onto the trace's clock."""


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
    """Absolute path of ``libnvtx_recorder.so`` in the installed package (:func:`nvtx_cffi.recorder_path`;
    FileNotFoundError if the installation lacks it)."""
    return _tools.recorder_path()


def null_tool_path() -> str:
    """Absolute path of ``libnvtx_null_tool.so``: an NVTX tool that does nothing (benchmarks;
    :func:`nvtx_cffi.null_tool_path`, FileNotFoundError if the installation lacks it)."""
    return _tools.null_tool_path()


def environment(directory: Union[str, "os.PathLike[str]"], *, max_bytes: Optional[int] = None,
                run_id: Optional[int] = None) -> Dict[str, str]:
    """Environment variables that attach the recorder to a process started with them.

    ``directory`` receives one file per process (made absolute here; created if missing).
    ``max_bytes`` bounds each process's file; past it, events are dropped and counted (1 to
    2**64-1 bytes, as the recorder reads sizes; ValueError for one it would not take).
    Each call is one run: its processes (and their children, which inherit the environment) write
    ``run_id`` (default: a new random one) into their files' headers (:attr:`ProcessInfo.run_id`),
    which tells two runs recorded into one directory apart.
    """
    if run_id is None:
        run_id = secrets.randbits(64) | 1
    if not 0 < run_id < 1 << 64:
        msg = f"run_id must be 1 to 2**64-1, got {run_id}"
        raise ValueError(msg)
    env = {
        "NVTX_INJECTION64_PATH": library_path(),
        "NVTX_CFFI_RECORD_DIR": os.path.abspath(os.fspath(directory)),
        "NVTX_CFFI_RECORD_RUN": f"{run_id:016x}",
    }
    if max_bytes is not None:
        env["NVTX_CFFI_RECORD_MAX_BYTES"] = _size_text(int(max_bytes))
    return env


def _size_text(n: int) -> str:
    """``n`` bytes as the recorder reads a size (c/recorder/recorder_lifecycle.c parse_size: at most 19 digits, then
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
    candidates = [os.path.join(_HERE, _tools.RECORDER)]  # (loaded or not: never an error here)
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


# --------------------------------------------------------------------------- reading (file format 2, c/recorder/recorder.h)

ProgressFn = Callable[[int, int], None]

_CHUNK_HDR = _format.CHUNK_HEADER  # struct nvtxrec_chunk_header
_CHUNK_WORDS = _CHUNK_HDR.size // 8  # a chunk's records start after its header
_CHUNK_TAG, _CHUNK_CHECK = _lib.NVTXREC_CHUNK_TAG, _lib.NVTXREC_CHUNK_CHECK
# event heads NVTXREC_KIND_PUSH..MARK, extension words NVTXREC_W_ATTR..RANGE_ID_HI, data records
# NVTXREC_D_STRING..CLOCK
_HEAD_LO, _HEAD_HI = _lib.NVTXREC_KIND_PUSH, _lib.NVTXREC_KIND_MARK
_KIND_START, _KIND_END = _lib.NVTXREC_KIND_START, _lib.NVTXREC_KIND_END
_W_ATTR, _W_COLOR, _W_CATEGORY = _lib.NVTXREC_W_ATTR, _lib.NVTXREC_W_COLOR, _lib.NVTXREC_W_CATEGORY
_W_PAYLOAD, _W_PAYLOAD_HI = _lib.NVTXREC_W_PAYLOAD, _lib.NVTXREC_W_PAYLOAD_HI
_W_RANGE_ID, _W_RANGE_ID_HI = _lib.NVTXREC_W_RANGE_ID, _lib.NVTXREC_W_RANGE_ID_HI
_D_STRING, _D_DOMAIN, _D_CATEGORY = _lib.NVTXREC_D_STRING, _lib.NVTXREC_D_DOMAIN, _lib.NVTXREC_D_CATEGORY
_D_THREAD, _D_RESOURCE = _lib.NVTXREC_D_THREAD_NAME, _lib.NVTXREC_D_RESOURCE_NAME
_D_BLOB, _D_CLOCK = _lib.NVTXREC_D_BLOB, _lib.NVTXREC_D_CLOCK
_W_CONT = _lib.NVTXREC_W_CONT
_DF_INHERITED, _DF_TRUNCATED = _lib.NVTXREC_DFLAG_INHERITED, _lib.NVTXREC_DFLAG_TRUNCATED
_DF_MESSAGE, _DF_API_SHIFT = _lib.NVTXREC_DFLAG_MESSAGE, _lib.NVTXREC_DFLAG_API_SHIFT
# blob kinds that register (a forked child's file carries them): schema, counter group, scope
_REGISTRATIONS = (_lib.NVTXREC_BLOB_SCHEMA, _lib.NVTXREC_BLOB_COUNTER_GROUP, _lib.NVTXREC_BLOB_SCOPE)
_BLOB_COUNTER_SAMPLE = _lib.NVTXREC_BLOB_COUNTER_SAMPLE
_DATA_FIXED = struct.Struct("<QQB")  # a data record's time, arg, aux: NVTXREC_DATA_FIXED bytes
_STRING_OVERFLOW = _lib.NVTXREC_STRING_OVERFLOW
_CLOCK_TSC = _lib.NVTXREC_CLOCK_TSC
_RES_CUDA_DEVICE = _lib.NVTXREC_RES_CUDA_DEVICE  # a device ordinal: a signed int
_M56 = (1 << 56) - 1
_OVERFLOW_TEXT = "<nvtx-cffi recorder: string table full>"
_DEF_KINDS = _format.DEFINITIONS
_PT_EXT, _PT_UNKNOWN = _lib.NVTXREC_PT_EXT, _lib.NVTXREC_PT_UNKNOWN


#: payload type code -> (its name, its value from the raw bits), for every value type
_PAYLOADS = {code: (_format.PAYLOAD_TYPES[code], value) for code, value in _format.PAYLOAD_VALUES.items()}


def _decode_payload(code: int, raw: int, raw_type: int = 0) -> Tuple[Payload, Optional[str]]:
    found = _PAYLOADS.get(code)
    if found is not None:
        name, value = found
        return value(raw), name
    if code == _PT_EXT:
        return None, "ext"
    signed = raw_type - (1 << 32) if raw_type >= 1 << 31 else raw_type
    return raw, f"unknown({signed})"


class _Header:
    """The header of one record file (struct nvtxrec_file_header)."""

    __slots__ = ("path", "size", "pid", "ppid", "exec_gen", "page", "start_ns", "clock", "tsc0",
                 "ns_per_tick", "dropped", "write_errors", "proc_start", "start_realtime_ns", "run_id")


#: bound of a header's start_ns (CLOCK_MONOTONIC): 2**62 ns is 146 years of uptime, and it leaves
#: room in an int64 for the events' times, start_ns plus their offsets
_START_NS_LIMIT = 1 << 62


def _read_header(f: "io.BufferedReader", path: str) -> Optional[_Header]:
    """The header; None for a file still being created (empty, or its reserved header all zeros).

    Raises ValueError, naming the path, for a file that is not a recording, is cut inside its header
    or whose header does not check out (the field named).
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
    fields = dict(zip(_format.FILE_HEADER_FIELDS, _HEADER.unpack(head)))
    header_size, page, start_ns = fields["header_size"], fields["page_size"], fields["start_ns"]
    if header_size != _HEADER_SIZE or page == 0 or page & (page - 1) or page % 8:
        raise ValueError(f"{path}: corrupt NVTX recording header (header size {header_size}, page {page})")
    if start_ns >= _START_NS_LIMIT:  # event times are start_ns plus their offset, as int64 nanoseconds
        raise ValueError(f"{path}: corrupt NVTX recording header (start_ns {start_ns} is not below 2**62, "
                         "the CLOCK_MONOTONIC time the file was created)")
    h = _Header()
    h.path, h.size, h.page = path, size, page
    for name in ("pid", "ppid", "exec_gen", "start_ns", "clock", "tsc0", "ns_per_tick", "start_realtime_ns", "dropped",
                 "write_errors", "proc_start", "run_id"):
        setattr(h, name, fields[name])
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
        if _HEAD_LO <= tag <= _HEAD_HI or _D_STRING <= tag <= _D_CLOCK:
            return data[:end]
    return data[:_CHUNK_HDR.size]


class _Defs:
    """What the definitions pass learnt about one file: names, strings, clock pairs, time bounds."""

    __slots__ = ("header", "info", "strings", "string_truncated", "domains", "cal_x", "cal_y", "slope",
                 "first", "last", "skips", "np_strings")

    def to_ns(self, t: int) -> int:
        h = self.header
        if h.clock != _CLOCK_TSC:
            return h.start_ns + t
        xs, ys = self.cal_x, self.cal_y
        i = bisect.bisect_right(xs, t) - 1
        if i < 0:
            return h.start_ns + int(round(ys[0] + (t - xs[0]) * self.slope))
        if i + 1 < len(xs) and xs[i + 1] > xs[i]:
            x0, x1 = xs[i], xs[i + 1]
            return h.start_ns + int(round(ys[i] + (t - x0) * (ys[i + 1] - ys[i]) / (x1 - x0)))
        return h.start_ns + int(round(ys[i] + (t - xs[i]) * self.slope))

    def to_ns_many(self, np, ticks):
        """``(ns, exact)``: :meth:`to_ns` of each of ``ticks`` (a uint64 array) as int64, with NumPy,
        and where that gives :meth:`to_ns`'s own integer: its float operations are the same, on the
        same operands, when the interpolation's product (an exact integer in Python) fits a double."""
        h = self.header
        exact = ticks < np.uint64(1 << 52)
        t = np.where(exact, ticks, 0).astype(np.int64)
        if h.clock != _CLOCK_TSC:
            return t + h.start_ns, exact
        xs = np.asarray(self.cal_x, dtype=np.int64)
        ys = np.asarray(self.cal_y, dtype=np.int64)
        i = np.searchsorted(xs, t, side="right") - 1  # bisect_right
        at = np.maximum(i, 0)
        after = np.minimum(at + 1, len(xs) - 1)
        span = xs[after] - xs[at]
        between = (i >= 0) & (at + 1 < len(xs)) & (span > 0)
        dx = t - xs[at]
        dy = ys[after] - ys[at]
        fits = np.abs(dx).astype(np.float64) * np.abs(dy).astype(np.float64) < 2.0 ** 52
        exact &= ~between | fits
        ratio = (np.where(between, dx * dy, 0).astype(np.float64) / np.where(between, span, 1).astype(np.float64))
        y = ys[at].astype(np.float64) + np.where(between, ratio, dx.astype(np.float64) * self.slope)
        return np.rint(y).astype(np.int64) + h.start_ns, exact


def _segment_converter(d: "_Defs") -> Callable[[int], int]:
    """d.to_ns, with the interpolation segment of the last call cached (a chunk's times increase)."""
    h = d.header
    if h.clock != _CLOCK_TSC:
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


def _np_data_checked(np, w, tags, heads):
    """``(length, ok)`` of the data records at ``heads`` (a chunk's words ``w``, their ``tags``): each
    one's data length, and whether it checks out as :func:`_data_record` checks it (a length of its
    fixed part at least, every continuation word of it there)."""
    length = (w[heads] >> np.uint64(32)).astype(np.int64)
    words = (length + 6) // 7
    ends = heads + 1 + words
    ok = (length >= _DATA_FIXED.size) & (ends <= len(w))
    if ok.any():
        cont = np.concatenate(([0], np.cumsum(tags == _W_CONT)))
        ok[ok] = cont[ends[ok]] - cont[heads[ok] + 1] == words[ok]
    return length, ok


def _np_data_bytes(np, w, heads, length, count: int):
    """The first ``count`` data bytes of each data record at ``heads`` (checked ones, ``length``
    their data lengths), zero past its length: an (n, count) uint8 array."""
    words = (count + 6) // 7
    at = np.minimum(heads[:, None] + 1 + np.arange(words), len(w) - 1)  # (past a short record: masked)
    m = np.arange(count)
    out = w[at].view(np.uint8).reshape(len(heads), 8 * words)[:, m // 7 * 8 + 1 + m % 7]  # (a tag byte a word)
    out[m >= length[:, None]] = 0
    return out


def _np_u64(data):
    """The little-endian uint64 in each row of ``data`` (an (n, 8) uint8 array)."""
    return data.copy().view("<u8")[:, 0]


def _np_event_blobs(np, w, tags, heads, bounds: list):
    """The blob records among the data records at ``heads`` that register nothing (counter samples,
    binary payloads), in bulk: of those that check out only the time counts in the definitions pass
    (to ``bounds``, where the record is the file's own). Returns the heads left to read one by one:
    the others, and the blob records that do not check out (the one-by-one reader counts them)."""
    blob = heads[tags[heads] == _D_BLOB]
    if not blob.size:
        return heads
    length, ok = _np_data_checked(np, w, tags, blob)
    data = _np_data_bytes(np, w, blob[ok], length[ok], _DATA_FIXED.size)
    events = ~np.isin(data[:, _DATA_FIXED.size - 1], _REGISTRATIONS)
    done = blob[ok][events]
    own = ((w[done] >> np.uint64(8)) & np.uint64(_DF_INHERITED)) == 0
    if own.any():
        times = _np_u64(data[events][own, :8])
        bounds.append((int(times.min()), int(times.max())))
    return heads[~np.isin(heads, done)]


def _np_strings(np, w, tags, heads, strings: StringTable, truncated: set, bounds: list):
    """Add the string definitions among the data records at ``heads`` (a chunk's words ``w``) to
    ``strings`` in bulk; returns the heads left to read one by one (other definitions, and all of
    them when a string record does not check out: the one-by-one reader counts what is torn)."""
    is_string = tags[heads] == _D_STRING
    ks = heads[is_string]
    if not ks.size:
        return heads
    length, ok = _np_data_checked(np, w, tags, ks)
    if not ok.all():
        return heads
    head = w[ks]
    text_len = length - _DATA_FIXED.size
    text_ends = np.cumsum(text_len)
    native = _native_decoder()
    if native is not None and hasattr(native[1], "nvtxcffi_word_bytes"):  # only the records' bytes, in C
        ffi, lib = native
        words_at = ffi.from_buffer("uint8_t[]", np.ascontiguousarray(w).view(np.uint8))

        def data_bytes(skip: Any, count: Any) -> Any:
            first, skip, count = (np.ascontiguousarray(a, dtype=np.int64) for a in (ks + 1, skip, count))
            out = np.empty(int(count.sum()) + 1, dtype=np.uint8)
            size = lib.nvtxcffi_word_bytes(words_at, ffi.from_buffer("int64_t[]", first),
                                           ffi.from_buffer("int64_t[]", skip), ffi.from_buffer("int64_t[]", count),
                                           len(first), ffi.from_buffer("uint8_t[]", out))
            return out[:size]

        none = np.zeros(len(ks), dtype=np.int64)
        fixed = data_bytes(none, none + 16).view("<u8").reshape(-1, 2)  # time, arg
        text = data_bytes(none + _DATA_FIXED.size, text_len).tobytes()
    else:
        flat = w.view(np.uint8).reshape(-1, 8)[:, 1:].reshape(-1)  # the 7 data bytes of every word
        start = (ks + 1) * 7  # each record's data in flat
        fixed = flat[start[:, None] + np.arange(16)].copy().view("<u8")  # time, arg
        first = start + _DATA_FIXED.size
        text = flat[np.repeat(first - (text_ends - text_len), text_len)
                    + np.arange(int(text_ends[-1]) if len(text_ends) else 0)].tobytes()
    times, keys = fixed[:, 0], fixed[:, 1]
    flags = ((head >> np.uint64(8)) & np.uint64(0xFF)).astype(np.int64)
    strings._add_many(keys, text, text_ends)
    cut = (flags & _DF_TRUNCATED) != 0
    if cut.any():
        truncated.update(keys[cut].tolist())
    own = (flags & (_DF_INHERITED | _DF_MESSAGE)) == 0
    if own.any():
        bounds.append((int(times[own].min()), int(times[own].max())))
    return heads[~is_string]


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
                       exec_gen=h.exec_gen, start_ns=h.start_ns, start_realtime_ns=h.start_realtime_ns,
                       run_id=h.run_id)
    d.info = info
    strings = StringTable({_STRING_OVERFLOW: _OVERFLOW_TEXT})
    truncated: set = set()
    domains: Dict[int, Optional[str]] = {0: None}
    categories: list = []
    pairs = [(0, 0)]
    bounds: list = []  # event times (ticks) seen: (min, max) per chunk
    registrations: list = []  # (blob kind, domain id, time, arg, bytes, truncated) of schemas, counters, scopes

    def definition(tag: int, r: tuple) -> None:
        flags, dom, t, arg, aux, raw, _i = r
        if tag == _D_BLOB:
            if aux in _REGISTRATIONS:  # (a forked child's inherited copies too)
                registrations.append((aux, dom, t, arg, raw, bool(flags & _DF_TRUNCATED)))
        elif tag == _D_CLOCK:
            pairs.append((t, arg - h.start_ns))
            return
        if tag == _D_STRING:
            strings._add(arg, raw)
            if flags & _DF_TRUNCATED:
                truncated.add(arg)
            if not (flags & (_DF_INHERITED | _DF_MESSAGE)):
                bounds.append((t, t))
            return
        text = raw.decode("utf-8", "replace")
        if tag == _D_DOMAIN:
            domains[arg] = text
        elif tag == _D_CATEGORY:
            categories.append((dom, arg, text))
        elif tag == _D_THREAD:
            info.thread_names[arg] = text
        if not (flags & _DF_INHERITED or (tag == _D_STRING and flags & _DF_MESSAGE)):
            bounds.append((t, t))

    np = _numpy()
    head_lo, head_hi, w_lo, w_hi, d_lo, d_hi = _HEAD_LO, _HEAD_HI, _W_ATTR, _W_RANGE_ID_HI, _D_STRING, _D_CLOCK
    try:
        for _off, _tid, data in _chunks(f, h, d.skips):
            if np is not None:
                w, tags = _np_valid(np, data, d.skips)
                heads = np.flatnonzero((tags >= _HEAD_LO) & (tags <= _HEAD_HI))
                if heads.size:  # a chunk is one thread's, in time order
                    bounds.append((int(w[heads[0]]) >> 8, int(w[heads[-1]]) >> 8))
                data_heads = np.flatnonzero((tags >= _D_STRING) & (tags <= _D_CLOCK))
                if data_heads.size > 16:  # many definitions (strings): in bulk where they check out
                    data_heads = _np_strings(np, w, tags, data_heads, strings, truncated, bounds)
                data_heads = _np_event_blobs(np, w, tags, data_heads, bounds)
                for k in data_heads.tolist():
                    words = _np_data_words(w, k)
                    r = _data_record(words, 0, len(words))
                    if r is None:
                        d.skips.bytes += 8 * _torn_words(words, 0, len(words))
                    else:
                        definition(int(tags[k]), r)
                continue
            words = _chunk_words(data)
            n = len(words)
            i = _CHUNK_WORDS
            lo = hi = None
            while i < n:
                w = words[i]
                tag = w & 0xFF
                if head_lo <= tag <= head_hi:
                    if lo is None:
                        lo = (w >> 8) & _M56
                    hi = (w >> 8) & _M56
                    i += 1
                elif w_lo <= tag <= w_hi:
                    i += 1
                elif d_lo <= tag <= d_hi:
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
    if h.clock == _CLOCK_TSC and span_ns >= 10_000_000 and xs[-1] > xs[0]:
        d.slope = span_ns / (xs[-1] - xs[0])
    else:
        d.slope = h.ns_per_tick or 1.0
    d.strings, d.string_truncated, d.domains = strings, truncated, domains
    d.first = d.to_ns(first) if first is not None else None
    d.last = d.to_ns(last) if last is not None else None
    info.skipped_bytes, info.skipped_chunks = d.skips.bytes, d.skips.chunks
    for aux, dom, t, arg, raw, cut in registrations:
        ev = object.__new__(Event)
        _set(ev, "__dict__", {
            "kind": "blob", "time_ns": d.to_ns(t), "pid": h.pid, "tid": 0,
            "domain": _domain_name(domains, dom) if dom else None, "message": None, "color": None, "category": 0,
            "payload": None, "payload_type": None, "range_id": None, "api": "ex", "name": BLOB_KINDS[aux],
            "target": arg, "resource": None, "truncated": cut, "data": raw, "exec_gen": h.exec_gen})
        info.registrations.append(ev)
    from .ext_records import Clocks  # (here: a program that only names the recorder need not build its classes)

    tsc0 = h.tsc0
    info.clocks = Clocks(h.start_ns, h.start_realtime_ns,
                         (lambda ticks: d.to_ns(ticks - tsc0)) if h.clock == _CLOCK_TSC else None)
    return d


def _domain_name(domains: Dict[int, Optional[str]], i: int) -> Optional[str]:
    name = domains.get(i, _MISSING)
    return f"<unknown domain {i}>" if name is _MISSING else name  # type: ignore[return-value]


_MISSING = object()
_time_key = operator.attrgetter("time_ns")
_set = object.__setattr__


def _string(strings: "StringTable", i: int) -> str:
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
    head_lo, head_hi, w_lo, w_hi, d_lo, d_hi = _HEAD_LO, _HEAD_HI, _W_ATTR, _W_RANGE_ID_HI, _D_STRING, _D_CLOCK
    start_end = (_KIND_START, _KIND_END)
    try:
        for done_here, tid, data in _chunks(f, h, skips):
            words = _chunk_words(data)
            n = len(words)
            i = _CHUNK_WORDS
            while i < n:
                w = words[i]
                tag = w & 0xFF
                if head_lo <= tag <= head_hi:
                    t = (w >> 8) & _M56
                    i += 1
                    api = dom = msg = category = ptype = raw_type = 0
                    color = None
                    payload_raw = 0
                    range_id = None
                    while i < n:
                        x = words[i]
                        xt = x & 0xFF
                        if xt < w_lo or xt > w_hi:
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
                        "range_id": (range_id or 0) if tag in start_end else None, "api": _APIS[api],
                        "name": None, "target": None, "resource": None, "truncated": msg in truncated,
                        "data": None, "exec_gen": gen})
                    yield ev
                elif d_lo <= tag <= d_hi:
                    r = _data_record(words, i, n)
                    if r is None:  # torn: skipped (and counted by _scan)
                        i += _torn_words(words, i, n)
                        continue
                    flags, dom, t, arg, aux, raw, i = r
                    # inherited definitions are no events, but a forked child's copies of its
                    # parent's schema / counter / scope registrations are what decodes its blobs
                    if tag == _D_CLOCK or (flags & _DF_INHERITED and tag != _D_BLOB) or (
                            tag == _D_STRING and flags & _DF_MESSAGE):
                        continue
                    api = _APIS[(flags >> _DF_API_SHIFT) & 3]
                    domain = _domain_name(domains, dom) if dom else None
                    data_bytes = None
                    if tag == _D_BLOB:
                        name: Optional[str] = BLOB_KINDS.get(aux, f"unknown({aux})")
                        data_bytes, api, target, resource = raw, "ex", arg, None
                    else:
                        name = raw.decode("utf-8", "replace")
                        if tag == _D_RESOURCE:
                            target = arg - (1 << 64) if aux == _RES_CUDA_DEVICE and arg >= 1 << 63 else arg
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
                elif w_lo <= tag <= w_hi:
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
#   blocks(source, *, progress=None, max_events=1 << 16, samples=False) -> BlockStream
#       source: a recording directory (every *.nvtxrec) or one record file.
#       samples: the small counter samples come as columns (EventBlock.samples), not as Blobs.
#       Raises FileNotFoundError for a missing source, ValueError (naming the path) for a file that
#       is not a recording or is cut inside its header. An empty directory is an empty stream.
#   BlockStream: like EventStream, known before iterating:
#       .processes  Dict[int, ProcessInfo]   pid -> info of its latest exec image (see .images)
#       .images     List[ProcessInfo]        one per record file (pid, exec_gen, ...), file order
#       .dropped    int                      events the processes could not record (all images)
#       .skipped_bytes / .skipped_chunks     corrupt data the reader stepped over (never silent)
#       .start_ns / .end_ns                  earliest / latest event (None when there is none)
#       .total_bytes                         what progress(done, total) counts up to
#     iterating yields EventBlock objects, file by file, at most max_events events each, and
#     extension records of at most 4 * max_events words (a block's first chunk may hold more).
#   EventBlock:
#       .info      ProcessInfo of the file (pid, ppid, exec_gen, thread_names, category_names)
#       .pid       int;  .exec_gen int (0 for the first image of a pid; +1 per exec())
#       .events    numpy array of EVENT_DTYPE; each thread's events in time order, threads
#                  interleaved by chunk (not globally sorted: np.argsort(kind="stable") yourself)
#       .strings   StringTable (a read-only mapping, compact): string id -> text, the file's whole
#                  table; [0] -> None (no message), an id the file does not define ->
#                  "<unknown string N>" (.get() and `in` see only the defined ones).
#                  Registered strings and messages share it.
#       .domains   Dict[int, Optional[str]]: domain id -> name (0 -> None: NVTX's default domain)
#       .blobs     List[Blob]: the block's variable-length extension records (see Blob)
#       .samples   blocks(samples=True) only: a numpy structured array (fields below), the
#                  counter_sample records of at most 64 data bytes and not cut (scalar values,
#                  sample_no_value, groups of a few fields), which .blobs then leaves out; None
#                  when there are none
#       .blob_order  blocks(samples=True) only: numpy int64 array, the place of each .blobs entry
#                  among the block's extension records (file order), as .samples' order
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
#   .samples fields (little-endian, packed, 29 bytes + the data's width): a counter_sample Blob as a row
#       order        int64   its place among the block's extension records (as .blob_order)
#       time_ns      int64   as Blob.time_ns
#       tid          uint32  as Blob.tid
#       domain       uint32  as Blob.domain
#       counter      uint64  Blob.arg: the counter id
#       size         uint8   len(Blob.data) (17..64: a sample head, then its value's bytes)
#       data         W x u1  Blob.data, zero-padded; W = 24, or the block's longest rounded up to
#                            8 bytes (up to 64) where it has longer samples

KIND_PUSH, KIND_POP, KIND_START, KIND_END, KIND_MARK = (
    _lib.NVTXREC_KIND_PUSH, _lib.NVTXREC_KIND_POP, _lib.NVTXREC_KIND_START, _lib.NVTXREC_KIND_END, _lib.NVTXREC_KIND_MARK)
FLAG_COLOR, FLAG_TRUNCATED = _lib.NVTXCFFI_EVENT_COLOR, _lib.NVTXCFFI_EVENT_TRUNCATED
PT_NONE, PT_UINT64, PT_INT64 = _lib.NVTXREC_PT_NONE, _lib.NVTXREC_PT_UINT64, _lib.NVTXREC_PT_INT64
PT_DOUBLE, PT_UINT32, PT_INT32, PT_FLOAT = (
    _lib.NVTXREC_PT_DOUBLE, _lib.NVTXREC_PT_UINT32, _lib.NVTXREC_PT_INT32, _lib.NVTXREC_PT_FLOAT)
PT_EXT, PT_UNKNOWN = _PT_EXT, _PT_UNKNOWN
#: names of the blob kinds (c/recorder/nvtxrec_format.h NVTXREC_BLOB_*)
BLOB_KINDS = _format.BLOB_KINDS

_EVENT_FIELDS = [
    ("time_ns", "<i8"), ("kind", "u1"), ("api", "u1"), ("flags", "u1"), ("payload_type", "u1"),
    ("tid", "<u4"), ("domain", "<u4"), ("message", "<u4"), ("color", "<u4"), ("category", "<u4"),
    ("payload", "<u8"), ("range_id", "<u8"),
]


#: the Blob.data of an EventBlock.samples row: a sample head (16 bytes) and an 8-byte value, or,
#: in a block with longer samples, up to a group of six 8-byte fields (a wider row for every sample:
#: only the blocks that have such samples pay for it)
_SAMPLE_DATA, _SAMPLE_DATA_MAX = 24, 64
#: a block's extension records (counter samples, binary payloads) take this many words a
#: max_events event at most, give or take a chunk: a block of samples alone stays bounded
_EXT_WORDS_PER_EVENT = 4


def _sample_fields(width: int) -> list:
    """The fields of EventBlock.samples rows of ``width`` data bytes."""
    return [("order", "<i8"), ("time_ns", "<i8"), ("tid", "<u4"), ("domain", "<u4"), ("counter", "<u8"),
            ("size", "u1"), ("data", "u1", (width,))]


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


class StringTable(Mapping):
    """String id -> text of one record file (a read-only mapping); ``[0]`` -> None, an id the file
    does not define -> a placeholder (``get`` and ``in`` see only the defined ones).

    Compact: the file's strings are kept as their UTF-8 bytes in one buffer with an offset each
    (16 bytes a string over its length, not a Python string and a dict entry: a recording
    of a million distinct range names holds tens of MB, not hundreds); a lookup decodes its text,
    and a bounded cache keeps the recent ones. ``StringTable({id: text})`` makes one from a dict.
    """

    _CACHE = 4096

    def __init__(self, items: Any = ()) -> None:
        self._blob = bytearray()
        self._starts = array.array("q", [0])
        self._ids: Optional[array.array] = array.array("q")  # per string, in definition order
        self._pos: Optional[array.array] = None  # dense: id -> string number (-1: none)
        self._sorted: Optional[Tuple[array.array, array.array]] = None  # sparse: (ids, string numbers)
        self._given: Dict[int, Optional[str]] = {}  # texts given as str (the constructor, placeholders)
        self._cache: Dict[int, str] = {}
        for key, value in (items.items() if hasattr(items, "items") else items):
            self._given[int(key)] = value

    # building (the reader's scan): raw UTF-8 texts, later definitions of an id win
    def _add(self, key: int, raw: bytes) -> None:
        self._blob += raw
        self._starts.append(len(self._blob))
        self._ids.append(key)  # type: ignore[union-attr]

    def _add_many(self, keys: Any, blob: bytes, ends: Any) -> None:
        """Strings ``keys[j]`` = ``blob[ends[j-1]:ends[j]]`` (``ends`` relative to ``blob``)."""
        base = len(self._blob)
        self._blob += blob
        if hasattr(ends, "dtype"):  # NumPy arrays: their bytes as the arrays' items
            self._starts.frombytes((ends.astype("=i8") + base).tobytes())
            self._ids.frombytes(keys.astype("=i8").tobytes())  # type: ignore[union-attr]
            return
        self._starts.extend(base + int(e) for e in ends)
        self._ids.extend(int(k) for k in keys)  # type: ignore[union-attr]

    def _index(self) -> None:
        ids = self._ids
        self._ids = None
        n = len(ids)
        top = max(ids) if n else -1
        if 0 <= min(ids, default=0) and top < 2 * n + 1024:  # dense: the recorder numbers them 1, 2, 3...
            pos = array.array("q", [-1]) * (top + 1)
            try:
                import numpy as np
            except ImportError:  # pragma: no cover - PyPy
                for k, key in enumerate(ids):
                    pos[key] = k
            else:  # (a key given twice: its last number, as the loop gives)
                view = np.frombuffer(pos, dtype=np.int64)
                view[np.frombuffer(ids, dtype=np.int64)] = np.arange(n, dtype=np.int64)
                del view
            self._pos = pos
        else:
            order = sorted(range(n), key=ids.__getitem__)  # stable: an id's last definition last
            keys, numbers = array.array("q"), array.array("q")
            for k in order:
                if keys and keys[-1] == ids[k]:
                    numbers[-1] = k
                else:
                    keys.append(ids[k])
                    numbers.append(k)
            self._sorted = (keys, numbers)

    def _number(self, key: Any) -> int:
        """The string number of ``key`` (-1: not defined here)."""
        if self._ids is not None:
            self._index()
        pos = self._pos
        if type(key) is not int:
            try:
                key = operator.index(key)
            except TypeError:
                return -1
        if pos is not None:
            return pos[key] if 0 <= key < len(pos) else -1
        keys, numbers = self._sorted  # type: ignore[misc]
        j = bisect.bisect_left(keys, key)
        return numbers[j] if j < len(keys) and keys[j] == key else -1

    def _text(self, k: int) -> str:
        return self._blob[self._starts[k]:self._starts[k + 1]].decode("utf-8", "replace")

    def get(self, key: Any, default: Any = None) -> Any:
        cache = self._cache
        text = cache.get(key)
        if text is not None:
            return text
        if key in self._given:
            return self._given[key]
        k = self._number(key)
        if k < 0:
            return default
        if len(cache) >= self._CACHE:
            cache.clear()
        text = cache[key] = self._text(k)
        return text

    def texts(self, keys: Any) -> List[Optional[str]]:
        """``[self[key] for key in keys]`` (ints), in one pass: what a writer asks for a batch's names."""
        if self._ids is not None:
            self._index()
        if len(keys) >= 1024:
            try:
                import numpy  # noqa: F401
            except ImportError:  # pragma: no cover - PyPy
                return self._texts(keys)
            return self._texts_bulk(keys)
        return self._texts(keys)

    def _texts_bulk(self, keys: Any) -> List[Optional[str]]:
        """:meth:`texts` for many keys: their bytes gathered at once and, when all ASCII, decoded as
        one string cut at the offsets; the other keys one by one."""
        import numpy as np

        data, lengths = self.raw_many(np.asarray(keys, dtype=np.int64), nul=True)
        text = data.tobytes()
        if not text.isascii():
            return self._texts(keys)
        out: List[Optional[str]] = text.decode("ascii").split("\0")
        out.pop()  # (after the last separator)
        if len(out) != len(lengths):  # a NUL inside a text
            return self._texts(keys)
        if int(lengths.min()) < 0:
            other = np.flatnonzero(lengths < 0).tolist()
            for j, found in zip(other, self._texts([keys[j] for j in other])):
                out[j] = found
        return out

    def _texts(self, keys: Any) -> List[Optional[str]]:
        given, pos, blob, starts = self._given, self._pos, self._blob, self._starts
        top = len(pos) if pos is not None else 0
        out: List[Optional[str]] = []
        for key in keys:
            if key in given:
                out.append(given[key])
                continue
            if pos is not None:
                k = pos[key] if 0 <= key < top else -1
            else:
                k = self._number(key)
            if k >= 0:
                out.append(blob[starts[k]:starts[k + 1]].decode("utf-8", "replace"))
            else:
                out.append(None if key == 0 else f"<unknown string {key}>")
        return out

    def raw_many(self, keys: Any, nul: bool = False) -> Tuple[Any, Any]:
        """The UTF-8 bytes of ``keys`` (a NumPy int array), without decoding: ``(data, lengths)``,
        ``data`` a NumPy uint8 array of the texts one after another, ``lengths`` per key (-1: a key
        this table does not hold as bytes, with no bytes in ``data``: look it up as text).
        ``nul``: a 0 byte after each text (the keys of length -1 too), not counted in ``lengths``."""
        import numpy as np

        from ._fixedwidth import join_rows  # (here: it imports NumPy)

        if self._ids is not None:
            self._index()
        keys = np.asarray(keys, dtype=np.int64)
        if self._pos is not None:
            pos = np.frombuffer(self._pos, dtype=np.int64)
            inside = (keys >= 0) & (keys < len(pos))
            k = np.full(len(keys), -1, dtype=np.int64)
            k[inside] = pos[keys[inside]]
        else:
            sorted_keys, numbers = (np.frombuffer(a, dtype=np.int64) for a in self._sorted)  # type: ignore[misc]
            j = np.minimum(np.searchsorted(sorted_keys, keys), max(len(sorted_keys) - 1, 0))
            found = (sorted_keys[j] == keys) if len(sorted_keys) else np.zeros(len(keys), dtype=bool)
            k = np.where(found, numbers[j] if len(numbers) else 0, -1)
        if self._given:
            k[np.isin(keys, np.fromiter(self._given, dtype=np.int64, count=len(self._given)))] = -1
        starts = np.frombuffer(self._starts, dtype=np.int64)
        ok = k >= 0
        # np.where computes both sides: the index of a key not held must stay inside `starts` (an
        # empty table's is [0] alone), whatever the value it reads there.
        at = np.where(ok, k, 0)
        begin = np.where(ok, starts[at], 0)
        lengths = np.where(ok, starts[np.minimum(at + 1, len(starts) - 1)] - begin, -1)
        take = np.maximum(lengths, 0)
        none = np.zeros(len(keys), dtype=np.int64)
        blob = np.frombuffer(self._blob, dtype=np.uint8)
        try:  # (the view is let go at once: the buffer grows as the reader adds strings)
            data = join_rows(blob, begin, take, np.zeros(1, dtype=np.uint8), none, none + 1 if nul else none)
        finally:
            del blob
        return data, lengths

    def __getitem__(self, key: Any) -> Optional[str]:
        text = self.get(key, _MISSING)
        if text is _MISSING:
            return None if key == 0 else f"<unknown string {key}>"
        return text

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[int]:
        if self._ids is not None:
            self._index()
        given = self._given
        yield from given
        if self._pos is not None:
            keys: Any = (key for key, k in enumerate(self._pos) if k >= 0)
        else:
            keys = self._sorted[0]  # type: ignore[index]
        for key in keys:
            if key not in given:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"StringTable({dict(self.items())!r})"


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
    valid = np.zeros(len(events), dtype=bool)
    for code, (name, _value) in _PAYLOADS.items():
        m = pt == code
        if m.any():
            valid |= m
            fmt = _format.PAYLOAD_FORMATS[name].format
            size = struct.calcsize(fmt)  # the value's bytes: the low ones of the 64 bits
            bits = raw[m] if size == 8 else (raw[m] & np.uint64((1 << 8 * size) - 1)).astype(f"<u{size}")
            out[m] = bits.view(np.dtype(fmt)).astype(np.float64)
    return out, valid


class EventBlock:
    """Up to ``max_events`` events of one record file as a NumPy structured array (see READER-API)."""

    __slots__ = ("info", "pid", "exec_gen", "events", "strings", "domains", "blobs", "samples", "blob_order")

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
    w = np.frombuffer(data, dtype="<u8", offset=_CHUNK_HDR.size)
    zero = np.flatnonzero(w == 0)
    if zero.size:
        w = w[:zero[0]]
    tags = (w & 0xFF).astype(np.uint8)
    bad = np.flatnonzero(((tags > _HEAD_HI) & (tags < _W_ATTR)) | ((tags > _W_RANGE_ID_HI) & (tags < _D_STRING))
                         | ((tags > _D_CLOCK) & (tags < _W_CONT)))
    if bad.size:
        skips.bytes += (len(w) - bad[0]) * 8
        w, tags = w[:bad[0]], tags[:bad[0]]
    return w, tags


_NATIVE: List[Any] = []


def _native_decoder() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the block decoder (nvtxcffi_decode_events), else None."""
    return _bulk.helper(_NATIVE, "nvtxcffi_decode_events")


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


def _np_block(np, d: _Defs, parts, dtype, skips: _Skips, samples: bool) -> EventBlock:
    words = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
    tags = np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]
    is_head = (tags >= _HEAD_LO) & (tags <= _HEAD_HI)
    counts = [int(np.count_nonzero(is_head[s:e])) for s, e in _spans(parts)]
    decoded = _np_decode(np, words, sum(counts), dtype)
    if decoded is not None:
        ev, ticks = decoded
        ev["time_ns"] = _np_times(np, d, ticks)
        ev["tid"] = np.repeat(np.asarray([p[0] for p in parts], dtype=np.uint32), counts)
    else:
        ev = _np_fields(np, d, words, tags, is_head, parts, counts, dtype)
    return _np_finish(np, d, ev, parts, skips, samples)


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


def _np_finish(np, d: _Defs, ev, parts, skips: _Skips, samples: bool = False) -> EventBlock:
    if d.string_truncated:
        cut = np.isin(ev["message"], np.fromiter(d.string_truncated, dtype=np.uint32))
        ev["flags"][cut] |= FLAG_TRUNCATED
    blobs: List[Blob] = []
    order: List[int] = []  # (samples) each Blob's place among the block's extension records
    rows: list = []  # (samples) the sample rows of each part
    seen = 0  # (samples) the extension records of the parts before
    for tid, w, t in parts:
        heads = np.flatnonzero(t == _D_BLOB)
        if not heads.size:
            continue
        length, ok = _np_data_checked(np, w, t, heads)
        heads, length = heads[ok], length[ok]  # torn: skipped (and counted by _scan)
        if samples:
            place = seen + np.arange(len(heads))
            seen += len(heads)
            found = _np_sample_rows(np, d, tid, w, heads, length, place)
            if found is not None:
                rows.append(found)
                small = np.isin(place, found["order"])
                heads, length, place = heads[~small], length[~small], place[~small]
            order += place.tolist()
        blobs += _np_blobs(np, d, tid, w, heads, length)
    b = EventBlock()
    b.info, b.pid, b.exec_gen = d.info, d.header.pid, d.header.exec_gen
    b.events, b.strings, b.domains, b.blobs = ev, d.np_strings, d.domains, blobs
    b.samples = _np_joined_rows(np, rows) if rows else None
    b.blob_order = np.asarray(order, dtype=np.int64) if samples else None
    return b


def _np_blobs(np, d: _Defs, tid: int, w, heads, length) -> List["Blob"]:
    """The :class:`Blob` of each checked data record at ``heads`` (a chunk's words ``w``; ``length``:
    their data lengths), as :func:`_data_record` reads one: the data bytes of all of them gathered
    at once (7 a continuation word), their times converted at once where that is exact."""
    if not heads.size:
        return []
    k = (length + 6) // 7  # continuation words of each record
    first = np.cumsum(k) - k
    index = np.repeat(heads + 1 - first, k) + np.arange(int(k.sum()))
    data = w[index].view(np.uint8).reshape(-1, 8)[:, 1:].tobytes()  # byte 0 of a word: its tag
    at = (7 * first).tolist()
    head = w[heads]
    flags = ((head >> np.uint64(8)) & np.uint64(0xFF)).tolist()
    dom = ((head >> np.uint64(16)) & np.uint64(0xFFFF)).tolist()
    fixed = _DATA_FIXED.size
    fields = [_DATA_FIXED.unpack_from(data, a) for a in at]
    ticks = np.fromiter((f[0] for f in fields), dtype=np.uint64, count=len(fields))
    ns, exact = d.to_ns_many(np, ticks)
    ns = [n if ok else d.to_ns(tt) for n, ok, tt in zip(ns.tolist(), exact.tolist(), ticks.tolist())]
    return [Blob(BLOB_KINDS.get(aux, f"unknown({aux})"), aux, time, tid, dm, arg, data[a + fixed:a + n],
                 bool(fl & _DF_TRUNCATED))
            for (_tt, arg, aux), time, dm, fl, a, n in zip(fields, ns, dom, flags, at, length.tolist())]


def _np_joined_rows(np, rows: list):
    """The EventBlock.samples rows of each part, as one array as wide as the widest part's."""
    if len(rows) == 1:
        return rows[0]
    width = max(r.dtype["data"].shape[0] for r in rows)
    out = np.zeros(sum(len(r) for r in rows), dtype=_sample_fields(width))
    at = 0
    for r in rows:
        part = out[at:at + len(r)]
        for name in r.dtype.names:
            if name == "data":
                part[name][:, :r.dtype[name].shape[0]] = r[name]
            else:
                part[name] = r[name]
        at += len(r)
    return out


def _np_sample_rows(np, d: _Defs, tid: int, w, heads, length, place):
    """The rows of EventBlock.samples among the checked blob records at ``heads`` (``length``: their
    data lengths, ``place``: their places among the block's extension records): the counter samples
    of at most _SAMPLE_DATA_MAX bytes, not cut, whose time :meth:`_Defs.to_ns_many` gives exactly; None
    when there are none."""
    data = _np_data_bytes(np, w, heads, length, _DATA_FIXED.size + _SAMPLE_DATA)
    flags = (w[heads] >> np.uint64(8)) & np.uint64(0xFF)
    small = ((data[:, _DATA_FIXED.size - 1] == _BLOB_COUNTER_SAMPLE)
             & (length <= _DATA_FIXED.size + _SAMPLE_DATA_MAX) & ((flags & np.uint64(_DF_TRUNCATED)) == 0))
    if not small.any():
        return None
    heads, length, place, data = heads[small], length[small], place[small], data[small]
    width = max(_SAMPLE_DATA, (int(length.max()) - _DATA_FIXED.size + 7) // 8 * 8)
    if width > _SAMPLE_DATA:
        data = _np_data_bytes(np, w, heads, length, _DATA_FIXED.size + width)
    time_ns, exact = d.to_ns_many(np, _np_u64(data[:, :8]))
    rows = np.zeros(int(exact.sum()), dtype=_sample_fields(width))
    if not len(rows):
        return None
    rows["order"] = place[exact]
    rows["time_ns"] = time_ns[exact]
    rows["tid"] = tid
    rows["domain"] = ((w[heads[exact]] >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.uint32)
    rows["counter"] = _np_u64(data[exact, 8:16])
    rows["size"] = length[exact] - _DATA_FIXED.size
    rows["data"] = data[exact, _DATA_FIXED.size:]
    return rows


def _spans(parts) -> Iterator[Tuple[int, int]]:
    s = 0
    for p in parts:
        e = s + len(p[1])
        yield s, e
        s = e


class BlockStream:
    """A recording read as :class:`EventBlock` objects (see the READER-API contract). Built by :func:`blocks`."""

    def __init__(self, paths: List[str], progress: Optional[ProgressFn], max_events: int, strict: bool,
                 samples: bool = False) -> None:
        import numpy  # noqa: F401  (fail here, not halfway through)

        self._stream = EventStream(paths, None, strict=strict)
        s = self._stream
        self.processes, self.images, self.dropped = s.processes, s.images, s.dropped
        self.skipped_bytes, self.skipped_chunks = s.skipped_bytes, s.skipped_chunks
        self.start_ns, self.end_ns, self.total_bytes = s.start_ns, s.end_ns, s.total_bytes
        self._progress = progress
        self._max = max(1, int(max_events))
        self._samples = samples

    def __iter__(self) -> Iterator[EventBlock]:
        import numpy as np

        dtype = np.dtype(_EVENT_FIELDS)
        done = 0
        for d in self._stream._scans:
            d.np_strings = d.strings
            try:
                f, h = _open(d.header.path)
            except FileNotFoundError:
                continue
            if f is None or h is None:
                continue
            skips = _Skips()
            try:
                parts: list = []
                n = ext = 0  # the block's events, and words of extension records
                for done_here, tid, data in _chunks(f, h, skips):
                    w, t = _np_valid(np, data, skips)
                    blob = np.flatnonzero(t == _D_BLOB)
                    words = int((((w[blob] >> np.uint64(32)).astype(np.int64) + 6) // 7).sum()) + len(blob)
                    if parts and ext + words > self._max * _EXT_WORDS_PER_EVENT:
                        # (counter samples amid few events or none: the block ends before this chunk)
                        yield _np_block(np, d, parts, dtype, skips, self._samples)
                        parts, n, ext = [], 0, 0
                        if self._progress is not None:
                            self._progress(min(done + done_here, self.total_bytes), self.total_bytes)
                    ext += words
                    while len(w):
                        head_pos = np.flatnonzero((t >= _HEAD_LO) & (t <= _HEAD_HI))
                        room = self._max - n
                        if len(head_pos) > room:  # split the chunk at a head: at most max_events per block
                            cut = int(head_pos[room]) if room > 0 else 0
                            if cut:
                                parts.append((tid, w[:cut], t[:cut]))
                            if parts:
                                yield _np_block(np, d, parts, dtype, skips, self._samples)
                            parts, n, ext = [], 0, 0
                            w, t = w[cut:], t[cut:]
                            if self._progress is not None:
                                self._progress(min(done + done_here, self.total_bytes), self.total_bytes)
                            continue
                        parts.append((tid, w, t))
                        n += len(head_pos)
                        break
                if parts:
                    yield _np_block(np, d, parts, dtype, skips, self._samples)
            finally:
                f.close()
            done += d.header.size
            if self._progress is not None:
                self._progress(done, self.total_bytes)


def blocks(source: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None,
           max_events: int = 1 << 16, samples: bool = False) -> BlockStream:
    """Read a recording directory or record file as NumPy blocks of events (see READER-API above)::

        s = recorder.blocks("/tmp/trace")
        for b in s:
            pushes = b.events[b.events["kind"] == recorder.KIND_PUSH]
            names = [b.strings[i] for i in pushes["message"]]
    """
    path = os.fspath(source)
    return BlockStream(_paths(path), progress, max_events, os.path.isfile(path), samples)
