"""Wrappers that open a range around each call of a function, generator or coroutine.

Plain functions get a wrapper generated with the function's own parameter list (like dataclasses
generate ``__init__``): a ``*args, **kwargs`` frame costs ~60 ns a call, a fixed signature ~16 ns.
On CPython the C accelerator's ``decorated`` type replaces both (push, call, pop in C, no frame).
Generators, coroutines and async generators can be suspended, and other code runs on the thread
meanwhile, so they get a start/end range (not push/pop) spanning their whole execution.
"""
from __future__ import annotations


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Tuple

from ._accel import accel as _accel

__all__ = ["wrap"]

_INTERNAL = ("_nvtx_func", "_nvtx_begin", "_nvtx_close", "_nvtx_arg")
# A class body turns these into classmethods only when they are plain Python functions (type.__new__
# checks the type), so decorated ones keep a Python wrapper, never the accelerator's C callable.
_IMPLICIT_CLASSMETHODS = frozenset({"__init_subclass__", "__class_getitem__"})
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08  # inspect.CO_VARARGS, inspect.CO_VARKEYWORDS
_FunctionType = type(lambda: None)  # types._FunctionType (without importing types)


def wrap(func: Callable, begin: Callable, begin_arg: Any, close: Callable,
         start: Callable, end: Callable, c_args: Optional[Tuple[int, int, Any]] = None) -> Callable:
    """Return ``func`` wrapped so that each call is one range.

    Sync calls run ``begin(begin_arg)`` before and ``close()`` after (push/pop; ``close`` is
    typically a 0-argument C function, CFFI's cheapest call), or, with the accelerator, the same in
    C from ``c_args`` = ``(slot, domain_index, attributes)``;
    generators and coroutines run ``rid = start()`` when first resumed and ``end(rid)`` when done.
    """
    import functools
    import inspect  # (here, not at import: only decorating with a tool attached needs them)

    if inspect.isasyncgenfunction(func):
        wrapper = _async_generator_wrapper(func, start, end)
    elif inspect.iscoroutinefunction(func):
        wrapper = _coroutine_wrapper(func, start, end)
    elif inspect.isgeneratorfunction(func):
        wrapper = _generator_wrapper(func, start, end)
    elif _accel is not None and c_args is not None and not _implicit_classmethod(func):
        wrapper = _accel.decorated(func, *c_args)
    else:
        wrapper = _fixed_signature_wrapper(func, begin, begin_arg, close)
        if wrapper is None:
            wrapper = _generic_wrapper(func, begin, begin_arg, close)
    return functools.wraps(func)(wrapper)


def _implicit_classmethod(func: Callable) -> bool:
    return isinstance(func, _FunctionType) and func.__name__ in _IMPLICIT_CLASSMETHODS


# Both wrappers below open the range in a try of its own. A RecursionError from begin is raised
# entering the call (the interpreter's depth check), before anything is pushed: no close. Any other
# exception from it is a tool's callback that raised after the push: closed. (With one try around
# both, a call at the recursion limit closed a range it never opened: an extra pop.)
def _generic_wrapper(func, begin, begin_arg, close):
    def wrapper(*args, **kwargs):
        try:
            begin(begin_arg)
        except RecursionError:
            raise
        except BaseException:
            close()
            raise
        try:
            return func(*args, **kwargs)
        finally:
            close()

    return wrapper


def _fixed_signature_wrapper(func, begin, begin_arg, close):
    """Generate ``def wrapper(<func's parameters>)`` forwarding each one; None when not possible.

    The parameters are read from the code object, which is what the call binds against, not from
    ``inspect.signature``: that would trust a ``__signature__`` set on the function (a wrapper
    taking ``**kwargs`` that advertises fewer), and the wrapper would refuse arguments that work.
    """
    if not isinstance(func, _FunctionType):  # (inspect.isfunction)
        return None
    import keyword
    code = func.__code__
    n_positional, n_keyword_only = code.co_argcount, code.co_kwonlyargcount
    names = list(code.co_varnames[:n_positional + n_keyword_only])
    star = star_star = None
    position = n_positional + n_keyword_only
    if code.co_flags & _CO_VARARGS:
        star, position = code.co_varnames[position], position + 1
    if code.co_flags & _CO_VARKEYWORDS:
        star_star = code.co_varnames[position]
    for name in (*names, star, star_star):
        if name is not None and (not name.isidentifier() or keyword.iskeyword(name) or name in _INTERNAL):
            return None
    positional_defaults = func.__defaults__ or ()
    keyword_defaults = func.__kwdefaults__ or {}
    first_default = n_positional - len(positional_defaults)
    params, args, defaults = [], [], {}

    def with_default(name: str, value: Any) -> str:
        defaults[f"_nvtx_default{len(defaults)}"] = value
        return f"{name}=_nvtx_default{len(defaults) - 1}"

    for index, name in enumerate(names[:n_positional]):
        params.append(with_default(name, positional_defaults[index - first_default])
                      if index >= first_default else name)
        args.append(name)
        if index + 1 == code.co_posonlyargcount:
            params.append("/")
    if star is not None:
        params.append(f"*{star}")
        args.append(f"*{star}")
    elif n_keyword_only:
        params.append("*")
    for name in names[n_positional:]:
        params.append(with_default(name, keyword_defaults[name]) if name in keyword_defaults else name)
        args.append(f"{name}={name}")
    if star_star is not None:
        params.append(f"**{star_star}")
        args.append(f"**{star_star}")
    outer = ", ".join(["_nvtx_func", "_nvtx_begin", "_nvtx_arg", "_nvtx_close", *defaults])
    source = (
        f"def _nvtx_make({outer}):\n"
        f"    def wrapper({', '.join(params)}):\n"
        f"        try:\n"
        f"            _nvtx_begin(_nvtx_arg)\n"
        f"        except RecursionError:\n"
        f"            raise\n"
        f"        except BaseException:\n"
        f"            _nvtx_close()\n"
        f"            raise\n"
        f"        try:\n"
        f"            return _nvtx_func({', '.join(args)})\n"
        f"        finally:\n"
        f"            _nvtx_close()\n"
        f"    return wrapper\n"
    )
    namespace: dict = {}
    exec(compile(source, f"<nvtx_cffi wrapper of {func.__qualname__}>", "exec"), namespace)  # noqa: S102
    return namespace["_nvtx_make"](func, begin, begin_arg, close, *defaults.values())


def _generator_wrapper(func, start, end):
    def wrapper(*args, **kwargs):
        generator = func(*args, **kwargs)
        range_id = start()
        try:
            return (yield from generator)
        finally:
            end(range_id)

    return wrapper


def _coroutine_wrapper(func, start, end):
    async def wrapper(*args, **kwargs):
        range_id = start()
        try:
            return await func(*args, **kwargs)
        finally:
            end(range_id)

    return wrapper


def _async_generator_wrapper(func, start, end):
    async def wrapper(*args, **kwargs):
        generator = func(*args, **kwargs)
        range_id = start()
        try:
            try:
                item = await generator.__anext__()
            except StopAsyncIteration:
                return
            while True:
                try:
                    sent = yield item
                except GeneratorExit:
                    await generator.aclose()
                    raise
                except BaseException as exc:  # forwarded into the wrapped generator
                    try:
                        item = await generator.athrow(exc)
                    except StopAsyncIteration:
                        return
                else:
                    try:
                        item = await generator.asend(sent)
                    except StopAsyncIteration:
                        return
        finally:
            end(range_id)

    return wrapper
