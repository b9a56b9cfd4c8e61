"""Property-based tests: every public function's arguments, hostile or not, against the recorder.

For any message (any type; NUL, lone surrogates, 1 MB), colour, category, payload and domain,
each public call either raises TypeError/ValueError/OverflowError whose text names a bad
argument, or records exactly the event an independent model of the arguments predicts
(message, colour, domain, category, payload). Never a crash; and after each run a known-good
call must still record correctly (no table was corrupted).

The properties run in a recorded child (``test_under_recorder``), one pytest child per property
so that each child's record file stays small (``capture`` re-reads it after every example).
Examples per property: 150 by default, ``NVTX_CFFI_HYPOTHESIS_EXAMPLES`` or ``-m slow`` (3000).
"""
from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import re
import warnings
from decimal import Decimal
from fractions import Fraction

import pytest

try:
    import numpy as _np
except ImportError:  # PyPy without NumPy: sequences warn and are not sent
    _np = None
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvtx_cffi as nvtx
from support.hardening import attached_here, opted_in_slow, run_pytest_child  # noqa: F401 (fixture)
from nvtx_cffi import recorder
from nvtx_cffi._colors import CSS_COLORS, NVTX_COLORS
from nvtx_cffi.nvtx import NvtxWarning
from nvtx_cffi._validate import ArgumentRangeError

INNER = attached_here()
inner = pytest.mark.skipif(not INNER, reason="runs in a recorded child: see test_under_recorder")

PROPERTIES = ["test_module_calls", "test_annotate", "test_domain_api", "test_end_and_pop", "test_call_sites"]
EXAMPLES = int(os.environ.get("NVTX_CFFI_HYPOTHESIS_EXAMPLES", "150"))
STATS = os.environ.get("NVTX_CFFI_HYPOTHESIS_STATS")  # file the child appends its example count to

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # shared 2-core machine: timing says nothing here
    suppress_health_check=list(HealthCheck),
)

# The recorder cuts a text longer than this (its chunk size bounds a record); see recorder.h.
RECORDER_TEXT_CAP = 65536
BLUE = 0x0000FF  # nvtx's default colour

# --------------------------------------------------------------------------- strategies

_odd_chars = st.sampled_from(["a", "Z", " ", "\n", "\t", "\u00e9", "\u4e2d", "\U0001F600", "\u200b",
                              "\x00", "\ud800", "\udfff", "\x7f", "%", "{", "#"])
texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=_odd_chars, max_size=24),
    # long ones: around the registration bound (4096 bytes) and the recorder's text cap, and 1 MB
    st.builds(operator.mul, st.sampled_from(["x", "\u00e9", "\U0001F600", "ab\x00", "\udc80"]),
              st.sampled_from([1000, 2048, 4096, 4097, 65535, 65537, 1 << 20])),
)
not_text = st.one_of(st.binary(max_size=8), st.integers(), st.floats(), st.booleans(),
                     st.lists(st.integers(), max_size=2), st.tuples(st.text(max_size=3)),
                     st.just(object()), st.just(Decimal("1.5")), st.just(b"bytes"))
messages = st.one_of(st.none(), texts, not_text)

