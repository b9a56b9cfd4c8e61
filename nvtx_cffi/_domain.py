"""Domains and their prepared attributes: the slow path that the hot calls cache.

Each domain interns its messages as NVTX registered strings and keeps one C attribute slot per
(message, colour, category) it has seen. All of that is bounded: messages longer than
``MAX_REGISTERED_BYTES`` or beyond the C tables' capacity are sent with each call instead (the C
shim registers the text with NVTX, keeping it in its own bounded table), which is correct, just slower.
"""
from __future__ import annotations

import _thread

TYPE_CHECKING = False

from . import _state
from ._accel import accel as _accel, partial as _partial, update_wrapper as _update_wrapper
from ._bases import DomainBase, EventAttributesBase, caches
from ._colors import to_argb
from ._env import env_int
from ._locks import hold_across_fork
from ._native import ffi, lib
from ._validate import (_INT64_MAX, _INT64_MIN, ArgumentRangeError, ArgumentTypeError, as_index, describe_int,
                        keyable, short_repr, text_of, to_category_id, to_utf8)
from . import _payload
from ._payload import _DOUBLE, _INT64, KIND_EXT as _KIND_EXT, ExtFields as _ExtFields, payload_fields

if TYPE_CHECKING:
    from typing import Any, Dict, Optional, SupportsIndex, Tuple, Union

    import numpy

    from ._colors import ColorLike
    from ._counters import Counter, CounterSemantics
    from ._payload_enums import TimestampType

    #: A payload: a number, or a binary payload (a NumPy array, a list, tuple, range or bytes of numbers).
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

__all__ = ["Domain", "EventAttributes", "RegisteredString", "get_domain", "MAX_REGISTERED_BYTES", "Payload", "Message",
           "Category"]

#: Longer messages are not kept registered (interned) but registered again with each call.
MAX_REGISTERED_BYTES = lib.NVTXCFFI_MAX_STRING_BYTES
#: Total UTF-8 bytes of registered messages kept per process; past it, new messages are registered per call.
MAX_REGISTERED_TOTAL_BYTES = lib.NVTXCFFI_MAX_STRING_TOTAL_BYTES
#: Distinct category names per process; later names share category OTHER_CATEGORY_ID.
MAX_CATEGORY_NAMES = 65536
#: The category of names past MAX_CATEGORY_NAMES (named OTHER_CATEGORY_NAME in their domain).
OTHER_CATEGORY_ID = (1 << 32) - 1
OTHER_CATEGORY_NAME = "(other categories)"
_UINT64_MAX = (1 << 64) - 1

OP_PUSH = lib.NVTXCFFI_OP_PUSH
OP_START = lib.NVTXCFFI_OP_START
OP_MARK = lib.NVTXCFFI_OP_MARK

_NO_PAYLOAD = (lib.NVTXREC_PT_NONE, 0, 0.0)
# Argument types whose equal values mean the same (get_event_attributes answers them by an equal key).
_PLAIN_KEYS = frozenset((str, int, type(None)))


def make_room(cache, bound: int, *companions) -> bool:
    """Whether ``cache`` (a dict or set of at most ``bound`` entries) may take one more, clearing it
    and its ``companions`` (caches filled together with it) first when it is full: a full cache of
    prepared calls starts again, so that a spelling met late is cached as one met early (keeping the
    old entries left every later one unprepared for good). False only for a bound of 0."""
    if len(cache) >= bound:
        cache.clear()
        for companion in companions:
            companion.clear()
    return len(cache) < bound


#: A message's first ``PREPARE_AT - 1`` calls send it with the call (registered by the C shim,
#: nothing prepared); its ``PREPARE_AT``-th call prepares it (a C slot, a cache entry). A
#: preparation costs about as much as twenty calls sent with their message, so a message used a few
#: times never pays it and one used often pays it once. ``NVTX_CFFI_PREPARE_AT`` (2 to 64) sets
#: it for the process, read at import.
PREPARE_AT = env_int("NVTX_CFFI_PREPARE_AT", lib.NVTXCFFI_PREPARE_AT, 2, lib.NVTXCFFI_PREPARE_AT_MAX)


