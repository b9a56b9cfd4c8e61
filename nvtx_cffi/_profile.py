"""``Profile``: one NVTX range per Python (and C) function call, without touching the code.

Compatible with nvtx 0.2.x's ``nvtx.Profile``: domain ``"nvtx.py"``, colour blue, messages
``"file.py:lineno(name)"`` with ``linenos`` (basename of the file, the function's first line, its
``co_name``) or the plain name without; C functions appear under their ``__name__``.

How calls are seen, picked once per interpreter:

* Python 3.12+ (CPython): :mod:`sys.monitoring` (PEP 669) under a tool id of its own. It covers every
  thread, including threads that were already running at :meth:`Profile.enable`. Code that the
  filters reject is switched off for good at its first call (``sys.monitoring.DISABLE``), so
  excluded code runs at full speed afterwards.
* Python 3.11 and PyPy: ``sys.setprofile`` for the calling thread and ``threading.setprofile``
  for threads started afterwards. Threads already running at ``enable()`` are not profiled (Python
  offers no way to install a profile function on another running thread).

On CPython the callbacks are C functions (``c/speedups/profiler.c``: builtin functions registered with
sys.monitoring, or a ``PyEval_SetProfile`` function), with the per-code cache in C; Python only
decides once per code object (filters, message, slot). On 3.11 that is a profile function, which
switches the interpreter to its slower tracing mode (the PEP 523 frame-evaluation hook that avoided
it needed CPython's internal headers and is gone). PyPy, and CPython without the optional
accelerator ``nvtx_cffi._speedups``, run the same logic in Python. :data:`ENGINE` and
:attr:`Profile.engine` say which is in use.

Per code object the message is built and registered once and its prepared C attribute slot kept,
so a call costs a dict lookup and one C call (nvtx formats and registers the string on every
call). Generators and coroutines close their range at each ``yield``/``await`` and reopen it on
resumption; exceptions close it on the way out, so ranges stay balanced on every thread.

Without an NVTX tool (or with ``NVTX_DISABLE``), ``enable()`` and ``disable()`` do nothing.
"""
from __future__ import annotations

import _thread
import os
import sys
import warnings

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Dict, Iterable, List, Optional, Sequence, Set, Union

    Patterns = Union[str, Iterable[str], None]

from . import _state
from ._domain import OP_PUSH, get_domain
from ._accel import speedups as _speedups
from ._native import lib
from ._validate import as_index, describe_int

__all__ = ["Profile", "MONITORING", "C_ENGINE", "ENGINE"]

#: The engine in use: ``sys.monitoring`` (CPython 3.12+) rather than ``sys.setprofile``.
MONITORING: bool = hasattr(sys, "monitoring") and sys.implementation.name == "cpython"

#: Callbacks in C (CPython; ``c/speedups/profiler.c``) rather than Python functions (PyPy). Tests may set it
#: to False before ``enable()`` to run the Python engine.
C_ENGINE: bool = _speedups is not None

#: What ``enable()`` uses by default (with ``annotate_cfuncs``): ``"c-monitoring"``, ``"c-setprofile"``,
#: ``"monitoring"`` or ``"setprofile"``.
ENGINE: str = ("c-" if C_ENGINE else "") + ("monitoring" if MONITORING else "setprofile")

#: nvtx's domain and colour for automatic annotations (kept for drop-in compatibility).
DEFAULT_DOMAIN = "nvtx.py"
_COLOR = 0x0000FF

#: Largest ``max_depth`` (the C engine counts depth in a C int).
MAX_DEPTH = (1 << 31) - 1

#: Code objects whose decision is cached; beyond it new code takes the slow path on every call.
MAX_CACHED_CODES = 1 << 18

#: Tool ids tried in order (3 and 4 are free by convention; 2 is PROFILER_ID, used by cProfile).
_TOOL_IDS = (4, 3)
_TOOL_NAME = "nvtx_cffi.Profile"

# The profiler never annotates itself.
_OWN_FILES = frozenset(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    for name in ("_profile.py", "_profile_cli.py")
)

_C_TYPES = (type(len), type(list.append))  # builtin_function_or_method, method_descriptor

_enabled_lock = _thread.allocate_lock()
_enabled_profile: Optional["Profile"] = None


def _patterns(value: Patterns, argument: str) -> tuple:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    try:
        items = tuple(items)
    except TypeError:
        msg = f"{argument} must be a str, an iterable of str or None, not {type(value).__name__}"
        raise TypeError(msg) from None
    for item in items:
        if not isinstance(item, str):
            msg = f"{argument} must contain str patterns, not {type(item).__name__}"
            raise TypeError(msg)
        if not item:
            msg = f"{argument} must not contain an empty pattern"
            raise ValueError(msg)
    return items


