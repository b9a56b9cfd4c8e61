"""Bad input: a clear exception naming the argument, and the tables stay intact."""
from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

import nvtx_cffi as nvtx

try:
    import numpy as _np
except ImportError:  # PyPy without NumPy: array payloads warn and are not sent
    _np = None
from nvtx_cffi import recorder

from conftest import ranges, run_python

CALLS = {
    "push_range": nvtx.push_range,
    "mark": nvtx.mark,
    "start_range": nvtx.start_range,
    "annotate": nvtx.annotate,
}

BAD = [
    (dict(message=42), TypeError, "message must be a str"),
    (dict(message=bytearray(b"bytes")), TypeError, "message must be a str"),
    (dict(message=b"nul\x00inside"), ValueError, "message must not contain NUL"),
    (dict(message="nul\x00inside"), ValueError, "message must not contain NUL"),
    (dict(message="lone \ud800 surrogate"), ValueError, "message is not valid Unicode"),
    (dict(color="no-such-colour"), ValueError, "unknown color 'no-such-colour'"),
    (dict(color=-1), ValueError, "color -0x1 is out of range"),
    (dict(color=2**32), ValueError, "color 0x100000000 is out of range"),
    (dict(color=True), TypeError, "color must be"),
    (dict(color=1.5), TypeError, "color must be"),
    (dict(color=(2.0, 0.0, 0.0)), ValueError, "color tuple must hold"),
    (dict(category=-1), ValueError, "category must be non-negative"),
    (dict(category=2**32), OverflowError, "category 4294967296 is out of range"),
    (dict(category=1.5), TypeError, "category must be a str"),
    (dict(category="nul\x00"), ValueError, "category must not contain NUL"),
    (dict(payload=2**64), OverflowError, "payload 18446744073709551616 is out of range"),
    (dict(payload=-(2**63) - 1), OverflowError, "is out of range"),
    # str/dict payloads warn and are not sent (as nvtx); arrays no schema describes are errors:
    *([(dict(payload=[object()]), TypeError, "payload: NumPy arrays of Python objects cannot be sent"),
       (dict(payload=_np.arange(3, dtype=">i4")), ValueError, "payload: dtype >i4 is not in native byte order"),
       (dict(payload=_np.array([True])), TypeError, "payload: NumPy dtype bool is not supported")]
      if _np is not None else []),
    (dict(domain=7), TypeError, "domain must be a str, not int"),
    (dict(domain="nul\x00"), ValueError, "domain must not contain NUL"),
]


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(("kwargs", "error", "text"), BAD, ids=[repr(b[0])[:40] for b in BAD])
def test_bad_argument_is_named(call, kwargs, error, text):
    with pytest.raises(error, match=re.escape(text)):
        CALLS[call](**kwargs)


def test_tables_intact_after_bad_input():
    for kwargs, error, _ in BAD:
        with pytest.raises(error):
            nvtx.push_range(**kwargs)
    with recorder.capture() as got:
        nvtx.push_range("still fine", color="red", category=3, payload=1)
        nvtx.pop_range()
    (push,) = ranges(got, "push")
    assert (push.message, push.color, push.category, push.payload) == ("still fine", 0xFF0000, 3, 1)


def _spellings():
    d = nvtx.get_domain("equal_keys")

    def annotate_with(**kw):
        with nvtx.annotate("eq", **kw):
            pass

    def decorated(**kw):
        nvtx.annotate("eq", **kw)(lambda: None)()

    return {
        "push_range": lambda **kw: (nvtx.push_range("eq", **kw), nvtx.pop_range()),
        "mark": lambda **kw: nvtx.mark("eq", **kw),
        "start_range": lambda **kw: nvtx.end_range(nvtx.start_range("eq", **kw)),
        "annotate": annotate_with,
        "annotate payload": lambda **kw: annotate_with(payload=7, **kw),
        "decorator": decorated,
        "Domain.push_range": lambda **kw: (d.push_range(message="eq", **kw), d.pop_range()),
        "Domain.start_range": lambda **kw: d.end_range(d.start_range(message="eq", **kw)),
        "Domain.mark": lambda **kw: d.mark(message="eq", payload=7, **kw),
    }


