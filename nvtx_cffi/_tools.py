"""Where the NVTX tools shipped in the package are: paths for ``NVTX_INJECTION64_PATH``.

Only ``os``: the paths are asked for by programs that set up a child's environment, and by the
package itself (the recorder, ``python -m nvtx_cffi trace``, the tests), before any NVTX call.
"""
from __future__ import annotations

import os

__all__ = ["null_tool_path", "recorder_path", "tool_path"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

NULL_TOOL = "libnvtx_null_tool.so"
RECORDER = "libnvtx_recorder.so"


def tool_path(filename: str) -> str:
    """The absolute path of ``filename`` in the installed package; FileNotFoundError if missing."""
    path = os.path.join(_PACKAGE_DIR, filename)
    if not os.path.isfile(path):
        msg = (f"{filename} is missing from nvtx-cffi's installation ({_PACKAGE_DIR}): reinstall nvtx-cffi "
               "(`pip install --force-reinstall nvtx-cffi`; building needs a C compiler)")
        raise FileNotFoundError(2, msg, path)
    return path


def null_tool_path() -> str:
    """The absolute path of ``libnvtx_null_tool.so``, the bundled NVTX tool that does nothing.

    Name it in ``NVTX_INJECTION64_PATH`` to measure what annotations cost with a tool attached
    (the tool's own work left out), or to make annotations active without recording anything:

    >>> import os, subprocess, sys, nvtx_cffi
    >>> env = {**os.environ, "NVTX_INJECTION64_PATH": nvtx_cffi.null_tool_path()}
    >>> code = "import nvtx_cffi as nvtx; nvtx.mark('x'); print(nvtx.tool_attached())"
    >>> subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    'True\\n'

    FileNotFoundError (naming the file) when the installation lacks it.
    """
    return tool_path(NULL_TOOL)


def recorder_path() -> str:
    """The absolute path of ``libnvtx_recorder.so``, the bundled NVTX tool that records to files.

    Name it in ``NVTX_INJECTION64_PATH`` and a directory in ``NVTX_CFFI_RECORD_DIR`` (what
    :func:`nvtx_cffi.recorder.environment` returns), and :func:`nvtx_cffi.recorder.read` reads
    what the process recorded:

    >>> import os, subprocess, sys, tempfile, nvtx_cffi
    >>> from nvtx_cffi import recorder
    >>> record_dir = tempfile.mkdtemp()
    >>> env = {**os.environ, "NVTX_INJECTION64_PATH": nvtx_cffi.recorder_path(),
    ...        "NVTX_CFFI_RECORD_DIR": record_dir}
    >>> _ = subprocess.run([sys.executable, "-c", "import nvtx_cffi as nvtx; nvtx.mark('x')"], env=env, check=True)
    >>> [e.message for e in recorder.read(record_dir).events if e.kind == "mark"]
    ['x']

    FileNotFoundError (naming the file) when the installation lacks it.
    """
    return tool_path(RECORDER)