class FirstSight:
    """How often the caches of prepared calls have met each message (their doorkeeper).

    ``first(key)`` is True for the first ``PREPARE_AT - 1`` times ``key`` is met (counting them),
    False after; ``met(key)`` counts ``key`` as met that often (c/speedups/accel_first_sight.c counts
    the sights it answers itself and hands a message over so). A call sends a message that ``first`` lets through
    with the call (the C shim registers its text with NVTX once, as nvtx 0.2.16 does, and keeps
    the handle) and prepares it otherwise. Bounded: forgotten all at once when full (a message is
    then counted from the start once more). Races between threads only send one more event with
    its message or prepare one more time.

    >>> sight = FirstSight()
    >>> [sight.first("x") for _ in range(PREPARE_AT)] == [True] * (PREPARE_AT - 1) + [False]
    True
    """

    __slots__ = ("_seen", "_bound")

    def __init__(self, bound: int = 65536) -> None:
        self._seen: dict = {}
        self._bound = bound

    def first(self, key) -> bool:
        seen = self._seen
        count = seen.get(key, 0)
        if count >= PREPARE_AT - 1:
            return False
        if count or make_room(seen, self._bound):
            seen[key] = count + 1
        return True

    def met(self, key) -> None:
        if key in self._seen or make_room(self._seen, self._bound):
            self._seen[key] = PREPARE_AT - 1

    def first_in(self, message: str, domain: Optional[str]) -> bool:
        """``first`` of a message in a domain (a name, or None: the default one), keyed as
        c/speedups/accel_first_sight.c keys it when it hands a message met often enough to the Python
        path (``met``)."""
        return self.first(message if domain is None else (message, domain))

    def met_in(self, message: str, domain: Optional[str]) -> None:
        """``met`` of a message in a domain, keyed as ``first_in`` keys it."""
        self.met(message if domain is None else (message, domain))


# Bound once: the hot methods below pay neither the ``lib`` global nor cffi's attribute lookup.
_push = lib.nvtxcffi_push
_start = lib.nvtxcffi_start
_mark = lib.nvtxcffi_mark
_end = lib.nvtxcffi_end  # (without a tool: _end_unsent, bound by nvtx_cffi/_dispatch.py)

# Slow-path state is guarded by one re-entrant lock; the hot paths only read finished entries.
_lock = _thread.RLock()
hold_across_fork(_lock)
_domains: Dict[Optional[str], "Domain"] = caches.domains
_category_names = 0
_other_category_named: set = set()  # domain indexes where OTHER_CATEGORY_ID has been named
_registered_bytes = 0


def _end_unsent(index: int, range_id: int) -> None:
    """``_end`` without a tool or under NVTX_DISABLE: the range id checked as the C call converts
    it (a uint64), and no NVTX call, which would initialise NVTX and load a tool named anyway."""
    if range_id < 0 or range_id >> 64:
        raise OverflowError(range_id)


def _pop_unsent() -> None:
    """A Domain's ``pop_range`` without a tool or under NVTX_DISABLE: no NVTX call (see _end_unsent)."""


_ACTIVE = False  # _state.ACTIVE, bound at NVTX's first call by nvtx_cffi/_dispatch.py (every Domain exists after it)
_KEEP = object()  # "argument not given" for the Domain methods' keyword arguments


class RegisteredString:
    """A message registered (interned) in one domain; pass it wherever a message goes.

    >>> d = get_domain("example")
    >>> s = d.get_registered_string("step")
    >>> s.string
    'step'
    """

    __slots__ = ("string", "domain", "handle")

    def __init__(self, domain: "Domain", string: str, handle: int) -> None:
        self.string = string
        self.domain = domain
        self.handle = handle  # index in the shim's string table, -1 if sent inline

    def __repr__(self) -> str:
        return f"RegisteredString({self.string!r}, domain={self.domain.name!r})"


