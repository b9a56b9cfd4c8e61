"""No tool, NVTX_DISABLE, and the decision itself: same API, nothing done, strict flag parsing."""
from __future__ import annotations

import inspect
import json
import os

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
    attached = nvtx.tool_attached()  # (first: NVTX's first call; enabled() alone decides nothing)
    print(json.dumps({"enabled": nvtx.enabled(), "attached": attached, "sigs": sigs}))
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


# ---- lazy initialisation: NVTX starts at nvtx-cffi's first NVTX call, not at import -------------

def test_import_alone_makes_no_nvtx_call():
    # The recorder is named in the environment, so NVTX would load it at any NVTX call.
    proc = run_python("""
        import json, nvtx_cffi as nvtx
        from nvtx_cffi import _state, recorder
        after_import = (recorder.loaded(), _state.decided())
        enabled = nvtx.enabled()  # a tool is named: true, and NVTX is still not initialised
        after_enabled = [recorder.loaded(), _state.decided()]
        attached = nvtx.tool_attached()
        print(json.dumps({"after_import": after_import, "after_enabled": after_enabled, "enabled": enabled,
                          "after_tool_attached": [attached, recorder.loaded(), _state.decided()]}))
    """)
    out = json.loads(proc.stdout)
    assert out == {"after_import": [False, False], "after_enabled": [False, False], "enabled": True,
                   "after_tool_attached": [True, True, True]}


@pytest.mark.parametrize("first", ["push_range", "decorate", "annotate_with", "get_domain", "mark", "enabled"])
def test_tool_named_after_import_is_used(first):
    # As with nvtx: a notebook or test suite sets NVTX_INJECTION64_PATH after `import nvtx_cffi`;
    # the first NVTX call (whatever it is) loads the tool. Names imported before it follow.
    first_call = {
        "push_range": "push_range('first'); pop_range()",
        "decorate": "f = nvtx.annotate('first')(lambda: 3); assert f is not None and f() == 3",
        "annotate_with": "with nvtx.annotate('first'): pass",
        "get_domain": "nvtx.get_domain('lazy-domain')",
        "mark": "mark('first')",
        "enabled": "assert nvtx.enabled() and nvtx.tool_attached()",
    }[first]
    proc = run_python(f"""
        import json, os
        path = os.environ["RECORDER"]
        import nvtx_cffi as nvtx
        from nvtx_cffi import push_range, pop_range, mark, recorder
        assert not recorder.loaded()
        os.environ["NVTX_INJECTION64_PATH"] = path
        {first_call}
        @nvtx.annotate("decorated")
        def g(x):
            return x + 1
        with recorder.capture() as got:
            push_range("bound before"); pop_range()
            mark("marked", payload=5)
            g(1)
            with nvtx.annotate("with", domain="lazy-domain"):
                pass
        print(json.dumps({{"enabled": nvtx.enabled(), "g_is_plain": g.__class__.__name__ == "function"
                          and not hasattr(g, "__wrapped__"),
                          "events": [(e.kind, e.message, e.domain) for e in got if e.kind in ("push", "mark")]}}))
    """, {"RECORDER": os.environ["NVTX_INJECTION64_PATH"]}, remove=NO_TOOL)
    out = json.loads(proc.stdout)
    assert out["enabled"] is True and out["g_is_plain"] is False
    assert out["events"] == [["push", "bound before", None], ["mark", "marked", None], ["push", "decorated", None],
                             ["push", "with", "lazy-domain"]]


def test_no_tool_at_the_first_call_is_final():
    # NVTX initialised without a tool cannot load one later; nvtx-cffi acts on that once.
    proc = run_python("""
        import json, os, nvtx_cffi as nvtx
        from nvtx_cffi import push_range, recorder
        def f():
            return 1
        nvtx.mark("before")  # NVTX's first call: no tool
        first = nvtx.enabled()
        os.environ["NVTX_INJECTION64_PATH"] = os.environ["RECORDER"]
        push_range("x")
        print(json.dumps({"first": first, "later": nvtx.enabled(), "attached": nvtx.tool_attached(),
                          "decorator_returns_f": nvtx.annotate("f")(f) is f, "loaded": recorder.loaded(),
                          "start": nvtx.start_range("x")}))
    """, {"RECORDER": os.environ["NVTX_INJECTION64_PATH"]}, remove=NO_TOOL)
    assert json.loads(proc.stdout) == {"first": False, "later": False, "attached": False,
                                       "decorator_returns_f": True, "loaded": False, "start": None}


