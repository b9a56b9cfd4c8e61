"""The C shim built by stock CFFI (no ``c/shim/keep_gil.h``): the baseline for "GIL kept".

nvtx-cffi's wrappers keep the GIL and skip cffi's errno save/restore around each C call. To show
what that buys, this builds the very same ``c/shim/nvtx_shim.c`` and cdef as a second, throw-away CFFI
module without that header (so each call releases and re-takes the GIL, as stock CFFI does) and
caches it in the temp directory. Benchmarks only: it is never part of the package.

>>> load().lib.nvtxcffi_gil_held() in (0, -1)   # 0: the GIL is released during the call
True
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
from types import ModuleType

# absolute: doctest imports this file as a top-level module (cd asv_bench; python -m doctest benchmarks/stock_cffi.py)
from benchmarks.building import build_and_import, load_build_ffi, repo_root

__all__ = ["load"]

MODULE = "_nvtxcffi_stock"

# The GIL probe the cdef declares, without keep_gil.h's macro overrides around it.
_PREAMBLE = """
#include "nvtx_shim.h"
#ifndef PYPY_VERSION
PyAPI_FUNC(int) PyGILState_Check(void);
#endif
int nvtxcffi_gil_held(void)
{
#ifdef PYPY_VERSION
    return -1;
#else
    return PyGILState_Check();
#endif
}
#include "gil_release.h" /* c/shim/trace_decode.c, compiled here too, releases the GIL in bulk calls */
/* c/shim/shim_internal.h: stock wrappers release the GIL around the call, so no Python error state is read */
int nvtxcffi_tool_raised(void) { return 0; }
void *nvtxcffi_lock_wait_begin(void) { return 0; }
void nvtxcffi_lock_wait_end(void *state) { (void)state; }
"""


def load() -> ModuleType:
    """Import the stock-CFFI build of the shim, building it first if needed.

    Raises NotImplementedError (asv's "skip") when it cannot be built here.
    """
    return build_and_import(MODULE, _build, "the stock CFFI shim")


def _build() -> str:
    root = repo_root()
    build_ffi = load_build_ffi()  # the project's own sources, cdef reader and header finder
    sources = [os.path.join(root, path) for path in build_ffi.SOURCES]
    digest = hashlib.sha256(_PREAMBLE.encode())
    for source in [os.path.join(root, path) for path in build_ffi.DEPENDS]:
        with open(source, "rb") as f:
            digest.update(f.read())
    digest.update(sys.version.encode() + sys.executable.encode())
    cache = os.path.join(tempfile.gettempdir(), f"nvtx-cffi-stock-{digest.hexdigest()[:16]}")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(cache, MODULE + suffix)
    if os.path.exists(target):
        return target

    from cffi import FFI

    ffi = FFI()
    with open(os.path.join(root, "c", "shim", "nvtx_shim.h"), encoding="utf-8") as f:
        ffi.cdef(build_ffi._cdef_from_header(f.read()))
    ffi.set_source(MODULE, _PREAMBLE, sources=sources,
                   include_dirs=[build_ffi.nvtx_include_dir(), *build_ffi.INCLUDE_DIRS],
                   extra_compile_args=build_ffi.C_FLAGS, libraries=["dl", "pthread"],
                   define_macros=[("NVTXCFFI_VERSION", '"%s"' % build_ffi.package_version())],
                   py_limited_api=False)
    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix="build-", dir=cache)
    try:
        built = ffi.compile(tmpdir=work)
        if not os.path.exists(built):  # some cffi versions return a relative name
            built = glob.glob(os.path.join(work, "**", MODULE + "*"), recursive=True)[0]
        os.replace(built, target)  # atomic: concurrent builders both end with a whole file
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target