class EventAttributes(EventAttributesBase):
    """Prepared attributes of an event in one domain (message, colour, category, payload).

    Build them with :meth:`Domain.get_event_attributes`; reuse them with :meth:`Domain.push_range`,
    :meth:`Domain.start_range` and :meth:`Domain.mark` for the cheapest calls. Setting an attribute
    re-prepares the object.
    """

    __slots__ = ()  # its fields are EventAttributesBase's (nvtx_cffi/_bases.py)

    def __init__(self, domain: "Domain", message: Message = None, color: ColorLike = None, category: Category = None,
                 payload: Payload = None) -> None:
        self._domain = domain
        self._message = message
        self._color = color
        self._category = category
        self._payload = payload
        self._prepare()

    def _prepare(self, fields=None) -> None:
        """Prepare the slot; ``fields``: the payload's fields when the payload did not change (kept
        as they were taken), else they are taken from it now (see :func:`_payload.taken`)."""
        # Everything is computed before anything is stored: a bad argument leaves the object as it was.
        if fields is None:
            fields = _NO_PAYLOAD if self._payload is None else _payload.taken(payload_fields(self._payload))
        slot, inline = self._domain._slot_for(self._message, self._color, self._category)
        _payload.register(self._domain._index, fields)  # (as nvtx: when taken, after the message)
        self._fields, self._slot, self._inline = fields, slot, inline
        # The hot calls read this one attribute: a slot when one C call with no payload suffices.
        self._fast = slot if inline is None and self._payload is None else -1

    @classmethod
    def _for_one_event(cls, domain: "Domain", message: Message, color: ColorLike, category: Category,
                       payload: Payload, fields=None) -> "EventAttributes":
        """Attributes made for one event sent at once (checked as ``__init__`` checks them): the
        payload is read as it is now, not copied first (``fields``: its fields, when known)."""
        self = cls.__new__(cls)
        self._domain, self._message, self._color, self._category, self._payload = domain, message, color, category, payload
        self._prepare(payload_fields(payload) if fields is None and payload is not None else fields)
        return self

    @classmethod
    def _unprepared(cls, domain: "Domain", message: Message, color: ColorLike, category: Category) -> "EventAttributes":
        """Attributes whose message goes inline (nothing registered, no C slot), checked as
        ``__init__`` checks them: an annotate object made at its message's first sight (see
        :class:`FirstSight`)."""
        inline = domain._inline_fields(message, color, category)
        self = cls.__new__(cls)
        self._domain, self._message, self._color, self._category, self._payload = domain, message, color, category, None
        self._fields, self._slot, self._fast = _NO_PAYLOAD, -1, -1
        self._inline = inline if _state.active() else None  # (as _slot_for: nothing is sent without a tool)
        return self

    def _copy(self, message: Message, color: ColorLike, category: Category, payload: Payload,
              fields) -> "EventAttributes":
        """A new object of these attributes, given as ``message``, ``color`` and ``category`` (equal
        to these, of the same types), with ``payload`` (its ``fields``): nothing is prepared again."""
        copy = EventAttributes.__new__(EventAttributes)
        copy._domain, copy._message, copy._color, copy._category = self._domain, message, color, category
        copy._payload, copy._fields, copy._slot, copy._inline = payload, fields, self._slot, self._inline
        copy._fast = self._slot if self._inline is None and payload is None else -1
        return copy

    def _emit(self, op: int) -> int:
        """The general call: payload and/or inline message. Returns the range id for OP_START."""
        kind, ivalue, fvalue = self._fields
        if kind == _KIND_EXT:  # a binary payload (nvtx_cffi/_payload.py)
            return _payload.emit(op, self._slot, self._domain._index, self._inline, self._fields.payload)
        if self._inline is None:
            return lib.nvtxcffi_emit_slot(op, self._slot, kind, ivalue, fvalue)
        message, argb, category = self._inline
        return lib.nvtxcffi_emit(op, self._domain._index, message, argb, category, kind, ivalue, fvalue)

    @property
    def fast_slot(self) -> int:
        """The C slot when one call with no extra argument suffices, else -1."""
        return self._fast

    domain = property(lambda self: self._domain, doc="The :class:`Domain` these attributes belong to.")

    def _check_changeable(self) -> None:
        """An annotate object's attributes are shared by every annotate() of the same arguments (and
        already prepared into its C slot): changing them would change those, so it is refused."""
        if getattr(self, "_shared", False):
            msg = ("the attributes of an annotate object are shared by every annotate() of the same "
                   "arguments and cannot change: give annotate() the payload, color, ... instead")
            raise AttributeError(msg)

    def _setter(name):  # noqa: N805 - builds the four properties below
        def set_(self, value):
            self._check_changeable()
            old = getattr(self, name)
            setattr(self, name, value)
            try:
                self._prepare(None if name == "_payload" else self._fields)
            except BaseException:
                setattr(self, name, old)
                raise
        return set_

    message = property(lambda self: self._message, _setter("_message"), doc="The message.")
    color = property(lambda self: self._color, _setter("_color"), doc="The colour as given.")
    category = property(lambda self: self._category, _setter("_category"), doc="The category as given.")
    payload = property(lambda self: self._payload, _setter("_payload"), doc="The payload.")
    del _setter

    def __reduce__(self):
        """Pickled as what made it: unpickled, the domain prepares them again (slots are this
        process's)."""
        return EventAttributes, (self._domain, self._message, self._color, self._category, self._payload)

    def __repr__(self) -> str:
        return (f"EventAttributes(message={self._message!r}, color={self._color!r}, "
                f"category={self._category!r}, payload={self._payload!r}, domain={self._domain.name!r})")