class _Filter:
    """Which code objects get ranges: include/exclude patterns against module name and file.

    A pattern matches a module and its submodules (``"json"`` matches ``json.decoder``), or is a
    glob matched against the module name (``"my*"``) and the file name (``"*/site-packages/*"``).
    Code without a module file (``python -c``, ``exec``) is matched by its file name only,
    e.g. ``"<string>"``.
    """

    def __init__(self, include: tuple, exclude: tuple) -> None:
        self.include = include
        self.exclude = exclude
        self._modules: Dict[str, str] = {}
        self._modules_seen: tuple = ()

    def _module_of(self, filename: str) -> Optional[str]:
        if filename.startswith("<frozen "):
            return filename[8:-1]
        found = self._modules.get(filename)
        # Rescan sys.modules when it changed (runpy swaps __main__ without changing its size).
        seen = (len(sys.modules), id(sys.modules.get("__main__")))
        if found is None and seen != self._modules_seen:
            self._modules_seen = seen
            for name, module in list(sys.modules.items()):
                path = getattr(module, "__file__", None)
                if isinstance(path, str):
                    self._modules.setdefault(path, name)
                    self._modules.setdefault(os.path.abspath(path), name)
            main_path = getattr(sys.modules.get("__main__"), "__file__", None)
            if isinstance(main_path, str):
                self._modules[main_path] = self._modules[os.path.abspath(main_path)] = "__main__"
            found = self._modules.get(filename)
        return found

    @staticmethod
    def _matches(pattern: str, module: Optional[str], filename: str) -> bool:
        import fnmatch  # (here: fnmatch imports re)

        if module is not None and (module == pattern or module.startswith(pattern + ".")
                                   or fnmatch.fnmatchcase(module, pattern)):
            return True
        return fnmatch.fnmatchcase(filename, pattern)

    def accepts(self, code) -> bool:
        filename = code.co_filename
        if filename in _OWN_FILES:
            return False
        if not self.include and not self.exclude:
            return True
        module = self._module_of(filename)
        if self.include and not any(self._matches(p, module, filename) for p in self.include):
            return False
        return not any(self._matches(p, module, filename) for p in self.exclude)


