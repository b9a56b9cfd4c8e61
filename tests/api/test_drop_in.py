"""``import nvtx_cffi as nvtx`` finds every name a program written for nvtx 0.2.16 imports, the
submodules ``nvtx.nvtx`` and ``nvtx.colors`` included, and they record what nvtx's would."""
from __future__ import annotations

import importlib.util

import pytest

import nvtx_cffi
from nvtx_cffi import recorder

HAVE_NVTX = importlib.util.find_spec("nvtx") is not None
#: What nvtx.nvtx imports for itself (typing, stdlib, NumPy, Cython internals): not its API.
_NOT_API = {"Optional", "Tuple", "Union", "contextlib", "lru_cache", "np", "os", "warnings", "wraps", "DummyDomain",
            "dummy_domain", "PayloadTypeAlias", "libnvtx_end_range", "libnvtx_mark", "libnvtx_pop_range",
            "libnvtx_push_range", "libnvtx_start_range"}


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_every_public_name_of_nvtx_and_its_submodules_exists():
    import nvtx
    import nvtx.colors
    import nvtx.nvtx
    import nvtx.writer

    import nvtx_cffi.colors
    import nvtx_cffi.nvtx

    top = {n for n in dir(nvtx) if not n.startswith("_")}
    assert "writer" in top
    assert sorted(n for n in top if not hasattr(nvtx_cffi, n)) == []
    assert sorted(n for n in nvtx.writer.__all__ if not hasattr(nvtx_cffi.writer, n)) == []
    sub = {n for n in dir(nvtx.nvtx) if not n.startswith("_")} - _NOT_API
    assert sorted(n for n in sub if not hasattr(nvtx_cffi.nvtx, n)) == []
    for name in ("green", "blue", "yellow", "purple", "rapids", "cyan", "red", "white", "darkgreen", "orange", None,
                 0x123456):
        assert nvtx_cffi.colors.color_to_hex(name) == nvtx.colors.color_to_hex(name), name


def test_submodules_are_the_package_api_and_record_alike():
    import nvtx_cffi.colors as colors
    import nvtx_cffi.nvtx as nvtx_module

    assert nvtx_cffi.nvtx is nvtx_module and nvtx_module.annotate is nvtx_cffi.annotate
    with recorder.capture() as got:
        with nvtx_module.annotate("sub", color="red", domain="dropin"):
            pass
    push = [e for e in got if e.kind == "push"]
    assert [(e.message, e.color, e.domain) for e in push] == [("sub", colors.color_to_hex("red"), "dropin")]


def test_color_to_hex_rejects_what_it_cannot_read():
    from nvtx_cffi.colors import color_to_hex

    with pytest.raises(ValueError, match="color"):
        color_to_hex("no such colour")
    with pytest.raises(TypeError, match="color"):
        color_to_hex(1.5)


SUBCLASS_INIT = r"""
import json, sys
import nvtx_cffi
from nvtx_cffi import _accel, recorder

def python_new_calls():
    "How many annotate(...) calls run annotate.__new__ in Python (none when the C path answers)."
    calls = []
    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__new__":
            calls.append(1)
    for _ in range(2):  # (a message's first sight makes an object not cached; its second caches)
        nvtx_cffi.annotate("x"); nvtx_cffi.annotate("x", color="red")
    sys.setprofile(profile)
    for _ in range(10):
        nvtx_cffi.annotate("x"); nvtx_cffi.annotate("x", color="red")
    sys.setprofile(None)
    return len(calls)

before = python_new_calls()

class Step(nvtx_cffi.annotate):
    def __init__(self, name, size=None):
        super().__init__(f"step {name}", color="red", domain="steps", payload=size)

class Plain(nvtx_cffi.annotate):  # no __init__ of its own: cached like annotate's
    pass

with recorder.capture() as events:
    with Step("load"):
        pass
    with Step("load", 64) as held:
        pass

    @Step("train", 3)
    def train():
        return 7

    assert train() == 7
    outer = Step("load")
    with outer:
        with Step("load"):  # not outer again: preparing it must not change the object in use
            pass
try:
    nvtx_cffi.annotate.__init__(Step("x"), "y", color="no such colour")
    error = None
except ValueError as e:
    error = str(e)
print(json.dumps({
    "pushes": [[e.message, e.color, e.domain, e.payload] for e in events if e.kind in ("push", "start")],
    "pops": [e.domain for e in events if e.kind in ("pop", "end")],
    "held": [held.message, held.color, held.payload, type(held).__name__],
    "shared": [Step("x") is Step("x"), Plain("x") is Plain("x")],
    "python_new_calls": [before, python_new_calls()],
    "accelerated": _accel.accel is not None,
    "error": error,
}))
"""


