"""Format many rows of a text template with integer fields at once: fixed-width, space-padded.

The JSON writer's hot path. A row is ``parts[0] + field_0 + parts[1] + field_1 + ... + parts[-1]``;
every field is a non-negative integer printed right-aligned in the width of the largest value of
its column (leading spaces, which JSON allows between tokens), or with leading zeros for
``zero_pad`` columns (the three decimals of a microsecond time). All rows then have the same length,
so NumPy builds them as one ``uint8`` matrix: a template row (the constant parts) tiled once, then
two digits at a time by vectorised division (uint32 when the column fits) and a table look-up
stored as one uint16 per row. The pure-Python version (no NumPy) produces the same bytes row by row.

>>> fixed_rows(["a=", ",b=", ";\\n"], [[5, 120], [3, 4]], zero_pad=()).decode()
'a=  5,b=3;\\na=120,b=4;\\n'

Rows whose fields vary in length (numbers printed as they are, texts of any length): :class:`TextRows`,
in C.
"""
from __future__ import annotations

from typing import Any, List, Sequence

from . import _bulk

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["fixed_rows", "join_rows", "widths", "TextRows"]


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
               use_numpy: bool = True, as_buffer: bool = False) -> Any:
    """The rows as UTF-8 bytes; ``columns`` are NumPy int arrays or lists of ints (>= 0), equal length.

    ``as_buffer``: a memoryview of the NumPy rows instead of a bytes copy (what a binary file's
    ``write`` takes as it is)."""
    if not columns or not len(columns[0]):
        return b""
    w = widths(columns, zero_pad)
    if use_numpy and _np is not None:
        rows = _rows_numpy(parts, columns, w, zero_pad)
        return memoryview(rows.reshape(-1)) if as_buffer else rows.tobytes()
    fmt = parts[0].replace("%", "%%")
    for i, part in enumerate(parts[1:]):
        fmt += ("%0" if i in zero_pad else "%") + f"{w[i]}d" + part.replace("%", "%%")
    return "".join([fmt % row for row in zip(*columns)]).encode("utf-8")


_LUTS: List[Any] = []


