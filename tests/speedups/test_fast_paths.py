"""The hot paths must record exactly what the general paths record.

nvtx_cffi answers repeated calls from caches (message-only dicts, the argument-tuple cache, cached
annotate objects, per-domain C pop functions). A mistake there would send the wrong slot, colour,
domain or range id while every call still "works", so each scenario below runs three times in one
recorded subprocess: first use (general path, filling the caches), hot (fast paths) and after
clearing every Python-side cache (general path again), and the recorded events must be the same.

On CPython the hot paths are C (``c/speedups/accel*.c``); ``NVTX_CFFI_PURE_PYTHON=1`` runs the Python ones.
The scenario runs in both modes, and both must record the same events and raise the same errors.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import nvtx_cffi
from nvtx_cffi._domain import MAX_REGISTERED_BYTES

# The interpreter's own argument errors: CPython names a method by its qualified name, PyPy by its name.
DOMAIN_PREFIX = "" if sys.implementation.name == "pypy" else "Domain."
DOMAIN_MARK_COLOUR = DOMAIN_PREFIX + "mark() got an unexpected keyword argument 'colour'"

SCENARIO = r"""
import json
import sys
import warnings
import nvtx_cffi as nvtx
from nvtx_cffi import _accel, _annotate, _domain, _ranges

assert nvtx.enabled(), "the recorder did not attach"
blue = "".join(["bl", "ue"])  # equal to the default colour, not the same object: general path
d = nvtx.get_domain("fastdom")
d0 = nvtx.get_domain()
LONG = "L" * (_domain.MAX_REGISTERED_BYTES + 1)  # sent inline: no slot, the general push


def scenario(tag):
    nvtx.mark("separator", domain="separator", payload=tag)
    nvtx.push_range("x"); nvtx.pop_range()
    nvtx.push_range("x", color=blue); nvtx.pop_range(domain=None)
    nvtx.push_range("x", payload=7); nvtx.pop_range()
    nvtx.mark("m"); nvtx.mark("m", blue); nvtx.mark("m", category=2)
    nvtx.end_range(nvtx.start_range("s"))
    nvtx.end_range(nvtx.start_range("s", color="red")[0])  # a bare int: default domain
    nvtx.push_range("y", domain="fastdom"); nvtx.pop_range("fastdom")
    nvtx.end_range(nvtx.start_range("z", domain="fastdom", payload=1.5))
    with nvtx.annotate("w"):
        pass
    with nvtx.annotate("w", domain="fastdom", color="red"):
        pass

    @nvtx.annotate("dec")
    def f():
        pass

    @nvtx.annotate(domain="fastdom", category="cat")
    def g(a, b=2):
        return a + b

    f(); g(1)
    attrs = d.get_event_attributes(message="attrs", color="green", category=3)
    d.push_range(attrs); d.pop_range()
    d.push_range(message="attrs", color="green", category=3); d.pop_range()
    d.mark(attrs); d.end_range(d.start_range(attrs))
    d0.push_range(d0.get_event_attributes(message="d0")); d0.pop_range()
    # no slot (payload, inline message): C falls back to the general call
    with nvtx.annotate("wp", payload=5):
        pass
    with nvtx.annotate(LONG):
        pass
    with nvtx.annotate(message="kw", color="red", domain="fastdom"):
        pass
    nvtx.push_range(message="kwp", domain="fastdom"); nvtx.pop_range(domain="fastdom")
    nvtx.mark(LONG, domain="fastdom")
    pattrs = d.get_event_attributes(message="pa", payload=1)
    d.push_range(pattrs); d.pop_range(); d.mark(pattrs); d.end_range(d.start_range(pattrs))

    @nvtx.annotate("dec-payload", payload=2.5)
    def h(x):
        return x

    @nvtx.annotate(LONG, domain="fastdom")
    def h_long():
        pass

    class K:
        @nvtx.annotate("method")
        def m(self, x, *, y=1):
            return x + y

    @nvtx.annotate("rec", color="green")
    def rec(n):
        return 0 if n == 0 else 1 + rec(n - 1)

    @nvtx.annotate("raises")
    def raises():
        raise ValueError("inside")

    assert h(3) == 3 and K().m(1, y=2) == 3 and rec(3) == 3
    h_long()
    try:
        raises()
    except ValueError as exc:
        assert str(exc) == "inside"
    else:
        raise AssertionError("the exception did not propagate")
    payloads(tag)