_hex = "0123456789abcdefABCDEF"
colors = st.one_of(
    st.none(),
    st.sampled_from(sorted(NVTX_COLORS)), st.sampled_from(sorted(CSS_COLORS)),
    st.sampled_from(["Red", "DarkSlateGray", "dark slate gray", "RED", "tab:blue", "C0", "", "#", "nope"]),
    st.integers(0, 2**24 - 1).map("#{:06x}".format),
    st.integers(0, 2**32 - 1).map("#{:08X}".format),
    st.text(alphabet=_hex + "xX+-_ g", min_size=6, max_size=8).map("#".__add__),
    st.sampled_from(["#+12345", "#-12345", "# 12345", "#12345 ", "#1_2345", "#0x1234", "#\uff11\uff12\uff13\uff14\uff15\uff16",
                     "#-1234567", "#1234567", "#12345"]),
    st.text(max_size=12),
    st.integers(-(2**40), 2**40), st.sampled_from([0, 0xFFFFFFFF, 2**32, -1]),
    st.booleans(), st.floats(),
    st.tuples(st.floats(-0.5, 1.5), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
    st.lists(st.one_of(st.floats(0, 1), st.integers(0, 1), st.text(max_size=1)), min_size=0, max_size=5).map(tuple),
    st.lists(st.integers(), max_size=3), st.just(object()),
)
_category_names = st.sampled_from(["io", "compute", "\u00e9t\u00e9", "\U0001F600", "", "a b", "x" * 300])
categories = st.one_of(
    st.none(), _category_names, texts,
    st.integers(-(2**40), 2**40), st.sampled_from([0, 1, 2**32 - 1, 2**32, -1]),
    st.booleans(), st.floats(), st.just(Fraction(3, 1)), st.just(b"io"), st.lists(st.integers(), max_size=2),
)
payloads = st.one_of(
    st.none(), st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.just(Fraction(1, 3)), st.just(Decimal("2.5")), st.just(1 + 2j), st.text(max_size=3),
    st.just(b"1"), st.lists(st.integers(), max_size=2),
)
# Domains: a fixed pool of good names (each run may create at most 255 domains), and bad ones.
_domain_names = ["", "d", "hardening", "dom\u00e4ne", "\U0001F600 domain", "a b c", "x" * 5000]
domains = st.one_of(
    st.none(), st.sampled_from(_domain_names),
    st.sampled_from(["nul\x00", "\ud800", "lone \udfff"]),
    st.integers(), st.binary(max_size=4), st.lists(st.text(max_size=2), max_size=2), st.floats(),
)
MISSING = object()  # "argument not passed": the function's default applies


def maybe(strategy):
    return st.one_of(st.just(MISSING), strategy)


# --------------------------------------------------------------------------- the model


class Expect:
    """What a call with these arguments must do: raise (one of ``errors``) or record ``fields``."""

    def __init__(self) -> None:
        self.errors = {}  # argument name -> exception type
        self.fields = {}
        self.warning = None  # the NvtxWarning's text, for a payload that is left out

    def bad(self, argument: str, error: type) -> None:
        self.errors[argument] = error


def _text(value, argument: str, expect: Expect, bytes_ok: bool = False):
    """Model of a text argument: str without NUL, encodable as UTF-8. A message may be bytes, as
    in nvtx: read as UTF-8 (an invalid sequence as U+FFFD)."""
    if bytes_ok and type(value) is bytes:
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        expect.bad(argument, TypeError)
        return None
    if "\x00" in value:
        expect.bad(argument, ValueError)
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        expect.bad(argument, ValueError)
        return None
    return value


def model_message(message, expect: Expect) -> None:
    if message is None:
        expect.fields["message"] = None
    else:
        expect.fields["message"] = _text(message, "message", expect, bytes_ok=True)


def _hex_color(name: str):
    if re.fullmatch(r"#[0-9a-fA-F]{6}", name):
        return 0xFF000000 | int(name[1:], 16)
    if re.fullmatch(r"#[0-9a-fA-F]{8}", name):
        rgba = int(name[1:], 16)
        return ((rgba & 0xFF) << 24) | (rgba >> 8)
    return None


def _matplotlib_knows(name: str) -> bool:
    try:
        import matplotlib.colors as mcolors
    except ImportError:
        return False
    return mcolors.is_color_like(name)


def model_color(color, default, expect: Expect) -> None:
    if color is MISSING:
        color = default
    if color is None:
        expect.fields["color"] = BLUE
    elif isinstance(color, bool):
        expect.bad("color", TypeError)
    elif isinstance(color, int):
        if 0 <= color <= 0xFFFFFFFF:
            expect.fields["color"] = color
        else:
            expect.bad("color", ValueError)
    elif isinstance(color, str):
        value = NVTX_COLORS.get(color)
        if value is None and color.lower().replace(" ", "") in CSS_COLORS:
            value = 0xFF000000 | CSS_COLORS[color.lower().replace(" ", "")]
        if value is None:
            value = _hex_color(color)
        if value is not None:
            expect.fields["color"] = value
        elif _matplotlib_knows(color):
            expect.fields["color"] = nvtx.to_argb(color)  # matplotlib's own table: out of scope here
        else:
            expect.bad("color", ValueError)
    elif isinstance(color, tuple):
        if len(color) in (3, 4) and all(isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1
                                        for c in color):
            r, g, b, a = (*color, 1.0) if len(color) == 3 else color
            expect.fields["color"] = (round(a * 255) << 24) | (round(r * 255) << 16) | (round(g * 255) << 8) | round(b * 255)
        else:
            expect.bad("color", ValueError)
    else:
        expect.bad("color", TypeError)


def model_domain(domain, expect: Expect) -> None:
    expect.fields["domain"] = None if domain is None else _text(domain, "domain", expect)


def model_category(category, expect: Expect) -> None:
    """Category id; a name's id is asked of the domain afterwards (``fields['category_name']``)."""
    if category is None:
        expect.fields["category"] = 0
    elif isinstance(category, str):
        expect.fields["category_name"] = _text(category, "category", expect)
    elif isinstance(category, bool) or not isinstance(category, int):
        expect.bad("category", TypeError)
    elif category < 0:
        expect.bad("category", ValueError)
    elif category >= 2**32:
        expect.bad("category", OverflowError)
    else:
        expect.fields["category"] = category


def model_payload(payload, expect: Expect) -> None:
    if payload is None:
        expect.fields["payload"] = (None, None)
    elif isinstance(payload, float):
        expect.fields["payload"] = (payload, "double")
    elif isinstance(payload, int):  # bool included: an int
        if -(2**63) <= payload < 2**63:
            expect.fields["payload"] = (int(payload), "int64")
        elif 0 <= payload < 2**64:
            expect.fields["payload"] = (int(payload), "uint64")
        else:
            expect.bad("payload", OverflowError)
    elif isinstance(payload, Fraction):
        expect.fields["payload"] = (float(payload), "double")
    elif type(payload) in (list, tuple, range, bytes) and _np is not None:
        # An extended (binary) payload, as nvtx: NumPy makes the array; what no schema fits fails.
        try:
            array = _np.array(payload)
        except (OverflowError, ValueError, TypeError) as exc:
            expect.bad("payload", type(exc))
            return
        if array.dtype.hasobject or array.dtype.kind not in "iufSU":
            expect.bad("payload", TypeError)
        elif array.nbytes == 0:
            expect.fields["payload"] = (None, None)  # nothing to send: no payload (nvtx too)
        else:
            expect.fields["payload"] = (None, "ext")
    else:
        # str, Decimal, complex, ...: nvtx warns and sends the event without a payload.
        expect.fields["payload"] = (None, None)
        expect.warning = f"Unsupported payload type: {type(payload)}."
        if type(payload) in (list, tuple, range, bytes):  # only without NumPy
            expect.warning += " Install numpy for extended payload support."


@contextlib.contextmanager
def payload_warnings(expect: Expect):
    """The block's NvtxWarnings against the model, where the call went through: the one
    ``expect.warning`` names (however often the payload was looked at), none otherwise."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NvtxWarning)
        yield
    if not expect.errors:
        texts = {str(w.message) for w in caught if issubclass(w.category, NvtxWarning)}
        assert texts == ({expect.warning} if expect.warning else set()), texts


def model(message, color, domain, category, payload, *, default_color) -> Expect:
    expect = Expect()
    model_message(None if message is MISSING else message, expect)
    model_color(color, default_color, expect)
    model_domain(None if domain is MISSING else domain, expect)
    model_category(None if category is MISSING else category, expect)
    model_payload(None if payload is MISSING else payload, expect)
    return expect


def _equal_to_valid_int(value) -> bool:
    try:
        return not isinstance(value, (str, bytes)) and value == int(value)
    except (TypeError, ValueError, OverflowError):
        return False


def tolerate_cached_equal_int(expect: Expect, kwargs: dict) -> None:
    """A call the model rejects succeeded: allowed only for a bool / integral float / Fraction
    colour or category equal to a valid int. The hot path's caches are keyed by the raw arguments,
    so ``category=True`` after ``category=1`` finds 1's prepared slot (True == 1, same hash) and
    records category 1 instead of raising; by design (no type check on the hot path). The event
    must then carry that int."""
    assert set(expect.errors) <= {"color", "category"}, expect.errors
    for argument in expect.errors:
        value = kwargs.get(argument)
        assert _equal_to_valid_int(value), (argument, value, expect.errors)
        probe = Expect()
        (model_color(int(value), None, probe) if argument == "color" else model_category(int(value), probe))
        assert not probe.errors, (argument, value)
        expect.fields.update(probe.fields)
    expect.errors = {}


# --------------------------------------------------------------------------- checks


def call_kwargs(**arguments):
    return {name: value for name, value in arguments.items() if value is not MISSING}


def check_error(exc: BaseException, expect: Expect) -> None:
    """``exc`` is one of the expected types and its text names the argument it is about."""
    named = [a for a, t in expect.errors.items() if isinstance(exc, t) and a in str(exc)]
    assert named, f"{type(exc).__name__}({exc}) names none of the bad arguments {expect.errors}"


def check_message(recorded, expected) -> None:
    if expected is None:
        assert recorded is None
        return
    data = expected.encode("utf-8")
    if len(data) <= RECORDER_TEXT_CAP:
        assert recorded == expected
    else:  # the recorder cut it; what it kept must be the start (a cut character decodes as U+FFFD)
        kept = recorded.rstrip("\ufffd").encode("utf-8")
        assert data.startswith(kept) and len(kept) >= RECORDER_TEXT_CAP - 4


def check_event(event, kind: str, expect: Expect, domain_name) -> None:
    f = expect.fields
    assert event.kind == kind
    assert event.domain == domain_name
    check_message(event.message, f["message"])
    assert event.color == f["color"]
    if "category_name" in f:
        assert event.category == nvtx.get_domain(domain_name).get_category_id(f["category_name"])
    else:
        assert event.category == f["category"]
    value, kind_ = f["payload"]
    assert event.payload_type == kind_
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(event.payload)
    else:
        assert event.payload == value


def annotations(events):
    return [e for e in events if e.kind in ("push", "pop", "start", "end", "mark")]


def count_example() -> None:
    if STATS:
        with open(STATS, "a") as f:
            f.write("1\n")


def known_good_call_records() -> None:
    """After a run: tables intact, a plain call still records exactly (checked after each property)."""
    with recorder.capture() as events:
        nvtx.push_range("known good", color="green", domain="hardening", category=7, payload=1.5)
        nvtx.pop_range(domain="hardening")
        with nvtx.annotate("known good 2", color="#102030", category="io"):
            pass
    io = nvtx.get_domain().get_category_id("io")
    got = [(e.kind, e.domain, e.message, e.color, e.category, e.payload) for e in annotations(events)]
    assert got == [("push", "hardening", "known good", NVTX_COLORS["green"], 7, 1.5),
                   ("pop", "hardening", None, None, 0, None),
                   ("push", None, "known good 2", 0xFF102030, io, None),
                   ("pop", None, None, None, 0, None)]
    assert events.dropped == 0


# --------------------------------------------------------------------------- properties


@SETTINGS
@given(op=st.sampled_from(["push_range", "start_range", "mark"]), message=maybe(messages),
       color=maybe(colors), domain=maybe(domains), category=maybe(categories), payload=maybe(payloads),
       repeat=st.integers(1, 2))
def _module_calls(op, message, color, domain, category, payload, repeat):
    count_example()
    kwargs = call_kwargs(message=message, color=color, domain=domain, category=category, payload=payload)
    expect = model(message, color, domain, category, payload,
                   default_color=None if op == "start_range" else "blue")
    for _ in range(repeat):  # the second call takes the cached (hot) path
        with recorder.capture() as events, payload_warnings(expect):
            try:
                result = getattr(nvtx, op)(**kwargs)
            except (TypeError, ValueError, OverflowError) as exc:
                if not expect.errors:
                    raise
                check_error(exc, expect)
                assert annotations(events) == []  # nothing half-done
                continue
            if expect.errors:
                tolerate_cached_equal_int(expect, kwargs)
            domain_name = expect.fields["domain"]
            if op == "push_range":
                nvtx.pop_range(domain_name)
            elif op == "start_range":
                nvtx.end_range(result)
        got = annotations(events)
        if op == "mark":
            assert len(got) == 1
        else:
            assert len(got) == 2
        check_event(got[0], {"push_range": "push", "start_range": "start", "mark": "mark"}[op], expect, domain_name)
        if op == "push_range":
            assert (got[1].kind, got[1].domain, got[1].tid) == ("pop", domain_name, got[0].tid)
        elif op == "start_range":
            assert (got[1].kind, got[1].domain, got[1].range_id) == ("end", domain_name, got[0].range_id)
            assert result == (got[0].range_id, nvtx.get_domain(domain_name)._index)


@inner
def test_module_calls():
    _module_calls()
    known_good_call_records()


@SETTINGS
@given(message=maybe(messages), color=maybe(colors), domain=maybe(domains), category=maybe(categories),
       payload=maybe(payloads), how=st.sampled_from(["with", "with thrice, positional", "decorator",
                                                     "async_decorator"]))
def _annotate(message, color, domain, category, payload, how):
    count_example()
    kwargs = call_kwargs(message=message, color=color, domain=domain, category=category, payload=payload)
    expect = model(message, color, domain, category, payload, default_color=None)
    if not how.startswith("with") and message in (MISSING, None) and not expect.errors:
        expect.fields["message"] = "decorated"  # the function's __name__
    with recorder.capture() as events, payload_warnings(expect):
        try:
            if how == "with thrice, positional":  # the third call is answered by the call-site table
                args = [kwargs.get(name) for name in ("message", "color", "domain", "category", "payload")]
                for _ in range(3):
                    with nvtx.annotate(*args):
                        pass
            elif how == "with":
                with nvtx.annotate(**kwargs):
                    pass
            elif how == "decorator":
                def decorated(x, *, y=2):
                    return x + y
                assert nvtx.annotate(**kwargs)(decorated)(1) == 3
            else:
                annotation = nvtx.annotate(**kwargs)
                import asyncio

                async def decorated():
                    await asyncio.sleep(0)
                    return 5
                assert asyncio.run(annotation(decorated)()) == 5
        except (TypeError, ValueError, OverflowError) as exc:
            if expect.errors:
                check_error(exc, expect)
                assert annotations(events) == []
                return
            raise
    if expect.errors:
        tolerate_cached_equal_int(expect, kwargs)
    got = annotations(events)
    domain_name = expect.fields["domain"]
    if how == "with thrice, positional":
        assert len(got) == 6
        for push, pop in (got[0:2], got[2:4], got[4:6]):
            check_event(push, "push", expect, domain_name)
            assert (pop.kind, pop.domain) == ("pop", domain_name)
        return
    assert len(got) == 2
    check_event(got[0], "start" if how == "async_decorator" else "push", expect, domain_name)
    if how == "async_decorator":
        assert (got[1].kind, got[1].range_id) == ("end", got[0].range_id)
    else:
        assert (got[1].kind, got[1].domain) == ("pop", domain_name)


@inner
def test_annotate():
    _annotate()
    known_good_call_records()


# Valid arguments only: each call site below is called three times with the same objects, and the
# accelerator answers the later calls from its identity tables (a call site's table from the third).
_good_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                     max_size=12)
_good_arguments = st.tuples(
    st.one_of(st.none(), _good_text, _good_text.map(lambda t: f"f-{t}")),  # message
    st.one_of(st.none(), st.sampled_from(sorted(NVTX_COLORS)), st.integers(0, 2**24 - 1).map("#{:06x}".format)),
    st.one_of(st.none(), st.sampled_from(["d", "hardening", "sites"])),  # domain
    st.one_of(st.none(), st.sampled_from(["io", "compute"]), st.integers(0, 1000)),  # category
    st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False)),  # payload
)


def _call_site(call: str, spelling: str, arguments: tuple) -> None:
    """One call of `call` spelt with positional or keyword arguments, at a fixed call site."""
    m, c, d, k, p = arguments
    if call == "annotate":
        if spelling == "positional":
            with nvtx.annotate(m, c, d, k, p):
                pass
        else:
            with nvtx.annotate(message=m, color=c, domain=d, category=k, payload=p):
                pass
    elif call == "push_range":
        if spelling == "positional":
            nvtx.push_range(m, c, d, k, p)
            nvtx.pop_range(d)
        else:
            nvtx.push_range(message=m, color=c, domain=d, category=k, payload=p)
            nvtx.pop_range(domain=d)
    elif call == "start_range":
        if spelling == "positional":
            nvtx.end_range(nvtx.start_range(m, c, d, k, p))
        else:
            nvtx.end_range(nvtx.start_range(message=m, color=c, domain=d, category=k, payload=p))
    elif spelling == "positional":
        nvtx.mark(m, c, d, k, p)
    else:
        nvtx.mark(message=m, color=c, domain=d, category=k, payload=p)


@SETTINGS
@given(arguments=_good_arguments, call=st.sampled_from(["annotate", "push_range", "start_range", "mark"]),
       spelling=st.sampled_from(["positional", "keywords"]))
def _call_sites(arguments, call, spelling):
    count_example()
    with recorder.capture() as events:
        for _ in range(3):
            _call_site(call, spelling, arguments)
    got = annotations(events)
    step = 1 if call == "mark" else 2  # a range: what opens it, then what closes it
    assert len(got) == 3 * step, got
    opened = [(e.kind, e.domain, e.message, e.color, e.category, e.payload, e.payload_type) for e in got[0::step]]
    assert opened[0] == opened[1] == opened[2]  # the first call (general path) and the hot ones agree
    message, _, domain, _, payload = arguments
    assert opened[0][1:3] == (domain, message) and opened[0][5] == payload
    if call != "mark":
        closed = [(e.kind, e.domain) for e in got[1::2]]
        assert closed == [("end" if call == "start_range" else "pop", domain)] * 3


@inner
def test_call_sites():
    _call_sites()
    known_good_call_records()


@SETTINGS
@given(domain=domains, message=messages, color=maybe(colors), category=maybe(categories),
       payload=maybe(payloads), new_color=maybe(colors), op=st.sampled_from(["push_range", "start_range", "mark"]),
       registered=st.booleans(), keywords=st.booleans())
def _domain_api(domain, message, color, category, payload, new_color, op, registered, keywords):
    count_example()
    expect = model(message, color, domain, category, payload, default_color=None)
    if registered and message is None:
        expect.bad("message", TypeError)  # get_registered_string(None): there is nothing to register
    try:
        d = nvtx.get_domain(domain)
    except (TypeError, ValueError) as exc:
        assert "domain" in expect.errors, exc
        check_error(exc, expect)
        return
    assert "domain" not in expect.errors
    assert d is nvtx.get_domain(domain) and d.name == domain
    kwargs = call_kwargs(color=color, category=category, payload=payload)
    with recorder.capture() as events, payload_warnings(expect):
        try:
            if registered:
                text = d.get_registered_string(message)
                assert text.string == expect.fields["message"] and text.domain is d  # (bytes: as text)
                message_arg = text
            else:
                message_arg = message
            if isinstance(category, str) and "category" not in expect.errors:
                assert d.get_category_id(category) == d.get_category_id(category) >= 1
            if keywords:  # the call builds the attributes from keywords
                result = getattr(d, op)(message=message_arg, **kwargs)
            else:
                attributes = d.get_event_attributes(message=message_arg, **kwargs)
                result = getattr(d, op)(attributes)
        except (TypeError, ValueError, OverflowError) as exc:
            if expect.errors:
                check_error(exc, expect)
                assert annotations(events) == []
                return
            raise
        assert not expect.errors, f"no error for {expect.errors}"
        if op == "push_range":
            d.pop_range()
        elif op == "start_range":
            d.end_range(result)
        if not keywords:
            # A bad new value leaves the prepared attributes as they were.
            probe = Expect()
            model_color(new_color, None, probe)
            before = (attributes.message, attributes.color)
            try:
                attributes.color = None if new_color is MISSING else new_color
            except (TypeError, ValueError) as exc:
                check_error(exc, probe)
                assert (attributes.message, attributes.color) == before
    got = annotations(events)
    assert len(got) == (1 if op == "mark" else 2)
    check_event(got[0], {"push_range": "push", "start_range": "start", "mark": "mark"}[op], expect, domain)


@inner
def test_domain_api():
    _domain_api()
    known_good_call_records()


range_ids = st.one_of(
    st.none(), st.integers(-(2**70), 2**70), st.sampled_from([0, 2**64 - 1, 2**64, -1]),
    st.booleans(), st.floats(), st.text(max_size=3),
    st.tuples(st.integers(-(2**65), 2**65), st.integers(-5, 300)),
    st.tuples(st.one_of(st.floats(), st.text(max_size=2), st.none()), st.integers(0, 3)),
    st.tuples(st.integers(0, 10), st.one_of(st.floats(), st.text(max_size=2), st.none(), st.just(2**70))),
    st.tuples(st.integers(0, 3)), st.lists(st.integers(), max_size=2),
)


def _int(v) -> bool:
    return isinstance(v, int)  # bools too: C integer arguments take them


def model_end(range_id):
    """end_range's contract: ("error", type) | ("end", domain index, id) | ("nothing",)."""
    if range_id is None:
        return ("nothing",)
    if isinstance(range_id, tuple) and len(range_id) == 2:
        rid, index = range_id
        if not _int(rid) or not _int(index) or not -(2**31) <= index < 2**31:
            return ("error", TypeError)
        if not 0 <= rid < 2**64:
            return ("error", ArgumentRangeError)
        if 0 <= index < nvtx._native.lib.nvtxcffi_domain_count():
            return ("end", index, rid)
        return ("nothing",)  # no such domain: the shim ignores it
    if isinstance(range_id, bool) or not isinstance(range_id, int):
        return ("error", TypeError)
    if not 0 <= range_id < 2**64:
        return ("error", ArgumentRangeError)  # a ValueError, and nvtx's OverflowError
    return ("end", 0, range_id)


def domain_name_of(index: int):
    if index == 0:
        return None  # NVTX's default domain
    return next(d.name for d in list(nvtx._domain._domains.values()) if d._index == index)


@SETTINGS
@given(range_id=range_ids, pop_domain=maybe(domains))
def _end_and_pop(range_id, pop_domain):
    """end_range of anything / pop_range with nothing pushed: defined, harmless, errors named."""
    count_example()
    expected = model_end(range_id)
    with recorder.capture() as events:
        try:
            nvtx.end_range(range_id)
        except (TypeError, ValueError) as exc:
            assert expected == ("error", type(exc)) and "range_id" in str(exc), (expected, exc)
        else:
            assert expected[0] != "error", expected
    got = [(e.kind, e.domain, e.range_id) for e in annotations(events)]
    if expected[0] == "end":
        assert got == [("end", domain_name_of(expected[1]), expected[2])]
    else:
        assert got == []

    expect = Expect()
    model_domain(None if pop_domain is MISSING else pop_domain, expect)
    with recorder.capture() as events:
        try:
            nvtx.pop_range(*([] if pop_domain is MISSING else [pop_domain]))
        except (TypeError, ValueError) as exc:
            check_error(exc, expect)
            assert annotations(events) == []
            return
    assert not expect.errors
    assert [(e.kind, e.domain) for e in annotations(events)] == [("pop", expect.fields["domain"])]


@inner
def test_end_and_pop():
    _end_and_pop()
    known_good_call_records()


# --------------------------------------------------------------------------- pure functions (any process)


@settings(max_examples=max(EXAMPLES * 10, 1000), deadline=None, suppress_health_check=list(HealthCheck))
@given(color=colors)
def test_to_argb_property(color):
    """to_argb: the model's ARGB value (an int in [0, 2**32)) or an error naming the colour."""
    expect = Expect()
    model_color(color, None, expect)
    try:
        value = nvtx.to_argb(color)
    except (TypeError, ValueError) as exc:
        check_error(exc, expect)
        return
    assert not expect.errors, (color, hex(value))
    assert value == expect.fields["color"] and 0 <= value <= 0xFFFFFFFF


@pytest.mark.parametrize("color", ["#+12345", "#-12345", "# 12345", "#12345 ", "#1_2345", "#0x1234",
                                   "#\uff11\uff12\uff13\uff14\uff15\uff16", "#-1234567", "#12345", ""])
def test_to_argb_rejects_loose_hex(color):
    with pytest.raises(ValueError, match="color"):
        nvtx.to_argb(color)


# --------------------------------------------------------------------------- driver


def _run_property(name, tmp_path, examples):
    stats = tmp_path / "examples.txt"
    proc = run_pytest_child(f"hardening/test_hypothesis.py::{name}", tmp_path / "rec", timeout=1800, extra_env={
        "NVTX_CFFI_HYPOTHESIS_EXAMPLES": str(examples), "NVTX_CFFI_HYPOTHESIS_STATS": str(stats)})
    assert proc.returncode == 0, proc.stdout[-12000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    tried = len(stats.read_text().split())
    assert tried >= examples  # hypothesis really ran (it may also replay saved failures)
    print(json.dumps({"property": name, "inputs": tried}))
    rec = recorder.read(tmp_path / "rec")
    assert rec.dropped == 0 and len(rec.processes) == 1


@pytest.mark.skipif(INNER, reason="this process is recorded: the properties run here directly")
@pytest.mark.parametrize("name", PROPERTIES)
def test_under_recorder(name, tmp_path):
    _run_property(name, tmp_path, EXAMPLES)


@pytest.mark.slow
@pytest.mark.skipif(INNER, reason="this process is recorded: the properties run here directly")
@pytest.mark.parametrize("name", PROPERTIES)
def test_under_recorder_full(name, tmp_path, opted_in_slow):
    _run_property(name, tmp_path, 3000)
