"""Argument checks shared by every public call: clear errors that name the argument."""
from __future__ import annotations

try:  # operator.index, without importing operator.py
    from _operator import index as _index
except ImportError:
    from operator import index as _index

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, SupportsIndex, Tuple, Union

from ._native import lib
from ._payload import FAST_TYPES as _BINARY_TYPES, _numpy_if_imported, fields_for as _fields_for


class ArgumentTypeError(TypeError, AttributeError):
    """An argument of the wrong type: a TypeError, and also the AttributeError nvtx 0.2.16 raises
    there (it reads ``.value`` / calls ``.encode()`` on what it is given)."""


class ArgumentRangeError(ValueError, OverflowError):
    """An integer argument out of range: a ValueError, and also the OverflowError nvtx 0.2.16's C
    conversion raises there (a negative colour, category or range id)."""


class ArgumentColorError(TypeError, ValueError):
    """A colour nvtx-cffi cannot read (a value of the wrong type, an unknown name, a bad RGB(A)
    tuple): a TypeError, and also a ValueError. nvtx 0.2.16 raises either for the same input:
    matplotlib's ValueError when it is installed (``color=1.5``, ``b"red"``, a bad tuple), its own
    TypeError ("Invalid color ... install matplotlib") when it is not (``"tab:blue"``)."""


class ArgumentEncodeError(UnicodeEncodeError):
    """A text NVTX cannot carry as UTF-8 (a lone surrogate): nvtx 0.2.16's UnicodeEncodeError (a
    ValueError), with a message that names the argument."""

    def __init__(self, encoding: str, text: str, start: int, end: int, reason: str,
                 argument: str = "text") -> None:
        # UnicodeEncodeError's five arguments first: pickle and copy make it again from them (and
        # then restore ``argument`` from the instance dict)
        super().__init__(encoding, text, start, end, reason)
        self.argument = argument

    def __str__(self) -> str:
        return f"{self.argument} is not valid Unicode ({self.reason} at index {self.start})"


__all__ = ["Payload", "Message", "Category", "to_utf8", "to_category_id", "payload_fields", "as_index", "describe_int", "short_repr",
           "keyable"]

if TYPE_CHECKING:
    import numpy

    from ._domain import RegisteredString

    Payload = Union[int, float, list, tuple, range, bytes, None, "numpy.ndarray"]
    #: A message: text, UTF-8 bytes (as nvtx takes them), or a string registered in the call's domain.
    Message = Union[str, bytes, "RegisteredString", None]
    #: A category: a name (text or UTF-8 bytes) or a number (an int, or what has ``__index__``).
    Category = Union[str, bytes, int, SupportsIndex, None]
else:
    def __getattr__(name: str):
        """The ``Payload``, ``Message`` and ``Category`` aliases, built (with ``typing``) at their
        first use at run time: type checkers read them above, and importing needs no ``typing``."""
        if name in ("Payload", "Message", "Category"):
            from typing import SupportsIndex, Union

            module = globals()
            module.setdefault("Payload", Union[int, float, list, tuple, range, bytes, None, "numpy.ndarray"])
            module.setdefault("Message", Union[str, bytes, "RegisteredString", None])
            module.setdefault("Category", Union[str, bytes, int, SupportsIndex, None])
            return module[name]
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_UINT32_MAX = (1 << 32) - 1


def keyable(value: object) -> bool:
    """Whether a cache keyed by equality may answer for ``value``, a colour or category as given.

    The caches of prepared calls are dicts keyed by the arguments, and a dict finds a key by
    equality: ``True == 1 == 1.0`` and ``(True, 0, 0) == (1, 0, 0)``, yet a bool or a float colour
    is an error while the int is not. Only values whose every equal key validates alike are looked
    up: None, an exact str, an integer-like (an int, a NumPy integer, anything with ``__index__``;
    not a bool), a 3- or 4-tuple of exact ints and floats (an RGB(A) tuple). Anything else takes the
    validating path, which rejects it or prepares it. (c/speedups/accel_caches.c's ``keyable`` is the
    same rule.)

    >>> keyable(1), keyable(True), keyable(1.0), keyable((1.0, 0, 0)), keyable((True, 0, 0))
    (True, False, False, True, False)
    """
    cls = value.__class__
    if value is None or cls is str or cls is int:
        return True
    if cls is tuple:
        return len(value) in (3, 4) and all(item.__class__ is int or item.__class__ is float for item in value)
    return as_index(value) is not None  # equal only to the int of its value, which means the same


