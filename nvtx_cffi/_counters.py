"""NVTX counters (nvToolsExtCounters.h): nvtx 0.2.16's counter API.

``Domain.get_counter(name, dtype, ...)`` registers a counter once and returns the same object for
the same arguments. ``int`` and ``float`` counters sample with one C call: their ``sample``
attribute *is* a C function (CFFI, one argument) bound to the counter, for the first
``NVTXCFFI_FAST_COUNTERS`` of each type; later ones use a ``functools.partial`` of the general
call. Without a tool (or with ``NVTX_DISABLE``) ``get_counter`` checks its arguments and returns a
do-nothing counter, like nvtx.
"""
from __future__ import annotations

import array as pyarray
import _thread
import functools
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Iterable, Optional, Union

from . import _state
from ._accel import speedups as _speedups
from ._ext_abi import ENTRY_TYPE_FLOAT64, ENTRY_TYPE_INT64
from ._locks import hold_across_fork
from ._native import ffi, lib
from ._validate import _INT64_MAX, _INT64_MIN, ArgumentEncodeError, ArgumentTypeError
from ._payload import _metadata_key, _numpy, registry, semantics_struct
from ._payload_enums import CounterInterpolation, CounterNoValueReason, CounterValueType, TimestampType

__all__ = [
    "Counter", "Int64Counter", "Float64Counter", "ExtCounter", "CounterSemantics", "CounterValueType",
    "CounterInterpolation", "CounterNoValueReason", "get_counter", "get_timestamp",
]


if TYPE_CHECKING:
    from ._semantics import CounterSemantics
else:
    def __getattr__(name: str):
        """``CounterSemantics``, a frozen dataclass made at its first use (in ``_semantics``: importing
        nvtx_cffi does not import ``dataclasses``, which imports ``inspect``)."""
        if name == "CounterSemantics":
            from ._semantics import CounterSemantics

            return CounterSemantics
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)


def _is_semantics(value) -> bool:
    """``isinstance(value, CounterSemantics)``, without making the class: before it is made, nothing
    is one."""
    module = sys.modules.get(__package__ + "._semantics")
    return module is not None and isinstance(value, module.CounterSemantics)


# --------------------------------------------------------------------------- counters


#: _speedups' CounterBase (sample() as a C method), or None (PyPy, no accelerator).
_CBase = getattr(_speedups, "CounterBase", None)


class Counter(_CBase or object):  # type: ignore[misc]
    """A registered NVTX counter; get one with :meth:`Domain.get_counter`.

    ``sample(value)`` records one value, ``sample_no_value(reason)`` a sample without one,
    ``batch_submit(values, timestamps)`` many timestamped samples.
    """

    __slots__ = ("domain", "name", "dtype", "description", "scope", "semantics", "time_domain", "_index",
                 "__weakref__") + (() if _CBase is not None else ("sample",))

    def __init__(self, domain, name, dtype, description, scope, semantics, time_domain: int, schema_id: int):
        self.domain = domain
        self.name = name
        self.dtype = dtype
        self.description = description
        self.scope = scope
        self.semantics = semantics
        self.time_domain = time_domain
        scope_id = 0 if scope is None else _scope_id(domain, scope)
        keep = []
        c_sem = ffi.NULL
        if semantics is not None:
            c_sem = ffi.new("nvtxcffi_counter_semantics *")
            keep.append(semantics_struct(semantics, c_sem))
        description_bytes = ffi.NULL if description is None else _to_bytes(description, "description")
        index = lib.nvtxcffi_counter_register(domain._index, schema_id, _to_bytes(name, "name"),
                                              description_bytes, scope_id, time_domain, c_sem)
        if index < 0:
            msg = f"counter {name!r}: too many counters (limit {lib.NVTXCFFI_MAX_COUNTERS})"
            raise ValueError(msg)
        self._index = index
        self._bind()

    def _bind(self) -> None:
        if _CBase is None:
            self.sample = self._sample_ext

    def _sample_ext(self, value) -> None:  # pragma: no cover - overridden
        raise NotImplementedError("Use Domain.get_counter() to create a concrete counter.")

    def sample_no_value(self, reason: "CounterNoValueReason") -> None:
        """Record a sample without a value (zero, unchanged or unavailable)."""
        if not isinstance(reason, CounterNoValueReason):
            msg = f"reason must be a CounterNoValueReason, not {type(reason).__name__}"
            raise ArgumentTypeError(msg)
        lib.nvtxcffi_counter_sample_no_value(self._index, reason.value)

    def batch_submit(self, values: Iterable, timestamps: Iterable[int]) -> None:  # pragma: no cover
        raise NotImplementedError("Use Domain.get_counter() to create a concrete counter.")

    def _submit(self, data, nbytes: int, count: int, timestamps) -> None:
        ts = _timestamps(timestamps)
        if count != len(ts):
            raise ValueError("values and timestamps must have the same length.")
        lib.nvtxcffi_counter_batch(self._index, ffi.from_buffer(data) if nbytes else ffi.NULL, nbytes,
                                   ffi.cast("int64_t *", ffi.from_buffer(ts)) if len(ts) else ffi.NULL,
                                   len(ts) * 8, 0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dtype={self.dtype!r}, domain={self.domain.name!r})"


