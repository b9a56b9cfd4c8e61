"""Write pre-collected trace data through an NVTXW backend (nvtx 0.2.16's ``nvtx.writer``).

Regular NVTX calls annotate work as it runs. This module instead submits events and counter
samples with explicit timestamps to a writer backend: a shared library implementing NVTXW
(``nvtxw3/nvtxw3.h``), such as Nsight Systems' ``nsys_writer`` integration, or nvtx-cffi's own,
:func:`backend_path`, which writes the recorder's format so that ``python -m nvtx_cffi trace``'s
converter (:func:`convert`) turns it into JSON, Perfetto or SQLite.

>>> import os, tempfile
>>> from nvtx_cffi import writer
>>> out = tempfile.mkdtemp()
>>> backend = writer.load_backend(writer.backend_path())
>>> with writer.Session("run", backend=backend, config=f"dir={out}") as session:
...     with session.create_stream("worker 0", domain="io") as stream:
...         stream.write_pushpop(1_000, 5_000, message="read", color="green")
...         stream.write_mark(2_000, message="checkpoint")
...         reads = session.get_domain("io").get_counter("bytes read", int)
...         stream.write_counter_sample(reads, 3_000, 4096)
>>> len([f for f in os.listdir(out) if f.endswith(".nvtxrec")])
1

Timestamps are integers in the stream's time domain (nanoseconds for nvtx-cffi's backend, which
takes them as CLOCK_MONOTONIC-like values in ``[0, 2**56)``).
"""
from __future__ import annotations

import enum
import itertools
import operator
import os
import threading
from typing import Any, Dict, Iterable, Optional, Set, Union

from ._colors import ColorLike, color_to_hex
from ._counters import CounterNoValueReason, CounterSemantics, _normalize_dtype
from ._native import ffi, lib
from ._payload import (BatchOrdering, EntryKind, EventKind, PayloadEntryType, PredefinedScope, SchemaRegistry,
                       TimestampType, _metadata, _metadata_key, _numpy, numpy_dtype, semantics_struct)

__all__ = [
    "Backend",
    "Counter",
    "Domain",
    "PredefinedScope",
    "RegisteredString",
    "Schema",
    "Scope",
    "Session",
    "Stream",
    "StreamInterleaving",
    "StreamOrdering",
    "StreamSkid",
    "WriterError",
    "load_backend",
    "backend_path",
    "convert",
]

StrOrBytes = Union[str, bytes]

# NVTXW result codes (nvtxw3.h)
_SUCCESS, _FAILED, _INVALID_ARGUMENT = 0, 1, 2
_LIBRARY_NOT_FOUND, _LIBRARY_LOAD_FAILED, _SYMBOL_MISSING = 3, 4, 5
_VERSION_NOT_SUPPORTED, _NOT_SUPPORTED = 6, 7

_SCOPE_NONE, _SCOPE_ROOT = 0, 1
_SCOPE_ID_STATIC_START = 1 << 24
_SCOPE_ID_DYNAMIC_START = 1 << 32
_TIME_DOMAIN_ID_NONE = 0
_ENTRY_TYPE_INT64, _ENTRY_TYPE_FLOAT64 = 17, 44
_INT64_MIN, _INT64_MAX, _UINT64_MAX, _UINT32_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1, (1 << 32) - 1

_RESULT_MESSAGES = {
    _SUCCESS: "success",
    _FAILED: "failed",
    _INVALID_ARGUMENT: "invalid argument",
    _LIBRARY_NOT_FOUND: "library not found",
    _LIBRARY_LOAD_FAILED: "library load failed",
    _SYMBOL_MISSING: "library symbol missing",
    _VERSION_NOT_SUPPORTED: "interface version not supported",
    _NOT_SUPPORTED: "not supported by this backend",
}

_GET_INTERFACE_SYMBOL_NAME = "nvtxwGetInterface"


class StreamInterleaving(enum.Enum):
    """Whether ordering guarantees apply across the whole stream or per scope."""

    NONE = 0
    SCOPE = 1


class StreamOrdering(enum.Enum):
    """How fully events are sorted in the stream."""

    UNKNOWN = 0
    STRICT = 1
    PACKED_RANGE_START = 2
    PACKED_RANGE_END = 3


class StreamSkid(enum.Enum):
    """How partial-sort "skid" is quantified (paired with ``skid_amount``)."""

    NONE = 0
    TIME_NS = 1
    EVENT_COUNT = 2


class WriterError(Exception):
    """Raised when an NVTXW backend call returns a non-success result code.

    ``result_code``: the ``NVTXW_RESULT_*`` code; ``operation``: the backend call that failed, or None.

    >>> str(WriterError(7, "StreamOpen"))
    'StreamOpen failed: not supported by this backend (code 7)'
    """

    def __init__(self, result_code: int, operation: Optional[str] = None) -> None:
        self.result_code = result_code
        self.operation = operation
        message = _RESULT_MESSAGES.get(result_code, "unknown error")
        if operation:
            message = f"{operation} failed: {message} (code {result_code})"
        super().__init__(message)


def _check(rc: int, op: str) -> None:
    if rc != _SUCCESS:
        raise WriterError(rc, op)


# --------------------------------------------------------------------------- argument checks


def _text(value: Any, argument: str, *, none: bool = True) -> Optional[bytes]:
    """``value`` (str or bytes, or None when allowed) as the bytes a C string holds."""
    if value is None and none:
        return None
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogatepass")
    elif not isinstance(value, bytes):
        allowed = "a str, bytes or None" if none else "a str or bytes"
        msg = f"{argument} must be {allowed}, not {type(value).__name__}"
        raise TypeError(msg)
    if b"\x00" in value:
        msg = f"{argument} must not contain NUL characters"
        raise ValueError(msg)
    return value


def _as_str(value: Any, argument: str) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    msg = f"{argument} must be a str, bytes or None, not {type(value).__name__}"
    raise TypeError(msg)


def _integer(value: Any, argument: str, low: int, high: int) -> int:
    """An integer argument in [low, high]: TypeError for a non-integer, OverflowError out of range
    (what nvtx's C-typed arguments raise)."""
    try:
        number = operator.index(value)
    except TypeError:
        msg = f"{argument} must be an integer, not {type(value).__name__}"
        raise TypeError(msg) from None
    if not low <= number <= high:
        msg = f"{argument} {number} is out of range [{low}, {high}]"
        raise OverflowError(msg)
    return number


def _int64(value: Any, argument: str) -> int:
    return _integer(value, argument, _INT64_MIN, _INT64_MAX)


def _c(data: Optional[bytes]):
    return ffi.NULL if data is None else data


# --------------------------------------------------------------------------- backends

_BACKEND_MODULES: Dict[str, "_BackendModule"] = {}
_BACKEND_MODULES_LOCK = threading.RLock()