#: Ints longer than this are described by their size in error messages, never formatted whole.
_SHOWN_BITS = 128


def as_index(value: object) -> Optional[int]:
    """``value`` as an exact int when it is integer-like (``int``, a NumPy integer, anything with
    ``__index__``), else None. ``bool`` is not an integer here."""
    if value.__class__ is int:
        return value
    if isinstance(value, bool):
        return None
    try:
        return _index(value)
    except TypeError:
        return None


def describe_int(value: int) -> str:
    """``value`` for an error message: its digits when short, else its size (never unbounded)."""
    bits = value.bit_length()
    if bits <= _SHOWN_BITS:
        return str(value)
    return f"({'-' if value < 0 else ''}a {bits}-bit int)"


def short_repr(value: object, limit: int = 100) -> str:
    """A bounded ``repr`` for error messages: ints by :func:`describe_int`, a short tuple element by
    element, strings cut at ``limit`` characters, other objects by their type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return describe_int(int(value))
    if isinstance(value, (bool, float)) or value is None:
        return repr(value)
    if isinstance(value, str):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, tuple) and len(value) <= 4:
        inner = ", ".join(short_repr(item, limit // 2) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return f"<{type(value).__name__}>"


def text_of(value: object) -> object:
    """A message, registered string or category name as text: nvtx 0.2.16 also takes these as bytes
    (it hands them to NVTX as they are), read here as UTF-8, an invalid sequence as U+FFFD."""
    return value.decode("utf-8", "replace") if value.__class__ is bytes else value


def to_utf8(text: object, argument: str) -> bytes:
    """``text`` as NUL-free UTF-8 bytes for NVTX's char* entry points."""
    if not isinstance(text, str):
        msg = f"{argument} must be a str, not {type(text).__name__}"
        raise ArgumentTypeError(msg)
    if "\x00" in text:
        msg = f"{argument} must not contain NUL characters"
        raise ValueError(msg)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArgumentEncodeError(exc.encoding, exc.object, exc.start, exc.end, exc.reason, argument) from None


def to_category_id(category: object) -> int:
    """A numeric category: an integer-like in [0, 2**32)."""
    value = as_index(category)
    if value is None:
        msg = f"category must be a str, a non-negative int or None, not {type(category).__name__}"
        raise TypeError(msg)
    if value < 0:
        msg = f"category must be non-negative, not {describe_int(value)}"
        raise ArgumentRangeError(msg)
    if value > _UINT32_MAX:
        msg = f"category {describe_int(value)} is out of range (at most {_UINT32_MAX})"
        raise OverflowError(msg)
    return value


_INT64 = lib.NVTXCFFI_PAYLOAD_INT64
_DOUBLE = lib.NVTXCFFI_PAYLOAD_DOUBLE


def payload_fields(payload: object) -> Tuple[int, int, float]:
    """(kind, int64 bits, double) for the C calls; ints become int64, or uint64 where only that fits."""
    # Exact int and float first: a per-call payload is nearly always one, and the integer-like
    # checks below cost far more than the rest of the call.
    cls = payload.__class__
    if cls is int and _INT64_MIN <= payload <= _INT64_MAX:
        return _INT64, payload, 0.0
    if cls is float or isinstance(payload, float):
        return _DOUBLE, 0, float(payload)
    if cls in _BINARY_TYPES:
        # arrays (0-d too: the scalar schema of its dtype, as nvtx), lists, tuples, ranges, bytes (with NumPy)
        return _fields_for(payload)
    np = _numpy_if_imported()
    if np is not None and isinstance(payload, np.ndarray):  # (before the payload types fill FAST_TYPES)
        return _fields_for(payload)
    value = int(payload) if isinstance(payload, bool) else as_index(payload)  # bool: an int, as before
    if value is not None:
        if _INT64_MIN <= value <= _INT64_MAX:
            return lib.NVTXCFFI_PAYLOAD_INT64, value, 0.0
        if 0 <= value <= _UINT64_MAX:
            return lib.NVTXCFFI_PAYLOAD_UINT64, value - (1 << 64), 0.0
        msg = f"payload {describe_int(value)} is out of range: it must fit in int64 or uint64"
        raise OverflowError(msg)
    import numbers  # (here: only a payload of another number type gets this far)

    if isinstance(payload, numbers.Real):
        try:
            return lib.NVTXCFFI_PAYLOAD_DOUBLE, 0, float(payload)
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
    return _fields_for(payload)
