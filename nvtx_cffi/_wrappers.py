"""Wrappers that open a range around each call of a function, generator or coroutine.

Plain functions get a wrapper generated with the function's own parameter list (like dataclasses
generate ``__init__``): a ``*args, **kwargs`` frame costs ~60 ns a call, a fixed signature ~16 ns.
On CPython the C accelerator's ``decorated`` type replaces both (push, call, pop in C, no frame).
Generators, coroutines and async generators can be suspended, and other code runs on the thread
meanwhile, so they get a start/end range (not push/pop) spanning their whole execution.
"""
from __future__ import annotations

import functools
import inspect
import keyword
from typing import Any, Callable, Optional, Tuple

from ._accel import accel as _accel

__all__ = ["wrap"]

_P = inspect.Parameter

# Only parameter names, kinds and defaults are read: on 3.14+ (lazily evaluated annotations) ask for
# forward references, so decorating a function whose annotations name a later class works.
try:
    from annotationlib import Format as _Format  # type: ignore[import-not-found]

    _SIGNATURE_OPTIONS: dict = {"annotation_format": _Format.FORWARDREF}
except ImportError:  # before 3.14: annotations were evaluated at `def`
    _SIGNATURE_OPTIONS = {}
_INTERNAL = ("_nvtx_func", "_nvtx_begin", "_nvtx_close", "_nvtx_arg")


def wrap(func: Callable, begin: Callable, begin_arg: Any, close: Callable,
         start: Callable, end: Callable, c_args: Optional[Tuple[int, int, Any]] = None) -> Callable:
    """Return ``func`` wrapped so that each call is one range.

    Sync calls run ``begin(begin_arg)`` before and ``close()`` after (push/pop; ``close`` is
    typically a 0-argument C function, CFFI's cheapest call), or, with the accelerator, the same in
    C from ``c_args`` = ``(slot, domain_index, attributes)``;
    generators and coroutines run ``rid = start()`` when first resumed and ``end(rid)`` when done.
    """
    if inspect.isasyncgenfunction(func):
        wrapper = _async_generator_wrapper(func, start, end)
    elif inspect.iscoroutinefunction(func):
        wrapper = _coroutine_wrapper(func, start, end)
    elif inspect.isgeneratorfunction(func):
        wrapper = _generator_wrapper(func, start, end)
    elif _accel is not None and c_args is not None:
        wrapper = _accel.decorated(func, *c_args)
    else:
        wrapper = _fixed_signature_wrapper(func, begin, begin_arg, close)
        if wrapper is None:
            wrapper = _generic_wrapper(func, begin, begin_arg, close)
    return functools.wraps(func)(wrapper)


def _generic_wrapper(func, begin, begin_arg, close):
    def wrapper(*args, **kwargs):
        begin(begin_arg)
        try:
            return func(*args, **kwargs)
        finally:
            close()

    return wrapper


def _fixed_signature_wrapper(func, begin, begin_arg, close):
    """Generate ``def wrapper(<func's parameters>)`` forwarding each one; None when not possible."""
    if not inspect.isfunction(func):
        return None
    try:
        signature = inspect.signature(func, follow_wrapped=False, **_SIGNATURE_OPTIONS)
    except (TypeError, ValueError):
        return None
    params, args, defaults = [], [], {}
    saw_positional_only = saw_star = False
    for index, p in enumerate(signature.parameters.values()):
        name = p.name
        if not name.isidentifier() or keyword.iskeyword(name) or name in _INTERNAL:
            return None
        if p.kind is _P.POSITIONAL_ONLY:
            saw_positional_only = True
        elif saw_positional_only:
            params.append("/")
            saw_positional_only = False
        text = name
        if p.default is not _P.empty:
            defaults[f"_nvtx_default{index}"] = p.default
            text = f"{name}=_nvtx_default{index}"
        if p.kind is _P.VAR_POSITIONAL:
            text, saw_star = f"*{name}", True
            args.append(f"*{name}")
        elif p.kind is _P.VAR_KEYWORD:
            text = f"**{name}"
            args.append(f"**{name}")
        elif p.kind is _P.KEYWORD_ONLY:
            if not saw_star:
                params.append("*")
                saw_star = True
            args.append(f"{name}={name}")
        else:
            args.append(name)
        params.append(text)
    if saw_positional_only:
        params.append("/")
    outer = ", ".join(["_nvtx_func", "_nvtx_begin", "_nvtx_arg", "_nvtx_close", *defaults])
    source = (
        f"def _nvtx_make({outer}):\n"
        f"    def wrapper({', '.join(params)}):\n"
        f"        _nvtx_begin(_nvtx_arg)\n"
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