class _BackendModule:
    """One loaded backend library, shared by every :class:`Backend` of its path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ffi.NULL
        self.iface = ffi.NULL
        self.refcount = 0

    def initialize(self) -> None:
        lib_out = ffi.new("void **")
        iface_out = ffi.new("const void **")
        err = ffi.new("char[]", 1024)
        rc = lib.nvtxcffi_w_load(os.fsencode(self.path), lib_out, iface_out, err, 1024)
        if lib_out[0] != ffi.NULL:
            self.lib = lib_out[0]
        if rc == -2:
            raise RuntimeError("nvtx-cffi was built without the NVTXW headers (include/nvtxw3/, which nvidia-nvtx "
                               "13.0.x lacks): rebuild it with a newer nvidia-nvtx to use nvtx_cffi.writer")
        if rc == -1:
            raise OSError(ffi.string(err).decode("utf-8", "replace") or f"cannot load {self.path}")
        if rc == _SYMBOL_MISSING:
            raise WriterError(_SYMBOL_MISSING, "load_backend")
        _check(rc, _GET_INTERFACE_SYMBOL_NAME)
        self.iface = iface_out[0]

    def finalize(self) -> None:
        self.iface = ffi.NULL
        if self.lib != ffi.NULL:
            lib.nvtxcffi_w_finalize(self.lib)


def _canonical_backend_path(path: Any) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        msg = f"path must be a str, bytes or os.PathLike, not {type(path).__name__}"
        raise TypeError(msg)
    from pathlib import Path  # (not at import: nvtx_cffi imports this module)

    resolved = Path(os.fsdecode(path)).expanduser().resolve()
    return os.path.normcase(os.fspath(resolved))


def _release_backend_module(module: _BackendModule) -> None:
    with _BACKEND_MODULES_LOCK:
        if module.refcount <= 0:
            raise RuntimeError("backend module reference count underflow")
        module.refcount -= 1
        if module.refcount == 0:
            module.finalize()


def convert(source: Union[str, "os.PathLike[str]"], output: Union[str, "os.PathLike[str]"]) -> None:
    """Convert what :func:`backend_path`'s backend wrote (a directory, or one ``.nvtxrec`` file) into
    ``output``, whose ending picks the format as ``python -m nvtx_cffi trace -o`` does: ``.json``
    (Chrome Trace Event, for Perfetto), ``.pftrace`` (Perfetto protobuf) or ``.sqlite`` (Nsight's
    schema). The same conversion reads the recorder's recordings.

    >>> import json, tempfile
    >>> out = tempfile.mkdtemp()
    >>> with Session("c", backend=load_backend(backend_path()), config="dir=" + out) as session:
    ...     with session.create_stream("s") as stream:
    ...         stream.write_pushpop(2_000, 7_000, message="step")
    >>> convert(out, out + "/trace.json")
    >>> [(e["name"], e["dur"]) for e in json.load(open(out + "/trace.json"))["traceEvents"] if e["ph"] == "X"]
    [('step', 5.0)]
    """
    from ._trace.convert import convert as _convert  # (here: only a conversion loads the tracer)

    _convert(os.fspath(source), os.fspath(output))


def backend_path() -> str:
    """Path of nvtx-cffi's own NVTXW backend, ``libnvtx_writer_backend.so`` (installed beside the
    recorder): it writes each session as a record file of the recorder's format in the directory
    the session's config names (``dir=/some/dir``), else ``$NVTX_CFFI_RECORD_DIR``, else a directory
    named after the session. Convert it with :func:`convert` (``python -m nvtx_cffi trace``'s
    conversion), or read its events with :func:`nvtx_cffi.recorder.read`.

    >>> backend_path().endswith("libnvtx_writer_backend.so")
    True
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libnvtx_writer_backend.so")


class Backend:
    """A loaded NVTXW backend: the library plus its interface table. Made by :func:`load_backend`
    (constructing one directly raises ValueError).

    >>> backend = load_backend(backend_path())
    >>> backend.close()
    """

    def __init__(self, module: Any) -> None:
        if not isinstance(module, _BackendModule):
            raise ValueError("module must be a loaded backend module; "
                             "use nvtx_cffi.writer.load_backend to create a Backend")
        self._iface = module.iface
        self._module: Optional[_BackendModule] = module
        self._lock = threading.RLock()
        self._active_sessions: Set["Session"] = set()

    def _ensure_open(self) -> None:
        if self._module is None or self._iface == ffi.NULL:
            raise RuntimeError("backend is closed")

    def close(self) -> None:
        """Finalize and release the backend; its active sessions (and their open streams) are ended
        first. Optional (backends normally stay loaded until exit); a second call does nothing. The
        library is finalized once every Backend of its path is closed; it stays loaded.

        Raises WriterError if the backend fails to end an active session.
        """
        error: Optional[BaseException] = None
        module = None
        with self._lock:
            if self._module is None:
                return
            for session in list(self._active_sessions):
                try:
                    session.end()
                except Exception as exc:
                    if error is None:
                        error = exc
            if error is None:
                module = self._module
                self._iface = ffi.NULL
                self._module = None
        if error is not None:
            raise error
        assert module is not None
        _release_backend_module(module)


def load_backend(path: Union[str, bytes, "os.PathLike[str]"]) -> Backend:
    """Load and initialize an NVTXW backend from an explicit library path.

    Raises OSError if the library cannot be loaded (missing, not a shared library), WriterError if
    it does not export ``nvtxwGetInterface`` (result code 5) or lacks interface version 2, and
    TypeError for a ``path`` that is not a str, bytes or path (RuntimeError: nvtx-cffi was built
    without the NVTXW headers).

    >>> backend = load_backend(backend_path())
    >>> isinstance(backend, Backend)
    True
    """
    canonical = _canonical_backend_path(path)
    with _BACKEND_MODULES_LOCK:
        module = _BACKEND_MODULES.get(canonical)
        if module is None:
            module = _BackendModule(canonical)
        if module.refcount == 0:
            try:
                module.initialize()
            except Exception:
                module.finalize()
                raise
        _BACKEND_MODULES[canonical] = module
        module.refcount += 1
        try:
            return Backend(module)
        except Exception:
            _release_backend_module(module)
            raise


# --------------------------------------------------------------------------- sessions