class Profile:
    """Annotate every function call with an NVTX range while enabled (nvtx-compatible).

    Parameters
    ----------
    linenos
        Messages ``"file.py:lineno(name)"`` (``True``, nvtx's default) or the bare function name.
    annotate_cfuncs
        Also annotate builtin and C-extension functions (under their ``__name__``), when called
        from code that the filters accept.
    include, exclude
        Module names (a name covers its submodules) or globs over module names and file paths.
        With ``include``, only matching code is annotated; ``exclude`` wins over ``include``.
    max_depth
        Annotate at most this many nested Profile ranges per thread (``None``: no limit).
    domain
        NVTX domain of the ranges (nvtx uses ``"nvtx.py"``).

    >>> import nvtx_cffi
    >>> with nvtx_cffi.Profile(linenos=False, include="mypackage"):
    ...     pass  # calls into mypackage appear as ranges named after the functions
    """

    def __init__(self, linenos: bool = True, annotate_cfuncs: bool = True, *, include: Patterns = None,
                 exclude: Patterns = None, max_depth: Optional[int] = None,
                 domain: str = DEFAULT_DOMAIN) -> None:
        _import_threading()
        if max_depth is not None:
            depth = as_index(max_depth)
            if depth is None:
                msg = f"max_depth must be a positive int or None, not {type(max_depth).__name__}"
                raise TypeError(msg)
            if depth < 1:
                msg = f"max_depth must be a positive int or None, not {describe_int(depth)}"
                raise ValueError(msg)
            if depth > MAX_DEPTH:
                msg = f"max_depth {describe_int(depth)} is out of range (at most {MAX_DEPTH})"
                raise OverflowError(msg)
            max_depth = depth
        if not isinstance(domain, str):
            msg = f"domain must be a str, not {type(domain).__name__}"
            raise TypeError(msg)
        self.linenos = bool(linenos)
        self.annotate_cfuncs = bool(annotate_cfuncs)
        self.include = _patterns(include, "include")
        self.exclude = _patterns(exclude, "exclude")
        self.max_depth = max_depth
        self.domain = domain
        self._engine: Optional[_Engine] = None

    @property
    def enabled(self) -> bool:
        """Whether this profile is currently annotating calls."""
        return self._engine is not None

    @property
    def engine(self) -> Optional[str]:
        """How calls are seen while enabled (``"c-monitoring"``, ``"c-setprofile"``, ...), else None."""
        return None if self._engine is None else self._engine.name

    def enable(self) -> None:
        """Start annotating function calls (does nothing without an NVTX tool).

        Only one Profile is enabled at a time: enabling one while another is enabled disables that
        one first (closing its ranges, as its ``disable()`` would), as nvtx's ``Profile.enable()``
        replaces the hook of the previous one. Enabling an enabled one does nothing.
        """
        self._enable(3)

    def _enable(self, stacklevel: int) -> None:
        global _enabled_profile
        if not _state.active() or self._engine is not None:
            return
        with _enabled_lock:
            left: Dict[str, int] = {}
            lost = None
            if _enabled_profile is not None:
                # nvtx's Profile.enable() just replaces the hook: programs and notebooks rely on it.
                left, lost = _enabled_profile._stop()
            engine = _engine_class(self.annotate_cfuncs)(self)
            engine.start()  # on error it has undone what it did: nothing is left marked running
            self._engine = engine
            _enabled_profile = self
        for note in (lost, engine.note):
            if note:
                warnings.warn(note, RuntimeWarning, stacklevel=stacklevel)
        _warn_left(left, "enable()", stacklevel + 1)

    def disable(self) -> int:
        """Stop annotating and close the ranges still open on this thread.

        Returns the number of ranges left open on other threads (their function calls are still
        running and this thread cannot close another thread's ranges), and warns when it is not 0.
        With the ``sys.setprofile`` engines, other threads close theirs at their next call event,
        and the thread that ran ``enable()`` gets its previous profile function back then.
        """
        if self._engine is None:
            return 0
        with _enabled_lock:
            left, lost = self._stop()
        if lost:
            warnings.warn(lost, RuntimeWarning, stacklevel=2)
        _warn_left(left, "disable()", 3)
        return sum(left.values())

    def _stop(self):
        """disable() under _enabled_lock: stop the engine. Returns the ranges open on other
        threads and the engine's warning (None, or its hook on this thread was lost)."""
        global _enabled_profile
        engine = self._engine
        if engine is None:
            return {}, None
        self._engine = None
        if _enabled_profile is self:
            _enabled_profile = None
        engine.note = None  # enable()'s warning was given
        return engine.stop(), engine.note

    def __enter__(self) -> "Profile":
        self._enable(3)
        return self

    def __exit__(self, *exc_info) -> None:
        self.disable()

    def __repr__(self) -> str:
        return (f"Profile(linenos={self.linenos}, annotate_cfuncs={self.annotate_cfuncs}, "
                f"include={self.include!r}, exclude={self.exclude!r}, max_depth={self.max_depth}, "
                f"domain={self.domain!r})")


