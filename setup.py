"""Only what setuptools needs beyond pyproject.toml: the CFFI module, the accelerator, the NVTX tools.

* ``nvtx_cffi._native._ffi`` (build_ffi.py): the CFFI shim, limited API (``_ffi.abi3.so``).
* ``nvtx_cffi._speedups`` (c/speedups/): the optional accelerator, built per
  CPython version with ``optional=True`` (a failed compile leaves the pure-Python path, never a
  failed install); not built on PyPy, before CPython 3.11, on free-threaded CPython
  (``Py_GIL_DISABLED``: it relies on the GIL) or with ``NVTX_CFFI_SPEEDUPS=0`` (build_ffi.py
  decides). Without it the wheel holds only abi3 code and is tagged ``cp311-abi3``.

The NVTX tools (the recorder and a null tool for benchmarks) are plain shared libraries that NVTX
``dlopen``s through ``NVTX_INJECTION64_PATH``; Python never imports them, so they are built as
extensions but named ``lib*.so`` and export only ``InitializeInjectionNvtx2`` and their own API.
The NVTXW writer backend (``libnvtx_writer_backend.so``, ``nvtxwGetInterface``) is built the same way.

Before anything compiles, build_ext compiles a two-line C file with the compiler it will use: without
one, the build stops with one line saying what to install (NO_COMPILER), the last line of the
build's output, not a compiler error many lines up.
"""
import glob
import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError, ExecError, PlatformError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_ffi import (  # noqa: E402
    C_FLAGS,
    RECORDING_FORMAT,
    SPEEDUPS_C_FLAGS,
    build_speedups,
    nvtx_include_dir,
    package_version,
    wheel_limited_api,
)

# The source lists of what setup.py builds (c/README.md; the CFFI module's is build_ffi.SOURCES).
# Tests that build a tool of their own load this file for them (setup() runs only as __main__).
SPEEDUPS_SOURCES = [
    # c/speedups/: nvtx_cffi._speedups, the optional accelerator (with c/shim/'s nvtx_api.h, nvtx_shim.h
    # and c/recorder/'s nvtxrec_format.h)
    "c/speedups/speedups.c", "c/speedups/accel.c", "c/speedups/accel_caches.c", "c/speedups/accel_payloads.c",
    "c/speedups/accel_first_sight.c", "c/speedups/accel_annotate.c", "c/speedups/accel_annotate_call.c",
    "c/speedups/accel_ranges.c", "c/speedups/accel_domain.c", "c/speedups/accel_function.c",
    "c/speedups/accel_types.c",
    "c/speedups/profiler.c", "c/speedups/profiler_threads.c", "c/speedups/profiler_api.c",
    "c/speedups/counters_speedups.c",
]
RECORDER_SOURCES = [
    # c/recorder/: libnvtx_recorder, the recording tool, with the records of NVTX's extensions
    "c/recorder/recorder.c", "c/recorder/recorder_buffers.c", "c/recorder/recorder_pool.c",
    "c/recorder/recorder_file.c", "c/recorder/recorder_registry.c", "c/recorder/recorder_lifecycle.c",
    "c/recorder/recorder_ext.c",
]
WRITER_BACKEND_SOURCES = [
    # c/recorder/: libnvtx_writer_backend, an NVTXW backend writing the recorder's format
    "c/recorder/writer_backend.c", "c/recorder/writer_records.c", "c/recorder/writer_events.c",
    "c/recorder/writer_ext.c", "c/recorder/recorder_ext.c",
]
NULL_TOOL_SOURCES = [
    # c/tools/: libnvtx_null_tool, a tool that does nothing (benchmarks measure NVTX's own cost with it)
    "c/tools/null_tool.c",
]

NVTX_TOOLS = {
    "nvtx_cffi.libnvtx_recorder": RECORDER_SOURCES,
    "nvtx_cffi.libnvtx_null_tool": NULL_TOOL_SOURCES,
}
# the writer backend (nvtx_cffi.writer.backend_path()) needs the NVTXW headers (include/nvtxw3/),
# which nvidia-nvtx 13.0.x lacks
if os.path.isfile(os.path.join(nvtx_include_dir(), "nvtxw3", "nvtxw3_event_helpers.h")):
    NVTX_TOOLS["nvtx_cffi.libnvtx_writer_backend"] = WRITER_BACKEND_SOURCES


NO_COMPILER = ("nvtx-cffi: building needs a C compiler and the C library headers, and {cc} did not compile "
               "a test file: apt-get install gcc libc6-dev (Debian/Ubuntu), dnf install gcc (Fedora/RHEL), "
               "apk add build-base (Alpine), or set CC to one; Linux only (macOS, Windows: not supported)")


def check_compiler(compiler) -> None:
    """Compile a trivial C file (it includes <stdlib.h>) with ``compiler``; PlatformError(NO_COMPILER) if it fails."""
    cc = (getattr(compiler, "compiler_so", None) or ["the C compiler"])[0]
    with tempfile.TemporaryDirectory(prefix="nvtx-cffi-cc-") as tmp:
        source = os.path.join(tmp, "cc_check.c")
        with open(source, "w") as f:
            f.write("#include <stdlib.h>\nint nvtxcffi_cc_check(void) { return EXIT_SUCCESS; }\n")
        try:
            compiler.compile([source], output_dir=tmp)
        except (CompileError, ExecError, OSError):
            raise PlatformError(NO_COMPILER.format(cc=repr(cc))) from None


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

    def build_extensions(self):
        check_compiler(self.compiler)  # self.compiler: the one every extension is built with
        super().build_extensions()

    def run(self):
        if not speedups:  # an accelerator an earlier build left in build/ must not ride along
            for stale in glob.glob(os.path.join(self.build_lib, "nvtx_cffi", "_speedups*")):
                os.remove(stale)
        if "nvtx_cffi.libnvtx_writer_backend" not in NVTX_TOOLS:  # nor a writer backend built with headers
            for stale in glob.glob(os.path.join(self.build_lib, "nvtx_cffi", "libnvtx_writer_backend*")):
                os.remove(stale)
        super().run()


tools = [
    Extension(
        name,
        sources=sources,
        # a header change rebuilds the tool too (its files share their folder's headers)
        depends=sources + sorted(glob.glob(os.path.join(os.path.dirname(sources[0]), "*.h"))),
        include_dirs=[nvtx_include_dir(), os.path.dirname(sources[0])],  # the tool's own folder
        extra_compile_args=C_FLAGS,
        libraries=["pthread"],
    )
    for name, sources in NVTX_TOOLS.items()
]

speedups = [
    Extension(
        "nvtx_cffi._speedups",
        sources=SPEEDUPS_SOURCES,
        depends=SPEEDUPS_SOURCES + sorted(glob.glob("c/speedups/*.h"))
        + ["c/shim/nvtx_api.h", "c/shim/nvtx_shim.h", RECORDING_FORMAT],
        include_dirs=[nvtx_include_dir(), "c/speedups", "c/shim", "c/recorder"],
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

if __name__ == "__main__":
    setup(
        cffi_modules=["build_ffi.py:ffi"],
        ext_modules=tools + speedups,
        cmdclass={"build_ext": BuildExtWithNvtxTools},
        options=options,
    )