class Session:
    """An NVTXW session: the top-level container data is written into. Use it as a context manager
    (recommended) or call :meth:`begin` and :meth:`end`.

    ``name``: session name (str or bytes); ``backend``: a :class:`Backend`; ``config``: the
    backend's options, one ``key=value`` per line (nvtx-cffi's backend reads ``dir``).

    Writes to distinct streams may run concurrently; calls on one stream must not overlap, and
    registrations and lifecycle calls must not overlap writes.

    >>> backend = load_backend(backend_path())
    >>> import tempfile
    >>> with Session("demo", backend=backend, config="dir=" + tempfile.mkdtemp()) as session:
    ...     session.get_domain("my domain").get_category_id("io")
    1
    """

    def __init__(self, name: Optional[StrOrBytes], *, backend: Backend,
                 config: Optional[StrOrBytes] = None) -> None:
        if not isinstance(backend, Backend):
            msg = f"backend must be an nvtx_cffi.writer.Backend, not {type(backend).__name__}"
            raise TypeError(msg)
        self._backend = backend
        self._name = _text(name, "name")
        self._config = _text(config, "config")
        self._handle = ffi.NULL
        self._lock = threading.RLock()
        self._open_streams: Set["Stream"] = set()
        self._domains: Dict[Optional[str], "Domain"] = {}

    def begin(self) -> None:
        """Start the session. RuntimeError if it is active already or the backend is closed;
        WriterError if the backend fails."""
        with self._backend._lock, self._lock:
            if self._handle != ffi.NULL:
                raise RuntimeError("session is already active")
            self._backend._ensure_open()
            out = ffi.new("void **")
            self._backend._active_sessions.add(self)
            rc = lib.nvtxcffi_w_session_begin(self._backend._iface, _c(self._name), _c(self._config), out)
            if rc != _SUCCESS:
                self._backend._active_sessions.discard(self)
                raise WriterError(rc, "SessionBegin")
            self._handle = out[0]

    def end(self) -> None:
        """End the session; its open streams are closed first, and the objects made from it
        (domains, streams, strings, scopes, counters, schemas) become invalid. RuntimeError if it is
        not active or the backend is closed; WriterError if the backend fails."""
        error: Optional[BaseException] = None
        with self._backend._lock, self._lock:
            if self._handle == ffi.NULL:
                raise RuntimeError("session is not active")
            self._backend._ensure_open()
            for stream in list(self._open_streams):
                try:
                    stream.close()
                except Exception as exc:
                    if error is None:
                        error = exc
            self._open_streams.clear()
            handle = self._handle
            self._handle = ffi.NULL
            for domain in self._domains.values():
                domain._valid = False
            self._domains.clear()
            self._backend._active_sessions.discard(self)
            rc = lib.nvtxcffi_w_session_end(self._backend._iface, handle)
            if rc != _SUCCESS:
                raise WriterError(rc, "SessionEnd") from error
        if error is not None:
            raise error

    def get_domain(self, name: Optional[StrOrBytes] = None) -> "Domain":
        """The domain ``name`` of this session (registered on first use; None or "" the default
        domain). RuntimeError if the session is not active; TypeError for a name that is not a str,
        bytes or None; WriterError if the backend fails."""
        with self._lock:
            if self._handle == ffi.NULL:
                raise RuntimeError("session is not active")
            key = _as_str(name, "name") or None
            domain = self._domains.get(key)
            if domain is None:
                encoded = _text(key, "name")
                self._backend._ensure_open()
                out = ffi.new("void **")
                _check(lib.nvtxcffi_w_domain_register(self._backend._iface, self._handle, _c(encoded), out),
                       "DomainRegister")
                domain = Domain(self, out[0])
                self._domains[key] = domain
            return domain

    def create_stream(self, name: Optional[StrOrBytes], *, domain: Any = None, scope: Any = None,
                      time_domain_id: Union[TimestampType, int] = _TIME_DOMAIN_ID_NONE,
                      interleaving: StreamInterleaving = StreamInterleaving.NONE,
                      ordering: StreamOrdering = StreamOrdering.UNKNOWN,
                      skid: StreamSkid = StreamSkid.NONE, skid_amount: int = 0) -> "Stream":
        """A configured, unopened stream of this session (open it with ``with`` or :meth:`Stream.open`).

        ``domain``: a :class:`Domain` of this session or a domain name (None: the default domain);
        ``scope``: PredefinedScope.NONE / ROOT, a :class:`Scope` of the stream's domain or an int in
        the static scope id range; ``time_domain_id``: TimestampType or int; ``interleaving``,
        ``ordering``, ``skid`` and ``skid_amount``: the stream's ordering guarantees.
        TypeError for an argument of the wrong type, ValueError for a domain of another session, a
        scope of another domain, a runtime-resolved predefined scope or an int scope out of range.
        """
        if not isinstance(interleaving, StreamInterleaving):
            raise TypeError("interleaving must be an nvtx_cffi.writer.StreamInterleaving")
        if not isinstance(ordering, StreamOrdering):
            raise TypeError("ordering must be an nvtx_cffi.writer.StreamOrdering")
        if not isinstance(skid, StreamSkid):
            raise TypeError("skid must be an nvtx_cffi.writer.StreamSkid")
        if not isinstance(time_domain_id, (TimestampType, int)):
            raise TypeError("time_domain_id must be an nvtx_cffi.TimestampType or an int")
        with self._lock:
            if self._handle == ffi.NULL:
                raise RuntimeError("session is not active")
            if not isinstance(domain, Domain):
                domain = self.get_domain(domain)
            elif domain._session is not self:
                raise ValueError("domain belongs to a different session")
            else:
                domain._ensure_valid()
            return Stream._create(self, name, domain, scope, time_domain_id, interleaving, ordering, skid,
                                  skid_amount)

    def __enter__(self) -> "Session":
        self.begin()
        return self

    def __exit__(self, *_: Any) -> None:
        with self._backend._lock, self._lock:
            if self._handle != ffi.NULL:  # Backend.close() may have ended it already
                self.end()


# --------------------------------------------------------------------------- domain objects


class RegisteredString:
    """A string registered in a domain (:meth:`Domain.get_registered_string`): pass it as a write
    method's ``message``; :attr:`handle` also fits a ``PayloadEntryType.REGISTERED_STRING`` field.
    Valid until the session ends."""

    __slots__ = ("_handle", "_string", "_domain")

    def __init__(self, domain: "Domain", string: str, handle: Any) -> None:
        self._domain = domain
        self._string = string
        self._handle = handle

    def __repr__(self) -> str:
        return f"RegisteredString({self._string!r})"

    @property
    def handle(self) -> int:
        """Opaque numeric handle for a registered-string payload field."""
        return int(ffi.cast("uintptr_t", self._handle))


class Scope:
    """A scope registered in a domain (:meth:`Domain.get_scope`). Valid until the session ends."""

    __slots__ = ("_scope_id", "_path", "_domain")

    def __init__(self, scope_id: int, path: Optional[str] = None, domain: Optional["Domain"] = None) -> None:
        self._scope_id = scope_id
        self._path = path
        self._domain = domain

    def __repr__(self) -> str:
        return f"Scope(scope_id={self._scope_id}, path={self._path!r})"

    @property
    def scope_id(self) -> int:
        """Registered scope ID within the domain."""
        return self._scope_id

    @property
    def path(self) -> Optional[str]:
        """The path the scope was registered with (``None`` if unnamed)."""
        return self._path


class Counter:
    """A counter of a domain (:meth:`Domain.get_counter`), for the :class:`Stream` counter write
    methods. Valid until the session ends."""

    __slots__ = ("_domain", "_name", "_dtype", "_description", "_semantics", "_scope_id", "_counter_id",
                 "_schema_id", "_timestamp_field")

    def __init__(self, domain: "Domain", name: Optional[str], dtype: Any, description: Optional[str],
                 semantics: Optional[CounterSemantics], scope_id: int, counter_id: int, schema_id: int,
                 timestamp_field: Optional[str]) -> None:
        self._domain = domain
        self._name = name
        self._dtype = dtype
        self._description = description
        self._semantics = semantics
        self._scope_id = scope_id
        self._counter_id = counter_id
        self._schema_id = schema_id
        self._timestamp_field = timestamp_field

    def __repr__(self) -> str:
        return f"Counter(name={self._name!r}, counter_id={self._counter_id})"

    @property
    def counter_id(self) -> int:
        """Registered counter ID within the domain."""
        return self._counter_id

    @property
    def name(self) -> Optional[str]:
        """The counter's display name."""
        return self._name

    @property
    def dtype(self) -> Any:
        """The normalized dtype the counter was registered with."""
        return self._dtype

    @property
    def description(self) -> Optional[str]:
        """The counter's description, or ``None``."""
        return self._description

    @property
    def semantics(self) -> Optional[CounterSemantics]:
        """The counter's :class:`nvtx_cffi.CounterSemantics`, or ``None``."""
        return self._semantics


