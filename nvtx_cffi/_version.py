"""The package version: one place, read by pyproject.toml (setuptools ``attr:``), build_ffi.py
(stamped into the compiled module) and ``nvtx_cffi.__version__``."""
__version__ = "0.2.0"
