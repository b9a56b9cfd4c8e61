"""What the benchmarks' throw-away builds share: the checkout's ``build_ffi.py``, read by ``floor.py``,
``stock_cffi.py`` and ``scripts/trace_convert_bench.py``. Benchmarks only, never part of the package.

>>> os.path.isfile(os.path.join(repo_root(), "build_ffi.py")), load_build_ffi() is load_build_ffi()
(True, True)
"""
from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType

__all__ = ["load_build_ffi", "repo_root"]


def repo_root() -> str:
    """The source checkout these benchmarks belong to (holds ``build_ffi.py`` and ``c/``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=None)
def load_build_ffi() -> ModuleType:
    """The checkout's ``build_ffi.py`` (its sources, flags, cdef reader and NVTX header finder), loaded
    from its path: never another ``build_ffi`` that ``sys.path`` finds first, and ``sys.path`` untouched."""
    return _import_file("build_ffi", os.path.join(repo_root(), "build_ffi.py"))


def _import_file(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
