"""The optional C accelerator ``nvtx_cffi._speedups``, bound to the shim, or None.

What is left of a call's cost after the CFFI work is CPython running Python frames; only C
callables avoid them. ``nvtx_cffi._speedups`` (``c/speedups/``) is an extension module of its own,
built per CPython version and optional: the CFFI shim it calls is the limited-API ``_ffi.abi3.so``,
and it reaches the shim through the shim's function table (``lib.nvtxcffi_api()``,
``c/shim/nvtx_api.h``), never by linking to it. It provides: the C base class of
:class:`annotate` (``__enter__``/``__exit__`` and a cache-answering class call), a C callable type
for decorated functions, the module-level and ``Domain`` hot calls, and Profile's C engine. Each fast
path answers only what the Python caches already hold and otherwise calls its Python twin, so the
Python code stays the one complete implementation.

It is used when it imports, was built for these Python files (its version stamp), this is
CPython with a GIL and this interpreter is the first to load it; otherwise the pure-Python path
runs: PyPy, free-threaded builds, subinterpreters, installs where it failed to compile, and
``NVTX_CFFI_PURE_PYTHON=1`` (strictly parsed), which is how the tests check that both paths record
the same events and raise the same errors.

>>> import nvtx_cffi._accel as a
>>> a.accel is None or hasattr(a.accel, "decorated")
True
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Optional

from ._env import env_flag
from ._native import ffi, lib
from ._version import __version__

__all__ = ["PURE_PYTHON", "speedups", "accel", "why_not", "update_wrapper", "partial"]

try:  # functools.partial is _functools.partial (CPython): without importing functools (and collections)
    from _functools import partial
except ImportError:  # PyPy
    from functools import partial

#: functools.WRAPPER_ASSIGNMENTS of this Python (tests/api/test_import_cost.py compares them).
WRAPPER_ASSIGNMENTS = ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__") + (
    ("__type_params__",) if sys.version_info >= (3, 12) else ())


def update_wrapper(wrapper, wrapped):
    """``functools.update_wrapper(wrapper, wrapped)``, without importing ``functools`` at import time
    (it imports ``collections``, ``reprlib``, ...); 3.14+ (``__annotate__``): functools' own."""
    if sys.version_info >= (3, 14):
        import functools

        return functools.update_wrapper(wrapper, wrapped)
    for attr in WRAPPER_ASSIGNMENTS:
        try:
            value = getattr(wrapped, attr)
        except AttributeError:
            pass
        else:
            setattr(wrapper, attr, value)
    wrapper.__dict__.update(getattr(wrapped, "__dict__", {}))
    wrapper.__wrapped__ = wrapped  # last: not copied from the wrapped function's __dict__
    return wrapper


#: ``NVTX_CFFI_PURE_PYTHON`` is set: use the Python implementation even on CPython.
PURE_PYTHON: bool = env_flag("NVTX_CFFI_PURE_PYTHON")

#: ``nvtx_cffi._speedups``, bound to the shim, when usable here; else None.
speedups: Optional[ModuleType] = None

#: Why :data:`speedups` is None (empty when it is not).
why_not: str = ""


def _free_threaded_build() -> bool:
    """A free-threaded CPython build (``Py_GIL_DISABLED``, 3.13+): its ABI flags have a ``t``
    (read without importing ``sysconfig``, where there are ABI flags)."""
    if sys.version_info < (3, 13):
        return False
    abiflags = getattr(sys, "abiflags", None)
    if abiflags is not None:
        return "t" in abiflags
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _load() -> Optional[ModuleType]:
    global why_not
    if sys.implementation.name != "cpython":
        why_not = f"{sys.implementation.name} runs the Python implementation"
        return None
    if _free_threaded_build():
        why_not = "free-threaded CPython: the accelerator relies on the GIL"
        return None
    if PURE_PYTHON:
        why_not = "NVTX_CFFI_PURE_PYTHON is set"
        return None
    try:
        from . import _speedups  # type: ignore[attr-defined]
    except ImportError as exc:
        # (not built, `from . import` says "cannot import name ... circular import": say what it is)
        from importlib.machinery import PathFinder

        built = PathFinder.find_spec(f"{__package__}._speedups", sys.modules[__package__].__path__)
        why_not = (f"not importable ({exc})" if built is not None else
                   "not built (an abi3 wheel, NVTX_CFFI_SPEEDUPS=0, or its compile failed when installing)")
        return None
    if getattr(_speedups, "build_version", None) != __version__:
        why_not = f"built for version {getattr(_speedups, 'build_version', '?')}, not {__version__}"
        return None
    try:
        _speedups.bind(int(ffi.cast("uintptr_t", lib.nvtxcffi_api())))
    except ImportError as exc:  # a subinterpreter (the module serves the first interpreter)
        why_not = str(exc)
        return None
    return _speedups


speedups = _load()

#: The fast paths, for _annotate/_ranges/_domain/_wrappers. Until NVTX's first call decides whether
#: a tool listens (nvtx_cffi/_state.py), the module-level fast paths call their Python twins, which
#: decide; nvtx_cffi/_dispatch.py then calls install(), which gives them their with- or without-tool
#: bodies.
accel: Optional[ModuleType] = speedups
