"""nvtx 0.2.16's ``nvtx.colors`` module, for programs that import it by name.

>>> from nvtx_cffi.colors import color_to_hex
>>> hex(color_to_hex("red")), hex(color_to_hex()), color_to_hex(0x123456)
('0xff0000', '0xff', 1193046)
"""
from __future__ import annotations

from ._colors import color_to_hex

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

color_to_hex.__module__ = __name__  # nvtx's module: where it is documented (and pickled) from
