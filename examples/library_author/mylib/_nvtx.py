"""nvtx-cffi where it is installed (Linux), a do-nothing stand-in elsewhere.

The library declares ``nvtx-cffi; sys_platform == 'linux'`` in its dependencies; on a platform
without it, the same calls run and do nothing.
"""
try:
    import nvtx_cffi as nvtx
except ImportError:  # no nvtx-cffi on this platform: the same calls, doing nothing
    import contextlib
    import types

    class _annotate(contextlib.ContextDecorator):  # @annotate(...) and with annotate(...):
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def _nothing(*args, **kwargs):
        return None

    nvtx = types.SimpleNamespace(annotate=_annotate, mark=_nothing, push_range=_nothing, pop_range=_nothing)

__all__ = ["nvtx"]