class Schema:
    """A payload schema of a domain (:meth:`Domain.get_schema`); event schemas (made with a
    ``kind``) go to :meth:`Stream.write_event` and :meth:`Stream.write_event_batch`. Valid until
    the session ends."""

    __slots__ = ("_domain", "_schema_id", "_dtype", "_kind")

    def __init__(self, domain: "Domain", schema_id: int, dtype: Any, kind: Optional[EventKind]) -> None:
        self._domain = domain
        self._schema_id = schema_id
        self._dtype = dtype
        self._kind = kind

    def __repr__(self) -> str:
        return f"Schema(schema_id={self._schema_id}, dtype={self._dtype!r}, kind={self._kind})"

    @property
    def schema_id(self) -> int:
        """Registered schema ID within the domain."""
        return self._schema_id

    @property
    def dtype(self) -> Any:
        """The NumPy dtype the schema was registered with."""
        return self._dtype

    @property
    def kind(self) -> Optional[EventKind]:
        """The schema's :class:`EventKind`, or ``None`` if generic."""
        return self._kind


class _WriterSchemaRegistry(SchemaRegistry):
    """nvtx-cffi's dtype -> schema description, registered with the backend (SchemaRegister)."""

    def __init__(self, domain: "Domain") -> None:
        super().__init__(-1)
        self._domain = domain

    def _submit(self, field_mask, schema_type, flags, static_size, c_entries, count, c_sems, n_sems) -> int:
        domain = self._domain
        with domain._session._lock:
            domain._ensure_valid()
            out = ffi.new("uint64_t *")
            _check(lib.nvtxcffi_w_schema_register(domain._backend._iface, domain._handle, field_mask, schema_type,
                                                  flags, static_size, c_entries, count, c_sems, n_sems, out),
                   "SchemaRegister")
            return int(out[0])


def _resolve_scope_id(domain: Optional["Domain"], scope: Any) -> int:
    if scope is None:
        return _SCOPE_NONE
    if isinstance(scope, PredefinedScope):
        return scope.value
    if isinstance(scope, Scope):
        if domain is None:
            raise ValueError("scope requires a registered stream domain")
        if scope._domain is not domain:
            raise ValueError("scope is not registered in this domain")
        return scope._scope_id
    if isinstance(scope, int) and not isinstance(scope, bool):
        if not _SCOPE_ID_STATIC_START <= scope < _SCOPE_ID_DYNAMIC_START:
            msg = (f"integer scope must be in the NVTX static scope ID range "
                   f"[{_SCOPE_ID_STATIC_START}, {_SCOPE_ID_DYNAMIC_START})")
            raise ValueError(msg)
        return scope
    raise TypeError("scope must be None, a PredefinedScope, a Scope, or an int")


def _resolve_stream_scope_id(domain: "Domain", scope: Any) -> int:
    if isinstance(scope, PredefinedScope):
        if scope is PredefinedScope.NONE or scope is PredefinedScope.ROOT:
            return scope.value
        raise ValueError("runtime-resolved scopes are not valid as stream defaults")
    return _resolve_scope_id(domain, scope)


def _validate_native_byte_order(dt: Any, operation: str) -> None:
    if dt.subdtype is not None:
        _validate_native_byte_order(dt.subdtype[0], operation)
        return
    if dt.fields is not None:
        for field_name in dt.names:
            _validate_native_byte_order(dt.fields[field_name][0], operation)
        return
    if not dt.isnative:
        msg = f"{operation} requires native byte order; got dtype {dt}"
        raise TypeError(msg)


def _validate_counter_layout(dtype: Any) -> Optional[str]:
    """Reject event roles in a counter layout; the name of its COUNTER_TIMESTAMP field, or None."""
    if dtype is int or dtype is float:
        return None
    if dtype.subdtype is not None:
        raise TypeError("Top-level fixed-size array counter dtypes are not supported.")
    _validate_native_byte_order(dtype, "a counter layout")
    if dtype.fields is None:
        return None
    timestamp_fields = []
    for field_name in dtype.names:
        entry_kind = getattr(_metadata(dtype.fields[field_name][0]), "entry_kind", None)
        if entry_kind is None:
            continue
        if entry_kind is EntryKind.COUNTER_TIMESTAMP:
            timestamp_fields.append(field_name)
        else:
            msg = f"EntryKind.{entry_kind.name} is not valid in a counter layout (field {field_name!r})"
            raise ValueError(msg)
    if len(timestamp_fields) > 1:
        raise ValueError("a counter layout may embed at most one EntryKind.COUNTER_TIMESTAMP field")
    return timestamp_fields[0] if timestamp_fields else None


def _validate_event_dtype(kind: EventKind, dt: Any, operation: str) -> None:
    """The static layout and timestamp roles of an event dtype (nvtx's rules)."""
    if dt.fields is None:
        msg = f"{operation} requires a structured dtype"
        raise TypeError(msg)
    _validate_native_byte_order(dt, operation)
    roles = (EntryKind.RANGE_BEGIN, EntryKind.RANGE_END, EntryKind.MARK, EntryKind.COUNTER_TIMESTAMP)
    role_fields: Dict[EntryKind, list] = {role: [] for role in roles}
    range_id_fields = []
    for field_name in dt.names:
        field_dtype = dt.fields[field_name][0]
        if field_dtype.hasobject:
            msg = (f"{operation} requires fields with self-contained, fixed-width storage; "
                   f"field {field_name!r} uses managed storage")
            raise TypeError(msg)
        metadata = _metadata(field_dtype)
        entry_kind = getattr(metadata, "entry_kind", None)
        entry_type = getattr(metadata, "entry_type", None)
        if entry_type is PayloadEntryType.RANGE_ID:
            range_id_fields.append(field_name)
        if entry_kind in role_fields:
            if entry_type is not None:
                msg = (f"{operation} field {field_name!r} cannot combine the EntryKind.{entry_kind.name} "
                       f"timestamp role with PayloadEntryType.{entry_type.name}")
                raise ValueError(msg)
            role_fields[entry_kind].append(field_name)
    if kind is EventKind.MARK:
        required: tuple = (EntryKind.MARK,)
    elif kind in (EventKind.RANGE_PUSH, EventKind.RANGE_START):
        required = (EntryKind.RANGE_BEGIN,)
    elif kind in (EventKind.RANGE_POP, EventKind.RANGE_END):
        required = (EntryKind.RANGE_END,)
    else:
        required = (EntryKind.RANGE_BEGIN, EntryKind.RANGE_END)
    for entry_kind, fields in role_fields.items():
        expected = 1 if entry_kind in required else 0
        if len(fields) != expected:
            role = f"EntryKind.{entry_kind.name}"
            if expected:
                msg = f"{operation} dtype for {kind!s} must contain exactly one {role} field"
                raise ValueError(msg)
            msg = f"{role} is not valid for {kind!s}"
            raise ValueError(msg)
    expected_ids = 1 if kind in (EventKind.RANGE_START, EventKind.RANGE_END) else 0
    if len(range_id_fields) != expected_ids:
        role = "PayloadEntryType.RANGE_ID"
        if expected_ids:
            msg = f"{operation} dtype for {kind!s} must contain exactly one {role} field"
            raise ValueError(msg)
        msg = f"{role} is not valid for {kind!s}"
        raise ValueError(msg)