class Domain(DomainBase):
    """An NVTX domain: a named scope for ranges, marks, registered strings and categories.

    Get one with :func:`get_domain` (``Domain(name)`` returns the same object). Domains live as long
    as the process: NVTX tools expect that, so there is no ``close()``.

    >>> d = get_domain("my_library")
    >>> attrs = d.get_event_attributes(message="copy", color="green")
    >>> d.push_range(attrs)
    >>> d.pop_range()
    """

    __slots__ = {
        "name": "The domain's name (None: NVTX's default domain).",
        # (_index and _by_keywords are DomainBase's: nvtx_cffi/_bases.py)
        "_strings": None, "_categories": None, "_slots": None,
        "__weakref__": None,
        # Without the accelerator, an instance attribute bound to a C function (no Python frame):
        # see get_domain(). With it, DomainBase's C method.
        **({} if _accel is not None else {
            "pop_range": "pop_range() -> None: close this thread's innermost range of this domain "
                         "(nothing pushed: the tool ignores it)."}),
    }

    def __new__(cls, name: Optional[str] = None) -> "Domain":
        return get_domain(name)

    if TYPE_CHECKING:  # what type checkers see of the methods attached after the class (below, _counters)
        def push_range(self, attributes: Optional[EventAttributes] = None, *, message: Message = ...,
                       color: ColorLike = ..., category: Category = ..., payload: Payload = ...) -> None: ...

        def start_range(self, attributes: Optional[EventAttributes] = None, *, message: Message = ...,
                        color: ColorLike = ..., category: Category = ..., payload: Payload = ...) -> int: ...

        def mark(self, attributes: Optional[EventAttributes] = None, *, message: Message = ...,
                 color: ColorLike = ..., category: Category = ..., payload: Payload = ...) -> None: ...

        def pop_range(self) -> None: ...

        def get_counter(self, name: Union[str, bytes], dtype: Any, *, description: Union[str, bytes, None] = None,
                        scope: Union[str, bytes, None] = None, semantics: Optional["CounterSemantics"] = None,
                        time_domain: "TimestampType" = ...) -> "Counter": ...

        def get_timestamp(self) -> int: ...

    # -- preparation (slow path, under the lock) ------------------------------------------------
    def get_registered_string(self, string: str) -> RegisteredString:
        """Register ``string`` in this domain (once) and return its handle object."""
        global _registered_bytes
        with _lock:
            string = text_of(string)
            data = to_utf8(string, "message")  # first: an unhashable argument must fail by name
            found = self._strings.get(string)
            if found is not None:
                return found
            handle = -1
            if (_state.active() and len(data) <= MAX_REGISTERED_BYTES
                    and _registered_bytes + len(data) <= MAX_REGISTERED_TOTAL_BYTES):
                handle = lib.nvtxcffi_string_register(self._index, data)
                if handle >= 0:
                    _registered_bytes += len(data)
            registered = RegisteredString(self, string, handle)
            if handle >= 0:  # only what the bounded C table holds is cached
                self._strings[string] = registered
            return registered

    def get_category_id(self, name: str) -> int:
        """The id of category ``name`` in this domain, numbered from 1 and named in NVTX on first use.

        Past ``MAX_CATEGORY_NAMES`` names per process, new names get ``OTHER_CATEGORY_ID``.
        """
        global _category_names
        with _lock:
            name = text_of(name)
            data = to_utf8(name, "category")  # first: an unhashable argument must fail by name
            found = self._categories.get(name)
            if found is not None:
                return found
            if _category_names >= MAX_CATEGORY_NAMES:
                # Like messages past their bound: still correct events, no new table entry. Every
                # later name shares one category, named OTHER_CATEGORY_NAME in this domain.
                if self._index not in _other_category_named:
                    if _state.active():
                        lib.nvtxcffi_category_name(self._index, OTHER_CATEGORY_ID, OTHER_CATEGORY_NAME.encode())
                    _other_category_named.add(self._index)
                return OTHER_CATEGORY_ID
            category_id = len(self._categories) + 1
            if _state.active():
                lib.nvtxcffi_category_name(self._index, category_id, data)
            self._categories[name] = category_id
            _category_names += 1
            return category_id

    def get_event_attributes(self, message: Message = None,
                             color: ColorLike = None, category: Category = None,
                             payload: Payload = None) -> EventAttributes:
        """Prepare attributes once for reuse with this domain's calls.

        Each call gives a new object (they may be changed, see :meth:`set_event_attributes`): a
        copy of the attributes this domain keeps prepared for (message, color, category), which
        its keyword calls share, so that attributes made afresh at every call cost a copy.
        """
        fields = _NO_PAYLOAD if payload is None else payload_fields(payload)  # first, as __init__ checks
        if fields.__class__ is _ExtFields:  # an array's or a list's values: taken now, as nvtx takes them
            fields = _payload.taken(fields)
        # Only exact str/int/None arguments are answered by an equal key: the copy keeps the
        # objects given, and another type (a str enum, a NumPy integer, an odd __eq__) may be equal
        # to a key yet mean something else, or be an error.
        if (message.__class__ in _PLAIN_KEYS and color.__class__ in _PLAIN_KEYS
                and category.__class__ in _PLAIN_KEYS):
            template = self._by_keywords.get((message, color, category))
            if template is None:
                template = self._keyword_attributes(message, color, category)
            _payload.register(self._index, fields)  # (as nvtx: when taken, after the message)
            return template._copy(message, color, category, payload, fields)
        return EventAttributes(self, message, color, category, payload)

    def set_event_attributes(self, attributes: EventAttributes, *, message=_KEEP, color=_KEEP,
                             category=_KEEP, payload=_KEEP) -> None:
        """Change some of ``attributes`` (as nvtx does when its calls get keyword arguments)."""
        if not isinstance(attributes, EventAttributes):
            msg = f"attributes must be EventAttributes, not {type(attributes).__name__}"
            raise TypeError(msg)  # (nvtx's too: not an AttributeError, which __getattr__ would swallow)
        if attributes._domain is not self:
            raise _foreign_attributes(attributes, self)
        attributes._check_changeable()
        old = (attributes._message, attributes._color, attributes._category, attributes._payload)
        new = tuple(o if n is _KEEP else n for o, n in zip(old, (message, color, category, payload)))
        (attributes._message, attributes._color, attributes._category, attributes._payload) = new
        try:  # (a payload not given again keeps the values taken when it was given)
            attributes._prepare(attributes._fields if payload is _KEEP else None)
        except BaseException:
            (attributes._message, attributes._color, attributes._category, attributes._payload) = old
            raise

    def _argb_category(self, color, category) -> Tuple[int, int]:
        """The ARGB of ``color`` and the id of ``category`` (named in this domain): checked."""
        argb = to_argb(color)
        if category is None:
            return argb, 0
        if isinstance(category, str):
            return argb, self.get_category_id(category)
        return argb, to_category_id(category)

    def _own(self, message: RegisteredString) -> RegisteredString:
        if message.domain is not self:
            msg = (f"message {message.string!r:.100} is registered in domain {message.domain.name!r:.100}, "
                   f"not {self.name!r:.100}")
            raise ValueError(msg)
        return message

    def _slot_for(self, message, color, category) -> Tuple[int, Optional[tuple]]:
        """(slot, None) when a C slot holds these attributes, else (-1, (utf8, argb, category))."""
        argb, category_id = self._argb_category(color, category)
        if message is None or isinstance(message, (str, bytes)):
            registered = None if message is None else self.get_registered_string(message)
        elif isinstance(message, RegisteredString):
            registered = self._own(message)
        else:
            raise _bad_message(message)
        if not _state.active():
            return -1, None
        key = (None if registered is None else registered.string, argb, category_id)
        with _lock:
            slot = self._slots.get(key)
            if slot is not None:
                return slot, None
            string_id = -1 if registered is None else registered.handle
            if registered is None or string_id >= 0:
                slot = lib.nvtxcffi_slot_create(self._index, string_id, argb, category_id)
                if slot >= 0:
                    self._slots[key] = slot
                    return slot, None
        text = ffi.NULL if registered is None else to_utf8(registered.string, "message")
        return -1, (text, argb, category_id)

    def _inline_fields(self, message, color, category) -> Tuple[Any, int, int]:
        """(UTF-8 text or NULL, ARGB, category id) of an event whose message goes inline: checked
        as preparing the arguments would check them, nothing registered."""
        argb, category_id = self._argb_category(color, category)
        if message is None:
            return ffi.NULL, argb, category_id
        if isinstance(message, (str, bytes)):
            return to_utf8(text_of(message), "message"), argb, category_id
        if isinstance(message, RegisteredString):
            return to_utf8(self._own(message).string, "message"), argb, category_id
        raise _bad_message(message)

    def _emit_unprepared(self, op: int, message, color, category, payload, no_tool=None):
        """One event with its message inline: nothing registered in NVTX, no C slot, nothing cached;
        checked as preparing the arguments would check them (``no_tool``: the answer without a tool).

        The calls that cache what they prepare (module-level ``mark``/``push_range``/``start_range``,
        ``Domain`` keyword calls) send a message this way the first ``PREPARE_AT - 1`` times they
        meet it and prepare it at the ``PREPARE_AT``-th: a stream of messages that never repeat
        (``f"request {n}"``), or come a few times each, costs no string-table entry and fills no
        table (the shim registers each text with NVTX once)."""
        fields = _NO_PAYLOAD if payload is None else payload_fields(payload)
        text, argb, category_id = self._inline_fields(message, color, category)
        if not _state.active():
            return no_tool
        kind, ivalue, fvalue = fields
        if kind == _KIND_EXT:  # a binary payload (nvtx_cffi/_payload.py)
            return _payload.emit(op, -1, self._index, (text, argb, category_id), fields.payload)
        return lib.nvtxcffi_emit(op, self._index, text, argb, category_id, kind, ivalue, fvalue)

    # -- the calls ---------------------------------------------------------------------------
    # push_range/start_range/mark are made by _event_method (below the class) from one source.
    # d.push_range(message="x", color="red", payload=i), no attributes given: nvtx builds new
    # attributes on each call. Here the attributes of (message, color, category) are prepared once
    # and kept in a bounded per-domain dict (never handed out, so never changed); the payload is a
    # value sent with the prepared slot, never part of the key.
    def _keyword_attributes(self, message, color, category) -> EventAttributes:
        """First use (or an uncacheable spelling) of a keyword call's (message, color, category)."""
        attributes = EventAttributes(self, message, color, category)  # validates: raises by name
        if (attributes._inline is None and keyable(color) and keyable(category)
                and make_room(self._by_keywords, MAX_KEYWORD_ATTRIBUTES)):
            try:
                self._by_keywords[message, color, category] = attributes
            except TypeError:  # an unhashable (but valid) message: not cached
                pass
        return attributes

    def _keyword_payload(self, op: int, attributes: EventAttributes, payload):
        """A keyword call with a payload that is not an int64 or a float (checked even without a tool)."""
        kind, ivalue, fvalue = payload_fields(payload)
        slot = attributes._slot
        if slot >= 0 and attributes._inline is None:
            if kind == _KIND_EXT:  # a binary payload (nvtx_cffi/_payload.py)
                result = _payload.emit(op, slot, self._index, None, payload)
            else:
                result = _emit_slot(op, slot, kind, ivalue, fvalue)
        elif not _ACTIVE:
            return 0 if op == OP_START else None
        else:  # an inline message: the general call with this payload
            result = EventAttributes._for_one_event(self, attributes._message, attributes._color,
                                                    attributes._category, payload)._emit(op)
        return result if op == OP_START else None

    def _changed(self, attributes, message, color, category, payload) -> EventAttributes:
        """d.METHOD(attributes, message=...): nvtx changes the attributes given (in place). Attributes
        of another domain are changed in theirs, and the event goes to this domain (as in nvtx) with
        the equivalent attributes here: the slot, registered string and category of that domain
        are not this one's."""
        if attributes.__class__ is EventAttributes and attributes._domain is not self:
            if not (message is _KEEP and color is _KEEP and category is _KEEP and payload is _KEEP):
                attributes._domain.set_event_attributes(attributes, message=message, color=color,
                                                        category=category, payload=payload)
            text = attributes._message
            if isinstance(text, RegisteredString):
                text = text.string
            return EventAttributes._for_one_event(self, text, attributes._color, attributes._category,
                                                  attributes._payload, attributes._fields)
        self.set_event_attributes(attributes, message=message, color=color, category=category,
                                  payload=payload)
        return attributes

    def end_range(self, range_id: int) -> None:
        """End a range started by :meth:`start_range` (an unknown id is passed on; tools ignore it)."""
        if range_id.__class__ is not int:
            range_id = _range_id_index(range_id, pair=False)
        try:
            _end(self._index, range_id)
        except (TypeError, OverflowError):
            raise _bad_range_id(range_id, pair=False) from None

    def __repr__(self) -> str:
        return f"Domain({self.name!r})"

    def __reduce__(self):
        return get_domain, (self.name,)