def test_nvtx_disable_is_read_at_the_first_call():
    proc = run_python("""
        import os, nvtx_cffi as nvtx
        from nvtx_cffi import recorder
        os.environ["NVTX_DISABLE"] = "1"
        f = lambda: 1
        print(nvtx.annotate("f")(f) is f, nvtx.enabled(), recorder.loaded())
    """, remove=("NVTX_DISABLE",))
    assert proc.stdout.split() == ["True", "False", "False"]


DISABLED_UNDER_A_TOOL = """
    import json, threading
    import nvtx_cffi as nvtx
    from nvtx_cffi import recorder

    steps = []
    def step(name, call):
        call()
        steps.append([name, recorder.loaded()])
    def with_():
        with nvtx.annotate("w", domain="lib", payload=2.5):
            pass
    def profile():
        p = nvtx.Profile()
        p.enable()
        (lambda: 1)()
        p.disable()
    def bad_end():
        try:
            d.end_range(-1)
        except Exception as e:
            return [type(e).__name__, str(e)]

    d = nvtx.get_domain("lib")
    a = d.get_event_attributes(message="m", color="red", category="c")
    step("mark", lambda: nvtx.mark("x", color="red", domain="lib", category=1, payload=3))
    step("push_range/pop_range", lambda: (nvtx.push_range("x"), nvtx.pop_range(), nvtx.pop_range(domain="lib")))
    step("start_range/end_range", lambda: (nvtx.end_range(nvtx.start_range("x", domain="lib")), nvtx.end_range(7)))
    step("with annotate", with_)
    step("decorated", lambda: nvtx.annotate("f", domain="lib")(lambda: 1)())
    step("Domain attributes", lambda: (d.push_range(a), d.mark(a), d.end_range(d.start_range(a))))
    step("Domain.pop_range", lambda: (d.pop_range(), d.pop_range()))
    step("Domain keywords", lambda: (d.mark(message="k", payload=1), d.push_range(message="k"), d.pop_range()))
    step("Domain.end_range", lambda: d.end_range(5))
    step("strings, categories", lambda: (d.get_registered_string("s"), d.get_category_id("c2")))
    step("counters", lambda: (d.get_counter("n", int).sample(3), d.get_counter("f", float).sample(0.5)))
    step("array payloads", lambda: (nvtx.mark("arr", payload=[1, 2]), d.mark(message="arr", payload=(3.5, 4.5))))
    step("Profile", profile)
    step("CUDA names", lambda: (nvtx.name_cuda_device(0, "gpu0"), nvtx.name_cuda_stream(1, "s")))
    worker = threading.Thread(target=lambda: nvtx.mark("t"), name="worker")
    worker.start()
    worker.join()
    step("a named thread", lambda: None)
    print(json.dumps({"steps": steps, "bad_end": bad_end()}))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_nvtx_disable_under_a_tool_makes_no_nvtx_call_at_all(pure):
    """NVTX_DISABLE=1 turns everything off under a profiler: no call of the whole API reaches NVTX,
    so NVTX never initialises and the tool named in the environment (the recorder) is never loaded,
    pops and ends without a range included. Arguments are still checked as with a tool."""
    on = run_python(DISABLED_UNDER_A_TOOL, {"NVTX_CFFI_PURE_PYTHON": pure}, remove=("NVTX_DISABLE",))
    off = run_python(DISABLED_UNDER_A_TOOL, {"NVTX_CFFI_PURE_PYTHON": pure, "NVTX_DISABLE": "1"})
    on, off = json.loads(on.stdout), json.loads(off.stdout)
    assert all(loaded for _, loaded in on["steps"])  # (the same script does load it without the flag)
    assert [name for name, loaded in off["steps"] if loaded] == []
    assert off["bad_end"] == on["bad_end"] and on["bad_end"][0] == "ArgumentRangeError"  # (a ValueError)
