"""nvtx 0.2.16's ``nvtx.colors`` module, for programs that import it by name.

>>> from nvtx_cffi.colors import color_to_hex
>>> hex(color_to_hex("red")), hex(color_to_hex()), color_to_hex(0x123456)
('0xff0000', '0xff', 1193046)
"""
from __future__ import annotations

from ._colors import NVTX_COLORS, to_argb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._colors import ColorLike
else:
    def __getattr__(name: str):
        """``ColorLike`` (a ``typing`` alias), built at its first use: see nvtx_cffi/_colors.py."""
        if name == "ColorLike":
            from . import _colors

            return _colors.ColorLike
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

__all__ = ["color_to_hex"]

#: nvtx's table (``None`` is its default colour, blue).
_NVTX_COLORS = {None: 0x0000FF, **NVTX_COLORS}


def color_to_hex(color: ColorLike = None) -> int:
    """``color`` as the ARGB integer NVTX receives (nvtx's ``color_to_hex``): a name of nvtx's table,
    any CSS / matplotlib colour, ``"#rrggbb"``, or an ``int`` (returned as it is).
    What it cannot read (an unknown name, another type) raises an error that is both a ``TypeError``
    and a ``ValueError`` (nvtx raises one or the other, by whether matplotlib is installed)."""
    if isinstance(color, int) and not isinstance(color, bool):
        return color  # as nvtx: an int is taken as it is
    return to_argb(color)