def payloads(tag):
    # Per-call payloads: values that change every call, every spelling; the payload
    # is a value sent with the prepared slot, never part of a cache key.
    nvtx.mark("payloads")
    # the same in each run (the runs are compared); one machine digit ends at 2 ** 30
    for i in (10, 2 ** 40, -3, 2 ** 63, 0.25, 2 ** 30 - 1, 2 ** 30, -(2 ** 30) + 1, -(2 ** 30), 0):
        nvtx.mark("p", payload=i)
        nvtx.mark("p", "red", "fastdom", "pc", i)
        nvtx.mark(payload=i, message="p", category=4)  # the payload first: never a call-site key
        nvtx.push_range(message="p", payload=i, color="red"); nvtx.pop_range()
        nvtx.push_range("p", color="red", payload=i); nvtx.pop_range()
        nvtx.push_range(message="p", domain="fastdom", category=4, payload=i); nvtx.pop_range("fastdom")
        nvtx.end_range(nvtx.start_range("p", color="red", payload=i))
        with nvtx.annotate("p", payload=i):
            pass
        with nvtx.annotate("p", "red", "fastdom", "pc", i):
            pass
        with nvtx.annotate(message="p", color="green", domain="fastdom", category=5, payload=i):
            pass
        a = nvtx.annotate(f"p{len(LONG) % 2}", payload=i)  # a new str object each time
        assert (a.payload, a.attributes.payload, a.message) == (i, i, "p1"), a
        with a:
            pass
        d.push_range(message="p", color="red", payload=i); d.pop_range()
        d.mark(message="p", category=6, payload=i)
        d.end_range(d.start_range(message="p", payload=i))
        d.push_range(message="p", color="red"); d.pop_range()
        with nvtx.annotate(LONG, payload=i):
            pass
        d.mark(message=LONG, payload=i)
    # An annotate object keeps its payload whatever is made after it (with the accelerator, an
    # object nobody else holds is handed out again: none of this may notice).
    nvtx.mark("objects")
    a1 = nvtx.annotate("q", payload=1)
    a2 = nvtx.annotate("q", payload=2)
    assert a1 is not a2 and (a1.payload, a2.payload) == (1, 2)
    with a1:
        pass
    with a2:
        pass
    with nvtx.annotate("q", payload=3) as a3:
        with nvtx.annotate("q", payload=4):
            pass
        assert a3.payload == 3 and a3._args == ("q", None, None, None, 3)
    enter = nvtx.annotate("q", payload=5).__enter__
    assert nvtx.annotate("q", payload=6).payload == 6
    enter()
    nvtx.pop_range()
    decorated = nvtx.annotate("q", payload=7)(lambda: None)
    with nvtx.annotate("q", payload=8):
        pass
    decorated()
    import asyncio

    async def task(value):
        async with nvtx.annotate("q", payload=value):
            await asyncio.sleep(0)

    async def both():
        await asyncio.gather(task(9), task(10))

    asyncio.run(both())
    for value in (11, 12):
        with nvtx.annotate("q", payload=value):
            pass
    fstrings()


def fstrings():
    # f-string messages: a new str object each call, equal to earlier ones (answered through the
    # first str of the same text); 1-, 2- and 4-byte characters, and longer than that table takes
    nvtx.mark("fstrings")
    for i in range(9):
        n = i % 3
        nvtx.mark(f"f{n}")
        nvtx.push_range(f"é{n}", color="red"); nvtx.pop_range()
        with nvtx.annotate(f"日{n}", color="green"):
            pass
        with nvtx.annotate(f"a{n}"):
            pass
        nvtx.mark(f"{'😀' * (n + 1)}", domain="fastdom", payload=i)
        nvtx.end_range(nvtx.start_range(f"{'L' * 300}{n}"))
    constants()


# More constant messages than the C table answering annotate(message) by identity has entries (64):
# entries are replaced while the same messages come round again.
CONSTANTS = [sys.intern(f"const{k}") for k in range(150)]