_COMPLETE_EVENT_KINDS = (EventKind.MARK, EventKind.RANGE_PUSHPOP, EventKind.RANGE_STARTEND)


class Domain:
    """A domain of a session (:meth:`Session.get_domain`). Valid until the session ends."""

    def __init__(self, session: Session, handle: Any) -> None:
        if not isinstance(session, Session):
            raise TypeError("session must be an nvtx_cffi.writer.Session; use Session.get_domain()")
        self._session = session
        self._backend = session._backend
        self._valid = True
        self._handle = handle
        self._strings: Dict[str, RegisteredString] = {}
        self._scopes: Dict[tuple, Scope] = {}
        self._categories: Dict[str, int] = {}
        self._schemas: Dict[tuple, Schema] = {}
        self._counters: Dict[tuple, Counter] = {}
        self._category_ids = itertools.count(1)  # 0 is "no category"
        self._user_category_ids: Set[int] = set()
        self._registry = _WriterSchemaRegistry(self)
        self._event_schema_ids: Optional[Any] = None

    def _ensure_valid(self) -> None:
        if not self._valid:
            raise RuntimeError("domain is no longer valid: its owning session has ended")

    def _get_event_schema_ids(self) -> Any:
        with self._session._lock:
            self._ensure_valid()
            if self._event_schema_ids is None:
                ids = ffi.new("uint64_t[]", lib.NVTXCFFI_W_SCHEMA_IDS)
                _check(lib.nvtxcffi_w_event_schemas(self._backend._iface, self._handle, ids),
                       "nvtxwEventSchemasRegister")
                self._event_schema_ids = ids
            return self._event_schema_ids

    def get_registered_string(self, string: StrOrBytes) -> RegisteredString:
        """The registered string ``string`` (cached per domain; str and bytes spellings share one).
        RuntimeError if the domain is no longer valid; TypeError for a non-string; WriterError if
        the backend fails."""
        if not isinstance(string, (str, bytes)):
            msg = f"string must be a str or bytes, not {type(string).__name__}"
            raise TypeError(msg)
        with self._session._lock:
            self._ensure_valid()
            key = _as_str(string, "string")
            assert key is not None
            found = self._strings.get(key)
            if found is None:
                out = ffi.new("void **")
                _check(lib.nvtxcffi_w_string_register(self._backend._iface, self._handle,
                                                      _text(key, "string", none=False), out), "StringRegister")
                found = self._strings[key] = RegisteredString(self, key, out[0])
            return found

    def get_category_id(self, name: StrOrBytes) -> int:
        """The id of category ``name`` in this domain, registered on first use: ids start at 1 (0 is
        no category) and skip integer categories already passed to this domain's write methods.
        RuntimeError if the domain is no longer valid; TypeError for a non-string name."""
        if not isinstance(name, (str, bytes)):
            msg = f"category name must be a str or bytes, not {type(name).__name__}"
            raise TypeError(msg)
        self._ensure_valid()
        key = _as_str(name, "name")
        assert key is not None
        found = self._categories.get(key)
        if found is not None:
            return found
        with self._session._lock:
            self._ensure_valid()
            found = self._categories.get(key)
            if found is not None:
                return found
            category_id = next(self._category_ids)
            while category_id in self._user_category_ids:
                category_id = next(self._category_ids)
            _check(lib.nvtxcffi_w_category_register(self._backend._iface, self._handle, category_id,
                                                    _text(key, "name", none=False)), "CategoryRegister")
            self._categories[key] = category_id
            return category_id

    def get_scope(self, path: Optional[StrOrBytes], *, parent: Any = None) -> Scope:
        """The scope ``path`` under ``parent`` (None: the domain root; PredefinedScope NONE, ROOT,
        CURRENT_HW_MACHINE or CURRENT_VM; or a :class:`Scope` of this domain), cached per pair.
        TypeError for another parent type, ValueError for another domain's scope or another
        predefined scope; WriterError if the backend fails."""
        if parent is None:
            parent_id = _SCOPE_ROOT
        elif isinstance(parent, PredefinedScope):
            if parent not in (PredefinedScope.NONE, PredefinedScope.ROOT, PredefinedScope.CURRENT_HW_MACHINE,
                              PredefinedScope.CURRENT_VM):
                raise ValueError("predefined parent scope must be NONE, ROOT, CURRENT_HW_MACHINE, or CURRENT_VM")
            parent_id = parent.value
        elif isinstance(parent, Scope):
            if parent._domain is not self:
                raise ValueError("parent scope is registered in a different domain")
            parent_id = parent._scope_id
        else:
            raise TypeError("parent must be a PredefinedScope, a Scope, or None")
        with self._session._lock:
            self._ensure_valid()
            key_path = _as_str(path, "path")
            key = (key_path, parent_id)
            found = self._scopes.get(key)
            if found is None:
                out = ffi.new("uint64_t *")
                _check(lib.nvtxcffi_w_scope_register(self._backend._iface, self._handle,
                                                     _c(_text(key_path, "path")), parent_id, out), "ScopeRegister")
                found = self._scopes[key] = Scope(int(out[0]), key_path, self)
            return found

    def get_schema(self, dtype: Any, *, kind: Optional[EventKind] = None) -> Schema:
        """The payload schema of NumPy dtype ``dtype`` (cached per dtype and kind). ``kind``: the
        :class:`EventKind` it describes (required by :meth:`Stream.write_event`; fields carry
        their roles through :func:`nvtx_cffi.numpy_dtype`'s ``entry_kind`` / ``entry_type``), or
        None for a generic schema. RuntimeError without NumPy or for an invalid domain; TypeError /
        ValueError for a dtype whose layout or roles do not fit ``kind``."""
        if kind is not None and not isinstance(kind, EventKind):
            raise TypeError("kind must be an nvtx_cffi.EventKind or None")
        with self._session._lock:
            self._ensure_valid()
            dt = numpy_dtype(dtype)
            flags = 0 if kind is None else kind.value
            key = (dt, flags, _metadata_key(dt))
            schema = self._schemas.get(key)
            if schema is None:
                if kind is not None:
                    _validate_event_dtype(kind, dt, "an event schema")
                schema_id = self._registry.dtype_schema(dt, schema_flags=flags)
                schema = self._schemas[key] = Schema(self, schema_id, dt, kind)
            return schema

    def get_counter(self, name: StrOrBytes, dtype: Any, *, description: Optional[StrOrBytes] = None,
                    scope: Any = None, semantics: Optional[CounterSemantics] = None) -> Counter:
        """The counter (or flat counter group) ``name`` of this domain, cached per arguments.

        ``dtype``: ``int`` (int64 samples), ``float`` (doubles) or a NumPy dtype-like (structured:
        a counter group, with at most one ``EntryKind.COUNTER_TIMESTAMP`` field); ``scope``: a
        PredefinedScope, a :class:`Scope` of this domain or a static scope id; ``semantics``: a
        :class:`nvtx_cffi.CounterSemantics`. TypeError / ValueError for what nvtx rejects;
        WriterError if the backend fails.
        """
        dtype = _normalize_dtype(dtype)
        name_text = _text(name, "name", none=False)
        description_text = _text(description, "description")
        if semantics is not None and not isinstance(semantics, CounterSemantics) and \
                type(semantics).__name__ != "CounterSemantics":
            msg = f"semantics must be a CounterSemantics or None, not {type(semantics).__name__}"
            raise TypeError(msg)
        with self._session._lock:
            self._ensure_valid()
            scope_id = _resolve_scope_id(self, scope)
            key = (name_text, dtype, _metadata_key(dtype), description_text, scope_id, semantics)
            found = self._counters.get(key)
            if found is None:
                found = self._counters[key] = self._register_counter(name_text, dtype, description_text, scope_id,
                                                                     semantics)
            return found

    def _register_counter(self, name: bytes, dtype: Any, description: Optional[bytes], scope_id: int,
                          semantics: Any) -> Counter:
        timestamp_field = _validate_counter_layout(dtype)
        if dtype is int:
            schema_id = _ENTRY_TYPE_INT64
        elif dtype is float:
            schema_id = _ENTRY_TYPE_FLOAT64
        elif dtype.fields is None and dtype.subdtype is None and dtype.kind == "i" and dtype.itemsize == 8:
            schema_id = _ENTRY_TYPE_INT64
        elif dtype.fields is None and dtype.subdtype is None and dtype.kind == "f" and dtype.itemsize == 8:
            schema_id = _ENTRY_TYPE_FLOAT64
        else:
            schema_id = self._registry.dtype_schema(dtype, counter_group=dtype.fields is not None)
        c_sem = ffi.NULL
        keep = None
        if semantics is not None:
            c_sem = ffi.new("nvtxcffi_counter_semantics *")
            keep = semantics_struct(semantics, c_sem)
        out = ffi.new("uint64_t *")
        _check(lib.nvtxcffi_w_counter_register(self._backend._iface, self._handle, schema_id, name,
                                               _c(description), scope_id, c_sem, out), "CounterRegister")
        del keep
        return Counter(self, name.decode("utf-8", "surrogatepass"), dtype,
                       None if description is None else description.decode("utf-8", "surrogatepass"),
                       semantics, scope_id, int(out[0]), schema_id, timestamp_field)