def _luts() -> List[Any]:
    """Two-digit tables (100 rows of 2 bytes each, then 100 with the leading zero blanked): ``pad``
    (zeros kept), ``inner`` (a pair left of the last one: "  " for a value already exhausted) and
    ``last`` (the rightmost pair: " 0" for zero)."""
    if not _LUTS:
        np = _np
        pad = np.array([[48 + i // 10, 48 + i % 10] for i in range(100)], dtype=np.uint8)
        blank = pad.copy()
        blank[:10, 0] = 32
        inner = np.concatenate([pad, blank])
        inner[100] = 32
        last = np.concatenate([pad, blank])
        # each pair as one uint16 (its two bytes in memory order): one strided store per pair
        _LUTS[:] = [t.view(np.uint16).reshape(-1) for t in (pad, inner, last)]
    return _LUTS


def _digits_into(block: Any, v: Any, width: int, zero_pad: bool) -> None:
    """Write the ``width`` decimal digits of ``v`` (int64 >= 0, fits the width) into ``block``
    (an (n, width) uint8 view), right-aligned: leading zeros kept (``zero_pad``) or spaces."""
    np = _np
    pad, inner, last = _luts()
    if len(v) and int(v.max()) < 1 << 32:
        v = v.astype(np.uint32)  # (division by a constant is several times faster than int64's)
    k = width
    while k >= 2:
        q = v // 100
        r = v - q * 100
        if zero_pad:
            block[:, k - 2:k].view(np.uint16)[:, 0] = pad.take(r)
        else:
            # v < 100: the leading pair (its tens digit blanked when zero; "  " when v == 0 left of
            # the last pair)
            r += np.where(v < 100, 100, 0).astype(r.dtype)
            block[:, k - 2:k].view(np.uint16)[:, 0] = (last if k == width else inner).take(r)
        v = q
        k -= 2
    if k == 1:
        if zero_pad or width == 1:
            block[:, 0] = 48 + v
        else:
            block[:, 0] = np.where(v == 0, 32, 48 + v)


_NATIVE: List[Any] = []


def _native() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the row formatter (nvtxcffi_fixed_rows), else None."""
    return _bulk.helper(_NATIVE, "nvtxcffi_fixed_rows")


def _rows_native(native: Any, encoded: List[bytes], columns: Sequence[Any], w: List[int], zero_pad: Sequence[int],
                 template: bytes, n: int) -> Any:
    """The rows of :func:`_rows_numpy`, formatted in C (nvtxcffi_fixed_rows)."""
    np = _np
    ffi, lib = native
    k = len(columns)
    values = np.empty((k, n), dtype=np.int64)
    for i, col in enumerate(columns):
        values[i] = col
    offsets, pos = [], 0
    for i in range(k):
        pos += len(encoded[i])
        offsets.append(pos)
        pos += w[i]
    out = np.empty((n, len(template)), dtype=np.uint8)
    meta = np.array([offsets, w], dtype=np.int64)
    pads = np.array([1 if i in zero_pad else 0 for i in range(k)], dtype=np.uint8)
    lib.nvtxcffi_fixed_rows(ffi.from_buffer("int64_t[]", values), n, k, ffi.from_buffer("int64_t[]", meta[0].copy()),
                            ffi.from_buffer("int64_t[]", meta[1].copy()), ffi.from_buffer("uint8_t[]", pads),
                            ffi.from_buffer("uint8_t[]", template), len(template), ffi.from_buffer("uint8_t[]", out))
    return out


def _rows_numpy(parts: Sequence[str], columns: Sequence[Any], w: List[int], zero_pad: Sequence[int]) -> Any:
    np = _np
    n = len(columns[0])
    encoded = [p.encode("utf-8") for p in parts]
    row_len = sum(len(p) for p in encoded) + sum(w)
    # every row starts as the template (the constant parts, digits to be written), in one pass
    template = b"".join(p + b"0" * width for p, width in zip(encoded, w + [0]))
    native = _native()
    if native is not None:
        return _rows_native(native, encoded, columns, w, zero_pad, template, n)
    out = np.tile(np.frombuffer(template, dtype=np.uint8), (n, 1))
    pos = 0
    for i, part in enumerate(encoded):
        pos += len(part)
        if i == len(columns):
            break
        width = w[i]
        v = np.asarray(columns[i], dtype=np.int64)
        _digits_into(out[:, pos:pos + width], v, width, i in zero_pad)
        pos += width
    return out


def join_rows(pre: Any, pre_start: Any, pre_len: Any, data: Any, start: Any, length: Any, post: Any = None) -> Any:
    """Variable-length rows as one NumPy uint8 buffer: row ``i`` is ``pre[pre_start[i]:][:pre_len[i]]``
    + ``data[start[i]:][:length[i]]`` + row ``i`` of ``post`` (an (n, width) uint8 array, or None).
    ``pre`` and ``data`` are uint8 arrays, the others int64 arrays. In C (c/shim/trace_decode.c) when
    the module has it, else with NumPy's scatter."""
    np = _np
    n = len(length)
    width = post.shape[1] if post is not None else 0
    row_len = pre_len + length + width
    total = int(row_len.sum()) if n else 0
    out = np.empty(total, dtype=np.uint8)
    native = _native()
    if native is not None and hasattr(native[1], "nvtxcffi_join_rows"):
        ffi, lib = native

        def i64(a: Any) -> Any:
            return ffi.from_buffer("int64_t[]", np.ascontiguousarray(a, dtype=np.int64))

        def u8(a: Any) -> Any:
            return ffi.from_buffer("uint8_t[]", np.ascontiguousarray(a, dtype=np.uint8).reshape(-1))

        empty = np.zeros(1, dtype=np.uint8)
        lib.nvtxcffi_join_rows(n, u8(pre if len(pre) else empty), i64(pre_start), i64(pre_len),
                               u8(data if len(data) else empty), i64(start), i64(length),
                               u8(post if post is not None and post.size else empty), width, u8(out))
        return out
    row_end = np.cumsum(row_len)
    row_start = row_end - row_len
    for src_data, src_start, src_len, at in ((pre, pre_start, pre_len, row_start),
                                             (data, start, length, row_start + pre_len)):
        count = int(src_len.sum()) if n else 0
        if count:
            src = np.repeat(src_start - (np.cumsum(src_len) - src_len), src_len) + np.arange(count, dtype=np.int64)
            out[src + np.repeat(at - src_start, src_len)] = src_data[src]
    if width:
        out[(row_end - width)[:, None] + np.arange(width)] = post
    return out


class TextRows:
    """Rows of text of varying length, made in C (``nvtxcffi_text_rows``, c/shim/trace_decode.c):
    each row its literals and its fields, given a column at a time (NumPy), in row order.
    ``native`` is :func:`_native`'s ``(ffi, lib)``. For example::

        rows = TextRows(2, _native())
        rows.literal('{"a":'); rows.integer(np.array([-5, 12])); rows.literal(',"b":"')
        rows.text(np.frombuffer(b"xyz", np.uint8), np.array([0, 1]), np.array([1, 2])); rows.literal('"}\\n')
        bytes(rows.build())  # b'{"a":-5,"b":"x"}\\n{"a":12,"b":"yz"}\\n'
    """

    def __init__(self, n: int, native: Any) -> None:
        self.n = n
        self._ffi, self._lib = native
        self._literal = b""  # the text before the next field
        self._lits: List[bytes] = []
        self._kinds: List[int] = []
        self._values: List[Any] = []
        self._aux: List[Any] = []
        self._data: List[Any] = []
        self._data_size = 0
        self._numbers = 0

    def literal(self, text: str) -> None:
        """The same text in every row."""
        self._literal += text.encode("utf-8")

    def _field(self, kind: int, value: Any, aux: Any = 0) -> None:
        self._lits.append(self._literal)
        self._literal = b""
        self._kinds.append(kind)
        self._values.append(value)
        self._aux.append(aux)

    def integer(self, values: Any) -> None:
        """A signed decimal a row."""
        self._field(self._lib.NVTXCFFI_TEXT_INT, values)
        self._numbers += 1

    def frac(self, values: Any) -> None:
        """Three digits a row, zero-padded (0..999: what follows a decimal point)."""
        self._field(self._lib.NVTXCFFI_TEXT_FRAC, values)
        self._numbers += 1

    def hex(self, values: Any) -> None:
        """A row's 64 bits in lowercase hex (``%x`` of a uint64; ``values`` int64, as their bits)."""
        self._field(self._lib.NVTXCFFI_TEXT_HEX, values)
        self._numbers += 1

    def number(self, values: Any, mode: Any) -> None:
        """By each row's ``mode``: nothing (0), a signed decimal (1), the unsigned decimal of its bits (2)."""
        self._field(self._lib.NVTXCFFI_TEXT_NUMBER, values, mode)
        self._numbers += 1

    def micros(self, values: Any) -> None:
        """ns as microseconds, a row's ``repr(ns / 1000.0)`` (``|ns| < 2**50``): "2.0", "-0.25"."""
        self._field(self._lib.NVTXCFFI_TEXT_MICROS, values)
        self._numbers += 1

    def text(self, data: Any, start: Any, length: Any) -> None:
        """Each row's bytes ``data[start:start + length]`` (``data`` a uint8 array)."""
        self._field(self._lib.NVTXCFFI_TEXT_BYTES, start + self._data_size, length)
        self._data.append(data)
        self._data_size += len(data)

    def build(self) -> Any:
        """The rows, one after another (a memoryview of a NumPy buffer)."""
        np = _np
        ffi, lib = self._ffi, self._lib
        self._field(lib.NVTXCFFI_TEXT_END, 0)
        n, nfields = self.n, len(self._kinds)
        values = np.empty((nfields, n), dtype=np.int64)
        aux = np.empty((nfields, n), dtype=np.int64)
        for f in range(nfields):
            values[f] = self._values[f]
            aux[f] = self._aux[f]
        text_bytes = sum(int(aux[f].sum()) for f in range(nfields) if self._kinds[f] == lib.NVTXCFFI_TEXT_BYTES)
        lit_at = np.cumsum([0] + [len(lit) for lit in self._lits], dtype=np.int64)
        capacity = n * (int(lit_at[-1]) + 21 * self._numbers) + text_bytes
        # (a byte more in each buffer: none is empty, which cffi's from_buffer may refuse)
        lits = b"".join(self._lits) + b"\0"
        data = np.concatenate([*self._data, np.zeros(1, dtype=np.uint8)])
        out = np.empty(capacity + 1, dtype=np.uint8)
        size = lib.nvtxcffi_text_rows(n, nfields, ffi.from_buffer("uint8_t[]", np.array(self._kinds, dtype=np.uint8)),
                                      ffi.from_buffer("uint8_t[]", lits), ffi.from_buffer("int64_t[]", lit_at),
                                      ffi.from_buffer("int64_t[]", values), ffi.from_buffer("int64_t[]", aux),
                                      ffi.from_buffer("uint8_t[]", data), ffi.from_buffer("uint8_t[]", out), capacity)
        if size < 0:  # pragma: no cover - the capacity above always suffices
            msg = "text rows: buffer too small"
            raise RuntimeError(msg)
        return memoryview(out[:size])
