"""The C accelerator (``c/accel.c``): CPython C-API fast paths inside the CFFI module, or None.

What is left of a call's cost after the CFFI work is CPython running Python frames; only C
callables avoid them. ``c/accel.c`` is compiled into the same shared object as the shim (so it
uses the same slot tables) and provides, on CPython: the C base class of :class:`annotate`
(``__enter__``/``__exit__`` and a cache-answering class call), a C callable type for decorated
functions, and the module-level and ``Domain`` hot calls. Each of these answers only what the Python
caches already hold and otherwise calls its Python twin, so the Python code stays the one complete
implementation: PyPy uses it alone, and ``NVTX_CFFI_PURE_PYTHON=1`` (strictly parsed) forces it on
CPython, which is how the tests check that both paths record the same events and raise the same
errors.

The Python modules wire the accelerator in when :data:`accel` is not None.

>>> import nvtx_cffi._accel as a
>>> a.accel is None or hasattr(a.accel, "decorated")
True
"""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Optional

from . import _state
from ._env import env_flag
from ._native import lib

__all__ = ["PURE_PYTHON", "accel"]

#: ``NVTX_CFFI_PURE_PYTHON`` is set: use the Python implementation even on CPython.
PURE_PYTHON: bool = env_flag("NVTX_CFFI_PURE_PYTHON")

#: The module ``nvtx_cffi._native._accel`` (CPython, not PURE_PYTHON), else None.
accel: Optional[ModuleType] = None

if sys.implementation.name == "cpython" and not PURE_PYTHON:
    # A plain cdef'd function (no Python object crosses cffi): it creates the C types and
    # functions, with the GIL held, and registers them in sys.modules under this name.
    if lib.nvtxcffi_accel_install(int(_state.ACTIVE)) != 0:
        msg = "nvtx_cffi's C accelerator failed to initialise (NVTX_CFFI_PURE_PYTHON=1 runs without it)"
        raise ImportError(msg)
    accel = sys.modules["nvtx_cffi._native._accel"]
