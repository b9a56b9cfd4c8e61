"""Extended (binary) payloads: nvtx 0.2.16's payload enums, ``numpy_dtype`` and the schemas.

A payload that is not an int or a float (a NumPy array, list, tuple, range or bytes) travels as an
NVTX extended payload: the bytes of a NumPy array and the id of a schema that describes them,
registered with the tool once per domain and dtype (``nvtxPayloadSchemaRegister``) and cached.
Layouts, entry names, types, flags and semantics are nvtx 0.2.16's, so a tool receives the same
bytes from either library (tests/payloads/test_payloads.py compares them). NumPy is needed only
when such a payload is given; without it these payloads warn and are not sent, as with nvtx.
"""
from __future__ import annotations

import _thread
import sys

from . import _state
from ._accel import accel as _accel, speedups as _speedups
from ._ext_abi import (ATTR_FIELD_ENTRIES, ATTR_FIELD_FLAGS, ATTR_FIELD_NUM_ENTRIES, ATTR_FIELD_STATIC_SIZE,
                       ATTR_FIELD_TYPE, COUNTER_FLAG_LIMIT_MAX, COUNTER_FLAG_LIMIT_MIN, COUNTER_LIMIT_F64,
                       COUNTER_LIMIT_UNDEFINED, ENTRY_TYPE_BYTE, ENTRY_TYPE_CSTRING_UTF32, ENTRY_TYPE_FLOAT16,
                       ENTRY_TYPE_FLOAT32, ENTRY_TYPE_FLOAT64, ENTRY_TYPE_INT8, ENTRY_TYPE_INT16, ENTRY_TYPE_INT32,
                       ENTRY_TYPE_INT64, ENTRY_TYPE_UINT8, ENTRY_TYPE_UINT16, ENTRY_TYPE_UINT32, ENTRY_TYPE_UINT64,
                       PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, PAYLOAD_ENTRY_FLAG_ARRAY_LENGTH_INDEX,
                       PAYLOAD_ENTRY_FLAG_COUNTER, PAYLOAD_ENTRY_FLAG_TIMESTAMP, PAYLOAD_ENTRY_FLAG_UNUSED,
                       SCHEMA_FLAG_COUNTER_GROUP, SCHEMA_TYPE_DYNAMIC, SCHEMA_TYPE_STATIC)
from ._locks import hold_across_fork
from ._native import ffi, lib
from ._validate import _INT64_MAX, _INT64_MIN, _UINT64_MAX, ArgumentEncodeError, as_index, describe_int
from ._warnings import warn_at_caller

# NumPy is optional, and imported at the first payload, dtype or counter that needs it (_numpy()),
# not at `import nvtx_cffi`: it takes ~170 ms, and ranges and marks never need it.
np = None
_numpy_missing = False

__all__ = [
    "BatchOrdering", "EntryKind", "EventKind", "PayloadEntryType", "PredefinedScope", "TimestampType",
    "NvtxWarning", "numpy_dtype", "MAX_SCHEMAS", "payload_fields",
]

#: Schemas registered per process (all domains); past it new dtypes are refused (see register()).
MAX_SCHEMAS = 4096

NVTX_DTYPE_METADATA_KEY_NAME = "nvidia_nvtx_payload_metadata"  # nvtx's key: dtypes are interchangeable


class NvtxWarning(UserWarning):
    """A payload that cannot be sent (nvtx's ``NvtxWarning``)."""


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional, Tuple

    from ._payload_enums import BatchOrdering, EntryKind, EventKind, PayloadEntryType, PredefinedScope, TimestampType

#: nvtx 0.2.16's payload enums, in ``_payload_enums`` (imported at their first use: importing
#: nvtx_cffi does not import ``enum``), and what :func:`__getattr__` gives from there.
_ENUMS = frozenset(("BatchOrdering", "EntryKind", "EventKind", "PayloadEntryType", "PredefinedScope", "TimestampType"))


_DTYPE_TO_ENTRY_TYPE: dict = {}  # NumPy scalar type -> entry type (filled by _numpy())
#: Payload types sent as binary payloads without payload_fields() first: filled (in place: other
#: modules hold it) when NumPy is loaded, empty without it.
FAST_TYPES: set = set()
_ndarray = None  # numpy.ndarray once loaded


def _prod(shape) -> int:
    """``math.prod(shape)`` (a dtype's shape: a few ints), without importing ``math``."""
    n = 1
    for size in shape:
        n *= size
    return n


