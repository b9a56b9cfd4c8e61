"""Colour names and parsing: every colour becomes a 32-bit ARGB integer, as NVTX wants it.

Accepted: nvtx's own names (same values as NVIDIA's nvtx, alpha 0, for drop-in fidelity), the 148
CSS colour names (alpha 0xFF, what nvtx computes through matplotlib), ``"#rrggbb"`` and
``"#rrggbbaa"`` (matplotlib's order), RGB(A) tuples of floats in [0, 1], ARGB integers, and -- when
matplotlib happens to be installed -- anything else matplotlib understands (``"tab:blue"``, ``"C0"``).
"""
from __future__ import annotations

from ._validate import ArgumentColorError, ArgumentRangeError, as_index, describe_int, short_repr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import SupportsIndex, Tuple, Union

    #: A colour: a name, an ARGB int (or what has ``__index__``: a NumPy integer), an RGB(A) tuple.
    ColorLike = Union[str, int, SupportsIndex, Tuple[float, float, float], Tuple[float, float, float, float], None]
else:
    def __getattr__(name: str):
        """The ``ColorLike`` alias, built (with ``typing``) at its first use at run time."""
        if name == "ColorLike":
            from typing import SupportsIndex, Tuple, Union

            value = globals()[name] = Union[str, int, SupportsIndex, Tuple[float, float, float],
                                            Tuple[float, float, float, float], None]
            return value
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)

__all__ = ["ColorLike", "NVTX_COLORS", "CSS_COLORS", "to_argb", "color_to_hex"]

#: nvtx 0.2.x's names and values (alpha 0; Nsight Systems ignores the alpha byte).
NVTX_COLORS = {
    "green": 0x008000,
    "blue": 0x0000FF,
    "yellow": 0xFFFF00,
    "purple": 0x800080,
    "rapids": 0x7400FF,
    "cyan": 0x00FFFF,
    "red": 0xFF0000,
    "white": 0xFFFFFF,
    "darkgreen": 0x006400,
    "orange": 0xFFA500,
}

#: What ``color=None`` means, as in nvtx: blue.
DEFAULT_COLOR = NVTX_COLORS["blue"]

_OPAQUE = 0xFF000000
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")