def constants():
    nvtx.mark("constants")
    for _ in range(3):
        for message in CONSTANTS:
            with nvtx.annotate(message):
                pass
        for message in CONSTANTS[::7]:
            a = nvtx.annotate(message)
            assert a is nvtx.annotate(message) and a.message == message, (a.message, message)
            with a:
                pass
    # annotate's call-site table: colour and payload spellings, a payload that is sometimes None at
    # one site, f-string messages by keyword and longer than the text table takes
    nvtx.mark("sites")
    nvtx.annotate("pv", "green")  # (its first sight: an object sent inline, not the cached one)
    for k in range(4):
        for message in CONSTANTS[:80]:
            with nvtx.annotate(message, color="red"):
                pass
        for p in (None, k, None, k + 0.5):
            with nvtx.annotate("pv", "green", payload=p) as a:
                assert a.payload == p and (p is not None or a is nvtx.annotate("pv", "green")), (a.payload, p)
        with nvtx.annotate(message=f"kw{k % 2}", color="green"):
            pass
        with nvtx.annotate(f"{'M' * 300}{k % 2}", "red"):
            pass
        with nvtx.annotate(f"fs{k % 2}", "red", payload=k):
            pass
        for name in ("siteA", "siteB"):  # pop_range's call sites: by position and by keyword
            nvtx.push_range("sd", domain=name); nvtx.pop_range(name)
            nvtx.push_range("sd", domain=name); nvtx.pop_range(domain=name)


scenario(0)  # first use: general paths, caches filled
scenario(1)  # hot: fast paths
for cache in (_ranges._slot_cache, _ranges._blue_slots, _ranges._uncoloured_slots,
              _annotate._cache, _annotate._by_message):
    cache.clear()
scenario(2)  # general paths again

nvtx.mark("separator", domain="separator", payload=-1)  # the end of the compared runs
errors = {}


def outcome(call):
    # [exception type, message], [warning category, message], or None when the call just works
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except Exception as exc:
            return [type(exc).__name__, str(exc).split(". Did you mean")[0]]  # 3.14+ adds a suggestion
    return [caught[0].category.__name__, str(caught[0].message)] if caught else None


for name, bad in [("str id", ("a", 0)), ("too big", (2 ** 64, 0)), ("list", [1, 0]),
                  ("triple", (1, 0, 0)), ("bool", True), ("negative", -1)]:
    try:
        nvtx.end_range(bad)
        errors[name] = None
    except Exception as exc:
        errors[name] = [type(exc).__name__, str(exc).split(". Did you mean")[0]]  # 3.14+ adds a suggestion
# Bad payloads fail the same way on the first call and on a hot one, in every spelling.
for name, bad in [("str", "1"), ("huge", 2 ** 64), ("negative huge", -(2 ** 63) - 1), ("list", [1]),
                  ("object", object())]:
    for spelling, call in [
            ("mark", lambda: nvtx.mark("p", payload=bad)),
            ("push_range", lambda: nvtx.push_range("p", color="red", payload=bad)),
            ("start_range", lambda: nvtx.start_range("p", color="red", payload=bad)),
            ("annotate", lambda: nvtx.annotate("p", payload=bad)),
            ("annotate positional", lambda: nvtx.annotate("p", "red", "fastdom", "pc", bad)),
            ("Domain.mark", lambda: d.mark(message="p", payload=bad)),
            ("Domain.push_range", lambda: d.push_range(message="p", color="red", payload=bad))]:
        errors[f"payload {name} {spelling}"] = outcome(call)
try:
    d.mark(message="p", colour="red")
except TypeError as exc:
    errors["Domain.mark colour"] = [type(exc).__name__, str(exc).split(". Did you mean")[0]]  # 3.14+ adds a suggestion
# Per-call payloads left no trace in the caches (value, not identity).
for cache in (_ranges._slot_cache, _annotate._cache, d._by_keywords):
    assert not any(isinstance(k, tuple) and any(isinstance(v, (int, float)) and v not in (0, 2, 3, 4, 5, 6)
                                                  and not isinstance(v, bool) for v in k[1:])
                   for k in cache), sorted(map(repr, cache))
