"""``annotate``: a range as a decorator or a context manager (``with`` and ``async with``)."""
from __future__ import annotations

import _thread
import sys
from _contextvars import ContextVar  # contextvars.ContextVar (contextvars.py only re-exports it)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Callable, Optional, Type, TypeVar, Union

    from ._colors import ColorLike
    from ._domain import Category, Message, Payload

    F = TypeVar("F", bound=Callable)  # (what annotate(...)(f) gives back: f's own type)

from . import _ranges, _state
from ._accel import accel as _accel, partial as _partial
from ._locks import hold_across_fork
from ._domain import OP_PUSH, OP_START, PREPARE_AT, EventAttributes, FirstSight, _inline_style, get_domain, make_room
from ._bases import caches
from ._native import lib
from ._validate import _INT64_MAX, _INT64_MIN, ArgumentTypeError, keyable
from ._payload import _DOUBLE, _INT64, KIND_EXT as _KIND_EXT, emit as _payload_emit, payload_fields
from ._wrappers import wrap

__all__ = ["annotate"]

#: Bound of the cache of annotate objects (they are immutable, so equal arguments share one).
MAX_CACHED_ANNOTATIONS = 4096

#: How often annotate() has met each message (see annotate.__new__): prepared at its PREPARE_AT-th annotate().
_first_sight = FirstSight()

# (cls, message, color, domain, category, payload, payload type) -> annotate object; the C fast path
# reads it too (nvtx_cffi/_bases.py).
_cache: dict = caches.annotate
# annotate(message) with every other argument at its default, the commonest form: keyed by the
# message alone (no 7-tuple to build and hash). Same objects as in _cache, same bound.
_by_message: dict = caches.annotate_by_message
_cache_lock = _thread.allocate_lock()
hold_across_fork(_cache_lock)
_push = lib.nvtxcffi_push
_pop = lib.nvtxcffi_pop
_pop_default = lib.nvtxcffi_pop_default
_start = lib.nvtxcffi_start
_end = lib.nvtxcffi_end
_emit_slot = lib.nvtxcffi_emit_slot

# Ranges opened by ``async with``. Each ``async with`` must end the range it started, but
# ``__aexit__`` gets no token from ``__aenter__`` and a cached annotate object may be entered by
# several tasks at once, so the id is kept per *owner* of the entry:
# * inside an async generator (or code it awaits): a stack per generator frame, in
#   ``_agen_ranges`` keyed by the frame's id. An async generator runs in its consumer's context
#   and is suspended at ``yield`` with its ranges open while the consumer goes on, so a stack
#   per context would pop the consumer's range. Entries live until the
#   ``async with`` exits (an async generator that is never finished keeps its few ids here);
# * otherwise: a stack per context (each asyncio task runs in its own), where entries and exits
#   of one owner are strictly nested (``async with`` blocks, ``AsyncExitStack``).
# An entry is [annotate object, domain index, range id, open]: an exit ends the innermost entry of
# its own object. Every open entry is also in _async_open (by the entry's id), so that an exit in
# another task than the entry's (an AsyncExitStack handed to another task) still ends that range;
# an entry ended that way is marked closed, so that it is not ended again.
# One object entered in several tasks and exited in yet another is ambiguous: the newest open entry
# of it ends. _async_open keeps the newest MAX_ASYNC_OPEN entries (an entry never exited, as an
# AsyncExitStack never closed, would otherwise stay forever); an older one is still ended by an
# exit in its own task.
_async_ranges: ContextVar = ContextVar("nvtx_cffi_async_ranges", default=())
_agen_ranges: dict = {}
_async_open: dict = {}
MAX_ASYNC_OPEN = 65536
_getframe = sys._getframe
_CO_ASYNC_GENERATOR = 0x200  # inspect.CO_ASYNC_GENERATOR
_CO_AWAITING = 0x80 | 0x100  # inspect.CO_COROUTINE | CO_ITERABLE_COROUTINE


def _async_generator_frame():
    """The id of the async generator frame whose step runs the caller's caller, or None.

    Walks up through coroutines awaiting each other (only an ``await`` links them): the first
    frame that is not a coroutine (the event loop, a plain function) ends the walk.
    """
    frame = _getframe(2)
    while frame is not None:
        flags = frame.f_code.co_flags
        if flags & _CO_ASYNC_GENERATOR:
            return id(frame)
        if not flags & _CO_AWAITING:
            return None
        frame = frame.f_back
    return None