def _numpy():
    """NumPy, imported now if it was not yet (and the tables that need it filled); None where it is
    not installed."""
    global np, _ndarray, _numpy_missing
    if np is not None or _numpy_missing:
        return np
    with _lock:
        if np is not None:
            return np
        try:
            import numpy
        except ImportError:
            _numpy_missing = True
            return None
        # Every C integer type NumPy has, by its size: two of them share a size (long and long long
        # on Linux) and are distinct scalar types; int64/uint64 name only one of the two, while
        # np.array([2**63]) or dtype("q") gives the other.
        signed = {1: ENTRY_TYPE_INT8, 2: ENTRY_TYPE_INT16, 4: ENTRY_TYPE_INT32, 8: ENTRY_TYPE_INT64}
        unsigned = {1: ENTRY_TYPE_UINT8, 2: ENTRY_TYPE_UINT16, 4: ENTRY_TYPE_UINT32, 8: ENTRY_TYPE_UINT64}
        for types, by_size in (((numpy.byte, numpy.short, numpy.intc, numpy.int_, numpy.longlong), signed),
                               ((numpy.ubyte, numpy.ushort, numpy.uintc, numpy.uint, numpy.ulonglong), unsigned)):
            for scalar_type in types:
                _DTYPE_TO_ENTRY_TYPE[scalar_type] = by_size[numpy.dtype(scalar_type).itemsize]
        _DTYPE_TO_ENTRY_TYPE.update({
            numpy.float16: ENTRY_TYPE_FLOAT16, numpy.float32: ENTRY_TYPE_FLOAT32,
            numpy.float64: ENTRY_TYPE_FLOAT64, numpy.str_: ENTRY_TYPE_CSTRING_UTF32, numpy.bytes_: ENTRY_TYPE_BYTE,
        })
        _ndarray = numpy.ndarray
        FAST_TYPES.update((numpy.ndarray, list, tuple, range, bytes))
        np = numpy
    return np


def _numpy_if_imported():
    """NumPy if this program has imported it, else None, without importing it: no NumPy object
    (array, dtype) can exist before that, so checks for them need not import it."""
    return _numpy() if "numpy" in sys.modules else None


# --------------------------------------------------------------------------- numpy_dtype


if not TYPE_CHECKING:
    def __getattr__(name: str):
        """``_PayloadMetadata`` (what ``numpy_dtype`` attaches), a frozen dataclass made at its first
        use, in ``_semantics`` (importing nvtx_cffi does not import ``dataclasses``)."""
        if name == "_PayloadMetadata":
            from ._semantics import _PayloadMetadata

            return _PayloadMetadata
        if name in _ENUMS:
            from . import _payload_enums

            return getattr(_payload_enums, name)
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)


# What each role needs of a field's storage (nvtx's _dtype_validation).
_STORAGE = {
    "timestamp": (frozenset("iu"), 8, False, "64-bit integer storage"),
    "u64": (frozenset("u"), 8, True, "native uint64 storage"),
    "u32": (frozenset("u"), 4, True, "native uint32 storage"),
    "ptr": (frozenset("u"), ffi.sizeof("void *"), True, "native pointer-sized unsigned integer storage"),
}
def _role_storage() -> dict:
    from ._payload_enums import EntryKind, PayloadEntryType  # (here: importing nvtx_cffi does not import enum)

    return {
        EntryKind.RANGE_BEGIN: "timestamp", EntryKind.RANGE_END: "timestamp", EntryKind.MARK: "timestamp",
        EntryKind.COUNTER_TIMESTAMP: "timestamp", PayloadEntryType.RANGE_ID: "u64",
        PayloadEntryType.CATEGORY: "u32", PayloadEntryType.COLOR_ARGB: "u32", PayloadEntryType.SCOPE_ID: "u64",
        PayloadEntryType.REGISTERED_STRING: "ptr",
    }


def _validate_storage(dtype, role) -> None:
    if role is None:
        return
    need = _role_storage().get(role)
    if need is None:
        return
    kinds, itemsize, native, description = _STORAGE[need]
    if dtype.kind not in kinds or dtype.itemsize != itemsize or (native and not dtype.isnative):
        msg = f"{type(role).__name__}.{role.name} requires {description}; got dtype {dtype}"
        raise TypeError(msg)


