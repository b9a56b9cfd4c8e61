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
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import glob
import mmap
import operator
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

__all__ = [
    "Capture",
    "Event",
    "ProcessInfo",
    "Recording",
    "capture",
    "current_file",
    "environment",
    "flush",
    "library_path",
    "loaded",
    "null_tool_path",
    "read",
    "read_file",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAGIC = b"NVTXREC1"
# struct nvtxrec_file_header / struct nvtxrec_record in c/recorder.h
_HEADER = struct.Struct("<8sIIIIIIQQQQQ")
_RECORD = struct.Struct("<IBBBBIIQIIiIQQ")
_RECORD_SIZE = _RECORD.size  # 56

_KINDS = (None, "push", "pop", "start", "end", "mark", "domain", "string", "category", "thread_name",
          "resource_name")
_EVENT_KINDS = frozenset((1, 2, 3, 4, 5))
_K_START, _K_END, _K_DOMAIN, _K_STRING, _K_CATEGORY, _K_THREAD, _K_RESOURCE = 3, 4, 6, 7, 8, 9, 10
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


def _parse(path: str, progress: Optional[ProgressFn], done: int, total: int
           ) -> Tuple[Optional[ProcessInfo], List[Event]]:
    """Events (in file order) and process info of one record file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _HEADER.size:
            return None, []
        buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    try:
        (magic, _version, header_size, chunk, pid, ppid, rsize, _start, _rt, _max, dropped,
         write_errors) = _HEADER.unpack_from(buf, 0)
        if magic != _MAGIC or chunk == 0 or rsize != _RECORD_SIZE:
            return None, []
        info = ProcessInfo(pid=pid, ppid=ppid, path=path, dropped=dropped, write_errors=write_errors)
        events: List[Event] = []
        append = events.append
        unpack = _RECORD.unpack_from
        new = object.__new__
        set_ = _set
        domains: Dict[int, Optional[str]] = {0: None}
        pending: List[Event] = []    # events seen before their domain's definition (other chunk)
        categories: list = []
        texts: Dict[bytes, str] = {}
        step = 0
        for cstart in range(header_size, size, chunk):
            cend = min(cstart + chunk, size)
            off = cstart
            while off + _RECORD_SIZE <= cend:
                (n, kind, api, flags, aux, tid, category, time_ns, dom, color, ptype, tlen, payload,
                 arg) = unpack(buf, off)
                if n < _RECORD_SIZE or n & 7 or off + n > cend or _RECORD_SIZE + tlen > n:
                    break  # unused rest of the chunk, or a torn/cut record
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
                domain = domains.get(dom, _MISSING) if dom else None
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
                        "resource": None, "truncated": bool(flags & _F_TRUNCATED),
                    }
                else:
                    if kind == _K_DOMAIN:
                        domain = domains[arg] = text if text is not None else ""
                    elif kind == _K_CATEGORY:
                        categories.append((dom, arg, text or ""))
                    elif kind == _K_THREAD:
                        info.thread_names[arg] = text or ""
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
                        "resource": resource, "truncated": bool(flags & _F_TRUNCATED),
                    }
                ev = new(Event)
                set_(ev, "__dict__", values)  # frozen: skip the per-field __setattr__ of __init__
                append(ev)
                if domain is _MISSING:
                    values["domain"] = dom
                    pending.append(ev)
            if progress is not None:
                step += cend - cstart
                if step >= 1 << 24:
                    progress(done + cend, total)
                    step = 0
    finally:
        buf.close()

    def domain_name(i: int) -> Optional[str]:
        name = domains.get(i, _MISSING)
        return f"<unknown domain {i}>" if name is _MISSING else name  # type: ignore[return-value]

    for ev in pending:
        ev.__dict__["domain"] = domain_name(ev.__dict__["domain"])
    for dom, cat, name in categories:
        info.category_names[(domain_name(dom) if dom else None, cat)] = name
    return info, events


def _files(directory: Union[str, "os.PathLike[str]"]) -> List[str]:
    return sorted(glob.glob(os.path.join(os.fspath(directory), "*.nvtxrec")))


def _combine(paths: List[str], progress: Optional[ProgressFn]) -> Recording:
    sizes = []
    for p in paths:
        try:
            sizes.append(os.path.getsize(p))
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    done = 0
    events: List[Event] = []
    processes: Dict[int, ProcessInfo] = {}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would dominate the parse
    try:
        for path, size in zip(paths, sizes):
            try:
                info, evs = _parse(path, progress, done, total)
            except FileNotFoundError:
                info, evs = None, []
            done += size
            if progress is not None:
                progress(done, total)
            if info is not None:
                processes[info.pid] = info
                events.extend(evs)
        events.sort(key=_time_key)
    finally:
        if gc_was_enabled:
            gc.enable()
    return Recording(events=events, processes=processes,
                     dropped=sum(p.dropped for p in processes.values()))


def read(directory: Union[str, "os.PathLike[str]"], *, progress: Optional[ProgressFn] = None) -> Recording:
    """Parse every record file (``*.nvtxrec``) in ``directory``: all processes of a recording.

    Files may still be written to: what is complete is returned, a torn or cut final record is
    skipped. ``progress(done_bytes, total_bytes)`` is called as the files are parsed.
    """
    return _combine(_files(directory), progress)


def read_file(path: Union[str, "os.PathLike[str]"]) -> Recording:
    """Parse one process's record file."""
    return _combine([os.fspath(path)], None)
