"""Only what setuptools needs beyond pyproject.toml: the CFFI module, the accelerator, the NVTX tools.

* ``nvtx_cffi._native._ffi`` (build_ffi.py): the CFFI shim, limited API (``_ffi.abi3.so``).
* ``nvtx_cffi._speedups`` (c/speedups.c, accel.c, profiler.c): the optional accelerator, built per
  CPython version with ``optional=True`` (a failed compile leaves the pure-Python path, never a
  failed install); not built on PyPy, before CPython 3.11, on free-threaded CPython
  (``Py_GIL_DISABLED``: it relies on the GIL) or with ``NVTX_CFFI_SPEEDUPS=0`` (build_ffi.py
  decides). Without it the wheel holds only abi3 code and is tagged ``cp311-abi3``.

The NVTX tools (the recorder and a null tool for benchmarks) are plain shared libraries that NVTX
``dlopen``s through ``NVTX_INJECTION64_PATH``; Python never imports them, so they are built as
extensions but named ``lib*.so`` and export only ``InitializeInjectionNvtx2`` and their own API.
"""
import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_ffi import (  # noqa: E402
    C_FLAGS,
    SPEEDUPS_C_FLAGS,
    SPEEDUPS_DEPENDS,
    SPEEDUPS_SOURCES,
    build_speedups,
    nvtx_include_dir,
    package_version,
    wheel_limited_api,
)

NVTX_TOOLS = {
    "nvtx_cffi.libnvtx_recorder": ["c/recorder.c", "c/recorder_ext.c"],
    "nvtx_cffi.libnvtx_null_tool": ["c/null_tool.c"],
}


class BuildExtWithNvtxTools(build_ext):
    def get_ext_filename(self, fullname):
        # build_ext asks with the full dotted name (copying in place) and with only its last
        # component (get_ext_fullpath, when building): both must name a plain lib*.so.
        if fullname in NVTX_TOOLS or fullname in {n.rsplit(".", 1)[-1] for n in NVTX_TOOLS}:
            return os.path.join(*fullname.split(".")) + ".so"
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        if ext.name in NVTX_TOOLS:
            return []  # no PyInit_*: these are not Python modules
        return super().get_export_symbols(ext)

    def run(self):
        if not speedups:  # an accelerator an earlier build left in build/ must not ride along
            for stale in glob.glob(os.path.join(self.build_lib, "nvtx_cffi", "_speedups*")):
                os.remove(stale)
        super().run()


tools = [
    Extension(
        name,
        sources=sources,
        include_dirs=[nvtx_include_dir(), "c"],
        extra_compile_args=C_FLAGS,
        libraries=["pthread"],
    )
    for name, sources in NVTX_TOOLS.items()
]

speedups = [
    Extension(
        "nvtx_cffi._speedups",
        sources=SPEEDUPS_SOURCES,
        depends=SPEEDUPS_DEPENDS,
        include_dirs=[nvtx_include_dir(), "c"],
        extra_compile_args=SPEEDUPS_C_FLAGS,
        libraries=["pthread"],
        define_macros=[("NVTXCFFI_VERSION", '"%s"' % package_version())],
        optional=True,  # a compile failure leaves the pure-Python path, not a failed install
    )
] if build_speedups() else []

options = {}
limited_api = wheel_limited_api(bool(speedups))
if limited_api:
    options["bdist_wheel"] = {"py_limited_api": limited_api}  # nothing version-specific inside

setup(
    cffi_modules=["build_ffi.py:ffi"],
    ext_modules=tools + speedups,
    cmdclass={"build_ext": BuildExtWithNvtxTools},
    options=options,
)
