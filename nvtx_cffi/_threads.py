"""Thread names: NVTX tools show threads by OS id; give them their Python names.

Installed once when NVTX's first call finds a tool attached (:func:`install`), and never on a hot path:

* threads that already exist (the main thread included) are named at once, by ``native_id``;
* every ``threading.Thread`` started later names itself first thing on its own OS thread
  (``Thread._bootstrap_inner`` is wrapped), so ``Thread-1 (worker)`` and ``ThreadPoolExecutor``
  workers carry their names from their first event;
* ``thread.name = ...`` (and ``setName``) re-names it in NVTX: the ``name`` property is wrapped;
* in a child made by ``os.fork()`` the thread that forked (the child's only thread, a new OS
  thread id) is named again (``os.register_at_fork``).

Ranges and marks pay nothing for this: no check runs per event. Threads that Python did not start
(C threads that call into Python) keep their OS names.

>>> import threading, nvtx_cffi
>>> t = threading.Thread(target=print, name="loader")  # shown as "loader" in Nsight Systems
"""
from __future__ import annotations

import _thread
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Optional

from . import _state
from ._locks import hold_across_fork
from ._native import lib
from ._validate import to_utf8

__all__ = ["install", "name_current_thread", "name_thread"]

_installed = False
_install_lock = _thread.allocate_lock()
hold_across_fork(_install_lock)


def _encode(name: object) -> Optional[bytes]:
    try:
        return to_utf8(str(name), "thread name")
    except ValueError:
        return None  # a name NVTX cannot carry (NUL, lone surrogate) is skipped, never an error


def name_current_thread(name: str) -> None:
    """Name the calling OS thread in NVTX (what the hooks do for ``threading`` threads).

    >>> name_current_thread("io-loop")
    """
    data = _encode(name)
    if _state.active() and data is not None:
        lib.nvtxcffi_name_os_thread(lib.nvtxcffi_os_thread_id(), data)


def name_thread(thread: threading.Thread) -> bool:
    """Name ``thread`` in NVTX by its OS id; False when it has none yet (not started)."""
    import threading  # (a Thread exists: threading is imported; not at nvtx_cffi's import)

    native_id = getattr(thread, "native_id", None)
    data = _encode(thread.name)
    if not _state.active() or native_id is None or data is None:
        return False
    if thread is threading.current_thread():
        # The OS's own word: after os.fork() (3.9-3.11) threading keeps the parent's native_id for
        # the thread that forked, also in a process forked before this module was imported.
        native_id = lib.nvtxcffi_os_thread_id()
    elif thread is threading.main_thread():
        # Named from another thread: the main thread is the process's initial thread, whose Linux
        # thread id is the process id (also the thread that forked, in a child; threading may
        # still hold the parent's id then, even when the fork came before this module's import).
        native_id = os.getpid() if sys.platform.startswith("linux") else (_forked_tid or native_id)
    lib.nvtxcffi_name_os_thread(native_id, data)
    return True


def install() -> bool:
    """Hook ``threading`` once (only when a tool is attached). Returns whether hooks are in place."""
    global _installed
    if not _state.active():
        return False
    import threading  # (here: importing nvtx_cffi does not import threading)

    with _install_lock:
        if _installed:
            return True
        bootstrap = getattr(threading.Thread, "_bootstrap_inner", None)
        name_property = threading.Thread.__dict__.get("name")
        if bootstrap is not None:
            def _bootstrap_inner(self):
                # First thing on the new OS thread: its name, before any event it may emit.
                name_current_thread(self.name)
                return bootstrap(self)

            _bootstrap_inner.__wrapped__ = bootstrap
            threading.Thread._bootstrap_inner = _bootstrap_inner
        if isinstance(name_property, property) and name_property.fset is not None:
            def _set_name(self, value):
                name_property.fset(self, value)
                name_thread(self)  # started threads only; a new one names itself at start

            threading.Thread.name = property(name_property.fget, _set_name, name_property.fdel,
                                             name_property.__doc__)
        for thread in threading.enumerate():
            name_thread(thread)
        if hasattr(os, "register_at_fork"):
            # Registered after threading's own after-fork hook (threading is imported by now, and
            # hooks run in the order of registration): current_thread() is the child's then.
            os.register_at_fork(after_in_child=_name_forked_thread)
        _installed = True
        return True


#: In a child made by os.fork(): the OS id of its main thread (the thread that forked), else None.
_forked_tid: Optional[int] = None


def _after_fork_in_child() -> None:
    """The thread that forked is the child's main thread, under a new OS id: remember the id
    (threading keeps the parent's ``native_id`` on 3.9-3.11)."""
    global _forked_tid
    try:
        _forked_tid = lib.nvtxcffi_os_thread_id()
    except Exception:  # noqa: BLE001 - never fail a fork over a thread name
        pass


def _name_forked_thread() -> None:
    """In a forked child, once the hooks are installed: name the thread that forked (the child's
    main thread, under its new OS id). Registered by :func:`install`, after threading's hook."""
    try:
        import threading

        name_current_thread(threading.current_thread().name)
    except Exception:  # noqa: BLE001 - never fail a fork over a thread name
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