print(json.dumps({"errors": errors, "accelerated": _accel.accel is not None}))
"""

#: The scenario's environment per mode (the test process's own mode is left out of the children).
MODES = {"accelerated": {}, "pure_python": {"NVTX_CFFI_PURE_PYTHON": "1"}}

KINDS = {"push", "pop", "start", "end", "mark"}
#: A list payload: a binary payload (payload extension) with NumPy; without it (PyPy here) nvtx's
#: warning, and no payload.
LIST_PAYLOAD = None if importlib.util.find_spec("numpy") else [
    "NvtxWarning", "Unsupported payload type: <class 'list'>. Install numpy for extended payload support."]


def _record(mode: str, directory: str):
    from nvtx_cffi import recorder

    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_DISABLE", "NVTX_CFFI_PURE_PYTHON")}
    env.update(recorder.environment(directory), **MODES[mode])
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCENARIO)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    events = [e for e in recorder.read(directory).events if e.kind in KINDS]
    runs, current = {}, None
    for event in events:
        if event.kind == "mark" and event.domain == "separator":
            current = runs.setdefault(event.payload, []) if event.payload >= 0 else None
        elif current is not None:
            current.append(event)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return runs, report["errors"], report["accelerated"]


@pytest.fixture(scope="module")
def both_modes(tmp_path_factory):
    pytest.importorskip("nvtx_cffi.recorder")
    return {mode: _record(mode, str(tmp_path_factory.mktemp(mode))) for mode in MODES}


@pytest.fixture(params=sorted(MODES))
def recorded(request, both_modes):
    runs, errors, _ = both_modes[request.param]
    return runs, errors


def test_modes_are_what_they_say(both_modes):
    assert both_modes["pure_python"][2] is False
    assert both_modes["accelerated"][2] is (sys.implementation.name == "cpython")


def test_c_and_python_paths_record_the_same_events_and_errors(both_modes):
    accelerated, pure = both_modes["accelerated"], both_modes["pure_python"]
    assert sorted(accelerated[0]) == sorted(pure[0]) == [0, 1, 2]
    for run in (0, 1, 2):
        assert [_content(e) for e in accelerated[0][run]] == [_content(e) for e in pure[0][run]]
    assert accelerated[1] == pure[1]


def _content(event) -> tuple:
    return (event.kind, event.domain, event.message, event.color, event.category, event.payload,
            event.payload_type, event.api)


def test_fast_paths_record_the_same_events_as_the_general_paths(recorded):
    runs, _ = recorded
    assert sorted(runs) == [0, 1, 2]
    first = [_content(e) for e in runs[0]]
    assert [_content(e) for e in runs[1]] == first
    assert [_content(e) for e in runs[2]] == first


def test_per_call_payloads_reach_the_tool_with_their_slot(recorded):
    runs, _ = recorded
    red, green = nvtx_cffi.to_argb("red"), nvtx_cffi.to_argb("green")
    blue = nvtx_cffi.to_argb(None)  # the default colour
    long = "L" * (MAX_REGISTERED_BYTES + 1)
    for tag, run in runs.items():
        start = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "payloads")
        stop = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "objects")
        events = [e for e in run[start + 1:stop] if e.kind in ("push", "start", "mark")]
        values = [10, 2 ** 40, -3, 2 ** 63, 0.25, 2 ** 30 - 1, 2 ** 30, -(2 ** 30) + 1, -(2 ** 30), 0]
        per_value = len(events) // len(values)
        assert per_value * len(values) == len(events) and per_value == 17
        for n, value in enumerate(values):
            group = events[n * per_value:(n + 1) * per_value]
            kind = "double" if isinstance(value, float) else ("uint64" if value >= 2 ** 63 else "int64")
            expected = [(value, kind)] * 14 + [(None, None)] + [(value, kind)] * 2  # 15th: no payload
            assert [(e.payload, e.payload_type) for e in group] == expected, (tag, n)
            assert [(e.kind, e.message, e.domain, e.color, e.category) for e in group] == [
                ("mark", "p", None, blue, 0),
                ("mark", "p", "fastdom", red, 2),  # "pc": fastdom's second category name
                ("mark", "p", None, blue, 4),
                ("push", "p", None, red, 0),
                ("push", "p", None, red, 0),
                ("push", "p", "fastdom", blue, 4),
                ("start", "p", None, red, 0),
                ("push", "p", None, blue, 0),
                ("push", "p", "fastdom", red, 2),
                ("push", "p", "fastdom", green, 5),
                ("push", "p1", None, blue, 0),
                ("push", "p", "fastdom", red, 0),
                ("mark", "p", "fastdom", blue, 6),
                ("start", "p", "fastdom", blue, 0),
                ("push", "p", "fastdom", red, 0),
                ("push", long, None, blue, 0),
                ("mark", long, "fastdom", blue, 0),
            ], (tag, n)


def test_fstring_messages_carry_their_text(recorded):
    runs, _ = recorded
    red, green, blue = nvtx_cffi.to_argb("red"), nvtx_cffi.to_argb("green"), nvtx_cffi.to_argb(None)
    for tag, run in runs.items():
        start = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "fstrings")
        stop = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "constants")
        got = [(e.kind, e.message, e.color if e.kind != "start" else None, e.domain, e.payload)
               for e in run[start + 1:stop] if e.kind in ("push", "mark", "start")]
        expected = []
        for i in range(9):
            n = i % 3
            expected += [("mark", f"f{n}", blue, None, None), ("push", f"é{n}", red, None, None),
                         ("push", f"日{n}", green, None, None), ("push", f"a{n}", blue, None, None),
                         ("mark", "😀" * (n + 1), blue, "fastdom", i), ("start", "L" * 300 + str(n), None, None, None)]
        assert got == expected, tag


def test_constant_messages_past_the_identity_table_keep_their_text(recorded):
    runs, _ = recorded
    blue = nvtx_cffi.to_argb(None)
    messages = [f"const{k}" for k in range(150)]
    for tag, run in runs.items():
        start = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "constants")
        stop = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "sites")
        got = [(e.kind, e.message, e.color, e.domain) for e in run[start + 1:stop] if e.kind in ("push", "mark")]
        assert got == [("push", m, blue, None) for m in (messages + messages[::7]) * 3], tag
        pops = [e for e in run[start + 1:stop] if e.kind == "pop"]
        assert len(pops) == len(got) and all(e.domain is None for e in pops), tag


def test_call_sites_keep_message_colour_payload_and_domain(recorded):
    runs, _ = recorded
    red, green, blue = nvtx_cffi.to_argb("red"), nvtx_cffi.to_argb("green"), nvtx_cffi.to_argb(None)
    expected = []
    for k in range(4):
        expected += [("push", f"const{j}", red, None) for j in range(80)]
        expected += [("push", "pv", green, p) for p in (None, k, None, k + 0.5)]
        expected += [("push", f"kw{k % 2}", green, None), ("push", "M" * 300 + str(k % 2), red, None),
                     ("push", f"fs{k % 2}", red, k)]
        expected += [("push", "sd", blue, None)] * 4
    for tag, run in runs.items():
        start = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "sites")
        got = [(e.kind, e.message, e.color, e.payload) for e in run[start + 1:] if e.kind != "pop"]
        assert got == expected, tag
        # each push is popped at once, in its own domain
        kinds = [(e.kind, e.domain) for e in run[start + 1:]]
        assert kinds[1::2] == [("pop", domain) for kind, domain in kinds[0::2]], tag
        assert [d for _, d in kinds[0::2]].count("siteB") == 8, tag


def test_annotate_objects_keep_their_payload(recorded):
    runs, _ = recorded
    for tag, run in runs.items():
        start = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "objects")
        stop = next(n for n, e in enumerate(run) if e.kind == "mark" and e.message == "fstrings")
        events = [(e.kind, e.message, e.payload) for e in run[start + 1:stop] if e.kind in ("push", "start")]
        assert events[:8] == [("push", "q", 1), ("push", "q", 2), ("push", "q", 3), ("push", "q", 4),
                              ("push", "q", 5), ("push", "q", 8), ("push", "q", 7), ("start", "q", 9)], tag
        assert events[8:] == [("start", "q", 10), ("push", "q", 11), ("push", "q", 12)], tag


def test_bad_payloads_fail_alike_in_every_spelling(recorded):
    _, errors = recorded
    for spelling in ("mark", "push_range", "start_range", "annotate", "annotate positional",
                     "Domain.mark", "Domain.push_range"):
        # as nvtx 0.2.16: a str (or any unsupported type) warns and sends no payload; a list is a
        # binary payload (payload extension)
        assert errors[f"payload str {spelling}"] == ["NvtxWarning", "Unsupported payload type: <class 'str'>."], spelling
        assert errors[f"payload object {spelling}"] == [
            "NvtxWarning", "Unsupported payload type: <class 'object'>."], spelling
        assert errors[f"payload list {spelling}"] == LIST_PAYLOAD, spelling
        for name in ("huge", "negative huge"):
            assert errors[f"payload {name} {spelling}"][0] == "OverflowError", (name, spelling)
            assert "int64 or uint64" in errors[f"payload {name} {spelling}"][1]
    assert errors["Domain.mark colour"] == ["TypeError", DOMAIN_MARK_COLOUR]


def test_fast_path_events_carry_the_right_content(recorded):
    runs, _ = recorded
    hot = runs[1]
    hot = hot[:next(n for n, e in enumerate(hot) if e.kind == "mark" and e.message == "payloads")]
    push = hot[0]
    assert (push.kind, push.message, push.color, push.domain, push.category, push.payload) == (
        "push", "x", nvtx_cffi.to_argb("blue"), None, 0, None)
    assert hot[1].kind == "pop" and hot[1].domain is None
    with_payload = hot[4]
    assert (with_payload.kind, with_payload.message, with_payload.payload) == ("push", "x", 7)
    marks = [e for e in hot if e.kind == "mark"]
    assert [(m.message, m.category) for m in marks[:3]] == [("m", 0), ("m", 0), ("m", 2)]
    fastdom = [e for e in hot if e.domain == "fastdom" and e.kind == "push"]
    long = "L" * (MAX_REGISTERED_BYTES + 1)
    assert [e.message for e in fastdom] == ["y", "w", "g", "attrs", "attrs", "kw", "kwp", "pa", long]
    assert fastdom[1].color == nvtx_cffi.to_argb("red")
    assert fastdom[3].color == nvtx_cffi.to_argb("green") and fastdom[3].category == 3
    assert (fastdom[7].payload, fastdom[7].category) == (1, 0)
    default = [e for e in hot if e.domain is None and e.kind == "push"]
    assert [e.message for e in default[-9:]] == ["wp", long, "dec-payload", "method",
                                                 "rec", "rec", "rec", "rec", "raises"]
    assert default[-9].payload == 5 and default[-7].payload == 2.5
    assert {e.color for e in default[-5:-1]} == {nvtx_cffi.to_argb("green")}


def test_every_push_is_popped_in_its_domain(recorded):
    runs, _ = recorded
    for run in runs.values():
        open_ranges = []
        for event in run:
            if event.kind == "push":
                open_ranges.append(event.domain)
            elif event.kind == "pop":
                assert open_ranges.pop() == event.domain
        assert open_ranges == []


def test_every_end_closes_the_id_its_start_returned(recorded):
    runs, _ = recorded
    for run in runs.values():
        starts = [e for e in run if e.kind == "start"]
        ends = [e for e in run if e.kind == "end"]
        assert len(starts) == len(ends) == 5 + 2 * 10 + 2 + 9  # + two per payload value, two async tasks, f-strings
        # (the two asyncio tasks end in either order)
        assert sorted((s.range_id, s.domain or "") for s in starts) == sorted((e.range_id, e.domain or "") for e in ends)
        assert len({(s.range_id, s.domain) for s in starts}) == len(starts)  # ids are unique


def test_end_range_rejects_what_start_range_never_returns(recorded):
    _, errors = recorded
    assert errors["str id"][0] == "TypeError" and "range_id" in errors["str id"][1]
    assert errors["too big"][0] == "ArgumentRangeError" and "out of range" in errors["too big"][1]
    assert errors["list"][0] == "TypeError" and "list" in errors["list"][1]
    assert errors["triple"][0] == "TypeError" and "tuple" in errors["triple"][1]
    assert errors["bool"][0] == "TypeError" and "bool" in errors["bool"][1]
    assert errors["negative"][0] == "ArgumentRangeError" and "-1" in errors["negative"][1]


@pytest.mark.parametrize("method", ["push_range", "start_range", "mark"])
def test_domain_methods_keep_their_keyword_only_signature(method):
    signature = inspect.signature(getattr(nvtx_cffi.Domain, method))
    parameters = list(signature.parameters.values())
    assert [p.name for p in parameters] == ["self", "attributes", "message", "color", "category", "payload"]
    assert parameters[1].default is None
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])


@pytest.mark.parametrize("method", ["push_range", "start_range", "mark"])
def test_domain_methods_reject_unknown_keywords_and_extra_positionals(method):
    bound = getattr(nvtx_cffi.get_domain("fast_paths_errors"), method)
    with pytest.raises(TypeError, match=rf"^{re.escape(DOMAIN_PREFIX)}{method}\(\) got an unexpected keyword argument 'colour'"):
        bound(colour="red")
    attributes = nvtx_cffi.get_domain("fast_paths_errors").get_event_attributes(message="kept")
    for extra in ((None, "message"), (attributes, "message"), (None, "m", "red", "c", 1, "x")):
        with pytest.raises(TypeError, match=rf"^Domain\.{method}\(\) takes from 1 to 2 positional "
                                            r"arguments \(self, attributes\): message, color, category and payload are "
                                            r"keyword-only$"):
            bound(*extra)
    assert attributes.message == "kept" and attributes.color is None
    with pytest.raises(TypeError, match="EventAttributes"):
        bound("not attributes")


def test_domain_pop_range_takes_no_argument():
    assert nvtx_cffi.get_domain().pop_range() is None
    assert nvtx_cffi.get_domain("fast_paths_pop").pop_range() is None
    with pytest.raises(TypeError):
        nvtx_cffi.get_domain("fast_paths_pop").pop_range(1)


NO_TOOL = r"""
import json
import warnings
import nvtx_cffi as nvtx
from nvtx_cffi import _accel, _annotate, _ranges
assert not nvtx.enabled()
d = nvtx.get_domain("notool")
out = {"accelerated": _accel.accel is not None}
for i in (1, 2 ** 63, 0.5, -7):
    a = nvtx.annotate("x", "red", "notool", "c", payload=i)
    b = nvtx.annotate(message="x", payload=i)
    with a, b:
        pass
    assert (a.payload, b.payload, a.attributes.payload, a.message, a.color) == (i, i, i, "x", "red")
    nvtx.mark("x", payload=i); nvtx.push_range("x", color="red", payload=i); nvtx.pop_range()
    assert d.start_range(message="x", payload=i) == 0
    d.push_range(message="x", color="red", payload=i); d.pop_range()
