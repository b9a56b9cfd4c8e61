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
