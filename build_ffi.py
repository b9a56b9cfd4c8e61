"""Build nvtx-cffi's C shim in CFFI API mode: ``nvtx_cffi._native._ffi`` exposing ``ffi, lib``.

Switches (environment):
  NVTX_CFFI_INCLUDE_DIR  directory holding ``nvtx3/`` (default: the ``nvidia-nvtx`` package's)
  NVTX_CFFI_CFLAGS       extra compiler flags, e.g. ``-fsanitize=address`` for a sanitizer build
"""
import glob
import os
import re
import shlex

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
EXTRA_CFLAGS = shlex.split(os.environ.get("NVTX_CFFI_CFLAGS", ""))
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-O2", *EXTRA_CFLAGS]


def nvtx_include_dir() -> str:
    """Directory that contains ``nvtx3/nvToolsExt.h``, found in the installed nvidia-nvtx package."""
    override = os.environ.get("NVTX_CFFI_INCLUDE_DIR")
    if override:
        return override
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec else []
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "*", "include", "nvtx3", "nvToolsExt.h")))
        if hits:
            return os.path.dirname(os.path.dirname(hits[-1]))
    msg = "NVTX headers not found: install nvidia-nvtx or set NVTX_CFFI_INCLUDE_DIR"
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
SOURCES = [os.path.join("c", name) for name in ("nvtx_shim.c", "payload.c", "trace_decode.c")]
DEPENDS = SOURCES + [os.path.join("c", name) for name in ("nvtx_shim.h", "nvtx_api.h", "keep_gil.h", "gil_release.h", "cuda.h", "payload.h",
                                                          "shim_internal.h", "trace_decode.h")]

#: The optional accelerator (a plain CPython extension, not CFFI; setup.py builds it when it can).
SPEEDUPS_SOURCES = [os.path.join("c", name) for name in ("speedups.c", "accel.c", "profiler.c", "counters_speedups.c")]
SPEEDUPS_DEPENDS = SPEEDUPS_SOURCES + [os.path.join("c", name) for name in ("speedups.h", "nvtx_api.h", "nvtx_shim.h")]

ffi = FFI()
ffi.cdef(_cdef_from_header(_read("c/nvtx_shim.h")))
ffi.cdef(_cdef_from_header(_read("c/payload.h")))  # counters, extended payloads (c/payload.c)
# the tracer's bulk helpers (record decoding, push/pop pairing): nvtx_cffi._trace's fast path
ffi.cdef(_cdef_from_header(_read("c/trace_decode.h")))
ffi.set_source(
    "nvtx_cffi._native._ffi",
    '#include "nvtx_shim.h"\n#include "payload.h"\n#include "keep_gil.h"\n#include "trace_decode.h"\n',
    sources=SOURCES,
    include_dirs=[nvtx_include_dir(), os.path.join(HERE, "c")],
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
