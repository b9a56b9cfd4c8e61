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
