"""Bad input: a clear exception naming the argument, and the tables stay intact."""
from __future__ import annotations

import re

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import recorder

from conftest import ranges

CALLS = {
    "push_range": nvtx.push_range,
    "mark": nvtx.mark,
    "start_range": nvtx.start_range,
    "annotate": nvtx.annotate,
}

BAD = [
    (dict(message=42), TypeError, "message must be a str"),
    (dict(message=b"bytes"), TypeError, "message must be a str"),
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
    (dict(payload="text"), TypeError, "payload must be an int, a float or None, not str"),
    (dict(payload=[1, 2]), TypeError, "payload must be an int, a float or None, not list"),
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
    assert [e.range_id for e in ranges(got, "end")] == [123456789]


def test_domain_methods_reject_bad_input():
    domain = nvtx.get_domain("strict")
    with pytest.raises(TypeError, match="attributes must be EventAttributes, not str"):
        domain.push_range("not attributes", message="x")
    other = nvtx.get_domain("other").get_event_attributes(message="x")
    with pytest.raises(ValueError, match="attributes belong to domain 'other', not 'strict'"):
        domain.mark(other, color="red")
    registered = nvtx.get_domain("other").get_registered_string("owned")
    with pytest.raises(ValueError, match="registered in domain 'other', not 'strict'"):
        domain.get_event_attributes(message=registered)
    with pytest.raises(TypeError, match="range_id must be"):
        domain.end_range("x")


@pytest.mark.parametrize("payload", [None, 5], ids=["slot", "payload"])
def test_domain_methods_reject_another_domains_attributes(payload):
    """Issue 11, item 2: d1.push_range(a2) / start_range(a2) / mark(a2) recorded in domain two
    (and d1's next pop did not match); now the ValueError that keyword changes already raised."""
    d1, d2 = nvtx.get_domain("mine"), nvtx.get_domain("theirs")
    foreign = d2.get_event_attributes(message="foreign", payload=payload)
    with recorder.capture() as got:
        for method in (d1.push_range, d1.start_range, d1.mark):
            with pytest.raises(ValueError, match="^attributes belong to domain 'theirs', not 'mine'$"):
                method(foreign)
            with pytest.raises(ValueError, match="^attributes belong to domain 'theirs', not 'mine'$"):
                method(foreign, color="red")
        d2.mark(foreign)
    assert [(e.kind, e.domain, e.message) for e in got if e.kind in ("push", "start", "mark")] == [
        ("mark", "theirs", "foreign")]


def test_failed_update_leaves_attributes_unchanged():
    domain = nvtx.get_domain("keep")
    attributes = domain.get_event_attributes(message="kept", color="red")
    with pytest.raises(ValueError, match="unknown color"):
        attributes.color = "nope"
    with pytest.raises(TypeError, match="payload must be"):
        domain.set_event_attributes(attributes, message="changed", payload="bad")
    with recorder.capture() as got:
        domain.mark(attributes)
    (mark,) = ranges(got, "mark")
    assert (mark.message, mark.color, attributes.message) == ("kept", 0xFF0000, "kept")


def test_decorating_a_non_callable():
    with pytest.raises(TypeError, match="annotate\\(\\) decorates callables, not int"):
        nvtx.annotate("x")(3)
