"""What the benchmarks' throw-away builds share: the checkout's ``build_ffi.py``, read by ``floor.py``,
``stock_cffi.py`` and ``scripts/trace_convert_bench.py``, and importing a module built outside the
package (``floor.py``, ``stock_cffi.py``). Benchmarks only, never part of the package.
``python building.py nvtx-include`` prints the folder of the NVTX headers as ``build_ffi.py`` finds
them (for the C programs of ``scripts/bench_*.sh``).

>>> os.path.isfile(os.path.join(repo_root(), "build_ffi.py")), load_build_ffi() is load_build_ffi()
(True, True)
"""
from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType
from typing import Callable, Dict

__all__ = ["build_and_import", "load_build_ffi", "repo_root"]

_imported: Dict[str, ModuleType] = {}


def repo_root() -> str:
    """The source checkout these benchmarks belong to (holds ``build_ffi.py`` and ``c/``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=None)
def load_build_ffi() -> ModuleType:
    """The checkout's ``build_ffi.py`` (its sources, flags, cdef reader and NVTX header finder), loaded
    from its path: never another ``build_ffi`` that ``sys.path`` finds first, and ``sys.path`` untouched."""
    return _import_file("build_ffi", os.path.join(repo_root(), "build_ffi.py"))


def build_and_import(name: str, build: Callable[[], str], subject: str) -> ModuleType:
    """The extension module ``name`` from the path ``build()`` returns, built and imported once per process.

    Raises NotImplementedError (asv's "skip") saying it cannot build ``subject`` when ``build`` fails.
    """
    module = _imported.get(name)
    if module is None:
        try:
            path = build()
        except Exception as exc:  # no compiler, no headers, no sources: a row or column is empty, the suite goes on
            msg = f"cannot build {subject}: {type(exc).__name__}: {exc}"
            raise NotImplementedError(msg) from None
        module = _imported[name] = _import_file(name, path)
    return module


def _import_file(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["nvtx-include"]:
        sys.exit(f"usage: {sys.argv[0]} nvtx-include")
    print(load_build_ffi().nvtx_include_dir())