# A valid value, then one equal to it (so a dict finds its cache entry) that is an error.
EQUAL_BUT_WRONG = [
    ("color", 1, True, TypeError, "color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not True"),
    ("color", 1, 1.0, TypeError, "color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not float"),
    ("color", 0, False, TypeError, "color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not False"),
    ("color", (1, 0, 0), (True, 0, 0), ValueError, "color tuple must hold 3 or 4 numbers between 0 and 1"),
    ("category", 1, True, TypeError, "category must be a str, a non-negative int or None, not bool"),
    ("category", 1, 1.0, TypeError, "category must be a str, a non-negative int or None, not float"),
    # NumPy scalars equal to the int: a float64 (a float subclass) and a bool are errors, as on first
    # use; a NumPy integer is an integer-like and is looked up (it means what the int means)
    *([("color", 1, _np.float64(1.0), TypeError,
        "color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not float64"),
       ("category", 1, _np.True_, TypeError,
        f"category must be a str, a non-negative int or None, not {type(_np.True_).__name__}")]
      if _np is not None else []),
]


@pytest.mark.parametrize("spelling", sorted(_spellings()))
@pytest.mark.parametrize(("name", "good", "wrong", "error", "text"), EQUAL_BUT_WRONG,
                         ids=[f"{n}={type(w).__name__}({w!r})" for n, _, w, _, _ in EQUAL_BUT_WRONG])
def test_an_equal_value_of_a_wrong_type_is_rejected_after_the_right_one_is_cached(
        spelling, name, good, wrong, error, text):
    """The caches of prepared calls are keyed by the arguments, and True == 1 == 1.0: once
    ``color=1`` was cached, ``color=True`` used to find its entry and pass (in every spelling, in
    C and in Python). Three valid calls fill every cache (the C call-site table too); the wrong
    value must still fail as it does on first use, and the valid calls record the right event."""
    call = _spellings()[spelling]
    with recorder.capture() as got:
        for _ in range(3):
            call(**{name: good})
    events = [e for e in got if e.kind in ("push", "start", "mark") and e.message == "eq"]
    assert len(events) == 3, spelling
    if name == "color":
        # an int is the ARGB value as given; (1, 0, 0) is opaque red
        assert {e.color for e in events} == {0xFFFF0000 if isinstance(good, tuple) else good}
    else:
        assert all(e.category == good for e in events)
    for _ in range(3):
        with pytest.raises(error, match=re.escape(text)):
            call(**{name: wrong})


@pytest.mark.skipif(_np is None, reason="needs NumPy")
@pytest.mark.parametrize("spelling", sorted(_spellings()))
def test_a_numpy_integer_colour_and_category_mean_their_int(spelling):
    """A NumPy integer is looked up in the caches (it equals only the int of its value): after the
    int's calls, and on its own, it records that colour and category."""
    call = _spellings()[spelling]
    with recorder.capture() as got:
        call(color=0x00FF00FF, category=5)
        for _ in range(3):
            call(color=_np.int64(0x00FF00FF), category=_np.uint16(5))
            call(color=_np.int32(0x0000FF00), category=_np.int8(6))
    events = [(e.color, e.category) for e in got if e.kind in ("push", "start", "mark") and e.message == "eq"]
    assert events == [(0x00FF00FF, 5)] + [(0x00FF00FF, 5), (0x0000FF00, 6)] * 3, spelling


def test_huge_message_reaches_the_tool_whole():
    huge = "y" * (1 << 20) + "z"
    with recorder.capture() as got:
        nvtx.mark(huge)
        nvtx.mark("y" * 1000)
    (cut, whole) = ranges(got, "mark")
    # NVTX got all of it; the recorder keeps 64 KiB of a message per record and says it cut it.
    assert huge.startswith(cut.message) and len(cut.message) == 65536 and cut.truncated
    assert whole.message == "y" * 1000 and not whole.truncated