def numpy_dtype(*args, counter_semantics=None, entry_kind: Optional[EntryKind] = None,
                entry_type: Optional[PayloadEntryType] = None, **kwargs):
    """``numpy.dtype(*args, **kwargs)``, optionally carrying NVTX payload metadata (as nvtx's):
    ``counter_semantics`` for a field of a counter group, ``entry_kind`` (a field's role) and
    ``entry_type`` (a field's special interpretation)."""
    from ._payload_enums import EntryKind, PayloadEntryType  # (here: importing nvtx_cffi does not import enum)

    np = _numpy()
    if np is None:
        raise RuntimeError("Install numpy to construct NVTX NumPy dtypes.")
    if entry_kind is not None and not isinstance(entry_kind, EntryKind):
        raise TypeError("entry_kind must be an nvtx.EntryKind or None")
    if entry_type is not None and not isinstance(entry_type, PayloadEntryType):
        raise TypeError("entry_type must be an nvtx.PayloadEntryType or None")
    if counter_semantics is not None:
        from ._semantics import CounterSemantics  # (here: importing nvtx_cffi does not import dataclasses)

        if not isinstance(counter_semantics, CounterSemantics) and not _is_nvtx_semantics(counter_semantics):
            msg = f"counter_semantics must be a CounterSemantics or None, not {type(counter_semantics).__name__}"
            raise TypeError(msg)
    base = np.dtype(*args, **kwargs)
    _validate_storage(base, entry_kind)
    _validate_storage(base, entry_type)
    if counter_semantics is None and entry_kind is None and entry_type is None:
        return base
    metadata = dict(base.metadata or {})
    if NVTX_DTYPE_METADATA_KEY_NAME in metadata:
        warn_at_caller("NVTX dtype metadata key already exists; leaving it unchanged.", NvtxWarning)
    from ._semantics import _PayloadMetadata  # (here: importing nvtx_cffi does not import dataclasses)

    metadata[NVTX_DTYPE_METADATA_KEY_NAME] = _PayloadMetadata(counter_semantics, entry_kind, entry_type)
    return np.dtype(base, metadata=metadata)


def _is_nvtx_semantics(obj) -> bool:
    return type(obj).__name__ == "CounterSemantics" and hasattr(obj, "value_type")


def _metadata(dtype):
    meta = getattr(dtype, "metadata", None)
    return None if meta is None else meta.get(NVTX_DTYPE_METADATA_KEY_NAME)


def _metadata_key(dtype):
    """The NVTX metadata that is part of a schema's identity (nvtx's _dtype_metadata_key)."""
    np = _numpy_if_imported()
    if np is None or not isinstance(dtype, np.dtype):
        return None
    sub = dtype.subdtype
    fields = ()
    if dtype.fields is not None and dtype.names is not None:
        fields = tuple((name, _metadata_key(dtype.fields[name][0])) for name in dtype.names)
    return _metadata(dtype), (_metadata_key(sub[0]) if sub else None), fields


def _flags_of(meta) -> int:
    kind = getattr(meta, "entry_kind", None) if meta is not None else None
    return kind.value if kind is not None else 0


def _type_of(meta) -> Optional[int]:
    kind = getattr(meta, "entry_type", None) if meta is not None else None
    return kind.value if kind is not None else None


def _semantics_of(meta):
    return getattr(meta, "counter_semantics", None) if meta is not None else None


# --------------------------------------------------------------------------- schemas

_lock = _thread.RLock()
hold_across_fork(_lock)  # a fork while another thread registers: see _locks
_registered = 0


def _field_name(name: str) -> bytes:
    """A structured dtype's field name as UTF-8 (a lone surrogate: nvtx's UnicodeEncodeError, by name)."""
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArgumentEncodeError(exc.encoding, exc.object, exc.start, exc.end, exc.reason,
                                  f"dtype field name {name!r}") from None


def _limit_bits(value, limit_type: int) -> int:
    if limit_type == COUNTER_LIMIT_F64:
        import array  # (here: only a float limit needs it; importing nvtx_cffi does not load it)

        return int.from_bytes(array.array("d", [float(value)]).tobytes(), "little")
    return int(value) & _UINT64_MAX