if _accel is not None and not TYPE_CHECKING:
    # C: the fields below as C members, __enter__/__exit__ as C methods (c/speedups/accel_annotate.c).
    _Base = _accel.AnnotateBase
else:  # (and what type checkers see)

    class _Base:
        """annotate's fields and ``with`` protocol in Python (PyPy, ``NVTX_CFFI_PURE_PYTHON=1``),
        what ``AnnotateBase`` in ``c/speedups/accel_annotate.c`` does in C on CPython.
        ``__enter__``/``__exit__`` are bound by nvtx_cffi/_dispatch.py when NVTX's first call decides
        (every instance is made after that)."""

        # _attrs: the prepared EventAttributes, or None for an object carrying a per-call payload
        # (_template, _fields): its attributes are made when first asked for, as in C.
        __slots__ = ("_args", "_attrs", "_slot", "_domain_index", "_close", "_template", "_fields", "_first_sight")

        def _get_attributes(self):
            attributes = self._attrs
            if attributes is None:
                attributes = self._attrs = _payload_attributes(self._template, self._args[4], self._fields)
            return attributes

        def _set_attributes(self, attributes):
            self._attrs = attributes

        _attributes = property(_get_attributes, _set_attributes)


# The Python base's __enter__/__exit__, with a tool and without one (nvtx_cffi/_dispatch.py binds them).

def _enter_active(self) -> "annotate":
    slot = self._slot
    if slot >= 0:
        _push(slot)
    elif self._attrs is None:  # a per-call payload (Python path): the template's slot and the value
        _emit_slot(OP_PUSH, self._template._slot, *self._fields)
    else:
        _entered(self)
        slot = self._slot
        if slot >= 0:
            _push(slot)
        else:
            self._attrs._emit(OP_PUSH)
    return self


def _entered(self) -> None:
    """An object made at its message's first sight (``_first_sight`` 1) is being entered: at its
    second entry it is reused (a variable, ``with a:`` in a loop), so it prepares itself."""
    state = getattr(self, "_first_sight", 0)  # (unset in objects the Python base made otherwise)
    if state == 1:
        self._first_sight = 2
    elif state == 2:
        _first_sight_reused(self)


def _exit_active(self, exc_type, exc_value, traceback) -> None:
    self._close()


def _enter_noop(self) -> "annotate":
    return self


def _exit_noop(self, exc_type, exc_value, traceback) -> None:
    pass