@pytest.mark.parametrize(
    ("range_id", "error", "text"),
    [("abc", TypeError, "range_id must be the value start_range returned, not str"),
     ((1.5, 0), TypeError, "range_id must be the (id, domain index) pair start_range returned, not (1.5, 0)"),
     (-1, ValueError, "range_id -1 is out of range"),
     (2**64, ValueError, "range_id 18446744073709551616 is out of range")],
)
def test_end_range_bad_id(range_id, error, text):
    with pytest.raises(error, match=re.escape(text)):
        nvtx.end_range(range_id)


def test_unknown_range_id_and_domain_index_are_passed_on_or_ignored():
    with recorder.capture() as got:
        nvtx.end_range((123456789, 0))  # an id NVTX never issued: passed on, the tool ignores it
        nvtx.end_range((1, 10_000))  # a domain index that does not exist: ignored
        nvtx.end_range((2**40 + 3, 0))  # ids beyond 2**30 (more than one digit of CPython's int)
        nvtx.end_range(2**64 - 1)
        nvtx.end_range((5, 2**31 - 1))  # indexes that fit an int but name no domain: ignored
        nvtx.end_range((6, -5))
        with pytest.raises(TypeError, match=r"^range_id must be the \(id, domain index\) pair start_range returned, "
                                            r"not \(7, 1099511627776\)$"):
            nvtx.end_range((7, 2**40))  # an index beyond an int: refused, as a huge one is
    assert [e.range_id for e in ranges(got, "end")] == [123456789, 2**40 + 3, 2**64 - 1]


def test_domain_methods_reject_bad_input():
    domain = nvtx.get_domain("strict")
    with pytest.raises(TypeError, match="attributes must be EventAttributes, not str"):
        domain.push_range("not attributes", message="x")
    other = nvtx.get_domain("other").get_event_attributes(message="x")
    with pytest.raises(ValueError, match="attributes belong to domain 'other', not 'strict'"):
        domain.set_event_attributes(other, color="red")
    registered = nvtx.get_domain("other").get_registered_string("owned")
    with pytest.raises(ValueError, match="registered in domain 'other', not 'strict'"):
        domain.get_event_attributes(message=registered)
    with pytest.raises(TypeError, match="range_id must be"):
        domain.end_range("x")


def test_domain_end_range_given_module_level_start_ranges_pair_raises_type_error():
    """Domain.end_range takes the int Domain.start_range returns; the (id, domain) pair of module-
    level start_range is a TypeError there (as in nvtx), not a false 'id out of range'."""
    domain = nvtx.get_domain("pairs")
    pair = nvtx.start_range("pair", domain="pairs")
    with pytest.raises(TypeError, match=r"range_id must be the int Domain.start_range returned, not a tuple") as caught:
        domain.end_range(pair)
    assert not isinstance(caught.value, ValueError)
    with recorder.capture() as got:
        nvtx.end_range(pair)  # the range is still open: the right call ends it
    assert [(e.kind, e.domain, e.range_id) for e in got] == [("end", "pairs", pair[0])]


@pytest.mark.parametrize("payload", [None, 5], ids=["slot", "payload"])
def test_another_domains_attributes_record_in_the_domain_called(payload):
    """d1.push_range(a2) / start_range(a2) / mark(a2) recorded in domain two (and
    d1's next pop did not match). As in nvtx, the event is d1's, with d1's equivalent attributes."""
    d1, d2 = nvtx.get_domain("mine"), nvtx.get_domain("theirs")
    foreign = d2.get_event_attributes(message="foreign", payload=payload)
    with recorder.capture() as got:
        d1.push_range(foreign)
        d1.pop_range()
        d1.end_range(d1.start_range(foreign))
        d1.mark(foreign)
        d1.mark(foreign, color="red")  # changes `foreign` in its own domain, as nvtx does
        d2.mark(foreign)
    assert [(e.kind, e.domain, e.message, e.payload) for e in got if e.kind != "string"] == [
        ("push", "mine", "foreign", payload), ("pop", "mine", None, None), ("start", "mine", "foreign", payload),
        ("end", "mine", None, None), ("mark", "mine", "foreign", payload), ("mark", "mine", "foreign", payload),
        ("mark", "theirs", "foreign", payload)]
    assert [e.color for e in got if e.kind == "mark"][1:] == [0x00FF0000, 0x00FF0000] and foreign.color == "red"


