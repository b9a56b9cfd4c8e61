"""The interpreter's floor for each call shape: ``asv_bench/c/floor.c``, built for this interpreter.

A shape's floor statement (``Shape.floor_setup``) spells the shape's call with these no-op C
objects in place of the library: the same calls with the same arguments, the same ``with``, the
same f-string or payload expression. What it costs is what CPython charges for the spelling itself,
so a library cannot be that much cheaper than another one there. Built with setuptools on first use
and cached in the temp directory per interpreter and source; benchmarks only, never part of the
package.

NVTX's own calls are the other part of every floor: :func:`nvtx_cost` runs ``asv_bench/c/nvtx_cost.c``
(built by :func:`build_nvtx_cost` with ``cc`` against the NVTX headers the package builds with) under
the running process's tool and returns ns per call of each kind; :func:`nvtx_calls` says which calls a
shape makes.

>>> F = load()
>>> with F.Floor("x", color="red") as cm:
...     cm.one(cm.call(1, b=2)) is cm.noargs() is None
True
>>> F.wrap(lambda a, b=0: a + b)(1, b=2)
3
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from types import ModuleType
from typing import Dict

# absolute: doctest imports this file as a top-level module (cd asv_bench; python -m doctest benchmarks/floor.py)
from benchmarks.building import build_and_import, load_build_ffi

__all__ = ["build_nvtx_cost", "error_check_ns", "load", "nvtx_calls", "nvtx_cost", "Profile"]

MODULE = "_nvtx_floor"
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "c", "floor.c")
COST_SOURCE = os.path.join(os.path.dirname(SOURCE), "nvtx_cost.c")


def load() -> ModuleType:
    """Import the floor module, building it first if needed.

    Raises NotImplementedError when it cannot be built here (not CPython, no compiler, no setuptools, no headers).
    """
    if sys.implementation.name != "cpython":  # cpyext's costs are not an interpreter's floor
        msg = f"the floor is CPython's; this is {sys.implementation.name}"
        raise NotImplementedError(msg)
    return build_and_import(MODULE, _build, os.path.basename(SOURCE))


def _cache_dir(source: str) -> str:
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read())
    digest.update(sys.version.encode() + sys.executable.encode())
    return os.path.join(tempfile.gettempdir(), f"nvtx-cffi-floor-{digest.hexdigest()[:16]}")


def _build() -> str:
    cache = _cache_dir(SOURCE)
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


def nvtx_calls(shape: str) -> Dict[str, int]:
    """The NVTX calls an ideal library makes for one run of ``shape``'s statement, by kind.

    >>> nvtx_calls("with_fstring"), nvtx_calls("domain_start_end"), nvtx_calls("mark_twice")
    ({'push_pop': 1}, {'start_end': 1}, {'mark': 2})
    """
    twice = 2 if shape.endswith("_twice") else 1
    if shape.startswith(("start_end", "domain_start_end")):
        return {"start_end": twice}
    if shape.startswith(("mark", "domain_mark", "domain_payload", "domain_attrs_per_call")):
        return {"mark": twice}
    if shape.startswith(("int_sample", "float_sample", "group_sample")):
        return {"sample": twice}
    return {"push_pop": twice}  # ranges: with, decorated calls, push/pop, Profile's calls, the C rows


def error_check_ns(module: ModuleType, calls: int = 200_000, repeats: int = 20) -> float:
    """ns per ``PyErr_Occurred()`` called from C (thread CPU time, min of ``repeats`` loops of
    ``calls``): one lookup of the thread state, which a check for a tool's exception makes. Where
    libpython is a shared library (3.12+) it is a ``__tls_get_addr`` call.

    >>> 0 < error_check_ns(load(), 1000, 2) < 1000
    True
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        module.error_checks(calls)
        best = min(best, time.thread_time_ns() - start)
    return best / calls


def nvtx_cost() -> Dict[str, float]:
    """ns per NVTX call of each kind (``push_pop``, ``mark``, ``start_end``, ``sample``) with the
    tool this process's environment names, from C. Raises NotImplementedError where it cannot be
    built (no ``cc``, no NVTX headers)."""
    program = build_nvtx_cost()
    try:
        out = subprocess.run([program], capture_output=True, text=True, check=True, timeout=120).stdout
    except Exception as exc:  # a missing part of the floor: the column says so, the benchmarks go on
        raise NotImplementedError(_no_cost(exc)) from None
    return json.loads(out)


def build_nvtx_cost() -> str:
    """The path of :func:`nvtx_cost`'s program, built first if needed (cached in the temp directory per
    source). Raises NotImplementedError, as :func:`nvtx_cost` does, where it cannot be built (no ``cc``,
    no NVTX headers)."""
    try:
        return _build_cost()
    except Exception as exc:  # a missing part of the floor: the column says so, the benchmarks go on
        raise NotImplementedError(_no_cost(exc)) from None


def _build_cost() -> str:
    cache = _cache_dir(COST_SOURCE)
    program = os.path.join(cache, "nvtx_cost")
    if os.path.exists(program):
        return program
    include = load_build_ffi().nvtx_include_dir()
    os.makedirs(cache, exist_ok=True)
    partial = f"{program}.{os.getpid()}"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-I", include, COST_SOURCE,
                    "-o", partial, "-ldl"], check=True, capture_output=True, timeout=300)
    os.replace(partial, program)  # atomic: concurrent builders both end whole
    return program


def _no_cost(exc: Exception) -> str:
    return f"cannot measure NVTX's own cost: {type(exc).__name__}: {exc}"


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