#: CSS Color Module Level 4 names, RGB; used with alpha 0xFF.
CSS_COLORS = {
    "aliceblue": 0xF0F8FF,
    "antiquewhite": 0xFAEBD7,
    "aqua": 0x00FFFF,
    "aquamarine": 0x7FFFD4,
    "azure": 0xF0FFFF,
    "beige": 0xF5F5DC,
    "bisque": 0xFFE4C4,
    "black": 0x000000,
    "blanchedalmond": 0xFFEBCD,
    "blue": 0x0000FF,
    "blueviolet": 0x8A2BE2,
    "brown": 0xA52A2A,
    "burlywood": 0xDEB887,
    "cadetblue": 0x5F9EA0,
    "chartreuse": 0x7FFF00,
    "chocolate": 0xD2691E,
    "coral": 0xFF7F50,
    "cornflowerblue": 0x6495ED,
    "cornsilk": 0xFFF8DC,
    "crimson": 0xDC143C,
    "cyan": 0x00FFFF,
    "darkblue": 0x00008B,
    "darkcyan": 0x008B8B,
    "darkgoldenrod": 0xB8860B,
    "darkgray": 0xA9A9A9,
    "darkgreen": 0x006400,
    "darkgrey": 0xA9A9A9,
    "darkkhaki": 0xBDB76B,
    "darkmagenta": 0x8B008B,
    "darkolivegreen": 0x556B2F,
    "darkorange": 0xFF8C00,
    "darkorchid": 0x9932CC,
    "darkred": 0x8B0000,
    "darksalmon": 0xE9967A,
    "darkseagreen": 0x8FBC8F,
    "darkslateblue": 0x483D8B,
    "darkslategray": 0x2F4F4F,
    "darkslategrey": 0x2F4F4F,
    "darkturquoise": 0x00CED1,
    "darkviolet": 0x9400D3,
    "deeppink": 0xFF1493,
    "deepskyblue": 0x00BFFF,
    "dimgray": 0x696969,
    "dimgrey": 0x696969,
    "dodgerblue": 0x1E90FF,
    "firebrick": 0xB22222,
    "floralwhite": 0xFFFAF0,
    "forestgreen": 0x228B22,
    "fuchsia": 0xFF00FF,
    "gainsboro": 0xDCDCDC,
    "ghostwhite": 0xF8F8FF,
    "gold": 0xFFD700,
    "goldenrod": 0xDAA520,
    "gray": 0x808080,
    "green": 0x008000,
    "greenyellow": 0xADFF2F,
    "grey": 0x808080,
    "honeydew": 0xF0FFF0,
    "hotpink": 0xFF69B4,
    "indianred": 0xCD5C5C,
    "indigo": 0x4B0082,
    "ivory": 0xFFFFF0,
    "khaki": 0xF0E68C,
    "lavender": 0xE6E6FA,
    "lavenderblush": 0xFFF0F5,
    "lawngreen": 0x7CFC00,
    "lemonchiffon": 0xFFFACD,
    "lightblue": 0xADD8E6,
    "lightcoral": 0xF08080,
    "lightcyan": 0xE0FFFF,
    "lightgoldenrodyellow": 0xFAFAD2,
    "lightgray": 0xD3D3D3,
    "lightgreen": 0x90EE90,
    "lightgrey": 0xD3D3D3,
    "lightpink": 0xFFB6C1,
    "lightsalmon": 0xFFA07A,
    "lightseagreen": 0x20B2AA,
    "lightskyblue": 0x87CEFA,
    "lightslategray": 0x778899,
    "lightslategrey": 0x778899,
    "lightsteelblue": 0xB0C4DE,
    "lightyellow": 0xFFFFE0,
    "lime": 0x00FF00,
    "limegreen": 0x32CD32,
    "linen": 0xFAF0E6,
    "magenta": 0xFF00FF,
    "maroon": 0x800000,
    "mediumaquamarine": 0x66CDAA,
    "mediumblue": 0x0000CD,
    "mediumorchid": 0xBA55D3,
    "mediumpurple": 0x9370DB,
    "mediumseagreen": 0x3CB371,
    "mediumslateblue": 0x7B68EE,
    "mediumspringgreen": 0x00FA9A,
    "mediumturquoise": 0x48D1CC,
    "mediumvioletred": 0xC71585,
    "midnightblue": 0x191970,
    "mintcream": 0xF5FFFA,
    "mistyrose": 0xFFE4E1,
    "moccasin": 0xFFE4B5,
    "navajowhite": 0xFFDEAD,
    "navy": 0x000080,
    "oldlace": 0xFDF5E6,
    "olive": 0x808000,
    "olivedrab": 0x6B8E23,
    "orange": 0xFFA500,
    "orangered": 0xFF4500,
    "orchid": 0xDA70D6,
    "palegoldenrod": 0xEEE8AA,
    "palegreen": 0x98FB98,
    "paleturquoise": 0xAFEEEE,
    "palevioletred": 0xDB7093,
    "papayawhip": 0xFFEFD5,
    "peachpuff": 0xFFDAB9,
    "peru": 0xCD853F,
    "pink": 0xFFC0CB,
    "plum": 0xDDA0DD,
    "powderblue": 0xB0E0E6,
    "purple": 0x800080,
    "rebeccapurple": 0x663399,
    "red": 0xFF0000,
    "rosybrown": 0xBC8F8F,
    "royalblue": 0x4169E1,
    "saddlebrown": 0x8B4513,
    "salmon": 0xFA8072,
    "sandybrown": 0xF4A460,
    "seagreen": 0x2E8B57,
    "seashell": 0xFFF5EE,
    "sienna": 0xA0522D,
    "silver": 0xC0C0C0,
    "skyblue": 0x87CEEB,
    "slateblue": 0x6A5ACD,
    "slategray": 0x708090,
    "slategrey": 0x708090,
    "snow": 0xFFFAFA,
    "springgreen": 0x00FF7F,
    "steelblue": 0x4682B4,
    "tan": 0xD2B48C,
    "teal": 0x008080,
    "thistle": 0xD8BFD8,
    "tomato": 0xFF6347,
    "turquoise": 0x40E0D0,
    "violet": 0xEE82EE,
    "wheat": 0xF5DEB3,
    "white": 0xFFFFFF,
    "whitesmoke": 0xF5F5F5,
    "yellow": 0xFFFF00,
    "yellowgreen": 0x9ACD32,
}


