"""Build nvtx-cffi's C shim in CFFI API mode: ``nvtx_cffi._native._ffi`` exposing ``ffi, lib``.

Switches (environment):
  NVTX_CFFI_INCLUDE_DIR  directory holding ``nvtx3/`` (default: the ``nvidia-nvtx`` package's)
  NVTX_CFFI_CFLAGS       extra compiler flags, e.g. ``-fsanitize=address`` for a sanitizer build
  NVTX_CFFI_SPEEDUPS     0/false/no/off: no accelerator (setup.py; 1/true/yes/on, unset or empty: build it)
"""
import glob
import os
import re
import shlex
import sys
import sysconfig
from typing import Optional

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
EXTRA_CFLAGS = shlex.split(os.environ.get("NVTX_CFFI_CFLAGS", ""))
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-O2", *EXTRA_CFLAGS]
#: The accelerator is optional: a CPython API it uses that this CPython lacks must fail its compile
#: (and leave the pure-Python path), not build a module that cannot load.
SPEEDUPS_C_FLAGS = [*C_FLAGS, "-Werror=implicit-function-declaration"]
#: Oldest CPython of an abi3 wheel (the limited API version the shim is tagged with).
ABI3_FLOOR = (3, 11)


def build_switch(name: str, default: bool) -> bool:
    """A boolean build switch: 1/true/yes/on or 0/false/no/off (any case); unset or empty: ``default``.
    Anything else stops the build: a misspelt switch must not build what it meant to leave out."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    msg = f"{name}={raw!r} is not a boolean: use 1/true/yes/on or 0/false/no/off"
    raise ValueError(msg)


def build_speedups() -> bool:
    """Build the accelerator? CPython 3.11+ with a GIL (it uses 3.11's C API and relies on the GIL),
    unless NVTX_CFFI_SPEEDUPS is off."""
    if (sys.implementation.name != "cpython" or sys.version_info < ABI3_FLOOR
            or sysconfig.get_config_var("Py_GIL_DISABLED")):
        return False
    return build_switch("NVTX_CFFI_SPEEDUPS", True)


def wheel_limited_api(speedups: bool) -> Optional[str]:
    """bdist_wheel's ``py_limited_api`` (``"cp311"``: the wheel is tagged cp311-abi3), or None for a
    version-specific wheel: with the accelerator inside, on PyPy, on a CPython older than the floor
    (a cp311 tag would not install on it), and on free-threaded CPython before 3.15 (which has no
    limited API)."""
    if speedups or sys.implementation.name != "cpython" or sys.version_info < ABI3_FLOOR:
        return None
    if sysconfig.get_config_var("Py_GIL_DISABLED") and sys.version_info < (3, 15):
        return None
    return "cp%d%d" % ABI3_FLOOR


#: Headers the C code includes (core, and the payload and counters extensions): a folder without
#: them (nvidia-nvtx-cu12's, which PyTorch's CUDA 12 wheels install beside ours) will not do.
NEEDED_HEADERS = ("nvToolsExt.h", "nvToolsExtPayload.h", "nvToolsExtCounters.h")


def _has_needed_headers(include: str) -> bool:
    return all(os.path.isfile(os.path.join(include, "nvtx3", name)) for name in NEEDED_HEADERS)


def nvtx_include_dir() -> str:
    """Directory that contains ``nvtx3/`` with NEEDED_HEADERS: the ``nvidia-nvtx`` distribution's own
    (the build requirement, whose header layout the shim is written against), else any installed
    ``nvidia/*/include`` that has them all."""
    override = os.environ.get("NVTX_CFFI_INCLUDE_DIR")
    if override:
        return override
    import importlib.metadata
    import importlib.util

    try:
        files = importlib.metadata.distribution("nvidia-nvtx").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "nvToolsExt.h" and f.parent.name == "nvtx3":
            include = os.path.dirname(os.path.dirname(str(f.locate())))
            if _has_needed_headers(include):
                return include
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec else []
    for root in roots:
        for hit in sorted(glob.glob(os.path.join(root, "*", "include", "nvtx3", "nvToolsExt.h")), reverse=True):
            include = os.path.dirname(os.path.dirname(hit))
            if _has_needed_headers(include):
                return include
    msg = ("NVTX headers not found (nvtx3/ with " + ", ".join(NEEDED_HEADERS) +
           "): install nvidia-nvtx>=13,<14 or set NVTX_CFFI_INCLUDE_DIR")
    raise RuntimeError(msg)


def _read(path: str) -> str:
    with open(os.path.join(HERE, path), encoding="utf-8") as f:
        return f.read()


def package_version() -> str:
    """``__version__`` of nvtx_cffi/_version.py, stamped into the module (checked at import)."""
    match = re.search(r'^__version__ = "([^"]+)"$', _read("nvtx_cffi/_version.py"), re.MULTILINE)
    if not match:
        msg = "nvtx_cffi/_version.py has no __version__ line"
        raise RuntimeError(msg)
    return match.group(1)


def _cdef_from_header(text: str) -> str:
    # The header is the C API and the cdef at once. cdef understands only "#define NAME <int>"
    # among preprocessor lines, so keep those (they become lib constants) and drop the rest.
    integer_define = re.compile(r"#define \w+ -?\d+$")
    return "\n".join(
        line for line in text.splitlines() if not line.startswith("#") or integer_define.match(line)
    )


#: C files compiled into the module, and what a rebuild depends on (asv's stock-CFFI twin reuses these).
SOURCES = [
    # c/shim/: the abi3 CFFI core nvtx_cffi._native._ffi (NVTX calls, payloads, tracer helpers, NVTXW client)
    "c/shim/nvtx_shim.c", "c/shim/payload.c", "c/shim/trace_decode.c", "c/shim/writer.c",
]
DEPENDS = SOURCES + sorted(os.path.relpath(header, HERE) for header in glob.glob(os.path.join(HERE, "c", "shim", "*.h")))
#: Folders of the headers the module includes: its own, and those of headers it shares with others.
INCLUDE_DIRS = [os.path.join(HERE, "c", "shim")]

ffi = FFI()
ffi.cdef(_cdef_from_header(_read("c/shim/nvtx_shim.h")))
ffi.cdef(_cdef_from_header(_read("c/shim/payload.h")))  # counters, extended payloads (c/shim/payload.c)
# the tracer's bulk helpers (record decoding, push/pop pairing): nvtx_cffi._trace's fast path
ffi.cdef(_cdef_from_header(_read("c/shim/trace_decode.h")))
ffi.cdef(_cdef_from_header(_read("c/shim/writer.h")))  # NVTXW client (c/shim/writer.c): nvtx_cffi.writer
ffi.set_source(
    "nvtx_cffi._native._ffi",
    '#include "nvtx_shim.h"\n#include "payload.h"\n#include "keep_gil.h"\n#include "trace_decode.h"\n#include "writer.h"\n',
    sources=SOURCES,
    include_dirs=[nvtx_include_dir(), *INCLUDE_DIRS],
    extra_compile_args=C_FLAGS,
    libraries=["dl", "pthread"],
    define_macros=[("NVTXCFFI_VERSION", '"%s"' % package_version())],
    depends=DEPENDS,
    # The shim uses nothing of CPython's beyond cffi's own wrappers: one _ffi.abi3.so serves every
    # CPython 3.x (the version-specific fast paths live in nvtx_cffi._speedups). PyPy ignores it.
    py_limited_api=True,
)

if __name__ == "__main__":
    ffi.compile(verbose=True)