class _Engine:
    """State shared by both engines: the per-code cache, messages, and range bookkeeping."""

    name = "python"
    #: A warning for enable() to give (another profiler limits what this engine can do), or None;
    #: after stop(), one for disable() to give (the engine lost its hook on this thread).
    note: Optional[str] = None

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.linenos = profile.linenos
        self.cfuncs = profile.annotate_cfuncs
        self.max_depth = profile.max_depth
        self.filter = _Filter(profile.include, profile.exclude)
        self.domain = get_domain(profile.domain)
        self.domain_index = self.domain._index
        # Keyed by id(code): hashing a code object hashes its names and constants on every call,
        # id() is one cheap call. ``keep`` holds the codes so that their ids are never reused.
        self.slots: Dict[int, int] = {}           # id(code) -> C slot (annotated, fast path)
        self.inline: Dict[int, object] = {}       # id(code) -> EventAttributes without a C slot
        self.excluded: Set[int] = set()           # ids of codes the filters reject
        self.keep: Dict[int, object] = {}         # id(code) -> code
        self.cslots: Dict[str, int] = {}          # C function name -> C slot
        self.snapshot: Dict[int, object] = {}     # frames running at enable(): they never pushed
        self.snapshot_codes: Set[int] = set()     # ids of their codes (kept alive by the frames)
        self.overflow = False                     # MAX_CACHED_CODES reached: some codes uncached
        # Per-thread nesting for max_depth, shared by Python and C calls (None: no limit, no cost).
        self.depth_of = _depth_counter() if profile.max_depth is not None else None
        # re-entrant: the Python hook called directly by user code (a saved sys.getprofile()) runs
        # profiled, and its classify() sees the calls it makes on this thread
        self.lock = threading.RLock()

    # -- messages and slots (slow path, once per code object) ---------------------------------
    def message(self, code) -> str:
        if self.linenos:
            return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}({code.co_name})"
        return code.co_name

    def attributes(self, message: str):
        return self.domain.get_event_attributes(message=message, color=_COLOR)

    def classify(self, code) -> bool:
        """First sighting of ``code``: decide and cache. True when its calls get ranges."""
        key = id(code)
        with self.lock:
            if key in self.slots or key in self.inline:
                return True
            if key in self.excluded:
                return False
            if len(self.keep) >= MAX_CACHED_CODES:
                self.overflow = True
                return self.filter.accepts(code)
            self.keep[key] = code
            if not self.filter.accepts(code):
                self.excluded.add(key)
                return False
            attrs = self.attributes(self.message(code))
            if attrs.fast_slot >= 0:
                self.slots[key] = attrs.fast_slot
            else:
                self.inline[key] = attrs
            return True

    def push_code(self, code) -> None:
        """Open the range of an accepted ``code`` that the fast path did not find."""
        slot = self.slots.get(id(code))
        if slot is not None:
            lib.nvtxcffi_push(slot)
            return
        attrs = self.inline.get(id(code)) or self.attributes(self.message(code))
        if attrs.fast_slot >= 0:
            lib.nvtxcffi_push(attrs.fast_slot)
        else:
            attrs._emit(OP_PUSH)

    def first(self, code) -> bool:
        """Slow path of a call: classify ``code`` and open its range. False when excluded."""
        if not self.classify(code):
            return False
        self.push_code(code)
        return True

    def annotated(self, code) -> bool:
        """Does a call of ``code`` open a range? (Return side of codes missing from ``slots``.)"""
        key = id(code)
        if key in self.slots or key in self.inline:
            return True
        return self.overflow and key not in self.excluded and self.filter.accepts(code)

    def cfunc_push(self, func) -> None:
        """Open the range of C function ``func``, named after its ``__name__`` as in nvtx."""
        name = getattr(func, "__name__", None)
        if not isinstance(name, str):
            name = type(func).__name__
        slot = self.cslots.get(name)
        if slot is None:
            slot = self.attributes(name).fast_slot
            with self.lock:
                if len(self.cslots) < MAX_CACHED_CODES:
                    self.cslots[name] = slot
        if slot >= 0:
            lib.nvtxcffi_push(slot)
        else:
            self.attributes(name)._emit(OP_PUSH)

    def caller_ok(self, code) -> bool:
        """C functions are annotated when the code calling them is accepted."""
        key = id(code)
        if key in self.excluded or code.co_filename in _OWN_FILES:
            return False
        return key in self.slots or key in self.inline or self.filter.accepts(code)

    def take_snapshot(self) -> None:
        # Frames already running never opened a range; their returns must not count as open.
        for frame in sys._current_frames().values():
            while frame is not None:
                self.snapshot[id(frame)] = frame
                self.snapshot_codes.add(id(frame.f_code))
                frame = frame.f_back

    def running_before(self) -> bool:
        """Is the frame returning or yielding (two levels up) one that ran at enable()? It opened no
        range, but a coroutine or generator is resumed later and each resumption opens one: it
        leaves the snapshot at its first suspension, so that disable() counts those as open."""
        frame = sys._getframe(2)
        if self.snapshot.get(id(frame)) is frame:
            del self.snapshot[id(frame)]
            return True
        return False

    def open_on(self, frame) -> int:
        """Ranges this profile opened for ``frame`` and its callers (still running)."""
        count = 0
        while frame is not None:
            if id(frame) not in self.snapshot and (id(frame.f_code) in self.slots
                                                   or id(frame.f_code) in self.inline):
                count += 1
            frame = frame.f_back
        return count

    def close_current_thread(self, frame) -> None:
        depth = self.open_on(frame)
        if self.max_depth is not None:
            depth = min(depth, self.max_depth)
        for _ in range(depth):
            lib.nvtxcffi_pop(self.domain_index)

    def open_elsewhere(self) -> Dict[str, int]:
        names = {t.ident: t.name for t in threading.enumerate()}
        me = threading.get_ident()
        left = {}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            count = self.open_on(frame)
            if self.max_depth is not None:
                count = min(count, self.max_depth)
            if count:
                left[names.get(ident, f"thread {ident}")] = count
        return left

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> Dict[str, int]:
        raise NotImplementedError


def _depth_counter():
    """Per-thread nesting counter for ``max_depth`` (only built when a limit is set)."""
    local = threading.local()

    def get() -> List[int]:
        try:
            return local.depth
        except AttributeError:
            local.depth = [0]
            return local.depth
    return get