def to_argb(color: ColorLike) -> int:
    """Return ``color`` as an ARGB integer, or raise an error naming it: an int out of range
    :class:`ArgumentRangeError` (ValueError and OverflowError), anything else it cannot read -- a
    wrong type, an unknown name, a bad tuple -- :class:`ArgumentColorError` (TypeError and
    ValueError: nvtx 0.2.16 raises one or the other, by whether matplotlib is installed).

    >>> hex(to_argb("red")), hex(to_argb("salmon")), hex(to_argb("#102030")), to_argb(None)
    ('0xff0000', '0xfffa8072', '0xff102030', 255)
    """
    if color is None:
        return DEFAULT_COLOR
    if isinstance(color, str):
        return _from_name(color)
    if isinstance(color, bool):
        msg = f"color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not {color!r}"
        raise ArgumentColorError(msg)
    if isinstance(color, tuple):
        return _from_rgba_tuple(color)
    value = as_index(color)  # int, NumPy integer, anything with __index__
    if value is not None:
        if not 0 <= value <= 0xFFFFFFFF:
            shown = f"{value:#x}" if value.bit_length() <= 128 else describe_int(value)
            msg = f"color {shown} is out of range: an ARGB colour is 0 to 0xFFFFFFFF"
            raise ArgumentRangeError(msg)
        return value
    msg = f"color must be a name, '#rrggbb', an ARGB int or an RGB(A) tuple, not {type(color).__name__}"
    raise ArgumentColorError(msg)


def color_to_hex(color: ColorLike = None) -> int:
    """``color`` as the ARGB integer NVTX receives (nvtx's ``color_to_hex``): a name of nvtx's table,
    any CSS / matplotlib colour, ``"#rrggbb"``, or an ``int`` (returned as it is).
    What it cannot read (an unknown name, another type) raises an error that is both a ``TypeError``
    and a ``ValueError`` (nvtx raises one or the other, by whether matplotlib is installed)."""
    if isinstance(color, int) and not isinstance(color, bool):
        return color  # as nvtx: an int is taken as it is
    return to_argb(color)


def _from_name(name: str) -> int:
    value = NVTX_COLORS.get(name)
    if value is not None:
        return value
    key = name.lower().replace(" ", "")
    value = CSS_COLORS.get(key)
    if value is not None:
        return _OPAQUE | value
    # Exactly 6 or 8 ASCII hex digits: int(..., 16) alone would also take a sign, spaces,
    # underscores, "0x" and non-ASCII digits ("#-12345" even gave a negative colour).
    if name.startswith("#") and len(name) in (7, 9) and all(c in _HEX_DIGITS for c in name[1:]):
        rgba = int(name[1:], 16)
        if len(name) == 7:
            return _OPAQUE | rgba
        return ((rgba & 0xFF) << 24) | (rgba >> 8)
    argb = _from_matplotlib(name)
    if argb is None:
        msg = f"unknown color {short_repr(name)}: use an nvtx or CSS colour name, '#rrggbb', or an ARGB int"
        raise ArgumentColorError(msg)
    return argb


def _from_rgba_tuple(color: tuple) -> int:
    if len(color) not in (3, 4) or not all(
        isinstance(c, (int, float)) and not isinstance(c, bool) and 0.0 <= c <= 1.0 for c in color
    ):
        msg = f"color tuple must hold 3 or 4 numbers between 0 and 1, not {short_repr(color)}"
        raise ArgumentColorError(msg)
    r, g, b, a = (*color, 1.0) if len(color) == 3 else color
    return (round(a * 255) << 24) | (round(r * 255) << 16) | (round(g * 255) << 8) | round(b * 255)


def _from_matplotlib(name: str):
    try:
        import matplotlib.colors as mcolors
    except ImportError:
        return None
    try:
        rgba = mcolors.to_rgba(name)
    except ValueError:
        return None
    return _from_rgba_tuple(tuple(float(c) for c in rgba))