def semantics_struct(semantics, c_struct):
    """Fill ``nvtxcffi_counter_semantics`` ``c_struct`` from nvtx-cffi's (or nvtx's) CounterSemantics;
    returns what must stay alive while NVTX reads it."""
    limit_type = getattr(semantics, "_limit_type", COUNTER_LIMIT_UNDEFINED)
    flags = semantics.value_type.value | semantics.interpolation.value
    c_struct.scale_numerator = semantics.unit_scale_numerator
    c_struct.scale_denominator = semantics.unit_scale_denominator
    c_struct.limit_type = limit_type
    keep = None
    if semantics.unit is not None:
        keep = ffi.new("char[]", semantics.unit)
        c_struct.unit = keep
    if semantics.min is not None:
        flags |= COUNTER_FLAG_LIMIT_MIN
        c_struct.min_bits = _limit_bits(semantics.min, limit_type)
    if semantics.max is not None:
        flags |= COUNTER_FLAG_LIMIT_MAX
        c_struct.max_bits = _limit_bits(semantics.max, limit_type)
    c_struct.flags = flags
    return keep


class SchemaRegistry:
    """One domain's schemas, registered once per (dtype, metadata, counter group) and cached."""

    def __init__(self, domain_index: int) -> None:
        self.domain_index = domain_index
        self.dtypes: Dict[tuple, int] = {}
        self.arrays: Dict[int, int] = {}
        self.fixed: Dict[tuple, int] = {}

    def _register(self, field_mask, schema_type, flags, static_size, entries) -> int:
        """entries: (flags, type, name bytes|None, detail, offset, semantics|None)."""
        global _registered
        if _registered >= MAX_SCHEMAS:
            msg = f"too many payload schemas (limit {MAX_SCHEMAS} per process)"
            raise ValueError(msg)
        if len(entries) > lib.NVTXCFFI_MAX_SCHEMA_ENTRIES:  # the shim would refuse it (schema id 0)
            msg = (f"a NumPy dtype of {len(entries)} fields is not supported in an NVTX payload "
                   f"(at most {lib.NVTXCFFI_MAX_SCHEMA_ENTRIES} fields)")
            raise ValueError(msg)
        keep = []
        c_entries = ffi.new("nvtxcffi_schema_entry[]", len(entries))
        sems = [s for *_, s in entries if s is not None]
        c_sems = ffi.new("nvtxcffi_counter_semantics[]", max(1, len(sems)))
        k = 0
        for i, (eflags, etype, name, detail, offset, sem) in enumerate(entries):
            e = c_entries[i]
            e.flags, e.type, e.array_detail, e.offset = eflags, etype, detail, offset
            if name is not None:
                cname = ffi.new("char[]", name)
                keep.append(cname)
                e.name = cname
            e.semantics = -1
            if sem is not None:
                keep.append(semantics_struct(sem, c_sems + k))
                e.semantics = k
                k += 1
        schema_id = self._submit(field_mask, schema_type, flags, static_size, c_entries, len(entries), c_sems, k)
        _registered += 1
        return schema_id

    def _submit(self, field_mask, schema_type, flags, static_size, c_entries, count, c_sems, n_sems) -> int:
        """Register the C description (nvtxPayloadSchemaRegister); the schema id, 0 on failure.
        nvtx_cffi.writer's registry sends it to an NVTXW backend instead."""
        return lib.nvtxcffi_schema_register(self.domain_index, field_mask, schema_type, flags, static_size,
                                            c_entries, count, c_sems, n_sems)

    def dtype_schema(self, dtype, counter_group: bool = False, schema_flags: int = 0) -> int:
        key = (dtype, counter_group, schema_flags, _metadata_key(dtype))
        with _lock:
            found = self.dtypes.get(key)
            if found is not None:
                return found
            if dtype.subdtype:
                sub, shape = dtype.subdtype
                result = self.fixed_schema(self.dtype_schema(sub), _prod(shape), dtype.itemsize)
            elif dtype.type in _DTYPE_TO_ENTRY_TYPE:
                result = self._builtin(dtype, _metadata(dtype))
            elif dtype.names is not None:
                result = self._structured(dtype, counter_group, schema_flags)
            else:
                msg = f"NumPy dtype {dtype} is not supported in an NVTX payload (numbers, str, bytes and structs of them are)"
                raise TypeError(msg)
            self.dtypes[key] = result
            return result

    def _builtin(self, dtype, meta) -> int:
        flags = PAYLOAD_ENTRY_FLAG_UNUSED
        detail = 0
        entry_type = _type_of(meta)
        if entry_type is None:
            entry_type = _DTYPE_TO_ENTRY_TYPE[dtype.type]
        if entry_type == ENTRY_TYPE_CSTRING_UTF32:
            detail = dtype.itemsize // 4
        elif entry_type == ENTRY_TYPE_BYTE:
            detail = dtype.itemsize
            flags = PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE
        flags |= _flags_of(meta)
        mask = ATTR_FIELD_TYPE | ATTR_FIELD_ENTRIES | ATTR_FIELD_NUM_ENTRIES | ATTR_FIELD_STATIC_SIZE
        return self._register(mask, SCHEMA_TYPE_STATIC, 0, dtype.itemsize,
                              [(flags, entry_type, dtype.name.encode(), detail, 0, _semantics_of(meta))])

    def _structured(self, dtype, counter_group: bool, schema_flags: int) -> int:
        mask = ATTR_FIELD_TYPE | ATTR_FIELD_ENTRIES | ATTR_FIELD_NUM_ENTRIES | ATTR_FIELD_STATIC_SIZE
        flags = schema_flags | (SCHEMA_FLAG_COUNTER_GROUP if counter_group else 0)
        if flags:
            mask |= ATTR_FIELD_FLAGS
        flat = counter_group or schema_flags != 0
        entries = []
        for name in dtype.names:
            field_type, offset = dtype.fields[name][:2]
            meta = _metadata(field_type)
            detail = 0
            eflags = PAYLOAD_ENTRY_FLAG_UNUSED
            if flat and field_type.subdtype:
                sub, shape = field_type.subdtype
                if sub.type in _DTYPE_TO_ENTRY_TYPE:
                    entry_type = _DTYPE_TO_ENTRY_TYPE[sub.type]
                    detail = _prod(shape)
                    eflags = PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE
                else:
                    entry_type = self.dtype_schema(field_type)
            elif flat:
                entry_type = _type_of(meta)
                if entry_type is None:
                    entry_type = (_DTYPE_TO_ENTRY_TYPE[field_type.type] if field_type.type in _DTYPE_TO_ENTRY_TYPE
                                  else self.dtype_schema(field_type))
            else:
                entry_type = self.dtype_schema(field_type)
            if entry_type == ENTRY_TYPE_CSTRING_UTF32:
                detail = field_type.itemsize // 4
            elif entry_type == ENTRY_TYPE_BYTE:
                detail = field_type.itemsize
                eflags = PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE
            role = _flags_of(meta)
            eflags |= role
            if counter_group and not role & PAYLOAD_ENTRY_FLAG_TIMESTAMP:
                eflags |= PAYLOAD_ENTRY_FLAG_COUNTER
            entries.append((eflags, entry_type, _field_name(name), detail, offset, _semantics_of(meta)))
        return self._register(mask, SCHEMA_TYPE_STATIC, flags, dtype.itemsize, entries)

    def array_schema(self, scalar_schema: int) -> int:
        with _lock:
            found = self.arrays.get(scalar_schema)
            if found is None:
                mask = ATTR_FIELD_TYPE | ATTR_FIELD_ENTRIES | ATTR_FIELD_NUM_ENTRIES
                found = self._register(mask, SCHEMA_TYPE_DYNAMIC, 0, 0, [
                    (PAYLOAD_ENTRY_FLAG_UNUSED, ENTRY_TYPE_UINT64, b"size", 0, 0, None),
                    (PAYLOAD_ENTRY_FLAG_ARRAY_LENGTH_INDEX, scalar_schema, b"data", 0, 0, None),
                ])
                self.arrays[scalar_schema] = found
            return found

    def fixed_schema(self, scalar_schema: int, length: int, size: int) -> int:
        key = (scalar_schema, length, size)
        with _lock:
            found = self.fixed.get(key)
            if found is None:
                mask = ATTR_FIELD_TYPE | ATTR_FIELD_ENTRIES | ATTR_FIELD_NUM_ENTRIES | ATTR_FIELD_STATIC_SIZE
                found = self._register(mask, SCHEMA_TYPE_STATIC, 0, size,
                                       [(PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE, scalar_schema, None, length, 0, None)])
                self.fixed[key] = found
            return found