def _converted(convert, value, dtype, what: str):
    """``convert(value, dtype)``; its TypeError/ValueError/OverflowError (NumPy's or array's) as the
    same type, with a message that names the argument (``what``) and the dtype."""
    try:
        return convert(value, dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        msg = f"{what} does not convert to dtype {dtype}: {exc}"
        try:
            error = type(exc)(msg)
        except Exception:  # a subclass with another constructor: its nearest builtin base
            error = next(base(msg) for base in (OverflowError, TypeError, ValueError) if isinstance(exc, base))
        raise error from None


def _timestamps(timestamps):
    np = _numpy()
    if np is not None:
        return _converted(np.ascontiguousarray, timestamps, np.dtype(np.int64),
                          "batch_submit(): timestamps").reshape(-1)
    return _converted(_array_of, timestamps, "q", "batch_submit(): timestamps")


def _scalar_values(values, typecode: str):
    np = _numpy()
    if np is not None:
        return _converted(np.ascontiguousarray, values, np.dtype(typecode), "batch_submit(): values").reshape(-1)
    return _converted(_array_of, values, typecode, "batch_submit(): values")


def _array_of(values, typecode: str):  # without NumPy
    return pyarray.array(typecode, values)


def _bind_c_samplers() -> bool:
    """Give CounterBase's C ``sample`` the shim's two sample functions; False without the accelerator."""
    if _speedups is None or not hasattr(_speedups, "bind_samplers"):
        return False
    _speedups.bind_samplers(int(ffi.cast("uintptr_t", ffi.addressof(lib, "nvtxcffi_counter_sample_int64"))),
                            int(ffi.cast("uintptr_t", ffi.addressof(lib, "nvtxcffi_counter_sample_float64"))))
    return True


_samplers_bound = False  # (bound at the first counter: counters exist only with a tool)


def _sample_type_error(value, is_float: bool) -> TypeError:
    """c/speedups/counters_speedups.c's sample_type_error: the value's type and the counter's, named."""
    if is_float:
        return TypeError(f"sample() of a float64 counter takes a real number, not {type(value).__name__}")
    return TypeError(f"sample() of an int64 counter takes an int (or a number that int() truncates), "
                     f"not {type(value).__name__}")


def _int64_sample(value) -> int:
    """``value`` as the C ``sample`` of an int64 counter converts it (c/speedups/counters_speedups.c
    sample_int64_of: an int, or what ``__int__`` makes of it -- a float truncated), with its errors."""
    if isinstance(value, int):
        number = value
    elif not hasattr(type(value), "__int__"):  # (a str, None, an object with __index__ alone)
        raise _sample_type_error(value, False)
    else:
        try:
            number = int(value)  # what PyNumber_Long does here: __int__
        except TypeError:
            raise _sample_type_error(value, False) from None
        except (ValueError, OverflowError) as exc:  # a NaN's, an infinity's
            if type(exc) not in (ValueError, OverflowError):
                raise  # a subclass (a user's own): unchanged, as in C
            raise type(exc)(f"sample() of an int64 counter: {exc}") from None
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise OverflowError("sample() of an int64 counter: value is out of range (it must fit in int64)")
    return number


def _python_sampler(c_sample, truncates_floats: bool):
    """``sample(value)`` of the pure-Python path, around a CFFI sample function (which takes no
    keyword argument). A value CFFI refuses takes the C method's conversion (same values, same
    errors and messages): for an int64 counter (``truncates_floats``) CFFI's conversion refuses a
    float, nvtx's (Cython's, through ``__int__``) truncates it, so the value is converted here."""
    if truncates_floats:
        def sample(value) -> None:
            try:
                c_sample(value)
            except (TypeError, ValueError, OverflowError):
                c_sample(_int64_sample(value))  # (a float: its int; else the C method's error)
    else:
        def sample(value) -> None:
            try:
                c_sample(value)  # PyFloat_AsDouble, as the C method's
            except OverflowError:
                msg = "sample() of a float64 counter: value is out of range (too large for a double)"
                raise OverflowError(msg) from None
            except TypeError:
                raise _sample_type_error(value, True) from None

    sample.__qualname__ = "sample"  # argument errors read "sample() ...", as the C method's and nvtx's
    return sample


def _bind_scalar_sample(counter: "Counter", is_float: bool) -> None:
    """Int64Counter/Float64Counter._bind: ``sample`` as one C call."""
    global _samplers_bound
    if _CBase is not None:  # C: sample() is CounterBase's C method (nvtx_cffi._speedups)
        if not _samplers_bound:
            _samplers_bound = _bind_c_samplers()
        counter._bind_sample(counter._index, is_float)
        return
    fast = lib.nvtxcffi_fast_counter(counter._index)
    if fast >= 0:
        c_sample = getattr(lib, f"nvtxcffi_sample_{'f64' if is_float else 'i64'}_{fast}")
    else:
        general = lib.nvtxcffi_counter_sample_float64 if is_float else lib.nvtxcffi_counter_sample_int64
        c_sample = functools.partial(general, counter._index)
    counter.sample = _python_sampler(c_sample, truncates_floats=not is_float)


class Int64Counter(Counter):
    """A counter of signed 64-bit integers. ``sample(value)``: one C call. The value converts as in
    nvtx: an int, or a number ``int()`` truncates (a float, a NumPy scalar); a str or None raises
    TypeError, an int outside int64 OverflowError, a NaN ValueError."""

    __slots__ = ()

    def _bind(self) -> None:
        _bind_scalar_sample(self, is_float=False)

    def batch_submit(self, values: Iterable[int], timestamps: Iterable[int]) -> None:
        """Record timestamped int64 samples (one timestamp per value)."""
        data = _scalar_values(values, "q")
        self._submit(data, len(data) * 8, len(data), timestamps)


class Float64Counter(Counter):
    """A counter of doubles. ``sample(value)``: one C call."""

    __slots__ = ()

    def _bind(self) -> None:
        _bind_scalar_sample(self, is_float=True)

    def batch_submit(self, values: Iterable[float], timestamps: Iterable[int]) -> None:
        """Record timestamped double samples (one timestamp per value)."""
        data = _scalar_values(values, "d")
        self._submit(data, len(data) * 8, len(data), timestamps)


class ExtCounter(Counter):
    """A counter (or flat counter group, for a structured dtype) of NumPy-dtype samples."""

    __slots__ = ()

    def _bind(self) -> None:
        super()._bind()
        _ext_packers[self._index] = _packer(self.dtype)

    def _sample_ext(self, value) -> None:
        packer = _ext_packers.get(self._index)
        if packer is not None and value.__class__ in packer[1]:
            # A tuple (group) or a number (one field) of plain numbers: struct.pack lays them out
            # as NumPy would; anything it refuses goes the NumPy way (same values, same errors).
            try:
                data = packer[0](*value) if packer[2] else packer[0](value)
            except (struct.error, TypeError, ValueError, OverflowError):
                pass
            else:
                _sample_bytes(self._index, data, len(data))
                return
        payload = _converted(_numpy().ascontiguousarray, value, self.dtype, "sample(): value")
        if payload.size != 1:
            raise ValueError(
                f"sample() expects exactly one sample of dtype {self.dtype} ({self.dtype.itemsize} bytes); "
                f"got {payload.size} samples ({payload.nbytes} bytes). Use batch_submit() to submit "
                f"multiple samples at once."
            )
        lib.nvtxcffi_counter_sample(self._index, ffi.from_buffer(payload), payload.nbytes)

    def batch_submit(self, values: Iterable, timestamps: Iterable[int]) -> None:
        """Record timestamped samples: ``values`` as ``numpy.ascontiguousarray(values, self.dtype)``."""
        payload = _converted(_numpy().ascontiguousarray, values, self.dtype, "batch_submit(): values")
        nbytes = payload.nbytes
        self._submit(payload, nbytes, nbytes // self.dtype.itemsize, timestamps)


# ExtCounter.sample's fast path: per counter index, (Struct.pack, the value classes it takes,
# whether the value is a tuple of fields) for dtypes of plain integer/float fields; None otherwise.
_ext_packers: Dict[int, Optional[tuple]] = {}
_sample_bytes = lib.nvtxcffi_counter_sample_bytes
_STRUCT_CODES = {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I", "i8": "q", "u8": "Q",
                 "f4": "f", "f8": "d"}


def _packer(dtype) -> Optional[tuple]:
    """A struct.Struct with the exact layout of ``dtype`` (offsets, padding, itemsize), for dtypes
    of native integer and float fields (not f2, bool, strings, subarrays)."""
    np = _numpy()
    if np is None or not isinstance(dtype, np.dtype) or dtype.subdtype is not None:
        return None

    def code(field) -> Optional[str]:
        if field.subdtype is not None or field.fields is not None or not field.isnative:
            return None
        return _STRUCT_CODES.get(f"{field.kind}{field.itemsize}")

    if dtype.names is None:
        c = code(dtype)
        if c is None or dtype.kind == "f" and c in "bBhHiIqQ":
            return None
        return struct.Struct("=" + c).pack, ((int, float) if dtype.kind == "f" else (int,)), False
    fmt, at = "=", 0
    for name in dtype.names:  # the tuple's order: offsets must rise with it
        field, offset = dtype.fields[name][:2]
        c = code(field)
        if c is None or offset < at:
            return None
        fmt += "x" * (offset - at) + c
        at = offset + field.itemsize
    fmt += "x" * (dtype.itemsize - at)
    packer = struct.Struct(fmt)
    if packer.size != dtype.itemsize:
        return None
    return packer.pack, (tuple,), True


def _own_c_methods(cls, *names) -> None:
    """Give ``cls`` its own descriptors of its C base's methods: CPython 3.11's specialised call of a
    C method wants ``self`` exactly of the descriptor's type (``counter.sample(v)`` stays
    unspecialised with the base's descriptor)."""
    for name in names:
        setattr(cls, name, _speedups.method_for(cls, name))


if _CBase is not None:
    _own_c_methods(Int64Counter, "sample")
    _own_c_methods(Float64Counter, "sample")

# A bad call names sample(), the method users call, not the function behind it.
for _cls in (Counter, ExtCounter):
    _cls._sample_ext.__name__ = "sample"
    _cls._sample_ext.__qualname__ = "sample"
del _cls

if _CBase is not None:  # ExtCounter.sample is Python: a class attribute over CounterBase's
    ExtCounter.sample = ExtCounter._sample_ext


#: _speedups' NoOpCounterBase (its methods: C, doing nothing), or None (PyPy, no accelerator).
_NoOpBase = getattr(_speedups, "NoOpCounterBase", None)


class _NoOpCounter(_NoOpBase or object):  # type: ignore[misc]
    """What ``get_counter`` returns without a tool (nvtx's DummyCounter): every call does nothing.
    With the accelerator its methods are C (a call costs what a no-op C method costs)."""

    __slots__ = ()
    name = dtype = domain = description = scope = semantics = time_domain = None

    if _NoOpBase is None:
        # Static methods (a call costs what a method's costs): their argument errors read as the C
        # methods' ("sample() takes 1 positional argument but 2 were given", not "2 ... but 3").
        @staticmethod
        def sample(value) -> None:
            """Does nothing (no tool is attached)."""

        @staticmethod
        def batch_submit(values, timestamps) -> None:
            """Does nothing (no tool is attached)."""

        @staticmethod
        def sample_no_value(reason) -> None:
            """Does nothing (no tool is attached)."""

        sample.__func__.__qualname__ = "sample"
        batch_submit.__func__.__qualname__ = "batch_submit"
        sample_no_value.__func__.__qualname__ = "sample_no_value"


if _NoOpBase is not None:
    _own_c_methods(_NoOpCounter, "sample", "batch_submit", "sample_no_value")

_NO_OP_COUNTER = _NoOpCounter()


# --------------------------------------------------------------------------- Domain.get_counter

_lock = _thread.RLock()
hold_across_fork(_lock)  # a fork while another thread registers: see _locks
_counters: Dict[tuple, Counter] = {}
_scopes: Dict[tuple, int] = {}


def _to_bytes(value, argument: str) -> bytes:
    if isinstance(value, str):
        try:
            value = value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: not UTF-8 (nvtx's error, by name)
            raise ArgumentEncodeError(exc.encoding, exc.object, exc.start, exc.end, exc.reason, argument) from None
    elif not isinstance(value, bytes):
        msg = f"{argument} must be a str or bytes, not {type(value).__name__}"
        raise ArgumentTypeError(msg)
    if b"\x00" in value:
        msg = f"{argument} must not contain NUL characters"
        raise ValueError(msg)
    return value


def _scope_id(domain, scope) -> int:
    key = (domain._index, scope)
    with _lock:
        found = _scopes.get(key)
        if found is None:
            found = _scopes[key] = lib.nvtxcffi_scope_register(domain._index, _to_bytes(scope, "scope"))
        return found


def _normalize_dtype(dtype):
    """nvtx's _normalize_counter_dtype: int -> int64, NumPy dtype-likes -> np.dtype, flat groups only."""
    np = _numpy()
    if np is None:
        if dtype is int or dtype is float:
            return dtype
        raise RuntimeError("Install numpy to use dtype-based NVTX counters.")
    if dtype is int:
        dtype = np.dtype(np.int64)
    else:
        try:
            dtype = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError("Counter dtype must be int, float, or NumPy dtype-like.") from exc
    if dtype.subdtype is not None and dtype.subdtype[0].fields is not None:
        raise TypeError("Nested counter groups are not supported. "
                        "Counter dtype must not be a fixed-size array of a structured dtype.")
    if dtype.hasobject:
        raise TypeError(f"Counter dtype must not hold Python objects (got {dtype}).")
    if not dtype.isnative:
        raise ValueError(f"Counter dtype {dtype} is not in native byte order.")
    if dtype.fields is not None:
        for field_name in dtype.names:
            field_type = dtype.fields[field_name][0]
            if field_type.subdtype:
                raise TypeError(f"Counter group array fields are not supported. Field {field_name!r} must be a scalar dtype.")
            if field_type.fields is not None:
                raise TypeError(f"Nested counter groups are not supported. Field {field_name!r} must not have a structured dtype.")
    return dtype


def get_counter(self, name, dtype, *, description=None, scope=None, semantics=None,
                time_domain: TimestampType = TimestampType.TOOL_PROVIDED):
    """An NVTX counter in this domain, registered on first use; the same arguments give the same
    object. ``dtype``: ``int`` (int64 samples), ``float`` (doubles) or a NumPy dtype-like (a
    structured dtype is a flat counter group). ``description``, ``scope`` (a str or bytes path), ``semantics`` (:class:`CounterSemantics`) and ``time_domain``
    (:class:`TimestampType` of batched samples' timestamps) are optional. Without a tool: a counter
    that does nothing."""
    dtype = _normalize_dtype(dtype)
    _to_bytes(name, "name")
    if description is not None:
        _to_bytes(description, "description")
    if scope is not None:
        _to_bytes(scope, "scope")  # a path (nvtx takes no PredefinedScope here either)
    if semantics is not None and not _is_semantics(semantics):
        msg = f"semantics must be a CounterSemantics or None, not {type(semantics).__name__}"
        raise ArgumentTypeError(msg)  # (nvtx: the AttributeError of reading its fields)
    if not isinstance(time_domain, TimestampType):
        msg = f"time_domain must be a TimestampType, not {type(time_domain).__name__}"
        raise ArgumentTypeError(msg)
    if not _state.active():
        return _NO_OP_COUNTER
    group = getattr(dtype, "fields", None) is not None
    key = (self.name, name, dtype, group, _metadata_key(dtype), description, scope, semantics, time_domain.value)
    found = _counters.get(key)
    if found is not None:
        return found
    np = _numpy()
    with _lock:
        found = _counters.get(key)
        if found is not None:
            return found
        if dtype is int or (np is not None and dtype == np.dtype(np.int64)):
            cls, schema_id = Int64Counter, ENTRY_TYPE_INT64
        elif dtype is float or (np is not None and dtype == np.dtype(np.float64)):
            cls, schema_id = Float64Counter, ENTRY_TYPE_FLOAT64
        else:
            cls, schema_id = ExtCounter, registry(self._index).dtype_schema(dtype, counter_group=group)
        counter = cls(self, name, dtype, description, scope, semantics, time_domain.value, schema_id)
        _counters[key] = counter
        return counter


def get_timestamp(self) -> int:
    """An NVTX timestamp (``nvtxTimestampGet``: the tool's clock) for batched samples; 0 without a tool."""
    return lib.nvtxcffi_timestamp() if _state.active() else 0
