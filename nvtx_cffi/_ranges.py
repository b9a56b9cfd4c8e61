"""Module-level calls: ``push_range``/``pop_range``, ``start_range``/``end_range``, ``mark``.

Hot path: the arguments as given are the key of one dict that maps straight to a prepared C slot,
so a repeated call is one tuple, one lookup and one C call (a message-only call: no tuple either). Everything else (first use, payloads,
inline messages, errors) goes through :mod:`._domain`.

On CPython the five names are C functions (``c/speedups/accel_ranges.c``) that answer from the same
caches and call the Python functions below (their ``__wrapped__``) for everything else.

NVTX is initialised at the first call (nvtx_cffi/_state.py), and nvtx_cffi/_dispatch.py then gives
each of the five its real or do-nothing body. Without a tool (or with ``NVTX_DISABLE``) the same
names then do nothing, with the same signatures: NVTX cannot record anything in this process, so no
work is done and no argument is checked. :class:`~nvtx_cffi.annotate` and :class:`~nvtx_cffi.Domain`
still check theirs.
"""
from __future__ import annotations

import _thread

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple, Union

    from ._colors import ColorLike
    from ._domain import Category, Message, Payload

    #: What :func:`start_range` returns: ``(range_id, domain_index)``, nvtx's ``(id, domain)`` shape.
    RangeId = Tuple[int, int]
else:
    def __getattr__(name: str):
        """``RangeId`` (``typing.Tuple[int, int]``), built at its first use at run time: importing
        nvtx_cffi needs no ``typing``."""
        if name == "RangeId":
            from typing import Tuple

            value = globals()[name] = Tuple[int, int]
            return value
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

from . import _state
from ._accel import accel as _accel, update_wrapper as _update_wrapper
from ._bases import caches
from ._locks import hold_across_fork
from ._domain import OP_MARK, OP_PUSH, OP_START, EventAttributes, FirstSight, _bad_range_id, get_domain, make_room
from ._native import lib
from ._validate import as_index, keyable
from . import _payload
from ._payload import FAST_TYPES as _FAST_TYPES, KIND_EXT as _KIND_EXT, payload_fields

__all__ = ["push_range", "pop_range", "start_range", "end_range", "mark", "RangeId"]

#: Bound of the argument-tuple cache; past it calls still work through the per-domain tables.
MAX_CACHED_CALLS = 65536

# (message, color, domain, category) -> slot; the C fast paths read these three too (nvtx_cffi/_bases.py).
_slot_cache: dict = caches.slot
# The commonest calls give only a message: for those, a dict keyed by the message alone (its hash is
# cached in the str) saves building and hashing a 4-tuple. One per default colour: push_range and
# mark default to "blue", start_range to None. Filled together with _slot_cache, same bound.
# (An identity test: a colour object with an odd __eq__, e.g. an array, is never compared.)
_BLUE = "blue"
_blue_slots: dict = caches.blue_slots
_uncoloured_slots: dict = caches.uncoloured_slots
_cache_lock = _thread.allocate_lock()
hold_across_fork(_cache_lock)

_push = lib.nvtxcffi_push
_pop = lib.nvtxcffi_pop
_pop_default = lib.nvtxcffi_pop_default
_start = lib.nvtxcffi_start
_end = lib.nvtxcffi_end
_end_default = lib.nvtxcffi_end_default
_DEFAULT_DOMAIN = 0
_mark = lib.nvtxcffi_mark


#: How often the calls below met each message: prepared (a string entry, a C slot, cached) at its PREPARE_AT-th call.
_first_sight = FirstSight()


def _slow(op: int, message, color, domain, category, payload) -> Optional[int]:
    """First use of these arguments, a payload, or an inline message: prepare, cache, emit. A
    message met for the first time goes inline instead (see Domain._emit_unprepared:
    f"request {n}" must not register a string per call)."""
    if (message.__class__ is str and (domain is None or domain.__class__ is str)
            and _first_sight.first_in(message, domain)):
        return get_domain(domain)._emit_unprepared(op, message, color, category, payload)
    attributes = EventAttributes._for_one_event(get_domain(domain), message, color, category, payload)
    if attributes._inline is None:
        key = (message, color, domain, category)
        with _cache_lock:
            # (what a full cache drops comes back at its next call, its string and slot found
            # prepared in its domain)
            if make_room(_slot_cache, MAX_CACHED_CALLS, _blue_slots, _uncoloured_slots):
                _slot_cache[key] = attributes._slot
                if domain is None and category is None:
                    if color is _BLUE:
                        _blue_slots[message] = attributes._slot
                    elif color is None:
                        _uncoloured_slots[message] = attributes._slot
    return attributes._emit(op)


def _cached_slot(message, color, domain, category) -> Optional[int]:
    """The prepared slot for these arguments as given, or None (first use, inline, unhashable)."""
    try:  # (.get: a miss raises nothing, and a first-use path is a hot path for unbounded messages)
        if domain is None and category is None:
            if color is _BLUE:
                return _blue_slots.get(message)
            if color is None:
                return _uncoloured_slots.get(message)
        if ((color.__class__ is str or color is None or keyable(color))
                and (category is None or category.__class__ is str or keyable(category))):
            return _slot_cache.get((message, color, domain, category))
    except TypeError:  # an unhashable argument
        pass
    return None  # (not keyable: True would find the entry of 1, see keyable)


def _dispatch(op: int, fast, message, color, domain, category, payload):
    """One event: ``fast(slot)`` when these arguments are prepared and carry no payload, else the
    payload or first-use path. Returns what the C call returns (the range id for OP_START)."""
    slot = _cached_slot(message, color, domain, category)
    if slot is None:
        return _slow(op, message, color, domain, category, payload)
    if payload is None:
        return fast(slot)
    return _with_payload(op, slot, payload)