nvtx.annotate("pv", color="red")  # (its first sight: an object sent inline, not the cached one)
for p in (None, 3, None, 4.5, None):  # one call site, a payload sometimes None
    a = nvtx.annotate("pv", color="red", payload=p)
    assert a.payload == p and (p is not None or a is nvtx.annotate("pv", color="red")), (a.payload, p)
    with a:
        pass
a1, a2 = nvtx.annotate("x", payload=1), nvtx.annotate("x", payload=2)
assert a1 is not a2 and (a1.payload, a2.payload) == (1, 2)
errors = {}
for name, call in [("annotate", lambda: nvtx.annotate("x", payload="s")),
                   ("Domain.mark", lambda: d.mark(message="x", payload=[1])),
                   ("Domain.mark colour", lambda: d.mark(message="x", colour="red")),
                   ("annotate huge", lambda: nvtx.annotate("x", payload=2 ** 64)),
                   ("mark colour", lambda: nvtx.mark("x", colour="red")),
                   ("mark colour again", lambda: nvtx.mark("x", colour="red")),
                   ("push_range twice", lambda: nvtx.push_range("x", message="y"))]:
    nvtx.mark("x", color="red", domain="d", category="c")  # a valid shape, before and after
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except Exception as exc:
            errors[name] = [type(exc).__name__, str(exc).split(". Did you mean")[0]]  # 3.14+ adds a suggestion
    if caught:
        errors[name] = [caught[0].category.__name__, str(caught[0].message)]