#: Bound of each domain's dict of attributes prepared for keyword calls.
MAX_KEYWORD_ATTRIBUTES = 4096
_keyword_first_sight = FirstSight()  # (domain, message) met once by a keyword call
_emit_slot = lib.nvtxcffi_emit_slot


def _event_method(name: str, op: int, send, doc: str):
    """Domain.push_range / start_range / mark from one source (``send``: the C call of a slot).

    The documented signature is ``(self, attributes=None, *, message, color, category, payload)``
    (``__signature__``, and what the checks below enforce). The function's own parameters are
    positional-or-keyword, with ``_extra`` guarding the positions after ``attributes``: CPython
    fills positional defaults from a tuple and specialises the call, while it looks each missing
    keyword-only default up in a dict, and a ``**changes`` dict costs a dict, ``get`` calls and a
    check of its keys. Executed instructions per call on 3.11 (an empty body): ``d.m(attrs)`` 728
    against 1385 keyword-only and 917 ``**changes``; ``d.m(message=x)`` 914 against 1357 and 1514.
    ``_KEEP`` tells "not given" from ``None``: given attributes are changed only by what is given,
    as nvtx does.
    """
    no_tool = 0 if op == OP_START else None
    returns = op == OP_START

    def method(self, attributes: Optional[EventAttributes] = None, _extra=_NO_EXTRA, message=_KEEP,
               color=_KEEP, category=_KEEP, payload=_KEEP):
        if attributes is None:  # keyword call: the attributes of (message, color, category), cached
            if _extra is not _NO_EXTRA:
                raise _positional_error(name)
            if message is _KEEP:
                message = None
            if color is _KEEP:
                color = None
            if category is _KEEP:
                category = None
            if payload is _KEEP:
                payload = None
            try:
                if ((color is None or color.__class__ is str or keyable(color))
                        and (category is None or category.__class__ is str or keyable(category))):
                    prepared = self._by_keywords[message, color, category]
                else:  # True would find the attributes of 1 (see keyable): validate
                    raise KeyError
            except (KeyError, TypeError):
                if (message.__class__ is str
                        and _keyword_first_sight.first(message if self._index == 0 else (self._index, message))):
                    # a message met for the first time: inline (see _emit_unprepared)
                    result = self._emit_unprepared(op, message, color, category, payload, no_tool)
                    return result if returns else None
                prepared = self._keyword_attributes(message, color, category)
            if payload is None:
                slot = prepared._fast
                if slot >= 0:
                    return send(slot)
                if not _ACTIVE:
                    return no_tool
                result = prepared._emit(op)  # an inline message
                return result if returns else None
            cls = payload.__class__  # an int64 or a float: payload_fields' first lines, inline
            if cls is int and _INT64_MIN <= payload <= _INT64_MAX:
                kind, ivalue, fvalue = _INT64, payload, 0.0
            elif cls is float:
                kind, ivalue, fvalue = _DOUBLE, 0, payload
            else:
                return self._keyword_payload(op, prepared, payload)
            slot = prepared._slot
            if slot >= 0 and prepared._inline is None:
                result = _emit_slot(op, slot, kind, ivalue, fvalue)
                return result if returns else None
            if not _ACTIVE:
                return no_tool
            return self._keyword_payload(op, prepared, payload)  # an inline message
        if (attributes.__class__ is not EventAttributes or attributes._domain is not self or message is not _KEEP
                or color is not _KEEP or category is not _KEEP or payload is not _KEEP or _extra is not _NO_EXTRA):
            if _extra is not _NO_EXTRA:
                raise _positional_error(name)
            attributes = self._changed(attributes, message, color, category, payload)
        slot = attributes._fast  # -1 without a tool: nothing is emitted then
        if slot >= 0:
            return send(slot)
        if not _ACTIVE:
            return no_tool
        result = attributes._emit(op)
        return result if returns else None

    method.__name__ = name
    method.__qualname__ = f"Domain.{name}"  # CPython's argument errors name it so
    method.__doc__ = doc
    method.__wrapped__ = _documented(name, method, doc)
    return method