def _with_payload(op: int, slot: int, payload) -> int:
    cls = payload.__class__
    if cls in _FAST_TYPES:  # arrays (0-d too), lists...: binary, checked by emit()
        return _payload.emit(op, slot, _payload.slot_domain(slot), None, payload)
    kind, ivalue, fvalue = payload_fields(payload)
    if kind == _KIND_EXT:  # a binary payload (nvtx_cffi/_payload.py)
        return _payload.emit(op, slot, _payload.slot_domain(slot), None, payload)
    return lib.nvtxcffi_emit_slot(op, slot, kind, ivalue, fvalue)


# The real implementations (bodies only: nvtx_cffi/_dispatch.py gives them to the public functions below).

def _push_range_active(message=None, color=_BLUE, domain=None, category=None, payload=None):
    _dispatch(OP_PUSH, _push, message, color, domain, category, payload)


def _pop_range_active(domain=None):
    if domain is None:
        _pop_default()
    else:
        _pop(get_domain(domain)._index)


def _start_range_active(message=None, color=None, domain=None, category=None, payload=None):
    range_id = _dispatch(OP_START, _start, message, color, domain, category, payload)
    return range_id, (0 if domain is None else _domain_index(domain))


def _end_range_active(range_id):
    if range_id.__class__ is tuple and len(range_id) == 2:
        identifier, domain_index = range_id
        if identifier.__class__ is not int or domain_index.__class__ is not int:
            # integer-likes (NumPy integers, __index__): as ints; anything else is an error
            identifier, domain_index = as_index(identifier), as_index(domain_index)
            if identifier is None or domain_index is None:
                raise _bad_range_id(range_id)
        try:
            if domain_index is _DEFAULT_DOMAIN:  # the 0 start_range returned (not 0.0, not False)
                _end_default(identifier)
            else:
                _end(domain_index, identifier)
            return
        except (TypeError, OverflowError):
            raise _bad_range_id(range_id) from None
    if range_id is None:
        return
    identifier = as_index(range_id)  # an int, a NumPy integer, anything with __index__ (not bool)
    if identifier is not None:
        try:
            _end_default(identifier)
            return
        except OverflowError:
            raise _bad_range_id(range_id) from None
    raise _bad_range_id(range_id)


def _mark_active(message=None, color=_BLUE, domain=None, category=None, payload=None):
    _dispatch(OP_MARK, _mark, message, color, domain, category, payload)


# Without a tool (or with NVTX_DISABLE): do nothing, look at nothing (given the same way). (Same
# parameter names as the public functions: a body brings its parameters along.)

def _noop5(message=None, color=None, domain=None, category=None, payload=None):
    pass


def _pop_range_noop(domain=None):
    pass


def _end_range_noop(range_id):
    pass


# The public functions. Until NVTX's first call they decide (nvtx_cffi/_state.py), at which
# nvtx_cffi/_dispatch.py gives each the body of its real or do-nothing implementation (its
# __code__), then run it. The function objects stay the same, so names bound with
# ``from nvtx_cffi import push_range`` follow.

def push_range(message: Message = None, color: ColorLike = _BLUE, domain: Optional[str] = None,
               category: Category = None, payload: Payload = None) -> None:
    """Open a range on this thread (close it with :func:`pop_range` on the same thread).

    Without a tool (or with ``NVTX_DISABLE``) does nothing. (Bound at NVTX's first call by
    nvtx_cffi/_dispatch.py.)

    >>> push_range("load", color="green")
    >>> pop_range()
    """
    _state.decide()
    return push_range(message, color, domain, category, payload)


def pop_range(domain: Optional[str] = None) -> None:
    """Close this thread's innermost range of ``domain``; with nothing open, tools ignore it.
    (Bound at NVTX's first call by nvtx_cffi/_dispatch.py.)"""
    _state.decide()
    return pop_range(domain)


def start_range(message: Message = None, color: ColorLike = None, domain: Optional[str] = None,
                category: Category = None, payload: Payload = None) -> Optional[RangeId]:
    """Start a range that may end on any thread; pass the result to :func:`end_range`.

    Without a tool (or with ``NVTX_DISABLE``) does nothing and returns ``None``. (Bound at NVTX's
    first call by nvtx_cffi/_dispatch.py.)

    >>> rng = start_range("request")
    >>> end_range(rng)
    """
    _state.decide()
    return start_range(message, color, domain, category, payload)


def end_range(range_id: Union[RangeId, int, None]) -> None:
    """End a range from :func:`start_range`. ``None`` is ignored; a plain int is an id in the
    default domain; an id NVTX never issued is passed on and tools ignore it. (Bound at NVTX's
    first call by nvtx_cffi/_dispatch.py.)"""
    _state.decide()
    return end_range(range_id)


def mark(message: Message = None, color: ColorLike = _BLUE, domain: Optional[str] = None,
         category: Category = None, payload: Payload = None) -> None:
    """An instantaneous event. (Bound at NVTX's first call by nvtx_cffi/_dispatch.py.)

    >>> mark("checkpoint", payload=3)
    """
    _state.decide()
    return mark(message, color, domain, category, payload)


def _domain_index(name: str) -> int:
    return get_domain(name)._index


if _accel is not None:
    # The C fast paths: the same caches, one C call; the functions above remain their twins
    # (__wrapped__) for first use, payloads, new domains and errors, and give them their metadata.
    _accel.setup_ranges(_BLUE)
    push_range, pop_range, start_range, end_range, mark = (
        _update_wrapper(_accel.accelerate(f.__name__, f), f)
        for f in (push_range, pop_range, start_range, end_range, mark))