def test_failed_update_leaves_attributes_unchanged():
    domain = nvtx.get_domain("keep")
    attributes = domain.get_event_attributes(message="kept", color="red")
    with pytest.raises(ValueError, match="unknown color"):
        attributes.color = "nope"
    if _np is not None:
        with pytest.raises(TypeError, match="payload: NumPy arrays of Python objects"):
            domain.set_event_attributes(attributes, message="changed", payload=[object()])
    with recorder.capture() as got:
        domain.mark(attributes)
    (mark,) = ranges(got, "mark")
    assert (mark.message, mark.color, attributes.message) == ("kept", 0xFF0000, "kept")


def test_decorating_a_non_callable():
    with pytest.raises(TypeError, match="annotate\\(\\) decorates callables, not int"):
        nvtx.annotate("x")(3)


# -- huge ints are named, never formatted; integer-likes are ints everywhere --

HUGE = 10**5000  # str() of it raises ValueError (4300-digit limit); the message must not try


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(("kwargs", "error", "text"), [
    (dict(payload=HUGE), OverflowError, "payload (a 16610-bit int) is out of range: it must fit in int64 or uint64"),
    (dict(payload=-HUGE), OverflowError, "payload (-a 16610-bit int) is out of range"),
    (dict(category=HUGE), OverflowError, "category (a 16610-bit int) is out of range (at most 4294967295)"),
    (dict(category=-HUGE), ValueError, "category must be non-negative, not (-a 16610-bit int)"),
    (dict(color=HUGE), ValueError, "color (a 16610-bit int) is out of range"),
    (dict(payload=Fraction(HUGE, 3)), OverflowError, "payload is out of range for a float (double)"),
], ids=["payload", "-payload", "category", "-category", "color", "fraction"])
def test_huge_ints_are_named_not_formatted(call, kwargs, error, text):
    with pytest.raises(error) as info:
        CALLS[call](**kwargs)
    assert str(info.value).startswith(text) and len(str(info.value)) < 200


@pytest.mark.parametrize(("call", "error", "text"), [
    (lambda: nvtx.end_range(HUGE), ValueError, "range_id (a 16610-bit int) is out of range (0 to 2**64-1)"),
    (lambda: nvtx.end_range((HUGE, 0)), ValueError, "range_id (a 16610-bit int) is out of range"),
    (lambda: nvtx.end_range((1, HUGE)), TypeError,
     "range_id must be the (id, domain index) pair start_range returned, not (1, (a 16610-bit int))"),
    (lambda: nvtx.get_domain("huge").end_range(HUGE), ValueError, "range_id (a 16610-bit int) is out of range"),
    (lambda: nvtx.name_cuda_stream(HUGE, "s"), ValueError, "stream (a 16610-bit int) is out of range"),
    (lambda: nvtx.name_cuda_device(HUGE, "d"), ValueError, "device (a 16610-bit int) is out of range"),
    (lambda: nvtx.get_domain("huge").get_event_attributes(payload=HUGE), OverflowError, "payload (a 16610-bit int)"),
], ids=["end", "end pair", "end pair index", "domain end", "stream", "device", "attributes"])
def test_huge_ints_in_ids_and_handles(call, error, text):
    with pytest.raises(error) as info:
        call()
    assert str(info.value).startswith(text) and len(str(info.value)) < 200


