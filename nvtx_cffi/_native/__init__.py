"""The compiled C shim (private). Built by ``build_ffi.py``; see ``c/shim/nvtx_shim.h`` for its API.

Importing it fails with a message that says what to do, never a bare ``ModuleNotFoundError``:
the usual cause is a source checkout on ``sys.path`` (Python run from the repository root puts
``./nvtx_cffi`` ahead of the installed package), and the other is a compiled module left from
another version of the Python files.
"""
import os

from .._version import __version__

__all__ = ["ffi", "lib"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source_tree_message() -> str:
    root = os.path.dirname(_PACKAGE_DIR)
    if os.path.exists(os.path.join(root, "build_ffi.py")):
        return (
            f"nvtx_cffi is being imported from its source tree ({_PACKAGE_DIR}), which has no compiled "
            "C module. You should not import nvtx_cffi from its source directory: run Python from "
            "another directory to use the installed package, or build the source tree in place with "
            f"`pip install -e {root}`."
        )
    return (
        f"nvtx_cffi's compiled C module is missing from {_PACKAGE_DIR}: reinstall nvtx-cffi "
        "(`pip install --force-reinstall nvtx-cffi`; building needs a C compiler)."
    )


try:
    from ._ffi import ffi, lib
except ModuleNotFoundError as exc:
    if exc.name != __name__ + "._ffi":
        raise
    raise ImportError(_source_tree_message()) from None

_built_for = ffi.string(lib.nvtxcffi_build_version()).decode("ascii")
if _built_for != __version__:
    msg = (
        f"nvtx_cffi's compiled C module was built for version {_built_for}, but its Python files are "
        f"version {__version__} ({_PACKAGE_DIR}): rebuild it (`pip install .` or `pip install -e .` "
        "in the source tree)."
    )
    raise ImportError(msg)