class annotate(_Base):  # noqa: N801 - the name nvtx users know
    """Annotate a code range, as a decorator or a context manager.

    Parameters are those of NVIDIA's ``nvtx.annotate``: ``message`` (default: the decorated
    function's ``__name__``), ``color`` (name, ``"#rrggbb"``, ARGB int; default blue), ``domain``
    (name; default NVTX's default domain), ``category`` (name or non-negative int) and ``payload``
    (int or float). Arguments are checked and the event prepared once, here.

    As a decorator, each call is one range, also when it raises. ``async def`` functions,
    generators and async generators get one range over their whole execution (a start/end range,
    since other code runs on the thread while they are suspended). Without a tool the decorator
    returns the function itself.

    >>> @annotate("f()", color="purple")
    ... def f():
    ...     with annotate("loop", color="red"):
    ...         return 42
    >>> f()
    42

    Objects are immutable: equal arguments may give back the same object.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # bound by nvtx_cffi/_dispatch.py, once NVTX's first call has decided
        def __call__(self, func: F) -> F: ...

        def __enter__(self) -> "annotate": ...

        def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                     traceback: Optional[TracebackType]) -> None: ...

        async def __aenter__(self) -> "annotate": ...

        async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                            traceback: Optional[TracebackType]) -> None: ...

    def __new__(cls, message: Message = None, color: ColorLike = None, domain: Optional[str] = None,
                category: Category = None, payload: Payload = None) -> "annotate":
        if payload is not None:
            return _with_payload(cls, message, color, domain, category, payload)
        plain = color is None and domain is None and category is None and cls is annotate
        if plain:  # (.get: a miss raises nothing; a stream of new messages misses every time)
            try:
                found = _by_message.get(message)
            except TypeError:  # an unhashable message: the class call validates
                found = None
            if found is not None:
                return found
        # The payload's two places stay in the key (always None here): c/speedups/accel_annotate_call.c
        # builds the same key.
        key = (cls, message, color, domain, category, None, _NONE_TYPE)
        # A subclass with an __init__ of its own may prepare its objects again (see __init__): they
        # are its own, never shared through the cache.
        own = cls is not annotate and cls.__init__ is not annotate.__init__  # (object's, or _subclass_init)
        if (not own and (color is None or color.__class__ is str or keyable(color))
                and (category is None or category.__class__ is str or keyable(category))):
            try:  # (not keyable: True would find the object of 1, see keyable)
                found = _cache.get(key)
            except TypeError:
                found = None
            if found is not None:
                return found
        self = _Base.__new__(cls)
        domain_object = get_domain(domain)
        # A message among its first PREPARE_AT - 1 sights: an object sending it inline, neither
        # prepared nor cached; its PREPARE_AT-th annotate() prepares and caches one. A stream of
        # messages that never repeat (with annotate(f"request {n}")) fills no table.
        first = (not own and message.__class__ is str and (domain is None or domain.__class__ is str)
                 and _first_sight.first_in(message, domain))
        if first:
            attributes = EventAttributes._unprepared(domain_object, message, color, category)
        else:
            attributes = EventAttributes(domain_object, message, color, category, payload)
        attributes._shared = True  # (see EventAttributes._check_changeable)
        self._args = (message, color, domain, category, payload)
        self._attributes = attributes
        self._slot = attributes.fast_slot
        self._domain_index = index = domain_object._index
        # What closes the range: a C function called with no argument (no frame, no conversion).
        self._close = _pop_default if index == 0 else _partial(_pop, index)
        if first:
            self._first_sight = 1  # (see _entered)
            return self
        # (a list or array payload is unhashable: not cached)
        if not own and (payload is None or payload.__hash__ is not None):
            _remember(key, self, plain)
        return self

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # nvtx's annotate is set up in __init__, so a subclass may pass its own arguments on with
        # super().__init__(...). annotate gets that __init__ when the first such subclass is made,
        # not before: while annotate has none, the class call does not call one (a Python frame).
        if cls.__init__ is not object.__init__ and "__init__" not in annotate.__dict__:
            # (an __init__ of its own, or a mixin's before annotate; with the accelerator annotate
            # is sealed once NVTX is decided: c/speedups/accel_annotate_call.c, annotate_seal)
            _set_class_attribute("__init__", _subclass_init)

    message = property(lambda self: self._args[0], doc="The message as given.")
    color = property(lambda self: self._args[1], doc="The colour as given.")
    domain = property(lambda self: self._attributes.domain, doc="The :class:`Domain`.")
    category = property(lambda self: self._args[3], doc="The category as given.")
    payload = property(lambda self: self._args[4], doc="The payload as given.")
    attributes = property(lambda self: self._attributes, doc="The prepared :class:`EventAttributes`.")

    def __reduce__(self):
        return self.__class__, self._args

    def __repr__(self) -> str:
        message, color, domain, category, payload = self._args
        return (f"annotate(message={message!r}, color={color!r}, domain={domain!r}, "
                f"category={category!r}, payload={payload!r})")

    # __aenter__, __aexit__, __call__ and _start: the functions below, with a tool or without one,
    # bound by nvtx_cffi/_dispatch.py when NVTX's first call decides (creating an annotate object is
    # such a call, so every instance sees them bound).


async def _aenter_active(self) -> "annotate":
    owner = _async_generator_frame()
    entry = [self, self._domain_index, self._start(), True]
    _async_open[id(entry)] = entry
    if len(_async_open) > MAX_ASYNC_OPEN:
        del _async_open[next(iter(_async_open))]  # the oldest
    if owner is None:
        _async_ranges.set(_async_ranges.get() + (entry,))
    else:
        _agen_ranges.setdefault(owner, []).append(entry)
    return self


def _innermost(stack, annotation) -> int:
    """The index of the innermost entry of ``annotation`` in ``stack``, or -1."""
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][0] is annotation:
            return i
    return -1


async def _aexit_active(self, exc_type, exc_value, traceback) -> None:
    owner = _async_generator_frame()
    if owner is None:
        open_ranges = _async_ranges.get()
        i = _innermost(open_ranges, self)
        entry = open_ranges[i] if i >= 0 else None
        if entry is not None:
            _async_ranges.set(open_ranges[:i] + open_ranges[i + 1:])
    else:
        stack = _agen_ranges.get(owner, ())
        i = _innermost(stack, self)
        entry = stack.pop(i) if i >= 0 else None
        if not stack and owner in _agen_ranges:
            del _agen_ranges[owner]
    if entry is None:  # entered in another task or generator: its innermost open entry of self
        entries = list(_async_open.values())
        i = _innermost(entries, self)
        entry = entries[i] if i >= 0 else None
    if entry is not None and entry[3]:  # (not ended by an exit in another task)
        entry[3] = False
        _async_open.pop(id(entry), None)
        _end(entry[1], entry[2])


def _call_active(self, func: F) -> F:
    """Decorate ``func``: each call is one range (see the class docstring)."""
    if isinstance(func, (staticmethod, classmethod)):
        return type(func)(self(func.__func__))
    if not callable(func):
        msg = f"annotate() decorates callables, not {type(func).__name__}"
        raise ArgumentTypeError(msg)
    annotation = self
    if self._args[0] is None:
        name = getattr(func, "__name__", None) or type(func).__name__
        annotation = type(self)(name, *self._args[1:])
    if getattr(annotation, "_first_sight", 0):  # (unset in objects the Python base made otherwise)
        # made at its message's first sight (inline): a decorated function is called again and
        # again, so the object prepares itself now, as one entered a second time does
        _first_sight_reused(annotation)
    elif annotation._slot < 0:
        # (an object with a payload copies its template's attributes, which may still send their
        # message with each call): register the message now, as nvtx registers it when the
        # decorator is made, not at the function's first call
        message = annotation._args[0]
        if message.__class__ is str or message.__class__ is bytes:
            get_domain(annotation._args[2]).get_registered_string(message)
    domain_index = annotation._domain_index
    if annotation._slot >= 0:
        begin, begin_arg = _push, annotation._slot
    else:
        begin, begin_arg = annotation._attributes._emit, OP_PUSH
    return wrap(func, begin, begin_arg, annotation._close,
                annotation._start, lambda range_id: _end(domain_index, range_id),
                (annotation._slot, domain_index, annotation._attributes))


def _start_active(self) -> int:
    slot = self._slot
    if slot >= 0:
        return _start(slot)
    _entered(self)
    slot = self._slot
    return _start(slot) if slot >= 0 else self._attributes._emit(OP_START)


# Without a tool: annotate's methods do nothing (nvtx_cffi/_dispatch.py binds them).

async def _aenter_noop(self) -> "annotate":
    return self


async def _aexit_noop(self, exc_type, exc_value, traceback) -> None:
    pass


def _call_noop(self, func: F) -> F:
    """Without a tool the decorator returns ``func`` itself."""
    if not callable(func) and not isinstance(func, (staticmethod, classmethod)):
        msg = f"annotate() decorates callables, not {type(func).__name__}"
        raise ArgumentTypeError(msg)
    return func


def _start_noop(self) -> int:
    return 0


_NONE_TYPE = type(None)

# What annotate.__init__ copies from an object prepared for other arguments: every field __new__ and
# _with_payload set (the C base's are members of these names; its C-only payload fields stay unset
# in objects made in Python). The Python base's may be unset.
_FIELDS = (("_args", "_attributes", "_slot", "_domain_index", "_close") if _accel is not None
           else _Base.__slots__)


def _subclass_init(self, message: Message = None, color: ColorLike = None, domain: Optional[str] = None,
                   category: Category = None, payload: Payload = None) -> None:
    """annotate.__init__, once a subclass has an __init__ of its own (see __init_subclass__). For
    annotate and the other subclasses, nothing: ``__new__`` prepared the object. Such a subclass's
    objects are not cached (see __new__), so super().__init__ with other arguments than the class
    call's prepares that object again, for them.

    >>> class Step(annotate):
    ...     def __init__(self, name):
    ...         super().__init__(name, color="red")
    >>> Step("load").color
    'red'
    """
    args = self._args
    if (args[0] is message and args[1] is color and args[2] is domain and args[3] is category
            and args[4] is payload) or type(self).__init__ is _subclass_init:
        return  # the class call's arguments, or an object that may be shared
    made = type(self).__new__(type(self), message, color, domain, category, payload)
    for name in _FIELDS:
        try:
            setattr(self, name, getattr(made, name))
        except AttributeError:  # unset in the Python base
            if hasattr(self, name):
                delattr(self, name)


def _with_payload(cls, message, color, domain, category, payload) -> annotate:
    """annotate(..., payload=value): a new object per call; the payload is a value, not an identity.

    The arguments without the payload are prepared (and cached) once, as ``cls(message, color,
    domain, category)``; each call copies that template's fields and converts only the payload, so
    a value that changes every call creates no cache entry, slot or registered string. (With the C
    accelerator such calls are answered in C the same way, the attributes made on demand by
    :func:`_payload_attributes`.)
    """
    # first, as EventAttributes does: bad payloads fail alike. An int64 or a float is answered here
    # as payload_fields' own first lines answer it, without that call's frame (~50 ns of ~700 on
    # the pure-Python path); anything else goes to it.
    kind = payload.__class__
    if kind is int and _INT64_MIN <= payload <= _INT64_MAX:
        fields = (_INT64, payload, 0.0)
    elif kind is float:
        fields = (_DOUBLE, 0, payload)
    else:
        fields = payload_fields(payload)
    try:  # the cached template, without another class call
        if color is None and domain is None and category is None and cls is annotate:
            template = _by_message[message]
        elif ((color is None or color.__class__ is str or keyable(color))
                and (category is None or category.__class__ is str or keyable(category))):
            template = _cache[cls, message, color, domain, category, None, _NONE_TYPE]
        else:
            raise KeyError  # not keyable: the class call validates
    except (KeyError, TypeError):
        template = cls.__new__(cls, message, color, domain, category)  # (not a subclass's own __init__)
    self = _Base.__new__(cls)
    self._args = (message, color, domain, category, payload)
    if _accel is None and ((template._slot >= 0 and fields[0] != _KIND_EXT) or not _state.ACTIVE):
        # the Python base: attributes made on first use; __enter__ sends the template's slot + value
        # (a binary payload only without a tool, where __enter__ sends nothing)
        self._attrs, self._template, self._fields = None, template, fields
    else:
        self._attributes = _payload_attributes(template, payload, fields)
    self._slot = -1  # the general push: the template's slot with this payload
    self._domain_index = template._domain_index
    self._close = template._close
    return self


def _payload_attributes(template: annotate, payload, fields=None) -> EventAttributes:
    """``template``'s attributes with ``payload`` (never None here): a copy, nothing prepared again."""
    base = template._attributes
    attributes = base._copy(base._message, base._color, base._category, payload,
                            payload_fields(payload) if fields is None else fields)
    attributes._shared = True
    return attributes