# --------------------------------------------------------------------------- streams


def _rows(data: Any, dt: Any) -> Any:
    """Batch data as a flat, contiguous array of ``dt`` rows (ndarray, DataFrame or iterable)."""
    np = _numpy()
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise ValueError("batch data must be one-dimensional")
        return np.ascontiguousarray(data, dtype=dt)
    if type(data).__name__ == "DataFrame" and hasattr(data, "to_numpy"):
        rows = np.empty(len(data), dtype=dt)
        for name in dt.names:
            try:
                column = data[name]
            except KeyError:
                msg = f"batch data is missing a column for dtype field {name!r}"
                raise ValueError(msg) from None
            rows[name] = column.to_numpy(copy=False)
        return rows
    return np.fromiter(data, dtype=dt)


def _need_numpy(what: str) -> Any:
    np = _numpy()
    if np is None:
        msg = f"Install numpy to use {what}."
        raise RuntimeError(msg)
    return np


def _address(array: Any) -> Any:
    return ffi.cast("const void *", array.ctypes.data)


class Stream:
    """An NVTXW stream, which events and counter samples are written to; made by
    :meth:`Session.create_stream`. Use it as a context manager (recommended) or call :meth:`open`
    and :meth:`close`. Timestamps are integers in the stream's time domain.

    >>> import tempfile
    >>> backend = load_backend(backend_path())
    >>> with Session("s", backend=backend, config="dir=" + tempfile.mkdtemp()) as session:
    ...     with session.create_stream("main") as stream:
    ...         stream.write_push(10, message="outer")
    ...         stream.write_startend(12, 15, message="async", category="io")
    ...         stream.write_pop(20)
    """

    def __init__(self, *_: Any, **__: Any) -> None:
        raise RuntimeError("Do not construct streams directly; use Session.create_stream().")

    @classmethod
    def _create(cls, session: Session, name: Any, domain: Domain, scope: Any, time_domain_id: Any,
                interleaving: StreamInterleaving, ordering: StreamOrdering, skid: StreamSkid,
                skid_amount: Any) -> "Stream":
        self = object.__new__(cls)
        self._session = session
        self._backend = session._backend
        self._domain = domain
        self._name = _text(name, "name")
        self._scope_id = _resolve_stream_scope_id(domain, scope)
        if isinstance(time_domain_id, TimestampType):
            time_domain_id = time_domain_id.value
        self._time_domain_id = _integer(time_domain_id, "time_domain_id", 0, _UINT64_MAX)
        self._interleaving = interleaving.value
        self._ordering = ordering.value
        self._skid = skid.value
        self._skid_amount = _int64(skid_amount, "skid_amount")
        self._handle = ffi.NULL
        self._schema_ids: Any = None
        return self

    def open(self) -> None:
        """Open the stream for writing. RuntimeError if it is open already, the session is not active
        or the domain is no longer valid; WriterError if the backend fails."""
        with self._session._lock:
            if self._handle != ffi.NULL:
                raise RuntimeError("stream is already open")
            if self._session._handle == ffi.NULL:
                raise RuntimeError("session is not active")
            self._domain._ensure_valid()
            out = ffi.new("void **")
            rc = lib.nvtxcffi_w_stream_open(self._backend._iface, self._session._handle, _c(self._name),
                                            self._domain._handle, self._scope_id, self._time_domain_id,
                                            self._interleaving, self._ordering, self._skid, self._skid_amount, out)
            if rc != _SUCCESS:
                raise WriterError(rc, "StreamOpen")
            self._handle = out[0]
            self._session._open_streams.add(self)

    def close(self) -> None:
        """Close the stream (its session goes on). RuntimeError if it is not open or the backend is
        closed; WriterError if the backend fails."""
        with self._session._lock:
            if self._handle == ffi.NULL:
                raise RuntimeError("stream is not open")
            self._backend._ensure_open()
            handle = self._handle
            self._handle = ffi.NULL
            self._session._open_streams.discard(self)
            _check(lib.nvtxcffi_w_stream_close(self._backend._iface, handle), "StreamClose")

    def __enter__(self) -> "Stream":
        self.open()
        return self

    def __exit__(self, *_: Any) -> None:
        with self._session._lock:
            if self._handle != ffi.NULL:
                self.close()

    # ---- checks

    def _ensure_writable(self) -> None:
        if self._handle == ffi.NULL:
            raise RuntimeError("stream is not open")
        self._backend._ensure_open()

    def _ensure_counter(self, counter: Any) -> None:
        if not isinstance(counter, Counter):
            msg = f"counter must be an nvtx_cffi.writer.Counter, not {type(counter).__name__}"
            raise TypeError(msg)
        if counter._domain is not self._domain:
            raise ValueError("counter is not registered in this stream's domain")

    def _writer_ids(self) -> Any:
        self._ensure_writable()
        if self._schema_ids is None:
            self._schema_ids = self._domain._get_event_schema_ids()
        return self._schema_ids

    def _category(self, category: Any) -> int:
        if category is None:
            return 0
        if isinstance(category, (str, bytes)):
            return self._domain.get_category_id(category)
        if isinstance(category, int):
            if category < 0 or category > _UINT32_MAX:
                raise ValueError("category must be in [0, 2**32 - 1]")
            domain = self._domain
            if category not in domain._user_category_ids:
                with domain._session._lock:
                    domain._ensure_valid()
                    domain._user_category_ids.add(category)
            return category
        raise TypeError("category must be a str, bytes, int, or None")

    def _emit(self, op: int, name: str, utf8_name: str, t0: int, t1: int, range_id: int, message: Any,
              color: Any, category: Any) -> None:
        ids = self._writer_ids()
        argb = 0 if color is None else color_to_hex(color)
        argb = _integer(argb, "color", 0, _UINT32_MAX)
        category_id = self._category(category)
        if message is None:
            message = b""
        if isinstance(message, RegisteredString):
            if message._domain is not self._domain:
                raise ValueError("message is a RegisteredString from a different domain")
            rc = lib.nvtxcffi_w_event(self._backend._iface, self._handle, ids, op, t0, t1, range_id, argb,
                                      category_id, message._handle, ffi.NULL, 0, 0)
            _check(rc, name)
            return
        if isinstance(message, str):
            message = message.encode("utf-8", "surrogatepass")
        elif not isinstance(message, bytes):
            raise TypeError("message must be a str, bytes, RegisteredString, or None")
        rc = lib.nvtxcffi_w_event(self._backend._iface, self._handle, ids, op, t0, t1, range_id, argb, category_id,
                                  ffi.NULL, message, len(message), 1)
        _check(rc, utf8_name)

    # ---- events

    def write_mark(self, timestamp: int, *, message: Any = None, color: Optional[ColorLike] = None,
                   category: Any = None) -> None:
        """Write a mark at ``timestamp``. ``message``: str, bytes or :class:`RegisteredString`;
        ``color``: int (ARGB) or colour-like; ``category``: a name (registered in the stream's
        domain) or an int. RuntimeError if the stream is not open; TypeError / ValueError for bad
        arguments; WriterError if the backend fails."""
        self._emit(lib.NVTXCFFI_W_MARK, "nvtxwMarkWrite", "nvtxwMarkWriteUtf8", _int64(timestamp, "timestamp"), 0,
                   0, message, color, category)

    def write_pushpop(self, start: int, end: int, *, message: Any = None, color: Optional[ColorLike] = None,
                      category: Any = None) -> None:
        """Write a complete push/pop range from ``start`` to ``end`` (arguments as :meth:`write_mark`)."""
        self._emit(lib.NVTXCFFI_W_PUSHPOP, "nvtxwRangePushPopWrite", "nvtxwRangePushPopWriteUtf8",
                   _int64(start, "start"), _int64(end, "end"), 0, message, color, category)

    def write_startend(self, start: int, end: int, *, message: Any = None, color: Optional[ColorLike] = None,
                       category: Any = None) -> None:
        """Write a complete start/end range from ``start`` to ``end`` (arguments as :meth:`write_mark`)."""
        self._emit(lib.NVTXCFFI_W_STARTEND, "nvtxwRangeStartEndWrite", "nvtxwRangeStartEndWriteUtf8",
                   _int64(start, "start"), _int64(end, "end"), 0, message, color, category)

    def write_push(self, timestamp: int, *, message: Any = None, color: Optional[ColorLike] = None,
                   category: Any = None) -> None:
        """Write the beginning of a push/pop range (pairs with :meth:`write_pop`, last in first out)."""
        self._emit(lib.NVTXCFFI_W_PUSH, "nvtxwRangePushWrite", "nvtxwRangePushWriteUtf8",
                   _int64(timestamp, "timestamp"), 0, 0, message, color, category)

    def write_pop(self, timestamp: int) -> None:
        """Write the end of the most recently pushed range."""
        t = _int64(timestamp, "timestamp")
        ids = self._writer_ids()
        _check(lib.nvtxcffi_w_event(self._backend._iface, self._handle, ids, lib.NVTXCFFI_W_POP, t, 0, 0, 0, 0,
                                    ffi.NULL, ffi.NULL, 0, 0), "nvtxwRangePopWrite")

    def write_start(self, timestamp: int, range_id: int, *, message: Any = None,
                    color: Optional[ColorLike] = None, category: Any = None) -> None:
        """Write the beginning of a start/end range; ``range_id`` (nonzero) pairs it with the
        :meth:`write_end` of the same id. ValueError for a zero ``range_id``."""
        if range_id == 0:
            raise ValueError("range_id must be non-zero")
        rid = _integer(range_id, "range_id", 0, _UINT64_MAX)
        t = _int64(timestamp, "timestamp")
        self._emit(lib.NVTXCFFI_W_START, "nvtxwRangeStartWrite", "nvtxwRangeStartWriteUtf8", t, 0, rid, message,
                   color, category)

    def write_end(self, timestamp: int, range_id: int) -> None:
        """Write the end of the start/end range ``range_id``. ValueError for a zero ``range_id``."""
        if range_id == 0:
            raise ValueError("range_id must be non-zero")
        rid = _integer(range_id, "range_id", 0, _UINT64_MAX)
        t = _int64(timestamp, "timestamp")
        ids = self._writer_ids()
        _check(lib.nvtxcffi_w_event(self._backend._iface, self._handle, ids, lib.NVTXCFFI_W_END, t, 0, rid, 0, 0,
                                    ffi.NULL, ffi.NULL, 0, 0), "nvtxwRangeEndWrite")

    def write_event(self, schema: Schema, row: Any) -> None:
        """Write one event described by an event schema (:meth:`Domain.get_schema` with a ``kind``)
        of this stream's domain; ``row``: one row of its dtype (a tuple, a NumPy scalar).
        TypeError if ``schema`` is not a Schema; ValueError for another domain's schema, a generic
        schema or a row that is not exactly one event."""
        if not isinstance(schema, Schema):
            msg = f"schema must be an nvtx_cffi.writer.Schema, not {type(schema).__name__}"
            raise TypeError(msg)
        if schema._domain is not self._domain:
            raise ValueError("schema is not registered in this stream's domain")
        if schema._kind is None:
            raise ValueError("write_event requires an event schema; pass kind= to Domain.get_schema")
        self._ensure_writable()
        np = _need_numpy("write_event")
        payload = np.ascontiguousarray(row, schema._dtype)
        if payload.size != 1:
            msg = f"write_event expects one row of dtype {schema._dtype}; got {payload.size}"
            raise ValueError(msg)
        _check(lib.nvtxcffi_w_event_write(self._backend._iface, self._handle, schema._schema_id, _address(payload),
                                          payload.nbytes), "EventWrite")

    def write_event_batch(self, schema: Schema, rows: Any, *, ordering: BatchOrdering = BatchOrdering.SORTED) -> None:
        """Write a batch of complete events (schema kind MARK, RANGE_PUSHPOP or RANGE_STARTEND);
        ``rows``: an ndarray, a pandas DataFrame (columns matched by name) or an iterable of rows.
        TypeError for a bad ``schema`` / ``ordering``; ValueError for another domain's schema, a
        schema of another kind or no rows."""
        if not isinstance(ordering, BatchOrdering):
            raise TypeError("ordering must be an nvtx_cffi.BatchOrdering")
        if not isinstance(schema, Schema):
            msg = f"schema must be an nvtx_cffi.writer.Schema, not {type(schema).__name__}"
            raise TypeError(msg)
        if schema._domain is not self._domain:
            raise ValueError("schema is not registered in this stream's domain")
        if schema._kind not in _COMPLETE_EVENT_KINDS:
            raise ValueError("write_event_batch accepts only complete-event schemas; pass kind=EventKind.MARK, "
                             "EventKind.RANGE_PUSHPOP, or EventKind.RANGE_STARTEND to Domain.get_schema")
        self._ensure_writable()
        _need_numpy("write_event_batch")
        events = _rows(rows, schema._dtype)
        if events.size == 0:
            raise ValueError("batch rows must contain at least one event")
        _check(lib.nvtxcffi_w_event_batch(self._backend._iface, self._handle, schema._schema_id, _address(events),
                                          events.nbytes, self._scope_id, ordering.value), "EventBatchWrite")

    # ---- counters

    def write_counter_sample(self, counter: Counter, timestamp: int, value: Any) -> None:
        """Write one sample of ``counter`` (of this stream's domain) at ``timestamp``; ``value``
        matches its dtype (a group: one row). ValueError for another domain's counter, a layout
        that embeds its timestamp (use :meth:`write_counter_batch`) or not exactly one sample."""
        self._ensure_counter(counter)
        t = _int64(timestamp, "timestamp")
        self._ensure_writable()
        if counter._timestamp_field is not None:
            raise ValueError("write_counter_sample does not support a counter layout that embeds an "
                             "EntryKind.COUNTER_TIMESTAMP field; use write_counter_batch instead")
        iface = self._backend._iface
        if counter._schema_id == _ENTRY_TYPE_INT64:
            rc = lib.nvtxcffi_w_counter_int64(iface, self._handle, t, counter._counter_id, _int64(value, "value"))
        elif counter._schema_id == _ENTRY_TYPE_FLOAT64:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__float__") and not hasattr(value, "__index__"):
                msg = f"value must be a number, not {type(value).__name__}"
                raise TypeError(msg)
            rc = lib.nvtxcffi_w_counter_float64(iface, self._handle, t, counter._counter_id, float(value))
        else:
            np = _need_numpy("write_counter_sample")
            payload = np.ascontiguousarray(value, counter._dtype)
            if payload.size != 1:
                msg = f"write_counter_sample expects one sample of dtype {counter._dtype}; got {payload.size}"
                raise ValueError(msg)
            rc = lib.nvtxcffi_w_counter_raw(iface, self._handle, t, counter._counter_id, _address(payload),
                                            payload.nbytes)
        _check(rc, "CounterWrite")

    def write_counter_sample_no_value(self, counter: Counter, timestamp: int,
                                      reason: CounterNoValueReason) -> None:
        """Write a sample of ``counter`` that has no value, for ``reason``
        (:class:`nvtx_cffi.CounterNoValueReason`)."""
        self._ensure_counter(counter)
        t = _int64(timestamp, "timestamp")
        if not isinstance(reason, CounterNoValueReason):
            raise TypeError("reason must be an nvtx_cffi.CounterNoValueReason")
        self._ensure_writable()
        _check(lib.nvtxcffi_w_counter_no_value(self._backend._iface, self._handle, t, counter._counter_id,
                                               reason.value), "CounterNoValueWrite")

    def write_counter_batch(self, counter: Counter, data: Any, *, timestamps: Optional[Iterable[int]] = None,
                            ordering: BatchOrdering = BatchOrdering.SORTED) -> None:
        """Write a batch of samples of ``counter``: ``data`` (ndarray, DataFrame or iterable) with
        ``timestamps`` (one per sample), or rows that embed their timestamp (a layout with an
        ``EntryKind.COUNTER_TIMESTAMP`` field; ``timestamps`` omitted). RuntimeError without NumPy;
        ValueError for a wrong timestamp source, empty or multi-dimensional data, or lengths that
        differ."""
        if not isinstance(ordering, BatchOrdering):
            raise TypeError("ordering must be an nvtx_cffi.BatchOrdering")
        self._ensure_counter(counter)
        self._ensure_writable()
        np = _numpy()
        if np is None:  # (PyPy without NumPy: int and float counters, from the array module)
            self._write_scalar_batch(counter, data, timestamps, ordering)
            return
        dt = counter._dtype
        if dt is int:
            dt = np.dtype(np.int64)
        elif dt is float:
            dt = np.dtype(np.float64)
        if counter._timestamp_field is not None:
            if timestamps is not None:
                raise ValueError("timestamps is mutually exclusive with a counter layout that embeds an "
                                 "EntryKind.COUNTER_TIMESTAMP field")
        elif timestamps is None:
            raise ValueError("write_counter_batch requires timestamps unless the counter layout embeds an "
                             "EntryKind.COUNTER_TIMESTAMP field")
        if dt.fields is not None:
            samples = _rows(data, dt)
        else:
            samples = np.ascontiguousarray(data, dt) if isinstance(data, np.ndarray) else np.fromiter(data, dtype=dt)
            if samples.ndim != 1:
                raise ValueError("batch data must be one-dimensional")
        if samples.size == 0:
            raise ValueError("batch data must contain at least one sample")
        ts = None
        if timestamps is not None:
            if isinstance(timestamps, np.ndarray):
                ts = np.ascontiguousarray(timestamps, dtype=np.int64)
            else:
                ts = np.fromiter(timestamps, dtype=np.int64)
            if ts.ndim != 1:
                raise ValueError("timestamps must be one-dimensional")
            if ts.size != samples.size:
                raise ValueError("data and timestamps must have the same length")
        _check(lib.nvtxcffi_w_counter_batch(self._backend._iface, self._handle, counter._counter_id,
                                            _address(samples), samples.nbytes,
                                            ffi.NULL if ts is None else ffi.cast("const int64_t *", ts.ctypes.data),
                                            0 if ts is None else ts.nbytes, ordering.value), "CounterBatchWrite")

    def _write_scalar_batch(self, counter: Counter, data: Any, timestamps: Any, ordering: BatchOrdering) -> None:
        import array

        if counter._dtype not in (int, float):
            raise RuntimeError("Install numpy to use write_counter_batch.")
        if timestamps is None:
            raise ValueError("write_counter_batch requires timestamps unless the counter layout embeds an "
                             "EntryKind.COUNTER_TIMESTAMP field")
        try:
            values = array.array("q" if counter._dtype is int else "d", data)
            ts = array.array("q", timestamps)
        except (TypeError, OverflowError) as exc:
            msg = f"write_counter_batch: {exc}"
            raise type(exc)(msg) from None
        if not values:
            raise ValueError("batch data must contain at least one sample")
        if len(ts) != len(values):
            raise ValueError("data and timestamps must have the same length")
        c_values = ffi.from_buffer(values)
        c_ts = ffi.from_buffer("int64_t[]", ts)
        _check(lib.nvtxcffi_w_counter_batch(self._backend._iface, self._handle, counter._counter_id, c_values,
                                            len(values) * values.itemsize, c_ts, len(ts) * 8, ordering.value),
               "CounterBatchWrite")