class _MonitoringEngine(_Engine):
    """CPython 3.12+: ``sys.monitoring`` callbacks under a tool id of our own."""

    name = "monitoring"

    def start(self) -> None:
        mon = sys.monitoring
        callbacks = self.callbacks()
        self.tool = _claim_tool_id()
        self.registered = tuple(callbacks)
        try:
            mask = 0
            for event, callback in callbacks.items():
                mon.register_callback(self.tool, event, callback)
                mask |= event
            self.take_snapshot()
            mon.set_events(self.tool, mask)
        except BaseException:
            _release_tool_id(self.tool, self.registered)
            raise

    def stop(self) -> Dict[str, int]:
        _release_tool_id(self.tool, self.registered)
        self.close_current_thread(sys._getframe())
        left = self.open_elsewhere()
        self.snapshot.clear()
        self.snapshot_codes.clear()
        return left

    def callbacks(self) -> dict:
        ev = sys.monitoring.events
        DISABLE = sys.monitoring.DISABLE  # noqa: N806
        slots, inline, excluded = self.slots, self.inline, self.excluded
        push, pop, dom = lib.nvtxcffi_push, lib.nvtxcffi_pop, self.domain_index
        first, annotated, classify, push_code = self.first, self.annotated, self.classify, self.push_code
        snapshot_codes, running_before = self.snapshot_codes, self.running_before
        id_ = id

        if self.max_depth is None:
            # The fast path: a dict lookup and one C call per event.
            def on_start(code, offset):
                try:
                    push(slots[id_(code)])
                except KeyError:
                    if not first(code):
                        return DISABLE  # never again for this code: excluded code runs at full speed

            def on_throw(code, offset, exc):  # PY_THROW cannot be disabled
                try:
                    push(slots[id_(code)])
                except KeyError:
                    first(code)

            def on_return(code, offset, value):
                key = id_(code)
                if key in snapshot_codes and running_before():
                    return
                if key in slots:
                    pop(dom)
                elif key in excluded:
                    return DISABLE
                elif annotated(code):
                    pop(dom)

            def on_unwind(code, offset, exc):  # PY_UNWIND cannot be disabled
                if id_(code) in snapshot_codes and running_before():
                    return
                if id_(code) in slots or annotated(code):
                    pop(dom)
        else:
            limit = self.max_depth
            depth_of = self.depth_of

            def enter(code) -> bool:
                key = id_(code)
                if key not in slots and key not in inline and not classify(code):
                    return False
                depth = depth_of()
                depth[0] += 1
                if depth[0] <= limit:
                    push_code(code)
                return True

            def leave(code) -> None:
                if id_(code) in slots or annotated(code):
                    depth = depth_of()
                    if depth[0] > 0:  # 0: a call that was already running at enable()
                        if depth[0] <= limit:
                            pop(dom)
                        depth[0] -= 1

            def on_start(code, offset):
                if not enter(code):
                    return DISABLE

            def on_throw(code, offset, exc):
                enter(code)

            def on_return(code, offset, value):
                if id_(code) in excluded:
                    return DISABLE
                if id_(code) in snapshot_codes and running_before():
                    return
                leave(code)

            def on_unwind(code, offset, exc):
                if id_(code) in snapshot_codes and running_before():
                    return
                leave(code)

        callbacks = {
            ev.PY_START: on_start,
            ev.PY_RESUME: on_start,
            ev.PY_THROW: on_throw,
            ev.PY_RETURN: on_return,
            ev.PY_YIELD: on_return,
            ev.PY_UNWIND: on_unwind,
        }

        if self.cfuncs:
            limit = self.max_depth
            depth_of = self.depth_of
            cfunc_push, caller_ok = self.cfunc_push, self.caller_ok
            c_types = _C_TYPES
            callers: Set[int] = set()  # ids of caller codes already accepted (kept alive in keep)
            keep = self.keep

            def on_call(code, offset, func, arg0):
                if id_(code) not in callers:
                    if not caller_ok(code):
                        return DISABLE  # no C calls watched in excluded code from now on
                    if id_(code) in keep:
                        callers.add(id_(code))
                if type(func) in c_types:
                    if depth_of is not None:
                        depth = depth_of()
                        depth[0] += 1
                        if depth[0] > limit:
                            return
                    cfunc_push(func)

            def on_c_return(code, offset, func, arg0):  # C_RETURN/C_RAISE cannot be disabled
                if type(func) in c_types and (id_(code) in callers or caller_ok(code)):
                    if depth_of is not None:
                        depth = depth_of()
                        if depth[0] <= 0:
                            return
                        depth[0] -= 1
                        if depth[0] >= limit:
                            return
                    pop(dom)

            callbacks[ev.CALL] = on_call
            callbacks[ev.C_RETURN] = on_c_return
            callbacks[ev.C_RAISE] = on_c_return
        return callbacks