_NO_EXTRA = object()  # _event_method's guard: nothing was passed after ``attributes``


def _documented(name: str, method, doc: str):
    """``method`` with its documented signature, ``(self, attributes=None, *, message, color, category,
    payload)``: the method's ``__wrapped__``, which ``inspect.signature`` and ``help`` follow. (A
    ``__signature__`` would need ``inspect`` at import; this costs nothing until someone asks.)"""
    def documented(self, attributes: Optional[EventAttributes] = None, *, message=_KEEP, color=_KEEP,
                   category=_KEEP, payload=_KEEP):
        return method(self, attributes, message=message, color=color, category=category, payload=payload)

    documented.__name__ = name
    documented.__qualname__ = f"Domain.{name}"
    documented.__doc__ = doc
    return documented


def _positional_error(name: str) -> TypeError:
    return TypeError(f"Domain.{name}() takes from 1 to 2 positional arguments (self, attributes): "
                     "message, color, category and payload are keyword-only")


Domain.push_range = _event_method(
    "push_range", OP_PUSH, _push,
    "Open a range on this thread; keyword arguments build (or change) the attributes.")
Domain.start_range = _event_method(
    "start_range", OP_START, _start,
    "Start a range that any thread may end; returns its id for :meth:`end_range`.")
Domain.mark = _event_method("mark", OP_MARK, _mark, "An instantaneous event.")