out["errors"] = errors
out["annotate cache"] = len(_annotate._cache)
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode", sorted(MODES))
def test_without_a_tool_payload_calls_check_and_keep_their_values(mode):
    from conftest import run_python

    proc = run_python(NO_TOOL, env=MODES[mode], remove=("NVTX_INJECTION64_PATH", "NVTX_CFFI_PURE_PYTHON"))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["accelerated"] is (mode == "accelerated" and sys.implementation.name == "cpython")
    assert out["errors"] == {
        "annotate": ["NvtxWarning", "Unsupported payload type: <class 'str'>."],  # as nvtx; no error
        **({"Domain.mark": LIST_PAYLOAD} if LIST_PAYLOAD else {}),
        "Domain.mark colour": ["TypeError", DOMAIN_MARK_COLOUR],
        "annotate huge": ["OverflowError", f"payload {2 ** 64} is out of range: it must fit in int64 or uint64"],
        "mark colour": ["TypeError", "mark() got an unexpected keyword argument 'colour'"],
        "mark colour again": ["TypeError", "mark() got an unexpected keyword argument 'colour'"],
        "push_range twice": ["TypeError", "push_range() got multiple values for argument 'message'"],
    }
    # ("x", "red", "notool", "c"), ("x",) and ("pv", "red"): no payload in any key
    assert out["annotate cache"] == 3