class _SetprofileEngine(_Engine):
    """CPython 3.11 and PyPy: ``sys.setprofile`` here, ``threading.setprofile`` for new threads.

    Each thread gets a hook of its own, with its own count of open ranges (``_Thread``): the hook
    does not depend on which frames were running at enable() (a coroutine or generator that was
    running then is resumed later, and each resumption opens a range), and disable() can close a
    thread's ranges even after CPython removed a hook that raised (RecursionError, KeyboardInterrupt).
    """

    name = "setprofile"

    def start(self) -> None:
        self.on = True
        self.previous = (sys.getprofile(), _threading_getprofile())
        self.threads: Dict[int, _Thread] = {}
        # Another profile function on this thread: a Python callable is chained (called first for
        # every event, as if alone); an object that is not callable (cProfile's profiler: its
        # callback is C) is paused, and given back with its own enable() by stop().
        here, threads = (_chainable(previous) for previous in self.previous)
        if self.previous[0] is not None and here is None:
            self.note = (f"nvtx_cffi.Profile: {_type_name(self.previous[0])} holds sys.setprofile and "
                         "cannot be chained here; it is paused until disable()")
        hook = self.thread_hook(here, self.previous[0])
        engine = self

        def install(frame, event, arg):
            # threading.setprofile's function, at a new thread's first event: a hook of its own.
            if not engine.on:
                _restore_profile(engine.previous[1])
                return
            own = engine.thread_hook(threads, engine.previous[1])
            sys.setprofile(own)
            own(frame, event, arg)

        threading.setprofile(install)
        sys.setprofile(hook)

    def thread_hook(self, chained, restore):
        """The calling thread's profile function, registered; ``restore`` is given back at the end."""
        state = _Thread(restore)
        hook = self.make_hook(state, chained)
        state.function = hook
        self.threads[threading.get_ident()] = state
        return hook

    def stop(self) -> Dict[str, int]:
        state = self.threads.get(threading.get_ident())
        removed = False
        try:
            # first: the hook must not see ``on`` False on this thread. Only a thread that runs
            # the hook gets its previous profiler back here; the others' hooks give theirs back
            # at their next event (this thread's own profiler, if any, is not touched).
            if state is not None and state.restore is not _DONE:
                current = sys.getprofile()
                removed = current is not state.function
                restore, state.restore = state.restore, _DONE
                if current is state.function or current is None:
                    _restore_profile(restore)
        finally:
            self.on = False
            threading.setprofile(self.previous[1])
        if state is not None:
            closed = state.close(self.domain_index, self.max_depth)
            if removed and closed:
                # CPython removes a profile function that raises (RecursionError or
                # KeyboardInterrupt inside it) and the program carries on: the ranges it had open
                # are closed only now, and calls made meanwhile were not annotated.
                self.note = (f"nvtx_cffi.Profile: the profile function of this thread was removed "
                             f"(an exception inside it, or sys.setprofile()) while {closed} ranges "
                             "were open; they are closed now, and calls made meanwhile were not "
                             "annotated")
        # Other threads still run the hook: it sees ``on`` is False at their next event, closes
        # their ranges and gives the thread back its previous profiler. Report what is open there.
        names = {t.ident: t.name for t in threading.enumerate()}
        left = {}
        for ident in sys._current_frames():
            other = self.threads.get(ident)
            if other is None or other is state:
                continue
            count = other.open(self.max_depth)
            if count:
                left[names.get(ident, f"thread {ident}")] = count
        return left

    def make_hook(self, state: "_Thread", chained=None):
        """The profile function; ``chained`` (a Python profile function) runs first on each event."""
        hook = self._make_hook(state)
        if chained is None:
            return hook

        def chain(frame, event, arg):
            if engine.on:
                chained(frame, event, arg)
            hook(frame, event, arg)
        engine = self
        return chain

    def _make_hook(self, state: "_Thread"):
        slots, inline, excluded = self.slots, self.inline, self.excluded
        push, pop, dom = lib.nvtxcffi_push, lib.nvtxcffi_pop, self.domain_index
        annotated, classify, push_code = self.annotated, self.classify, self.push_code
        cfunc_push, caller_ok = self.cfunc_push, self.caller_ok
        cfuncs, c_types, engine = self.cfuncs, _C_TYPES, self
        limit = MAX_DEPTH if self.max_depth is None else self.max_depth
        # This thread's nested annotated calls since enable() (capped at ``limit`` they are the
        # open ranges). Counted before the push or pop that it stands for: an exception in this
        # hook (KeyboardInterrupt is raised at the check after a call) leaves it matching NVTX.
        # A return at depth 0 is that of a call that began before enable(): it opened nothing.
        depth = state.depth

        def hook(frame, event, arg):
            if not engine.on:
                # disable() ran on another thread: close this thread's ranges and leave.
                sys.setprofile(None)
                state.close(dom, engine.max_depth)
                restore, state.restore = state.restore, _DONE
                if restore is not _DONE:
                    _restore_profile(restore)
                return
            if event == "call":
                try:
                    slot = slots[id(frame.f_code)]
                except KeyError:
                    code = frame.f_code
                    key = id(code)
                    if key in inline or (key not in excluded and classify(code)):
                        depth[0] += 1
                        if depth[0] <= limit:
                            push_code(code)
                    return
                depth[0] += 1
                if depth[0] <= limit:
                    push(slot)
            elif event == "return":
                key = id(frame.f_code)
                if depth[0] > 0 and (key in slots or (key not in excluded and annotated(frame.f_code))):
                    depth[0] -= 1
                    if depth[0] < limit:
                        pop(dom)
            elif cfuncs and type(arg) in c_types and caller_ok(frame.f_code):
                if event == "c_call":
                    depth[0] += 1
                    if depth[0] <= limit:
                        cfunc_push(arg)
                elif depth[0] > 0:  # c_return, c_exception
                    depth[0] -= 1
                    if depth[0] < limit:
                        pop(dom)

        return hook


