"""No tool, NVTX_DISABLE, and the decision itself: same API, nothing done, strict flag parsing."""
from __future__ import annotations

import inspect
import json

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import _ranges

from conftest import run_python

NO_TOOL = ("NVTX_INJECTION64_PATH",)

SIGNATURES = """
    import inspect, json, nvtx_cffi as nvtx
    names = ["push_range", "pop_range", "start_range", "end_range", "mark"]
    sigs = {n: str(inspect.signature(getattr(nvtx, n))) for n in names}
    sigs["annotate"] = str(inspect.signature(nvtx.annotate))
    print(json.dumps({"enabled": nvtx.enabled(), "attached": nvtx.tool_attached(), "sigs": sigs}))
"""


def _state_of(env=None, remove=NO_TOOL):
    return json.loads(run_python(SIGNATURES, env, remove=remove).stdout)


def test_no_tool_keeps_signatures_and_defaults():
    here = {n: str(inspect.signature(getattr(nvtx, n)))
            for n in ["push_range", "pop_range", "start_range", "end_range", "mark"]}
    here["annotate"] = str(inspect.signature(nvtx.annotate))
    state = _state_of()
    assert (state["enabled"], state["attached"]) == (False, False)
    assert state["sigs"] == here


@pytest.mark.parametrize("path", ["", "/nonexistent/libtool.so", "relative-nothing.so"])
def test_empty_or_wrong_injection_path_means_no_tool(path):
    state = _state_of({"NVTX_INJECTION64_PATH": path})
    assert (state["enabled"], state["attached"]) == (False, False)


@pytest.mark.parametrize(("value", "enabled"), [("1", False), ("true", False), ("YES", False), ("on", False),
                                                ("0", True), ("", True), ("false", True), ("no", True)])
def test_nvtx_disable_is_parsed_strictly(value, enabled):
    state = _state_of({"NVTX_DISABLE": value}, remove=())
    assert state["enabled"] is enabled


def test_nvtx_disable_garbage_warns_and_stays_enabled():
    proc = run_python("import warnings; warnings.simplefilter('always'); import nvtx_cffi as n; print(n.enabled())",
                      {"NVTX_DISABLE": "maybe"})
    assert proc.stdout.strip() == "True"
    assert "NVTX_DISABLE='maybe' is not a boolean" in proc.stderr


def test_no_tool_decorator_returns_the_function_itself_and_calls_do_nothing():
    proc = run_python("""
        import asyncio, nvtx_cffi as nvtx
        def f(): return 1
        assert nvtx.annotate("x", color="red")(f) is f
        with nvtx.annotate("x") as a:
            pass
        assert nvtx.start_range("x") is None
        nvtx.end_range(nvtx.start_range("x"))
        nvtx.push_range("x"); nvtx.pop_range(); nvtx.mark("x")
        d = nvtx.get_domain("d")
        d.push_range(d.get_event_attributes(message="m")); d.pop_range()
        assert d.start_range(message="m") == 0
        async def g():
            async with nvtx.annotate("y"):
                return 2
        print(asyncio.run(g()), a.message)
    """, remove=NO_TOOL)
    assert proc.stdout.split() == ["2", "x"]


def test_no_tool_annotate_still_checks_its_arguments():
    proc = run_python("""
        import nvtx_cffi as nvtx
        try:
            nvtx.annotate("x", color="no-such")
        except ValueError as e:
            print(e)
    """, remove=NO_TOOL)
    assert "unknown color 'no-such'" in proc.stdout


def test_active_functions_are_the_real_ones():
    assert _ranges.push_range.__doc__.startswith("Open a range on this thread (close it")
