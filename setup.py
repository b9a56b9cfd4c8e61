"""Only what setuptools needs beyond pyproject.toml: the CFFI module and the two NVTX tools.

The NVTX tools (the recorder and a null tool for benchmarks) are plain shared libraries that NVTX
``dlopen``s through ``NVTX_INJECTION64_PATH``; Python never imports them, so they are built as
extensions but named ``lib*.so`` and export only ``InitializeInjectionNvtx2`` and their own API.
"""
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_ffi import C_FLAGS, nvtx_include_dir  # noqa: E402

NVTX_TOOLS = {
    "nvtx_cffi.libnvtx_recorder": ["c/recorder.c"],
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

setup(
    cffi_modules=["build_ffi.py:ffi"],
    ext_modules=tools,
    cmdclass={"build_ext": BuildExtWithNvtxTools},
)