#: A thread's previous profiler was already given back.
_DONE = object()


class _Thread:
    """One thread's state under the ``sys.setprofile`` engine."""

    __slots__ = ("depth", "restore", "function")

    def __init__(self, restore) -> None:
        self.depth = [0]          # nested annotated calls since enable(), see _make_hook
        self.restore = restore    # the profiler to give back at the end, or _DONE
        self.function = None      # the profile function installed on the thread

    def open(self, max_depth: Optional[int]) -> int:
        count = self.depth[0]
        return count if max_depth is None else min(count, max_depth)

    def close(self, domain_index: int, max_depth: Optional[int]) -> int:
        count = self.open(max_depth)
        self.depth[0] = 0
        for _ in range(count):
            lib.nvtxcffi_pop(domain_index)
        return count


class _CEngine(_Engine):
    """CPython: C callbacks (``c/speedups/profiler.c``) with a C cache; these methods are its slow path.

    The ``c_*`` methods are called from C, once per code object or C function name (or on every
    call past the cache bound), and must not raise for ordinary input.
    """

    mode = "PROF_SETPROFILE"  # the _speedups constant

    def c_classify(self, code) -> int:
        """The slot of ``code``'s range, -1 when the filters reject it, -2 when it has no C slot."""
        if not self.filter.accepts(code):
            return -1
        slot = self.attributes(self.message(code)).fast_slot
        return slot if slot >= 0 else -2

    def c_classify_cfunc(self, name: str) -> int:
        slot = self.attributes(name).fast_slot
        return slot if slot >= 0 else -2

    def c_push_code(self, code) -> None:
        self.attributes(self.message(code))._emit(OP_PUSH)

    def c_push_name(self, name: str) -> None:
        self.attributes(name)._emit(OP_PUSH)

    def c_callbacks(self, callbacks: tuple) -> None:
        self.functions = callbacks

    def c_left(self, os_tid: int, count: int) -> None:
        self.left_on[os_tid] = count

    def start(self) -> None:
        self.left_on: Dict[int, int] = {}
        # The C engine keeps its own reference to self until stop().
        _speedups.prof_start(self, getattr(_speedups, self.mode), self.domain_index, int(self.cfuncs), self.max_depth or 0)
        try:
            self.install()
        except BaseException:
            _speedups.prof_stop()
            raise

    def install(self) -> None:
        raise NotImplementedError

    def uninstall(self) -> None:
        raise NotImplementedError

    def stop(self) -> Dict[str, int]:
        try:
            self.uninstall()
        finally:
            _speedups.prof_stop()  # closes this thread's ranges; others' arrive in c_left
        names = {t.native_id: t.name for t in threading.enumerate()}
        return {names[tid]: count for tid, count in self.left_on.items() if tid in names}


class _CSetprofileEngine(_CEngine):
    """CPython 3.11: ``PyEval_SetProfile`` here; a C trampoline via ``threading.setprofile``."""

    name = "c-setprofile"

    def install(self) -> None:
        self.previous = (sys.getprofile(), _threading_getprofile())
        self.enabler = threading.get_ident()
        self.restored = False
        if self.previous[0] is not None:  # cProfile's profiler: paused, given back by uninstall()
            self.note = (f"nvtx_cffi.Profile: {_type_name(self.previous[0])} holds sys.setprofile; "
                         "it is paused until disable()")
        (trampoline,) = self.functions
        threading.setprofile(trampoline)
        # The enabling thread's C function calls restore_enabler when it finds itself stale (stop()
        # ran on another thread, which must not touch this thread's profiler).
        _speedups.prof_install_thread(self.restore_enabler)

    def restore_enabler(self) -> None:
        """Give the enabling thread (only) its previous profiler back, once."""
        if self.restored or threading.get_ident() != self.enabler:
            return
        self.restored = True
        current = sys.getprofile()
        # Not when something else took this thread's profile function since (the user's own).
        if current is None or isinstance(current, _speedups.ProfileFunction):
            _restore_profile(self.previous[0])

    def uninstall(self) -> None:
        try:
            self.restore_enabler()  # replaces the C function, on the enabling thread only
        finally:
            threading.setprofile(self.previous[1])
        # Other threads (the enabling one, when this is another) find their C function stale at
        # their next event: they close their ranges and remove it.


