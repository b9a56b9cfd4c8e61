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

    import nvtx_cffi.colors
    import nvtx_cffi.nvtx

    top = {n for n in dir(nvtx) if not n.startswith("_")} - {"writer"}  # NVTXW: not provided (README)
    assert sorted(n for n in top if not hasattr(nvtx_cffi, n)) == []
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
    assert out["accelerated"] is (not pure and nvtx_cffi._accel.accel is not None)
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
