"""What NVTX's first call binds, in one place: every name whose implementation depends on whether
annotations reach a tool, and both of its implementations.

NVTX initialises at its first call and loads a tool then or never (nvtx_cffi/_state.py decides, once);
after it initialised without a tool none can attach later. :func:`bind` then gives each name below
its real implementation (a tool listens) or its do-nothing one (no tool, or ``NVTX_DISABLE``), for
good. The package registers it with ``_state`` at import, which makes no NVTX call.

How each kind of name is bound, and why:

* :data:`FUNCTIONS`, the module-level calls: the function object keeps its identity and receives
  the chosen body's code (``__code__``). Users bind these names before the decision
  (``from nvtx_cffi import push_range`` at import time) and must then run the chosen body with
  nothing in between. Rebinding the module's name would leave their object behind; a forwarding
  function costs a Python frame per call (a no-op call ~35 ns becomes ~62 ns on the pure-Python
  path), and a flag tested in one shared body a global read and a branch in every call, with or
  without a tool. With the C accelerator these names are C functions whose Python twin
  (``__wrapped__``) is bound here, and whose own body ``install`` chooses (last item).
* :data:`METHODS`, annotate's methods: class attributes, looked up at each call, so rebinding them
  is enough. Until the decision they are the real ones, for introspection (no instance exists
  before it: making one decides).
* :data:`GLOBALS`, module globals read on hot paths instead of asking ``_state``.
* the C accelerator's fast paths (``c/accel.c``'s ``install``: the same choice for its C functions),
  and, with a tool, the thread-naming hooks (``_threads.install``).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Tuple

from . import _annotate, _domain, _ranges, _state, _threads
from ._accel import accel

__all__ = ["FUNCTIONS", "METHODS", "GLOBALS", "bind"]

#: (public function, body with a tool, body without): the function gets the body's code.
FUNCTIONS: Tuple[Tuple[Callable, Callable, Callable], ...] = (
    (_ranges.push_range, _ranges._push_range_active, _ranges._noop5),
    (_ranges.pop_range, _ranges._pop_range_active, _ranges._pop_range_noop),
    (_ranges.start_range, _ranges._start_range_active, _ranges._noop5),
    (_ranges.end_range, _ranges._end_range_active, _ranges._end_range_noop),
    (_ranges.mark, _ranges._mark_active, _ranges._noop5),
)

#: (class, method name, with a tool, without).
METHODS: Tuple[Tuple[type, str, Callable, Callable], ...] = (
    (_annotate.annotate, "__aenter__", _annotate._aenter_active, _annotate._aenter_noop),
    (_annotate.annotate, "__aexit__", _annotate._aexit_active, _annotate._aexit_noop),
    (_annotate.annotate, "__call__", _annotate._call_active, _annotate._call_noop),
    (_annotate.annotate, "_start", _annotate._start_active, _annotate._start_noop),
) + (() if accel is not None else (  # (with the accelerator: AnnotateBase's C methods, which install() binds)
    (_annotate._Base, "__enter__", _annotate._enter_active, _annotate._enter_noop),
    (_annotate._Base, "__exit__", _annotate._exit_active, _annotate._exit_noop),
))

#: (module, global name, with a tool, without).
GLOBALS: Tuple[Tuple[object, str, object, object], ...] = (
    (_domain, "_ACTIVE", True, False),
    (_domain, "_end", _domain._end, _domain._end_unsent),
)


def _give_code(function: Callable, body: Callable) -> None:
    """Give ``function`` (with the accelerator: its Python twin) the code of ``body`` (the same
    parameters, no closure), keeping its name in errors and tracebacks."""
    function = getattr(function, "__wrapped__", function)
    code = body.__code__
    changes = {"co_name": function.__code__.co_name}
    if hasattr(code, "co_qualname"):  # 3.11+: argument errors name the code's qualname
        changes["co_qualname"] = function.__code__.co_qualname
    function.__code__ = code.replace(**changes)


def _bind_methods(active: bool) -> None:
    for cls, name, real, no_op in METHODS:
        method = real if active else no_op
        method.__name__ = name
        method.__qualname__ = f"annotate.{name}"
        setattr(cls, name, method)


def bind(active: bool) -> None:
    """Bind every name above to its implementation with a tool (``active``) or without one.
    Called once, by ``_state`` at NVTX's first call."""
    for module, name, real, no_op in GLOBALS:
        setattr(module, name, real if active else no_op)
    for function, real, no_op in FUNCTIONS:
        _give_code(function, real if active else no_op)
    _bind_methods(active)
    if accel is not None:
        accel.install(active)
    if active:  # Python threads named in NVTX: existing ones now, new ones at start, renames
        _threads.install()


_bind_methods(True)
_state.bind_with(bind)
