"""Colours: nvtx's values for nvtx's names, CSS names, hex, tuples, ints."""
from __future__ import annotations

import pytest

from nvtx_cffi._colors import CSS_COLORS, NVTX_COLORS, to_argb


def test_nvtx_names_match_nvidia_nvtx():
    colors = pytest.importorskip("nvtx.colors")
    for name in NVTX_COLORS:
        assert to_argb(name) == colors.color_to_hex(name), name
    assert to_argb(None) == colors.color_to_hex(None)


def test_css_names_match_matplotlib():
    mcolors = pytest.importorskip("matplotlib.colors")
    assert set(CSS_COLORS) == set(mcolors.CSS4_COLORS)
    for name in ("salmon", "rebeccapurple", "lightgoldenrodyellow", "grey"):
        assert to_argb(name) == 0xFF000000 | int(mcolors.CSS4_COLORS[name][1:], 16)


def test_forms():
    assert to_argb("Salmon") == to_argb("salmon") == 0xFFFA8072
    assert to_argb("#0a0b0c") == 0xFF0A0B0C
    assert to_argb("#0a0b0c80") == 0x800A0B0C
    assert to_argb((0.0, 0.5, 1.0)) == 0xFF0080FF
    assert to_argb((1.0, 1.0, 1.0, 0.0)) == 0x00FFFFFF
    assert to_argb(0x11223344) == 0x11223344


# ---- colour errors: a TypeError and a ValueError (nvtx 0.2.16 raises either, by matplotlib) ------

_NOT_READ = "color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not "
_UNKNOWN = "unknown color {!r}: use an nvtx or CSS colour name, '#rrggbb', or an ARGB int"

#: A colour nvtx-cffi refuses (as before) -> its message: the type stays ArgumentColorError.
BAD_COLOURS = {
    "1.5": (1.5, _NOT_READ + "float"),
    "nan": (float("nan"), _NOT_READ + "float"),
    "b'red'": (b"red", _NOT_READ + "bytes"),
    "'nope'": ("nope", _UNKNOWN.format("nope")),
    "True": (True, _NOT_READ + "True"),
    "(2.0, 0, 0)": ((2.0, 0, 0), "color tuple must hold 3 or 4 numbers between 0 and 1, not (2.0, 0, 0)"),
    "[1, 0, 0]": ([1, 0, 0], _NOT_READ + "list"),
}

COLOUR_CHILD = r"""
import json, sys
if sys.argv[2] == "no-matplotlib":
    sys.modules["matplotlib"] = None  # `import matplotlib.colors` raises ImportError
nvtx = __import__(sys.argv[1])
BAD = {"1.5": 1.5, "nan": float("nan"), "b'red'": b"red", "'nope'": "nope", "'tab:blue'": "tab:blue",
       "True": True, "(2.0, 0, 0)": (2.0, 0, 0), "[1, 0, 0]": [1, 0, 0]}
d = nvtx.get_domain("colour-errors")

def annotate(c):
    with nvtx.annotate("a", color=c):
        pass

CALLS = {"mark": lambda c: nvtx.mark("m", color=c), "push_range": lambda c: nvtx.push_range("p", color=c),
         "start_range": lambda c: nvtx.start_range("s", color=c), "annotate": annotate,
         "Domain.get_event_attributes": lambda c: d.get_event_attributes(message="e", color=c)}
if sys.argv[1] == "nvtx_cffi":  # nvtx-cffi's other entry points (nvtx's Domain calls take attributes)
    import nvtx_cffi.colors
    attributes = d.get_event_attributes(message="e")

    def set_color(c):
        attributes.color = c

    CALLS.update({
        "Domain.mark": lambda c: d.mark(message="m", color=c),
        "Domain.push_range": lambda c: d.push_range(message="p", color=c),
        "Domain.start_range": lambda c: d.start_range(message="s", color=c),
        "EventAttributes": lambda c: nvtx.EventAttributes(d, "e", c),
        "EventAttributes.color": set_color,
        "Domain.set_event_attributes": lambda c: d.set_event_attributes(attributes, color=c),
        "colors.color_to_hex": nvtx_cffi.colors.color_to_hex,
        "to_argb": nvtx.to_argb})
out = {}
for call_name, call in CALLS.items():
    for name, bad in BAD.items():
        try:
            call(bad)
            out[call_name + " " + name] = None
        except Exception as e:
            out[call_name + " " + name] = [[c.__name__ for c in type(e).__mro__], str(e)]
print(json.dumps(out))
"""