def _first_sight_reused(annotation: annotate) -> bool:
    """An object made at its message's first sight, entered a second time: it prepares itself
    (its message counted as met often enough; the attributes of an object cached for its arguments
    meanwhile, if any) and becomes the cached object of its arguments (True: c/speedups/accel_annotate.c
    may then keep its bound methods, as for any cached object; an object it replaces stays valid)."""
    message, color, domain, category, _ = annotation._args
    annotation._first_sight = 0
    _first_sight.met_in(message, domain)
    cls = type(annotation)
    key = (cls, message, color, domain, category, None, _NONE_TYPE)
    found = _cache.get(key)
    if found is None:
        attributes = EventAttributes(get_domain(domain), message, color, category)
        attributes._shared = True  # (see EventAttributes._check_changeable)
    else:
        attributes = found._attributes
    annotation._attributes, annotation._slot = attributes, attributes.fast_slot
    return _remember(key, annotation, color is None and domain is None and category is None and cls is annotate)


def _remember(key: tuple, annotation: annotate, plain: bool) -> bool:
    """Cache ``annotation`` as the object of ``key`` (and of its message alone when ``plain``):
    False only when the cache's bound is 0. Objects a full cache drops stay valid, and one made
    again finds its string and slot prepared."""
    with _cache_lock:
        if not make_room(_cache, MAX_CACHED_ANNOTATIONS, _by_message):
            return False
        _cache[key] = annotation
        if plain:
            _by_message[key[1]] = annotation  # (the message)
        return True


def _first_sight_attributes(annotation: annotate) -> EventAttributes:
    """The attributes of an object c/speedups/accel_annotate_call.c made at its message's first sight
    (when asked for)."""
    message, color, domain, category, _ = annotation._args
    attributes = EventAttributes._unprepared(get_domain(domain), message, color, category)
    attributes._shared = True
    return attributes


if _accel is not None:
    # Repeated annotate(...) calls answered in C from the two caches above (a miss runs __new__),
    # and messages met for the first time sent inline as __new__ and _ranges._slow send them.
    _accel.setup_annotate(annotate, _payload_attributes, payload_fields, _payload_emit)
    _accel.setup_first_sight(FirstSight, _ranges._first_sight, _first_sight, _inline_style,
                             _first_sight_attributes, _pop_default, _first_sight_reused, PREPARE_AT)
    _set_class_attribute = _accel.set_annotate_attribute
else:
    def _set_class_attribute(name: str, value: object) -> None:
        setattr(annotate, name, value)
