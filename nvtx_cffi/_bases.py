"""The state nvtx_cffi's Python code shares with its C accelerator, declared once.

Three things are read by the accelerator's fast paths and filled by their Python twins: the fields
of a :class:`~nvtx_cffi.Domain` (``_index``, ``_by_keywords``), the fields of an
:class:`~nvtx_cffi.EventAttributes` (``_domain`` ... ``_shared``), and the caches of prepared calls.
With the accelerator they are its C types (``c/speedups/accel_types.c``): ``Domain`` and
``EventAttributes`` subclass ``DomainBase`` and ``EventAttributesBase``, and ``caches`` is the
one ``Caches`` instance C made, so the fast paths read struct fields, never a Python class's
``__slots__`` or a module's dict. Without it (PyPy, free-threaded builds,
``NVTX_CFFI_PURE_PYTHON=1``) they are the Python twins below, the reference implementation: the
same names, the same behaviour (``tests/speedups/test_bases.py`` runs both through one fixture).
``nvtx_cffi/_speedups.pyi`` types the C ones.

>>> from nvtx_cffi._bases import caches
>>> sorted(name for name in CACHE_NAMES if isinstance(getattr(caches, name), dict)) == sorted(CACHE_NAMES)
True
"""
from __future__ import annotations

from operator import itemgetter

from ._accel import accel

__all__ = ["DomainBase", "EventAttributesBase", "Caches", "caches", "PyDomainBase", "PyEventAttributesBase",
           "PyCaches", "DOMAIN_FIELDS", "ATTRIBUTE_FIELDS", "CACHE_NAMES"]

#: The fields of DomainBase, in C's order.
DOMAIN_FIELDS = ("_index", "_by_keywords")
#: The fields of EventAttributesBase, in C's order (accel.h's ATTR_* enum).
ATTRIBUTE_FIELDS = ("_domain", "_message", "_color", "_category", "_payload", "_slot", "_fields", "_inline", "_fast",
                    "_shared")
#: The caches of prepared calls, each a dict: who fills it is named in brackets.
CACHE_NAMES = (
    "annotate_by_message",  # message -> annotate object of that message alone (_annotate)
    "annotate",             # (cls, message, color, domain, category, payload, payload type) -> annotate (_annotate)
    "slot",                 # (message, color, domain, category) -> slot of a module-level call (_ranges)
    "blue_slots",           # message -> slot of push_range/mark(message), default colour (_ranges)
    "uncoloured_slots",     # message -> slot of start_range(message), no colour (_ranges)
    "domains",              # name -> Domain, None the default domain (_domain)
)


class PyDomainBase:
    """Python twin of ``_speedups.DomainBase``: the fields of a Domain the fast paths read. (C's
    also has ``pop_range``; here ``get_domain`` gives each Domain a ``pop_range`` attribute bound
    to a C function of the shim instead, which runs no Python frame either.)"""

    __slots__ = DOMAIN_FIELDS


class PyEventAttributesBase:
    """Python twin of ``_speedups.EventAttributesBase``: the fields of an EventAttributes."""

    __slots__ = ATTRIBUTE_FIELDS


class PyCaches(tuple):
    """Python twin of ``_speedups.Caches``: the caches of prepared calls, as read-only attributes
    (each a dict, made here; the modules that fill them bind them to names of their own)."""

    __slots__ = ()

    def __new__(cls) -> "PyCaches":
        return super().__new__(cls, ({} for _ in CACHE_NAMES))

    annotate_by_message = property(itemgetter(0), doc="message -> annotate object of that message alone.")
    annotate = property(itemgetter(1), doc="(cls, message, color, domain, category, payload, payload type) -> annotate.")
    slot = property(itemgetter(2), doc="(message, color, domain, category) -> slot of a module-level call.")
    blue_slots = property(itemgetter(3), doc="message -> slot of push_range/mark(message) (default colour).")
    uncoloured_slots = property(itemgetter(4), doc="message -> slot of start_range(message) (no colour).")
    domains = property(itemgetter(5), doc="name -> Domain (None: the default domain).")


TYPE_CHECKING = False
if TYPE_CHECKING or accel is None:
    DomainBase = PyDomainBase
    EventAttributesBase = PyEventAttributesBase
    Caches = PyCaches
    caches = PyCaches()
else:
    DomainBase = accel.DomainBase
    EventAttributesBase = accel.EventAttributesBase
    Caches = accel.Caches
    caches = accel.caches