class Index:
    """An integer-like that is not an int (what NumPy integers are to Python)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def integer_likes():
    kinds = [Index]
    try:
        import numpy
    except ImportError:
        pass
    else:
        kinds += [numpy.int64, numpy.uint32]
    return kinds


@pytest.mark.parametrize("kind", integer_likes(), ids=lambda k: k.__name__)
def test_integer_likes_are_accepted_wherever_an_int_is(kind):
    """np.int64 was accepted as category and payload but not as colour or range id."""
    d = nvtx.get_domain("intlike")
    with recorder.capture() as got:
        nvtx.push_range("il", color=kind(0x112233), category=kind(7), payload=kind(9))
        nvtx.pop_range()
        with nvtx.annotate("il2", color=kind(0x445566), category=kind(8), payload=kind(10)):
            pass
        rid, index = nvtx.start_range("il3", domain="intlike")
        nvtx.end_range((kind(rid), kind(index)))
        nvtx.end_range(kind(nvtx.start_range("il4")[0]))
        d.end_range(kind(d.start_range(d.get_event_attributes(message="il5", color=kind(0x778899)))))
        nvtx.name_cuda_stream(kind(0x1000), "il stream")
    pushes = ranges(got, "push")
    assert [(e.message, e.color, e.category, e.payload) for e in pushes] == [
        ("il", 0x112233, 7, 9), ("il2", 0x445566, 8, 10)]
    starts = {(e.domain, e.range_id): (e.message, e.color) for e in ranges(got, "start")}
    ended = [starts[e.domain, e.range_id][0] for e in ranges(got, "end")]
    assert ended == ["il3", "il4", "il5"] and ("il5", 0x778899) in starts.values()
    (named,) = [e for e in got if e.name == "il stream"]
    assert (named.resource, named.target) == ("cuda_stream", 0x1000)


def test_integer_like_whose_index_is_not_an_int_is_rejected_by_name():
    class Bad:
        def __index__(self):
            return "nope"

    for kwargs, name in [(dict(color=Bad()), "color"), (dict(category=Bad()), "category"),
                         (dict(payload=Bad()), "payload")]:
        with pytest.raises(TypeError, match=f"^{name} must be"):
            nvtx.mark("bad index", **kwargs)
    with pytest.raises(TypeError, match="^range_id must be the value start_range returned, not Bad$"):
        nvtx.end_range(Bad())


WARNING_LINES = r"""
import json, warnings
warnings.simplefilter("always")
import nvtx_cffi as nvtx
with warnings.catch_warnings(record=True) as caught:
    nvtx.mark("m", payload="s")                               # line 6
    with nvtx.annotate("a", payload="s"):                     # line 7
        pass
    nvtx.push_range("p", payload={})                          # line 9
    nvtx.pop_range()
    d = nvtx.get_domain("d")
    a = d.get_event_attributes(message="x", payload="s")      # line 12
    d.mark(message="y", payload="s")                          # line 13
    @nvtx.annotate("f", payload="s")                          # line 14
    def f(): pass
    f()
    nvtx.end_range(nvtx.start_range("s", payload=object()))   # line 17
print(json.dumps([(w.filename == __file__, w.lineno, w.category.__name__) for w in caught]))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
@pytest.mark.parametrize("tool", ["recorder", "none"])
def test_a_payload_warning_names_the_users_line(tmp_path, pure, tool):
    # A fixed stacklevel named nvtx-cffi's own lines (_domain.py:108, _annotate.py:161) on most
    # paths. Without a tool the module-level calls do not look at their payload (docs/guide.md), so they
    # do not warn.
    script = tmp_path / "user.py"
    script.write_text(WARNING_LINES)
    remove = ("NVTX_INJECTION64_PATH",) if tool == "none" else ()
    proc = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')",
                      {"NVTX_CFFI_PURE_PYTHON": pure}, remove=remove)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = [6, 7, 9, 12, 13, 14, 17] if tool == "recorder" else [7, 12, 13, 14]
    assert got == [[True, line, "NvtxWarning"] for line in lines]


def test_a_bad_environment_switch_warns_at_the_users_import():
    proc = run_python("import warnings\nwarnings.simplefilter('always')\nimport nvtx_cffi\n",
                      {"NVTX_CFFI_PURE_PYTHON": "maybe"})
    assert proc.stderr.splitlines()[0] == (
        "<string>:3: RuntimeWarning: NVTX_CFFI_PURE_PYTHON='maybe' is not a boolean "
        "(use 1/true/yes/on or 0/false/no/off); treating it as off")
