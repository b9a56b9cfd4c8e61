"""Format many rows of a text template with integer fields at once: fixed-width, space-padded.

The JSON writer's hot path. A row is ``parts[0] + field_0 + parts[1] + field_1 + ... + parts[-1]``;
every field is a non-negative integer printed right-aligned in the width of the largest value of
its column (leading spaces, which JSON allows between tokens), or with leading zeros for
``zero_pad`` columns (the three decimals of a microsecond time). All rows then have the same length,
so NumPy builds them as one ``uint8`` matrix: digits by vectorised division, the constant parts
copied per column. The pure-Python version (no NumPy) produces the same bytes row by row.

>>> fixed_rows(["a=", ",b=", ";\\n"], [[5, 120], [3, 4]], zero_pad=()).decode()
'a=  5,b=3;\\na=120,b=4;\\n'
"""
from __future__ import annotations

from typing import Any, List, Sequence

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["fixed_rows", "widths"]


def _digits(n: int) -> int:
    return len(str(n)) if n > 0 else 1


def widths(columns: Sequence[Any], zero_pad: Sequence[int]) -> List[int]:
    """Width of each column: digits of its largest value (the given width for ``zero_pad`` ones)."""
    out = []
    for i, col in enumerate(columns):
        if i in zero_pad:
            out.append(3)
        else:
            top = int(col.max()) if hasattr(col, "max") else max(col)
            out.append(_digits(top))
    return out


def fixed_rows(parts: Sequence[str], columns: Sequence[Any], zero_pad: Sequence[int] = (),
               use_numpy: bool = True) -> bytes:
    """The rows as UTF-8 bytes; ``columns`` are NumPy int arrays or lists of ints (>= 0), equal length."""
    if not columns or not len(columns[0]):
        return b""
    w = widths(columns, zero_pad)
    if use_numpy and _np is not None:
        return _rows_numpy(parts, columns, w, zero_pad)
    fmt = parts[0].replace("%", "%%")
    for i, part in enumerate(parts[1:]):
        fmt += ("%0" if i in zero_pad else "%") + f"{w[i]}d" + part.replace("%", "%%")
    return "".join([fmt % row for row in zip(*columns)]).encode("utf-8")


def _rows_numpy(parts: Sequence[str], columns: Sequence[Any], w: List[int], zero_pad: Sequence[int]) -> bytes:
    np = _np
    n = len(columns[0])
    encoded = [p.encode("utf-8") for p in parts]
    row_len = sum(len(p) for p in encoded) + sum(w)
    out = np.empty((n, row_len), dtype=np.uint8)
    pos = 0
    for i, part in enumerate(encoded):
        if part:
            out[:, pos:pos + len(part)] = np.frombuffer(part, dtype=np.uint8)
            pos += len(part)
        if i == len(columns):
            break
        width = w[i]
        v = np.asarray(columns[i], dtype=np.int64).copy()
        block = out[:, pos:pos + width]
        for k in range(width - 1, -1, -1):
            block[:, k] = 48 + v % 10
            v //= 10
        if i not in zero_pad and width > 1:
            # blank the leading zeros (keep the last digit: 0 prints as "0")
            lead = np.cumprod(block[:, :-1] == 48, axis=1).astype(bool)
            block[:, :-1][lead] = 32
        pos += width
    return out.tobytes()