class _CounterMethod:
    """Domain.get_counter / Domain.get_timestamp (nvtx 0.2.16's counter API) live in _counters.py,
    imported at the first use of either (importing nvtx_cffi does not import ``enum``): this stand-in
    replaces itself with the function then, so ``Domain.get_counter`` is that function."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        from . import _counters

        function = getattr(_counters, self.name)
        setattr(Domain, self.name, function)
        return function if instance is None else function.__get__(instance, owner)


if not TYPE_CHECKING:
    Domain.get_counter = _CounterMethod("get_counter")
    Domain.get_timestamp = _CounterMethod("get_timestamp")

if _accel is not None:
    # C fast paths for calls with pre-built attributes (d.push_range(attrs), d.end_range(rid), ...)
    # and for copies of prepared attributes (d.get_event_attributes(...));
    # the methods above stay their Python twins (__wrapped__) for everything else.
    _accel.setup_domain(Domain, EventAttributes)
    for _name in ("push_range", "start_range", "mark", "end_range", "get_event_attributes"):
        _method = getattr(Domain, _name)
        setattr(Domain, _name, _update_wrapper(_accel.accelerate("Domain." + _name, _method), _method))
    del _name, _method
    Domain.pop_range = _accel.method_for(Domain, "pop_range")  # (DomainBase's, as Domain's own: see method_for)


def _bad_message(message: object) -> ArgumentTypeError:
    msg = f"message must be a str, bytes, a RegisteredString or None, not {type(message).__name__}"
    return ArgumentTypeError(msg)


def _foreign_attributes(attributes: EventAttributes, domain: Domain) -> ValueError:
    """Attributes prepared in another domain: their slot, strings and categories are that domain's."""
    return ValueError(f"attributes belong to domain {attributes._domain.name!r:.100}, not {domain.name!r:.100}")


