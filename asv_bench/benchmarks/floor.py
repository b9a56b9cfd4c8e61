"""The interpreter's floor for each call shape: ``asv_bench/c/floor.c``, built for this interpreter.

A shape's floor statement (``Shape.floor_setup``) spells the shape's call with these no-op C
objects in place of the library: the same calls with the same arguments, the same ``with``, the
same f-string or payload expression. What it costs is what CPython charges for the spelling itself,
so a library cannot be that much cheaper than another one there. Built with setuptools on first use
and cached in the temp directory per interpreter and source; benchmarks only, never part of the
package.

>>> F = load()
>>> with F.Floor("x", color="red") as cm:
...     cm.one(cm.call(1, b=2)) is cm.noargs() is None
True
>>> F.wrap(lambda a, b=0: a + b)(1, b=2)
3
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from types import ModuleType
from typing import Optional

__all__ = ["load", "Profile"]

MODULE = "_nvtx_floor"
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "c", "floor.c")

_loaded: Optional[ModuleType] = None


def load() -> ModuleType:
    """Import the floor module, building it first if needed.

    Raises NotImplementedError when it cannot be built here (no compiler, no setuptools, no headers).
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    try:
        path = _build()
    except Exception as exc:  # a missing floor empties a column; it does not stop the benchmarks
        msg = f"cannot build {os.path.basename(SOURCE)}: {type(exc).__name__}: {exc}"
        raise NotImplementedError(msg) from None
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _loaded = module
    return module


def _build() -> str:
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read())
    digest.update(sys.version.encode() + sys.executable.encode())
    cache = os.path.join(tempfile.gettempdir(), f"nvtx-cffi-floor-{digest.hexdigest()[:16]}")
    target = os.path.join(cache, MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    if os.path.exists(target):
        return target

    from setuptools import Distribution, Extension

    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix="build-", dir=cache)
    try:
        extension = Extension(MODULE, [SOURCE], extra_compile_args=["-Wall", "-Wextra"])
        dist = Distribution({"name": MODULE, "ext_modules": [extension]})
        dist.verbose = 0
        build = dist.get_command_obj("build_ext")
        build.build_lib = work
        build.build_temp = os.path.join(work, "tmp")
        build.ensure_finalized()
        build.run()
        os.replace(build.get_ext_fullpath(MODULE), target)  # atomic: concurrent builders both end whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


class Profile:
    """The floor of ``Profile``: the cheapest hook that sees every call, doing nothing.

    CPython 3.12+: ``sys.monitoring`` with a no-op builtin for the events nvtx-cffi's Profile
    watches (its C engine's); before: a no-op C ``PyEval_SetProfile`` function.
    """

    _EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND", "CALL",
               "C_RETURN", "C_RAISE")
    _TOOL = 5  # a tool id of no other user (nvtx-cffi's Profile is not enabled in the same process)

    def __init__(self, module: ModuleType) -> None:
        self._floor = module
        self._monitoring = getattr(sys, "monitoring", None)

    def enable(self) -> None:
        mon = self._monitoring
        if mon is None:
            self._floor.setprofile()
            return
        mon.use_tool_id(self._TOOL, "nvtx-cffi floor")
        mask = 0
        for name in self._EVENTS:
            event = getattr(mon.events, name)
            mon.register_callback(self._TOOL, event, self._floor.noop)
            mask |= event
        mon.set_events(self._TOOL, mask)

    def disable(self) -> None:
        mon = self._monitoring
        if mon is None:
            self._floor.unsetprofile()
            return
        mon.set_events(self._TOOL, 0)
        for name in self._EVENTS:
            mon.register_callback(self._TOOL, getattr(mon.events, name), None)
        mon.free_tool_id(self._TOOL)