NO_TOOL_ARRAYS = r"""
import json
import warnings
import numpy as np
import nvtx_cffi as nvtx
assert not nvtx.enabled()

class Sub(np.ndarray):
    pass

d = nvtx.get_domain("arrays")
ints, objects = np.arange(4), np.array([object()] * 2, dtype=object)
payloads = {
    "int64": ints, "int64 again": np.arange(3), "objects": objects,
    "big-endian": np.arange(2, dtype=">i4"), "0-d int": np.array(7), "0-d float": np.array(2.5),
    "int32": np.arange(2, dtype=np.int32), "sub of objects": objects.view(Sub),
    "sub of ints": ints.view(Sub), "strided": np.arange(8)[::2], "2-d": np.zeros((2, 3)),
    "complex128": np.ones(2, dtype=complex), "timedelta64": np.array([1], dtype="m8[s]"),
    "list": [1, 2], "str": "s",
}
out = {}
for _ in range(3):  # the first round fills the caches and C's dtype list; later rounds use them
    for name, p in payloads.items():
        for spelling, make in [("positional", lambda p: nvtx.annotate("x", "red", None, "c", p)),
                               ("keyword", lambda p: nvtx.annotate("x", payload=p)),
                               ("domain", lambda p: d.mark(message="x", color="red", payload=p)),
                               ("domain start", lambda p: d.start_range(message="x", payload=p))]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    a = make(p)
                    if spelling.startswith("domain"):
                        got = ["ok", a]  # None, and start_range's 0
                    else:
                        with a:
                            pass
                        got = ["ok", a.payload is p, a.message, a.color]
                except Exception as exc:
                    got = [type(exc).__name__, str(exc)]
            if caught:
                got.append(str(caught[0].message))
            out.setdefault(f"{name} {spelling}", []).append(got)
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="needs NumPy")
def test_without_a_tool_array_payloads_are_checked_on_every_call():
    """Without a tool, C carries an array payload whose dtype passed the check before without
    calling the check again: the same errors in both modes and on every call, a 0-d array is a
    number, ndarray subclasses and other dtypes still take the check."""
    from conftest import run_python

    results = {}
    for mode in sorted(MODES):
        proc = run_python(NO_TOOL_ARRAYS, env=MODES[mode], remove=("NVTX_INJECTION64_PATH", "NVTX_CFFI_PURE_PYTHON"))
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["accelerated"] == results["pure_python"]
    out = results["accelerated"]
    for key, rounds in out.items():
        assert rounds[0] == rounds[1] == rounds[2], key
    ok = ["ok", True, "x", "red"]
    objects_error = ["TypeError", "payload: NumPy arrays of Python objects cannot be sent (dtype object)"]
    assert out["int64 positional"][0] == out["strided positional"][0] == out["2-d positional"][0] == ok
    assert out["int64 keyword"][0] == ["ok", True, "x", None]
    assert out["objects positional"][0] == out["sub of objects keyword"][0] == objects_error
    assert out["big-endian keyword"][0] == [
        "ValueError", "payload: dtype >i4 is not in native byte order (use .astype(dtype.newbyteorder('=')))"]
    for name in ("complex128", "timedelta64[s]"):
        assert out[f"{name.split('[')[0]} positional"][0] == [
            "TypeError", f"payload: NumPy dtype {name} is not supported (numbers, str, bytes and structs of them are)"]
    assert out["0-d int keyword"][0] == out["0-d float keyword"][0] == out["sub of ints keyword"][0] == [
        "ok", True, "x", None]
    assert out["list positional"][0] == ok
    assert out["str positional"][0] == ok + ["Unsupported payload type: <class 'str'>."]
    for name in ("int64", "strided", "2-d", "0-d int", "sub of ints", "int32"):
        assert out[f"{name} domain"][0] == ["ok", None] and out[f"{name} domain start"][0] == ["ok", 0]
    assert out["objects domain"][0] == out["sub of objects domain start"][0] == objects_error