def _colour_errors(module: str, matplotlib: bool, env=None, remove=()):
    import json

    from conftest import run_python

    code = f"import sys; sys.argv[1:] = [{module!r}, {'matplotlib' if matplotlib else 'no-matplotlib'!r}]\n"
    return json.loads(run_python(code + COLOUR_CHILD, env, remove=remove).stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("matplotlib", [True, False], ids=["matplotlib", "no-matplotlib"])
@pytest.mark.parametrize("pure", [False, True], ids=["C", "pure"])
def test_colour_errors_are_what_nvtx_raises_with_or_without_matplotlib(pure, matplotlib):
    """nvtx 0.2.16 reads a colour it does not know through matplotlib (ValueError: "Invalid RGBA
    argument") or, without matplotlib, refuses it (TypeError: "Invalid color ... install matplotlib"):
    the same input raises one type or the other. nvtx-cffi's colour error is both, with its own
    message naming the argument, at every entry point that takes a colour (C path and pure)."""
    if matplotlib:
        pytest.importorskip("matplotlib")
    ours = _colour_errors("nvtx_cffi", matplotlib, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"})
    assert len(ours) == 13 * 8
    for key, got in ours.items():
        call, name = key.split(" ", 1)
        if name == "'tab:blue'":
            expected = None if matplotlib else _UNKNOWN.format("tab:blue")  # matplotlib's name
        else:
            expected = BAD_COLOURS[name][1]
        if expected is None:
            assert got is None, key
        else:
            assert got == [["ArgumentColorError", "TypeError", "ValueError", "Exception", "BaseException", "object"],
                           expected], key
    try:
        import nvtx  # noqa: F401
    except ImportError:
        return
    theirs = _colour_errors("nvtx", matplotlib)
    raised = {key: got[0][0] for key, got in theirs.items() if got is not None}
    assert "ValueError" in raised.values() if matplotlib else "TypeError" in raised.values()
    for key, nvtx_type in raised.items():
        assert ours[key] is not None and nvtx_type in ours[key][0], (key, nvtx_type, ours[key])


@pytest.mark.parametrize("pure", [False, True], ids=["C", "pure"])
def test_colour_errors_without_a_tool(pure):
    """Without a tool, module-level mark/push_range/start_range do nothing and check nothing (as
    nvtx); every other colour entry point still checks it, with the same error as with a tool."""
    got = _colour_errors("nvtx_cffi", False, {"NVTX_CFFI_PURE_PYTHON": "1" if pure else "0"},
                         remove=("NVTX_INJECTION64_PATH",))
    for key, result in got.items():
        call, name = key.split(" ", 1)
        if call in ("mark", "push_range", "start_range"):
            assert result is None, key
        else:
            expected = _UNKNOWN.format("tab:blue") if name == "'tab:blue'" else BAD_COLOURS[name][1]
            assert result is not None and result[0][0] == "ArgumentColorError" and result[1] == expected, key


@pytest.mark.parametrize("name", sorted(BAD_COLOURS))
def test_colour_error_pickles_and_is_caught_as_either_type(name):
    """In this process (recorder attached): the error is caught by ``except TypeError`` and by
    ``except ValueError``, nothing is recorded, and it survives pickling (a worker's exception)."""
    import pickle

    import nvtx_cffi as nvtx
    from nvtx_cffi import recorder
    from nvtx_cffi._validate import ArgumentColorError

    value, message = BAD_COLOURS[name]
    with recorder.capture() as got:
        for error in (TypeError, ValueError):
            with pytest.raises(error) as caught:
                nvtx.push_range("bad", color=value)
            assert type(caught.value) is ArgumentColorError and str(caught.value) == message
        nvtx.mark("fine", color="red")
    assert [(e.kind, e.message, e.color) for e in got if e.kind in ("push", "mark")] == [("mark", "fine", 0xFF0000)]
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), str(again)) == (ArgumentColorError, message)