def _bad_range_id(range_id: object, pair: bool = True) -> Exception:
    """The error for a range id that is not one; ``pair``: module-level end_range, which also takes
    the (id, domain index) pair module-level start_range returns (Domain.end_range takes the id)."""
    if isinstance(range_id, tuple) and not pair:
        return TypeError("range_id must be the int Domain.start_range returned, not a tuple "
                         "(module-level start_range's pair goes to module-level end_range)")
    if isinstance(range_id, tuple) and len(range_id) == 2:  # start_range's (id, domain index)
        rid, index = range_id
        index = as_index(index)
        if as_index(rid) is not None and index is not None and -(2**31) <= index < 2**31:
            return _bad_range_id(rid)  # the id is what is wrong
        return TypeError(f"range_id must be the (id, domain index) pair start_range returned, not {short_repr(range_id)}")
    value = as_index(range_id)
    if value is not None:
        return ArgumentRangeError(f"range_id {describe_int(value)} is out of range (0 to 2**64-1)")
    return TypeError(f"range_id must be the value start_range returned, not {type(range_id).__name__}")


def _range_id_index(range_id: object, pair: bool = True) -> int:
    """An integer-like range id (a NumPy integer, ...) as an int; raises the range_id error."""
    value = as_index(range_id)
    if value is None or not 0 <= value <= _UINT64_MAX:
        raise _bad_range_id(range_id, pair)
    return value


def get_domain(name: Optional[str] = None) -> Domain:
    """The :class:`Domain` called ``name`` (``None``: NVTX's default domain), created on first use.

    >>> get_domain("io") is get_domain("io")
    True
    """
    try:
        found = _domains.get(name)
    except TypeError:  # unhashable: not a str, and to_utf8 below says so, naming the argument
        found = None
    if found is not None:
        return found
    if name is not None:
        data = to_utf8(name, "domain")
    active = _state.decide()  # creating a domain is an NVTX call: NVTX initialises at the first
    with _lock:
        found = _domains.get(name)
        if found is not None:
            return found
        if name is None:
            index = 0
        elif active:
            index = lib.nvtxcffi_domain_create(data)
            if index < 0:
                msg = f"domain {short_repr(name)}: too many domains (limit {lib.NVTXCFFI_MAX_DOMAINS - 1})"
                raise ValueError(msg)
        else:
            if len(_domains) >= lib.NVTXCFFI_MAX_DOMAINS:
                msg = f"domain {short_repr(name)}: too many domains (limit {lib.NVTXCFFI_MAX_DOMAINS - 1})"
                raise ValueError(msg)
            index = 0
        domain = DomainBase.__new__(Domain)  # (Domain.__new__ is get_domain)
        domain.name = name
        domain._index = index
        domain._strings = {}
        domain._categories = {}
        domain._slots = {}
        domain._by_keywords = {}
        if _accel is None:
            # A C function, not a method: d.pop_range() is one cffi call with no Python frame
            # (the 0-argument form for the default domain, the cheapest cffi call there is).
            domain.pop_range = (_pop_unsent if not active
                                else lib.nvtxcffi_pop_default if index == 0 else _partial(lib.nvtxcffi_pop, index))
        _domains[name] = domain
        return domain


def _inline_style(color: ColorLike, domain: Optional[str], category: Category) -> Tuple[int, int, int]:
    """(domain index, ARGB, category id) of events of ``domain`` (a name or None) sent with their
    message inline, checked as preparing them would check them: c/speedups/accel_first_sight.c's
    first-sight calls ask once per (colour, domain, category) objects and keep the answer."""
    found = get_domain(domain)
    argb, category_id = found._argb_category(color, category)
    return found._index, argb, category_id