@pytest.mark.parametrize("pure", [False, True])
def test_a_subclass_whose_init_calls_super_init_gets_those_arguments(pure):
    """nvtx's annotate is set up in __init__, so subclasses pass their own arguments on with
    ``super().__init__``; here too, and such objects are the subclass's own (never shared). Defining
    such a subclass leaves annotate's own calls on the C path."""
    import json

    from conftest import run_python

    out = json.loads(run_python(SUBCLASS_INIT, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"}).stdout)
    red = 0x00FF0000  # nvtx's named colours have alpha 0
    assert out["pushes"] == [["step load", red, "steps", None], ["step load", red, "steps", 64],
                             ["step train", red, "steps", 3], ["step load", red, "steps", None],
                             ["step load", red, "steps", None]]
    assert out["pops"] == ["steps"] * 5
    assert out["held"] == ["step load", "red", 64, "Step"]
    assert out["shared"] == [False, True]
    assert out["python_new_calls"] == ([0, 0] if out["accelerated"] else [20, 20])
    assert not (pure and out["accelerated"])
    assert out["error"] is not None and "color" in out["error"]


EXCEPTION_TYPES = r"""
import json, sys
nvtx = __import__(sys.argv[1])
d = nvtx.get_domain("d")
rid = nvtx.start_range("r")
calls = {
    "mark(5)": lambda: nvtx.mark(5),
    "surrogate message": lambda: nvtx.mark("a\ud800"),
    "color=-1": lambda: nvtx.mark("m", color=-1),
    "color=2**40": lambda: nvtx.mark("m", color=2**40),
    "category=-1": lambda: nvtx.mark("m", category=-1),
    "end_range((-1, domain))": lambda: nvtx.end_range((-1, rid[1])),
    "end_range((2**64, domain))": lambda: nvtx.end_range((2**64, rid[1])),
    "Domain.end_range(-1)": lambda: d.end_range(-1),
    "get_registered_string(5)": lambda: d.get_registered_string(5),
    "get_category_id(None)": lambda: d.get_category_id(None),
    "get_event_attributes(5)": lambda: d.get_event_attributes(5),
    "annotate()(5)": lambda: nvtx.annotate()(5),
}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = None
    except Exception as e:
        out[name] = [c.__name__ for c in type(e).__mro__]
nvtx.end_range(rid)
print(json.dumps(out))
"""


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_bad_input_raises_what_nvtx_raises_or_a_subclass_of_it():
    """``except AttributeError`` / ``OverflowError`` / ``UnicodeEncodeError`` written around nvtx
    calls still catches nvtx-cffi's errors (TypeErrors and ValueErrors that name the argument)."""
    import json

    from conftest import run_python

    got = {mod: json.loads(run_python(f"import sys; sys.argv[1:] = [{mod!r}]\n" + EXCEPTION_TYPES).stdout)
           for mod in ("nvtx", "nvtx_cffi")}
    assert all(got["nvtx"].values())
    for name, mro in got["nvtx"].items():
        assert mro[0] in got["nvtx_cffi"][name], (name, mro[0], got["nvtx_cffi"][name])
        assert {"TypeError", "ValueError"} & set(got["nvtx_cffi"][name]), name


def test_messages_may_be_bytes_as_in_nvtx():
    """nvtx hands bytes messages to NVTX as they are; here they are read as UTF-8."""
    d = nvtx_cffi.get_domain("bytes")
    with recorder.capture() as events:
        nvtx_cffi.mark(b"bytes mark")
        nvtx_cffi.push_range(b"bytes range", domain="bytes")
        nvtx_cffi.pop_range(domain="bytes")
        with nvtx_cffi.annotate(b"bytes \xc3\xa9 with"):
            pass
        d.mark(d.get_event_attributes(message=d.get_registered_string(b"registered"),
                                      category=d.get_category_id(b"cat")))
        nvtx_cffi.mark(b"bad \xff utf-8")
    got = [(e.kind, e.message) for e in events if e.kind in ("mark", "push")]
    assert got == [("mark", "bytes mark"), ("push", "bytes range"), ("push", "bytes \u00e9 with"),
                   ("mark", "registered"), ("mark", "bad \ufffd utf-8")]
    assert [e.category for e in events if e.message == "registered"] == [d.get_category_id("cat")]
    with pytest.raises(TypeError, match="domain must be a str, not bytes"):
        nvtx_cffi.get_domain(b"bytes")


def test_the_attributes_of_an_annotate_object_are_shared_and_cannot_change():
    """nvtx makes a new annotate object per call; here equal arguments share one (and its prepared
    slot), so changing its attributes would change every such annotate(): refused, by name."""
    plain, with_payload = nvtx_cffi.annotate("shared step"), nvtx_cffi.annotate("shared step", payload=5)
    for attributes in (plain.attributes, with_payload.attributes):
        with pytest.raises(AttributeError, match="shared by every annotate"):
            attributes.payload = 7
        with pytest.raises(AttributeError, match="shared by every annotate"):
            plain.domain.set_event_attributes(attributes, color="red")
    own = plain.domain.get_event_attributes(message="own")
    own.payload = 7  # attributes of one's own: as in nvtx
    with recorder.capture() as events:
        with nvtx_cffi.annotate("shared step"):
            pass
        plain.domain.mark(own)
    assert [(e.kind, e.message, e.payload, e.color) for e in events if e.kind in ("push", "mark")] == [
        ("push", "shared step", None, nvtx_cffi.to_argb(None)), ("mark", "own", 7, nvtx_cffi.to_argb(None))]


def test_attributes_of_another_domain_record_in_the_domain_called():
    """nvtx records ``b.mark(attributes_of_a)`` in domain b: here too, with b's own registered string,
    category (by name, or the same number) and slot for those attributes."""
    a, b = nvtx_cffi.get_domain("attrs-a"), nvtx_cffi.get_domain("attrs-b")
    by_name = a.get_event_attributes(message=a.get_registered_string("shared"), color="red", category="io",
                                     payload=3)
    by_number = a.get_event_attributes(message="numbered", category=9)
    with recorder.capture() as events:
        b.mark(by_name)
        b.push_range(by_number)
        b.pop_range()
        rid = b.start_range(by_name, payload=4)  # changes by_name in place, as nvtx does
        b.end_range(rid)
    got = [(e.kind, e.domain, e.message, e.color, e.payload) for e in events if e.kind in ("mark", "push", "start")]
    assert got == [("mark", "attrs-b", "shared", 0x00FF0000, 3), ("push", "attrs-b", "numbered", nvtx_cffi.to_argb(None), None),
                   ("start", "attrs-b", "shared", 0x00FF0000, 4)]
    assert by_name.payload == 4 and by_name.domain is a
    categories = [e.category for e in events if e.kind in ("mark", "push", "start")]
    assert categories == [b.get_category_id("io"), 9, b.get_category_id("io")]
    with pytest.raises(ValueError, match="attributes belong to domain 'attrs-a', not 'attrs-b'"):
        b.set_event_attributes(by_name, color="blue")


MIXIN_INIT = r"""
import json
import nvtx_cffi
from nvtx_cffi import recorder

class Logged:  # a mixin whose __init__ passes the arguments on (the only __init__ in the subclass)
    def __init__(self, *args, **kwargs):
        self.logged = args
        super().__init__(*args, **kwargs)

class Traced(Logged, nvtx_cffi.annotate):
    pass

with recorder.capture() as events:
    with Traced("mixed", color="green") as t:
        pass
print(json.dumps({"pushes": [[e.message, e.color] for e in events if e.kind == "push"], "logged": t.logged}))
"""


def test_an_init_from_a_mixin_passes_the_arguments_on():
    """A subclass whose __init__ comes from a mixin before annotate (not from its own dict)."""
    import json

    from conftest import run_python

    out = json.loads(run_python(MIXIN_INIT).stdout)
    assert out == {"pushes": [["mixed", nvtx_cffi.to_argb("green")]], "logged": ["mixed"]}


def test_errors_that_are_also_nvtxs_types_pickle_and_copy():
    """A worker's exception crosses processes (multiprocessing pickles it): each of these survives."""
    import copy
    import pickle

    caught = []
    for call in (lambda: nvtx_cffi.mark("lone \ud800 surrogate"), lambda: nvtx_cffi.mark(5),
                 lambda: nvtx_cffi.mark("x", color=-1)):
        with pytest.raises(Exception) as info:
            call()
        caught.append(info.value)
    for exc in caught:
        for again in (pickle.loads(pickle.dumps(exc)), copy.copy(exc), copy.deepcopy(exc)):
            assert (type(again), str(again)) == (type(exc), str(exc))
    assert str(caught[0]) == "message is not valid Unicode (surrogates not allowed at index 5)"
    assert isinstance(caught[0], UnicodeEncodeError) and isinstance(caught[1], AttributeError)
    assert isinstance(caught[2], OverflowError)