_registries: Dict[int, SchemaRegistry] = {}


def registry(domain_index: int) -> SchemaRegistry:
    found = _registries.get(domain_index)
    if found is None:
        with _lock:
            found = _registries.setdefault(domain_index, SchemaRegistry(domain_index))
    return found


# --------------------------------------------------------------------------- event payloads

#: payload_fields()' kind for an extended payload (a binary payload: the recording format's code of
#: one, not a kind the C scalar calls send).
KIND_EXT = lib.NVTXREC_PT_EXT
_SEQUENCES = (list, tuple, range, bytes)


_EXT_TRIPLE = (KIND_EXT, 0, 0.0)


class ExtFields:
    """payload_fields()' answer for a binary payload: reads as the tuple ``(KIND_EXT, 0, 0.0)``
    (unpacking, indexing, len, ==) and carries ``.payload``. Not a tuple subclass: one slot, so
    making one per call costs no instance dict."""

    __slots__ = ("payload",)

    def __iter__(self):
        return iter(_EXT_TRIPLE)

    def __getitem__(self, index):
        return _EXT_TRIPLE[index]

    def __len__(self) -> int:
        return 3

    def __eq__(self, other):
        return _EXT_TRIPLE == (tuple(other) if isinstance(other, ExtFields) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ExtFields({self.payload!r})"


_new_ext_fields = object.__new__


def _ext_fields(payload) -> ExtFields:
    fields = _new_ext_fields(ExtFields)
    fields.payload = payload
    return fields


def taken(fields):
    """``fields`` (payload_fields()' answer) as prepared attributes keep them: nvtx 0.2.16 takes the
    values of an array or a sequence when its attributes are made (it copies an array's elements,
    and a list's through ``np.array(list)``), so later changes to the object given are not sent.
    A 0-d array is the exception, as in nvtx: its attributes point at the array itself."""
    if fields.__class__ is not ExtFields:
        return fields
    payload = fields.payload
    np = _numpy()
    if isinstance(payload, np.ndarray):
        if not payload.ndim:
            return fields
        return _ext_fields(np.array(payload, order="C"))  # a C-contiguous copy of the elements
    return _ext_fields(np.array(payload))  # a list, tuple, range or bytes: converted once


_checked_dtypes: Dict[int, object] = {}  # id -> dtype objects check_dtype() passed (kept alive; bounded)


def fields_for(payload):
    """payload_fields() for everything that is not an int or a float: ExtFields, or "no payload"
    after a warning (nvtx's behaviour for str, dict and other types)."""
    if payload.__class__ is _ndarray:  # the per-call case: a dtype already checked is not again
        dtype = payload.dtype
        if _checked_dtypes.get(id(dtype)) is not dtype:
            check_dtype(dtype)
            if len(_checked_dtypes) < 1024:
                _checked_dtypes[id(dtype)] = dtype
            _note_checked(dtype)
        return _ext_fields(payload)
    np = _numpy() if type(payload) in _SEQUENCES else _numpy_if_imported()
    if np is not None and (isinstance(payload, np.ndarray) or type(payload) in _SEQUENCES):
        check_dtype(payload.dtype if isinstance(payload, np.ndarray) else np.array(payload).dtype)
        return _ext_fields(payload)
    msg = f"Unsupported payload type: {type(payload)}."
    if np is None and type(payload) in _SEQUENCES:
        msg += " Install numpy for extended payload support."
    warn_at_caller(msg, NvtxWarning)
    return (lib.NVTXREC_PT_NONE, 0, 0.0)


_INT64 = lib.NVTXREC_PT_INT64
_DOUBLE = lib.NVTXREC_PT_DOUBLE


def payload_fields(payload: object) -> Tuple[int, int, float]:
    """(kind, int64 bits, double) for the C calls; ints become int64, or uint64 where only that fits."""
    # Exact int and float first: a per-call payload is nearly always one, and the integer-like
    # checks below cost far more than the rest of the call.
    cls = payload.__class__
    if cls is int and _INT64_MIN <= payload <= _INT64_MAX:
        return _INT64, payload, 0.0
    if cls is float or isinstance(payload, float):
        return _DOUBLE, 0, float(payload)
    if cls in FAST_TYPES:
        # arrays (0-d too: the scalar schema of its dtype, as nvtx), lists, tuples, ranges, bytes (with NumPy)
        return fields_for(payload)
    np = _numpy_if_imported()
    if np is not None and isinstance(payload, np.ndarray):  # (before the payload types fill FAST_TYPES)
        return fields_for(payload)
    value = int(payload) if isinstance(payload, bool) else as_index(payload)  # bool: an int, as before
    if value is not None:
        if _INT64_MIN <= value <= _INT64_MAX:
            return lib.NVTXREC_PT_INT64, value, 0.0
        if 0 <= value <= _UINT64_MAX:
            return lib.NVTXREC_PT_UINT64, value - (1 << 64), 0.0
        msg = f"payload {describe_int(value)} is out of range: it must fit in int64 or uint64"
        raise OverflowError(msg)
    import numbers  # (here: only a payload of another number type gets this far)

    if isinstance(payload, numbers.Real):
        try:
            return lib.NVTXREC_PT_DOUBLE, 0, float(payload)
        except OverflowError:
            msg = f"payload is out of range for a float (double): a {type(payload).__name__} too large"
            raise OverflowError(msg) from None
        except (TypeError, ValueError) as exc:
            msg = f"payload {type(payload).__name__} cannot be converted to a float (double)"
            raise type(exc)(msg) from None
    if hasattr(type(payload), "__index__") and not hasattr(payload, "__array_interface__"):
        msg = f"payload must be an int, a float or None: {type(payload).__name__}.__index__ did not return an int"
        raise TypeError(msg)
    # Arrays, lists, tuples, ranges, bytes: an extended payload; anything else warns (as nvtx).
    return fields_for(payload)


def _note_checked(dtype) -> None:
    """``dtype`` passed check_dtype: the accelerator's array paths may take arrays of it (exact
    ndarrays) without this check (annotate without a tool) or without the Python frames before
    emit() (annotate, mark, push_range with a tool)."""
    if _accel is not None:
        _accel.array_dtype_checked(_ndarray, dtype)


def check_dtype(dtype) -> None:
    """TypeError/ValueError, naming the payload, for a dtype no payload schema describes."""
    _numpy()  # the dtype's NumPy is imported: this fills _DTYPE_TO_ENTRY_TYPE
    if dtype.hasobject:
        msg = f"payload: NumPy arrays of Python objects cannot be sent (dtype {dtype})"
        raise TypeError(msg)
    if not dtype.isnative:
        msg = f"payload: dtype {dtype} is not in native byte order (use .astype(dtype.newbyteorder('=')))"
        raise ValueError(msg)
    if dtype.subdtype:
        check_dtype(dtype.subdtype[0])
    elif dtype.names is not None:
        for name in dtype.names:
            check_dtype(dtype.fields[name][0])
    elif dtype.type not in _DTYPE_TO_ENTRY_TYPE:
        msg = f"payload: NumPy dtype {dtype} is not supported (numbers, str, bytes and structs of them are)"
        raise TypeError(msg)


def encode(domain_index: int, payload):
    """(schema id, contiguous array or bytes, size) for a binary payload, or None when nothing is
    sent (an empty array, as nvtx). Raises TypeError/ValueError for payloads no schema fits."""
    np = _numpy()
    array = payload if isinstance(payload, np.ndarray) else np.array(payload)
    if array.nbytes == 0:
        return None
    dtype = array.dtype
    check_dtype(dtype)
    reg = registry(domain_index)
    schema = reg.dtype_schema(dtype)
    if array.ndim == 0:
        data = np.ascontiguousarray(array)
        return schema, data, data.nbytes
    schema = reg.array_schema(schema)
    data = np.ascontiguousarray(array)
    blob = np.uint64(data.size).tobytes() + data.tobytes()
    return schema, blob, len(blob)


# The per-call path of a binary payload: per domain, the schemas of each dtype object seen (kept
# alive in the entry, so its id is never reused while cached): (dtype, scalar schema, array schema
# or None). Filled by the general path after it registered (or found) the schemas; bounded.
_FAST_DTYPES_PER_DOMAIN = 256
_fast_schemas: Dict[int, Dict[int, tuple]] = {}
_slot_domains: Dict[int, int] = {}
_from_buffer = ffi.from_buffer
_NULL = ffi.NULL


def slot_domain(slot: int) -> int:
    """The domain index of prepared slot ``slot`` (slots never change domain; cached)."""
    found = _slot_domains.get(slot)
    if found is None:
        found = lib.nvtxcffi_slot_domain(slot)
        if len(_slot_domains) < 65536:
            _slot_domains[slot] = found
    return found


def emit(op: int, slot: int, domain_index: int, inline, payload) -> int:
    """One range/mark with a binary payload (slot, or inline = (message, argb, category)).

    An array whose dtype this domain has seen: the cached schema, the buffer's address, one C call
    (nvtxcffi_emit_ext_counted prefixes the element count). Anything else: _emit_general."""
    if payload.__class__ is not _ndarray:
        if payload.__class__ not in FAST_TYPES:
            return _emit_general(op, slot, domain_index, inline, payload)
        payload = np.array(payload)
    dtype = payload.dtype
    cached = _fast_schemas.get(domain_index)
    entry = cached.get(id(dtype)) if cached is not None else None
    if entry is None or entry[0] is not dtype:
        return _emit_general(op, slot, domain_index, inline, payload)
    if _c_emit_array is not None:  # _speedups: buffer, count and the shim's call in C
        result = _c_emit_array(op, slot, domain_index, inline, entry[1], entry[2] or 0, payload)
        return _emit_general(op, slot, domain_index, inline, payload) if result is None else result
    nbytes = payload.nbytes
    if not nbytes:
        return _emit_general(op, slot, domain_index, inline, payload)
    try:
        buffer = _from_buffer(payload)  # C-contiguous only (a plain buffer)
    except (ValueError, TypeError, BufferError):
        return _emit_general(op, slot, domain_index, inline, payload)
    if inline is None:
        message, argb, category = _NULL, 0, 0
    else:
        message, argb, category = inline
        slot = -1
    if payload.ndim:
        schema = entry[2]
        if schema is None:
            return _emit_general(op, slot, domain_index, inline, payload)
        return lib.nvtxcffi_emit_ext_counted(op, slot, domain_index, message, argb, category, schema, buffer,
                                             nbytes, payload.size)
    return lib.nvtxcffi_emit_ext(op, slot, domain_index, message, argb, category, entry[1], buffer, nbytes)


_c_emit_array = None  # _speedups.emit_array once bound (first _remember), None without the accelerator


def _bind_c_emit_array():
    if _speedups is None or not hasattr(_speedups, "emit_array"):
        return None
    _speedups.bind_payloads(int(ffi.cast("uintptr_t", ffi.addressof(lib, "nvtxcffi_emit_ext"))),
                            int(ffi.cast("uintptr_t", ffi.addressof(lib, "nvtxcffi_emit_ext_counted"))))
    return _speedups.emit_array


def _remember(domain_index: int, array) -> None:
    """Cache this array's dtype's schemas (registered by encode()) for emit()'s per-call path."""
    global _c_emit_array
    if _c_emit_array is None:
        _c_emit_array = _bind_c_emit_array()
    dtype = array.dtype
    _note_checked(dtype)  # encode() checked it
    reg = registry(domain_index)
    scalar = reg.dtype_schema(dtype)
    vector = reg.arrays.get(scalar)
    with _lock:
        cached = _fast_schemas.setdefault(domain_index, {})
        entry = cached.get(id(dtype))
        if entry is not None and entry[0] is dtype:
            if vector is None or entry[2] is not None:
                return
        elif len(cached) >= _FAST_DTYPES_PER_DOMAIN:
            return
        cached[id(dtype)] = (dtype, scalar, vector)


def register(domain_index: int, fields) -> None:
    """Register the payload schemas of ``fields`` (payload_fields()' answer) in a domain now: nvtx
    0.2.16 registers them when attributes take a payload, not at their first event. Nothing
    without a tool or for other payloads; an error is left to the event (which raises or warns)."""
    if fields.__class__ is not ExtFields or not _state.active():
        return
    try:
        encode(domain_index, fields.payload)
    except (TypeError, ValueError):
        pass


def _emit_general(op: int, slot: int, domain_index: int, inline, payload) -> int:
    """emit() for first uses, empty and non-contiguous arrays: encode() (checks, registers)."""
    if inline is not None and inline[0] != _NULL:
        # the message is registered before the payload's schemas, as nvtx registers them
        lib.nvtxcffi_string_keep(domain_index, inline[0])
    try:
        encoded = encode(domain_index, payload)
    except ValueError as exc:
        if "too many payload schemas" not in str(exc):
            raise
        warn_at_caller(f"{exc}; the event is sent without its payload", NvtxWarning)
        encoded = None
    if encoded is None:
        schema, buffer, size = 0, ffi.NULL, 0
    else:
        schema, data, size = encoded
        buffer = ffi.from_buffer(data)
        if isinstance(payload, _numpy().ndarray):
            _remember(domain_index, payload)
    if encoded is None:
        # No payload: the plain call (nvtx sends the event without one).
        if inline is None:
            return lib.nvtxcffi_emit_slot(op, slot, lib.NVTXREC_PT_NONE, 0, 0.0)
        message, argb, category = inline
        return lib.nvtxcffi_emit(op, domain_index, message, argb, category, lib.NVTXREC_PT_NONE, 0, 0.0)
    if inline is None:
        return lib.nvtxcffi_emit_ext(op, slot, domain_index, ffi.NULL, 0, 0, schema, buffer, size)
    message, argb, category = inline
    return lib.nvtxcffi_emit_ext(op, -1, domain_index, message, argb, category, schema, buffer, size)