class _CMonitoringEngine(_CEngine):
    """CPython 3.12+: C builtins registered as ``sys.monitoring`` callbacks."""

    name = "c-monitoring"

    mode = "PROF_MONITORING"

    def install(self) -> None:
        self.tool = _claim_tool_id()
        try:
            self._register()
        except BaseException:
            _release_tool_id(self.tool, self.registered)
            raise

    def _register(self) -> None:
        mon = sys.monitoring
        ev = mon.events
        # The order of c/speedups/profiler.c's monitoring_defs.
        events = [ev.PY_START, ev.PY_RESUME, ev.PY_THROW, ev.PY_RETURN, ev.PY_YIELD, ev.PY_UNWIND,
                  ev.CALL, ev.C_RETURN, ev.C_RAISE]
        if not self.cfuncs:
            events = events[:6]
        self.registered = tuple(events)
        mask = 0
        for event, function in zip(events, self.functions):
            mon.register_callback(self.tool, event, function)
            mask |= event
        self.registered = tuple(events)
        mon.set_events(self.tool, mask)

    def uninstall(self) -> None:
        _release_tool_id(self.tool, self.registered)


def _claim_tool_id() -> int:
    mon = sys.monitoring
    for tool in _TOOL_IDS:
        if mon.get_tool(tool) is None:
            mon.use_tool_id(tool, _TOOL_NAME)
            # Code switched off (DISABLE) under an earlier Profile with other filters must be seen again.
            mon.restart_events()
            return tool
    msg = f"no free sys.monitoring tool id among {_TOOL_IDS} for nvtx_cffi.Profile"
    raise RuntimeError(msg)


def _release_tool_id(tool: int, registered) -> None:
    mon = sys.monitoring
    try:
        mon.set_events(tool, 0)
        for event in registered:
            mon.register_callback(tool, event, None)
    finally:
        mon.free_tool_id(tool)


def _warn_left(left: Dict[str, int], where: str, stacklevel: int) -> None:
    if left:
        detail = ", ".join(f"{name}: {count}" for name, count in sorted(left.items()))
        warnings.warn(f"nvtx_cffi.Profile.{where} could not close ranges open on other threads "
                      f"({detail})", RuntimeWarning, stacklevel=stacklevel)


def _engine_class(cfuncs: bool):
    if C_ENGINE:
        if MONITORING:
            return _CMonitoringEngine
        # A Python profile function already on this thread (a user's sys.setprofile): the Python
        # engine chains it (the C one cannot); cProfile's C profiler is paused by either engine.
        if _chainable(sys.getprofile()) is not None:
            return _SetprofileEngine
        return _CSetprofileEngine
    return _MonitoringEngine if MONITORING else _SetprofileEngine


def _type_name(value) -> str:
    """Who holds the profile function, for a warning: cProfile's profiler by that name."""
    lsprof = sys.modules.get("_lsprof")
    if lsprof is not None and isinstance(value, getattr(lsprof, "Profiler", ())):
        return "cProfile"
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _chainable(previous):
    """``previous`` when it is a Python-callable profile function (it can be chained), else None."""
    if previous is None or not callable(previous):
        return None
    if _speedups is not None and isinstance(previous, _speedups.ProfileFunction):
        return None  # the C engine's own function (stale: it would remove the chain at its next call)
    return previous


def _restore_profile(previous) -> None:
    """Give this thread back the profile function it had before enable(), with the right API.

    ``sys.getprofile()`` returns the *object* of a C profile function: cProfile's (``_lsprof``)
    profiler, which is not callable; ``sys.setprofile`` of it would install it as a Python
    function (TypeError at the next event). Such a profiler is turned back on with its own
    ``enable()``, which keeps its statistics and flags.
    """
    if previous is None or callable(previous):
        sys.setprofile(previous)
        return
    sys.setprofile(None)
    enable = getattr(previous, "enable", None)
    if callable(enable):
        enable()


def _import_threading() -> None:
    """Bind this module's ``threading`` (first Profile): importing nvtx_cffi does not import it."""
    global threading
    import threading


def _threading_getprofile():
    get = getattr(threading, "getprofile", None)  # 3.10+
    if get is not None:
        return get()
    return getattr(threading, "_profile_hook", None)
