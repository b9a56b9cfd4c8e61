"""Write a :class:`~._trace.model.Timeline` as Chrome Trace Event JSON (Perfetto, chrome://tracing).

Mapping: push/pop ranges become complete events (``"ph": "X"``) on their thread; start/end ranges
become nestable async pairs (``"b"``/``"e"``, process-local ``id2``) that may end on another thread;
marks become thread-scoped instants (``"i"``); process and thread names are metadata (``"M"``).
``args`` carry the domain, category name, colour (``#rrggbb``), payload and, for ranges cut short by
the end of their process, ``"unterminated": true``.

Timestamps are microseconds (floats, ns precision) from the first recorded event; the recorder
uses CLOCK_MONOTONIC in every process, so processes line up. :class:`ChromeTraceWriter` writes each
event as soon as it is complete (a range at its pop/end), so events are not sorted by time in the
file: the format does not ask for it (complete and async events may come in any order) and
Perfetto and chrome://tracing sort them. Names (``"M"``) and ``otherData`` come last.

>>> import io, json
>>> from nvtx_cffi._trace.model import Timeline, Mark
>>> tl = Timeline(); tl.marks.append(Mark("hi", None, None, 0xFF00FF00, None, 7, 7, 1500))
>>> tl.threads.add((7, 7)); tl.process_names[7] = "demo"; tl.start_ns = 1000
>>> out = io.StringIO(); write_chrome_trace(tl, out)
1
>>> [e["ph"] for e in json.loads(out.getvalue())["traceEvents"]]
['i', 'M', 'M']
"""
from __future__ import annotations

import io
import json
import math
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

from .. import _fixedwidth
from .._fixedwidth import TextRows, fixed_rows, join_rows
from .grouping import group_rows
from .model import Mark, Range, Timeline
from .scalars import DOUBLE, FLOAT, scalar_payloads
from .writers import StreamWriter, register

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["ChromeTraceWriter", "write_chrome_trace", "hex_color", "json_value"]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=repr).encode
#: a str as a JSON string (what _dumps does for one, without the encoder's call)
_encode_str = json.encoder.encode_basestring  # (the C one where there is one; PyPy has its own)
def _name_json(name: Any) -> str:
    return _encode_str(name) if type(name) is str else _dumps(name)


#: cached event heads (name, domain, category, colour): names may never repeat, so this many at most
_HEAD_CACHE = 16384
#: rows formatted one by one (each a few Python objects while formatted) are taken this many at a time
_ROWS_AT_ONCE = 8192
#: batches of at least this many payload-free push/pop rows and many names take the bulk path
#: (:meth:`ChromeTraceWriter._ranges_by_style`); smaller ones are formatted row by row
_NAMED_ROWS_MIN = 4096

#: Strict JSON has no NaN or infinities (JSON.parse, which chrome://tracing uses, rejects them):
#: they are written as these strings.
_NON_FINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def json_value(value: Any) -> str:
    """``value`` as strict JSON text: non-finite floats become ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

    >>> json_value(float("nan")), json_value(-float("inf")), json_value(1.5), json_value(7)
    ('"NaN"', '"-Infinity"', '1.5', '7')
    """
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE[repr(value)]
    return _dumps(value)


def hex_color(argb: Optional[int]) -> Optional[str]:
    """``0xAARRGGBB`` → ``"#rrggbb"`` (alpha ignored: nvtx's named colours have alpha 0).

    >>> hex_color(0xFFFF0000)
    '#ff0000'
    """
    if argb is None:
        return None
    return f"#{argb & 0xFFFFFF:06x}"


def _args(domain: Optional[str], category: Optional[str], color: Optional[int], payload: Any) -> Dict[str, Any]:
    args: Dict[str, Any] = {}
    if domain is not None:
        args["domain"] = domain
    if category is not None:
        args["category"] = category
    if color is not None:
        args["color"] = hex_color(color)
    if payload is not None:
        args["payload"] = payload
    return args


def _cat(domain: Optional[str], category: Optional[str]) -> str:
    cat = domain if domain is not None else "nvtx"
    return f"{cat},{category}" if category is not None else cat


@register("json", ".json")
class ChromeTraceWriter(StreamWriter):
    """Write trace events to ``out`` as they come: memory for the cached name fragments only.

    ``start_ns`` is the time that becomes ``ts`` 0 (the recording's first event). Call
    :meth:`batch` (a conversion's :class:`~.writers.Writer`), or :meth:`range` and :meth:`mark`, in
    any order (viewers sort events by time), then :meth:`finish`, which adds the process/thread
    names and ``otherData`` (counts known only at the end). ``close=True``: :meth:`close` closes ``out``.

    >>> import io, json
    >>> from nvtx_cffi._trace.model import Mark, Timeline
    >>> out = io.StringIO(); w = ChromeTraceWriter(out, start_ns=1000)
    >>> w.mark(Mark("hi", None, None, 0xFF00FF00, None, 7, 7, 1500))
    >>> tl = Timeline(); tl.threads.add((7, 7)); tl.process_names[7] = "demo"
    >>> w.finish(tl)
    1
    >>> [(e["ph"], e.get("ts")) for e in json.loads(out.getvalue())["traceEvents"]]
    [('i', 0.5), ('M', None), ('M', None)]
    """

    def __init__(self, out: IO[Any], start_ns: int, close: bool = False) -> None:
        super().__init__(out, start_ns, close)
        if isinstance(out, (io.RawIOBase, io.BufferedIOBase)):  # binary: blocks go out as bytes
            self._write = lambda text: out.write(text.encode("utf-8"))
            self._write_bytes = out.write
        else:
            self._write = out.write
            self._write_bytes = lambda data: out.write(bytes(data).decode("utf-8"))
        self._sep = ""
        self.count = 0
        # Per-event text from cached fragments: names, categories and colours repeat, times do not.
        self._heads: Dict[tuple, Tuple[str, str]] = {}
        self._style_parts: Dict[tuple, Tuple[str, str]] = {}  # (ph, domain, category, colour): all but the name
        self._write('{"displayTimeUnit":"ns","traceEvents":[\n')

    def _head(self, ph: str, name: str, domain: Optional[str], category: Optional[str],
              color: Optional[int]) -> Tuple[str, str]:
        key = (ph, name, domain, category, color)
        cached = self._heads.get(key)
        if cached is None:
            style = self._style_part(ph, domain, category, color)
            if len(self._heads) >= _HEAD_CACHE:
                self._heads.clear()  # bounded: a unique name per range keeps no more than this
            cached = self._heads[key] = ('{"name":' + _name_json(name) + style[0], style[1])
        return cached

    def _style_part(self, ph: str, domain: Optional[str], category: Optional[str],
                    color: Optional[int]) -> Tuple[str, str]:
        """The head's text after the name, and the static args, of one (ph, domain, category, colour)."""
        style_key = (ph, domain, category, color)
        style = self._style_parts.get(style_key)
        if style is None:
            if len(self._style_parts) >= _HEAD_CACHE:
                self._style_parts.clear()
            extra = ',"s":"t"' if ph == "i" else ""
            style = self._style_parts[style_key] = (
                f',"cat":{_dumps(_cat(domain, category))},"ph":"{ph}"{extra}',
                _dumps(_args(domain, category, color, None))[1:-1])
        return style

    def range(self, r: Range) -> None:
        """A complete range: ``X`` for push/pop, a ``b``/``e`` pair for start/end."""
        t0 = self._t0
        if r.style == "push":
            prefix, static_args = self._head("X", r.name, r.domain, r.category, r.color)
            self._write(f'{self._sep}{prefix},"ts":{(r.start_ns - t0) / 1000.0!r},'
                        f'"dur":{(r.end_ns - r.start_ns) / 1000.0!r},"pid":{r.pid},"tid":{r.tid},'
                        f'"args":{{{_args_text(static_args, r.payload, r.unterminated)}}}}}')
            self.count += 1
        else:
            prefix, static_args = self._head("b", r.name, r.domain, r.category, r.color)
            end_prefix, _ = self._head("e", r.name, r.domain, r.category, r.color)
            ident = f'"id2":{{"local":"0x{r.range_id:x}"}}'
            self._write(f'{self._sep}{prefix},{ident},"ts":{(r.start_ns - t0) / 1000.0!r},'
                        f'"pid":{r.pid},"tid":{r.tid},'
                        f'"args":{{{_args_text(static_args, r.payload, r.unterminated)}}}}},\n'
                        f'{end_prefix},{ident},"ts":{(r.end_ns - t0) / 1000.0!r},'
                        f'"pid":{r.pid},"tid":{r.end_tid},"args":{{}}}}')
            self.count += 2
        self._sep = ",\n"

    def mark(self, m: Mark) -> None:
        """A mark: a thread-scoped instant ``i``."""
        prefix, static_args = self._head("i", m.name, m.domain, m.category, m.color)
        self._write(f'{self._sep}{prefix},"ts":{(m.time_ns - self._t0) / 1000.0!r},"pid":{m.pid},'
                    f'"tid":{m.tid},"args":{{{_args_text(static_args, m.payload, False)}}}}}')
        self.count += 1
        self._sep = ",\n"

    # ----------------------------------------------------------------- columns (the tracer's path)

    def batch(self, pb: Any) -> None:
        """Write a :class:`~.pairing.PairedBatch`: its ranges, start/end ranges and marks, in bulk.

        The same events as :meth:`range`/:meth:`mark` would write for them (timestamps printed
        from integers, ``%d.%03d`` µs, which JSON reads as the same numbers).
        """
        self._ranges(pb)
        self._asyncs(pb)
        self._marks(pb)

    def _styles(self, pb: Any, ph: str, text: List[int], dom: List[int], cat: List[int], color: List[int],
                has: List[int]) -> List[Tuple[str, str]]:
        """Per row: the cached (prefix, static args) of its name, domain, category and colour."""
        heads = []
        local: Dict[tuple, Tuple[str, str]] = {}
        # every name of the rows looked up and spelt as JSON once (names may never repeat)
        names = pb.texts(text) if hasattr(pb, "texts") else {t: pb.text(t) for t in set(text)}
        name_json = {t: '{"name":' + _name_json(name) for t, name in names.items()}
        parts: Dict[tuple, Tuple[str, str]] = {}  # (domain, category, colour, has colour): what follows the name
        for key in zip(text, dom, cat, color, has):
            head = local.get(key)
            if head is None:
                t, d, c, argb, h = key
                part = parts.get(key[1:])
                if part is None:
                    part = parts[key[1:]] = self._style_part(ph, pb.domain_name(d), pb.category_name(d, c),
                                                             argb if h else None)
                head = local[key] = (name_json[t] + part[0], part[1])
            heads.append(head)
        return heads

    def _times(self, pb: Any, cols: Any, *names: str) -> List[List[int]]:
        """``[µs, ns remainder]`` lists per named time column, relative to t0."""
        out: List[List[int]] = []
        for name in names:
            col = getattr(cols, name)
            if hasattr(col, "dtype"):  # NumPy: one vectorised pass
                import numpy as np

                rel = np.asarray(col, dtype=np.int64) - self._t0
                out += [(rel // 1000).tolist(), (rel % 1000).tolist()]
            else:
                rel = [t - self._t0 for t in col]
                out += [[t // 1000 for t in rel], [t % 1000 for t in rel]]
        return out

    def _payload_args(self, pb: Any, static: List[str], ptype: List[int], payload: List[int],
                      unterminated: bool) -> List[str]:
        from .columns import PT_EXT, payload_value

        tail = ',"unterminated":true' if unterminated else ""
        out = []
        for s, pt, raw in zip(static, ptype, payload):
            parts = s
            if pt:
                value = pb.ext_payload(raw) if pt == PT_EXT else payload_value(pt, raw)
                if value is not None:
                    parts = f'{parts},"payload":{json_value(value)}' if parts else f'"payload":{json_value(value)}'
            if tail:
                parts = parts + tail if parts else tail[1:]
            out.append(parts)
        return out

    def _args_column(self, pb: Any, heads: List[Tuple[str, str]], ptype: List[int], payload: List[int],
                     unterminated: bool) -> List[str]:
        static = [h[1] for h in heads]
        if unterminated or any(ptype):
            return self._payload_args(pb, static, ptype, payload, unterminated)
        return static

    def _ranges(self, pb: Any) -> None:
        """Push/pop ranges: rows without payload in fixed-width blocks per (name, domain, category,
        colour), each block formatted at once (:mod:`nvtx_cffi._fixedwidth`); the others row by row."""
        r = pb.ranges
        if not len(r):
            return
        numpy = hasattr(r.start, "dtype")
        pid = str(pb.pid)
        fast, slow = _split_rows(r, numpy, pb.unterminated)
        if fast is not None:
            groups = group_rows([r.text, r.domain, r.category, r.color, r.has_color], fast, numpy,
                                max_groups=len(fast) // 64)
            if groups is not None:  # few styles: blocks pay off
                for rows in groups:
                    i = int(rows[0])
                    head, static = self._head("X", pb.text(int(r.text[i])), pb.domain_name(int(r.domain[i])),
                                              pb.category_name(int(r.domain[i]), int(r.category[i])),
                                              int(r.color[i]) if r.has_color[i] else None)
                    start = _pick(r.start, rows, numpy)
                    dur = _pick(r.end, rows, numpy)
                    if numpy:
                        start = start - self._t0
                        dur = dur - (start + self._t0)
                        cols = [start // 1000, start % 1000, dur // 1000, dur % 1000, _pick(r.tid, rows, numpy)]
                    else:
                        start = [t - self._t0 for t in start]
                        dur = [e - self._t0 - s for s, e in zip(start, dur)]
                        cols = [[t // 1000 for t in start], [t % 1000 for t in start], [d // 1000 for d in dur],
                                [d % 1000 for d in dur], _pick(r.tid, rows, numpy)]
                    parts = [",\n" + head + ',"ts":', ".", ',"dur":', ".", ',"pid":' + pid + ',"tid":',
                             ',"args":{' + static + "}}"]
                    self._write_block(fixed_rows(parts, cols, zero_pad=(1, 3), use_numpy=numpy, as_buffer=True))
                self.count += len(fast)
            elif numpy and self._ranges_by_style(pb, r, fast):
                self.count += len(fast)
            else:
                slow = sorted(list(fast) + list(slow)) if slow is not None else list(fast)
        if slow is not None and len(slow):
            self._ranges_by_row(pb, r, slow)

    def _ranges_by_style(self, pb: Any, r: Any, rows: Any) -> bool:
        """Push/pop ranges of many names (NumPy): blocks per (domain, category, colour), each row
        its name's bytes then fixed-width fields, formatted at once. False (nothing written) when
        there are too few rows, too many styles or no byte access to the names."""
        import numpy as np

        raw_many = getattr(pb.strings, "raw_many", None)
        if raw_many is None or len(rows) < _NAMED_ROWS_MIN:
            return False
        groups = group_rows([r.domain, r.category, r.color, r.has_color], rows, True, max_groups=len(rows) // 64)
        if groups is None:
            return False
        pid = str(pb.pid)
        text_col = np.asarray(r.text)
        for group in groups:
            i = int(group[0])
            d = int(r.domain[i])
            style, static = self._style_part("X", pb.domain_name(d), pb.category_name(d, int(r.category[i])),
                                             int(r.color[i]) if r.has_color[i] else None)
            parts = ['"' + style + ',"ts":', ".", ',"dur":', ".", ',"pid":' + pid + ',"tid":',
                     ',"args":{' + static + "}}"]
            for at in range(0, len(group), _ROWS_AT_ONCE):
                sub = group[at:at + _ROWS_AT_ONCE]
                data, start, length = _json_name_bytes(pb, raw_many, text_col[sub])
                begin = r.start[sub] - self._t0
                dur = r.end[sub] - self._t0 - begin
                fixed = fixed_rows(parts, [begin // 1000, begin % 1000, dur // 1000, dur % 1000, r.tid[sub]],
                                   zero_pad=(1, 3), use_numpy=True, as_buffer=True)
                self._write_block(_join_rows(b',\n{"name":"', data, start, length, fixed))
        return True

    def _write_block(self, data: Any) -> None:
        if not len(data):
            return
        if not self._sep:  # the first event of the file: no separator before it
            data = data[2:]
        self._write_bytes(data)
        self._sep = ",\n"

    def _ranges_by_row(self, pb: Any, r: Any, rows: Any) -> None:
        for at in range(0, len(rows), _ROWS_AT_ONCE):  # bounded: Python objects per row while formatting
            sub = rows[at:at + _ROWS_AT_ONCE]
            if not self._rows_in_c(pb, "X", r, sub):
                self._ranges_rows(pb, r, sub)

    def _ranges_rows(self, pb: Any, r: Any, rows: Any) -> None:
        sub = _subset(r, rows)
        tid, start, end, text, dom, cat, color, has, ptype, payload = sub.lists(
            "tid", "start", "end", "text", "domain", "category", "color", "has_color", "ptype", "payload")
        heads = self._styles(pb, "X", text, dom, cat, color, has)
        t0 = self._t0
        args = self._args_column(pb, heads, ptype, payload, pb.unterminated)
        fmt = '%s,"ts":%d.%03d,"dur":%d.%03d,"pid":' + str(pb.pid) + ',"tid":%d,"args":{%s}}'
        text_out = ",\n".join([fmt % (h[0], (s - t0) // 1000, (s - t0) % 1000, (e - s) // 1000, (e - s) % 1000, t, x)
                               for h, s, e, t, x in zip(heads, start, end, tid, args)])
        self._write(self._sep + text_out)
        self._sep = ",\n"
        self.count += len(tid)

    def _asyncs(self, pb: Any) -> None:
        r = pb.asyncs
        if not len(r) or self._rows_in_c(pb, "b", r):
            return
        tid, end_tid, rid, text, dom, cat, color, has, ptype, payload = r.lists(
            "tid", "end_tid", "range_id", "text", "domain", "category", "color", "has_color", "ptype", "payload")
        heads = self._styles(pb, "b", text, dom, cat, color, has)
        ends = self._styles(pb, "e", text, dom, cat, color, has)
        s_us, s_ns, e_us, e_ns = self._times(pb, r, "start", "end")
        args = self._args_column(pb, heads, ptype, payload, pb.unterminated)
        pid = str(pb.pid)
        fmt = ('%s,"id2":{"local":"0x%x"},"ts":%d.%03d,"pid":' + pid + ',"tid":%d,"args":{%s}},\n'
               '%s,"id2":{"local":"0x%x"},"ts":%d.%03d,"pid":' + pid + ',"tid":%d,"args":{}}')
        text_out = ",\n".join([fmt % (h[0], i, a, b, t, x, e[0], i, c, d, et)
                               for h, e, i, a, b, c, d, t, et, x in zip(heads, ends, rid, s_us, s_ns, e_us, e_ns,
                                                                        tid, end_tid, args)])
        self._write(self._sep + text_out)
        self._sep = ",\n"
        self.count += 2 * len(r)

    def _marks(self, pb: Any) -> None:
        m = pb.marks
        if not len(m) or self._rows_in_c(pb, "i", m):
            return
        tid, text, dom, cat, color, has, ptype, payload = m.lists(
            "tid", "text", "domain", "category", "color", "has_color", "ptype", "payload")
        heads = self._styles(pb, "i", text, dom, cat, color, has)
        t_us, t_ns = self._times(pb, m, "time")
        args = self._args_column(pb, heads, ptype, payload, False)
        fmt = '%s,"ts":%d.%03d,"pid":' + str(pb.pid) + ',"tid":%d,"args":{%s}}'
        text_out = ",\n".join([fmt % (h[0], a, b, t, x) for h, a, b, t, x in zip(heads, t_us, t_ns, tid, args)])
        self._write(self._sep + text_out)
        self._sep = ",\n"
        self.count += len(m)

    def _rows_in_c(self, pb: Any, ph: str, cols: Any, rows: Any = None) -> bool:
        """Write the rows ``rows`` of ``cols`` (all of them when None) as :meth:`_ranges_rows` (``ph``
        "X"), :meth:`_marks` ("i") or :meth:`_asyncs` ("b": a "b"/"e" pair a row) write them, the
        same bytes made in C (:class:`~.fixedwidth.TextRows`), payloads included. False, having
        written nothing, without the compiled module, NumPy or byte access to the names, and for
        ranges still open at the end (``unterminated``: a few)."""
        native = _fixedwidth._native() if _np is not None else None
        raw_many = getattr(pb.strings, "raw_many", None)
        if native is None or raw_many is None or pb.unterminated:
            return False
        np = _np

        def col(name: str, dtype: Any = np.int64) -> Any:
            values = np.asarray(getattr(cols, name), dtype=dtype)  # (start/end ranges: lists)
            return values if rows is None else values[np.asarray(rows, dtype=np.int64)]

        text = col("text")
        n = len(text)
        if not n:
            return True
        name, name_start, name_len = _json_name_bytes(pb, raw_many, text)
        # what follows the name, and the args without the payload, per (domain, category, colour)
        dom, cat, color, has = col("domain"), col("category"), col("color"), col("has_color")
        style = np.empty(n, dtype=np.int64)
        parts: Dict[str, List[str]] = {p: [] for p in ("be" if ph == "b" else ph)}
        args: List[str] = []
        for k, group in enumerate(group_rows([dom, cat, color, has], np.arange(n), True)):
            style[group] = k
            i = int(group[0])
            key = (pb.domain_name(int(dom[i])), pb.category_name(int(dom[i]), int(cat[i])),
                   int(color[i]) if has[i] else None)
            for p, texts in parts.items():
                texts.append(self._style_part(p, *key)[0])
            static = self._style_part(ph, *key)[1]
            args += [static, (static + "," if static else "") + '"payload":']
        number, mode, payload, payload_start, payload_len = _payload_texts(pb, col("ptype"), col("payload", np.uint64))
        with_payload = (mode != 0) | (payload_len > 0)
        out = TextRows(n, native)
        times = (col("start"), col("end")) if ph != "i" else (col("time"),)
        for p, texts in parts.items():
            if p == "e":  # the end of the start/end range, on the thread that ended it
                out.literal("}},\n")
            out.literal(',\n{"name":"' if p != "e" else '{"name":"')
            out.text(name, name_start, name_len)
            out.literal('"')
            out.text(*_table(texts, style))
            if p in "be":
                out.literal(',"id2":{"local":"0x')
                out.hex(col("range_id", np.uint64).view(np.int64))
                out.literal('"}')
            at = times[1 if p == "e" else 0] - self._t0
            out.literal(',"ts":')
            out.integer(at // 1000)
            out.literal(".")
            out.frac(at % 1000)
            if p == "X":
                dur = times[1] - times[0]
                out.literal(',"dur":')
                out.integer(dur // 1000)
                out.literal(".")
                out.frac(dur % 1000)
            out.literal(f',"pid":{pb.pid},"tid":')
            out.integer(col("end_tid" if p == "e" else "tid"))
            out.literal(',"args":{')
            if p != "e":
                out.text(*_table(args, 2 * style + with_payload))
                out.number(number, mode)
                out.text(payload, payload_start, payload_len)
        out.literal("}}")
        self._write_block(out.build())
        self.count += 2 * n if ph == "b" else n
        return True

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: Optional[float],
                track: Any = None, no_value: Optional[str] = None) -> None:
        """One counter sample: a ``"C"`` event of process ``pid``; the series is named by ``unit``.
        A gap (``value`` None: an unavailable sample) is written as ``null``; NaN and infinities as
        ``"NaN"``, ``"Infinity"``, ``"-Infinity"``."""
        self._write(f'{self._sep}{{"name":{_dumps(name)},"ph":"C","ts":{(time_ns - self._t0) / 1000.0!r},'
                    f'"pid":{pid},"args":{{{_dumps(unit or "value")}:{json_value(value)}}}}}')
        self._sep = ",\n"
        self.count += 1

    def samples(self, block: Any) -> None:
        """:meth:`counter` of each sample of a :class:`~.counters.SampleBlock`, the same bytes made in C
        (:class:`~.fixedwidth.TextRows`); one by one without the compiled module, and for times
        2**50 ns (13 days) or more from t0, whose µs Python spells otherwise."""
        from .counters import FLOATING

        np = _np
        native = _fixedwidth._native()
        rel = block.time - self._t0
        if native is None or not len(block) or int(np.abs(rel).max()) >= 1 << 50:
            super().samples(block)
            return
        n = len(block)
        out = TextRows(n, native)
        out.literal(',\n{"name":')
        out.text(*_table([_dumps(t.title) for t in block.tracks], block.track))
        out.literal(',"ph":"C","ts":')
        out.micros(rel)
        out.literal(f',"pid":{block.pid},"args":{{')
        out.text(*_table([_dumps(t.unit or "value") for t in block.tracks], block.track))
        out.literal(":")
        floating = block.kind == FLOATING
        texts = floating if block.gap is None else floating | block.gap
        out.number(block.bits.view(np.int64), np.where(texts, 0, block.kind).astype(np.int64))
        length = np.zeros(n, dtype=np.int64)
        at = np.flatnonzero(floating if block.gap is None else floating & ~block.gap)
        data, length[at] = _float_texts(block.bits[at].view(np.float64))
        start = np.cumsum(length) - length
        if block.gap is not None:  # a gap: null, after the numbers' texts
            start[block.gap], length[block.gap] = len(data), 4
            data = np.concatenate((data, np.frombuffer(b"null", dtype=np.uint8)))
        out.text(data, start, length)
        out.literal("}}")
        self._write_block(out.build())
        self.count += n

    def finish(self, timeline: Timeline, extra_metadata: Optional[Dict[str, Any]] = None) -> int:
        """Write the names and ``otherData``, close the JSON; returns the number of trace events
        written before the names (ranges count 1, or 2 for a ``b``/``e`` pair; marks 1)."""
        def emit(event: Dict[str, Any]) -> None:
            self._write(self._sep + _dumps(event))
            self._sep = ",\n"

        pids = sorted({pid for pid, _ in timeline.threads} | set(timeline.process_names))
        for pid in pids:
            name = timeline.process_names.get(pid, "process")
            emit({"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
                  "args": {"name": f"{name} ({pid})"}})
        for pid, tid in sorted(timeline.threads | set(timeline.thread_names)):
            name = timeline.thread_names.get((pid, tid))
            if name is None:
                name = "main thread" if tid == pid else f"thread {tid}"
            emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        other: Dict[str, Any] = {
            "generator": "nvtx_cffi trace",
            "clock": "CLOCK_MONOTONIC",
            "t0_ns": self._t0,
            "events_recorded": timeline.event_count,
            "dropped_events": timeline.dropped,
            "unmatched_pops": timeline.unmatched_pops,
            "unmatched_ends": timeline.unmatched_ends,
            "unterminated_ranges": timeline.unterminated,
        }
        if extra_metadata:
            other.update(extra_metadata)
        self._write('\n],"otherData":')
        self._write(_dumps(other))
        self._write("}\n")
        return self.count


class _Sub:
    """Some rows of a :class:`~.pairing.Columns` (same ``lists`` method)."""

    def __init__(self, cols: Any, rows: Any) -> None:
        self._cols = cols
        self._rows = rows

    def lists(self, *names: str) -> List[list]:
        out = []
        for name in names:
            col = getattr(self._cols, name)
            if hasattr(col, "dtype"):
                out.append(col[self._rows].tolist())
            else:
                out.append([col[i] for i in self._rows])
        return out


#: JSON-escaped if they hold one of these bytes (or a non-ASCII one: decoded by Python, which replaces
#: invalid UTF-8): control characters, ``"`` and ``\\``
_PLAIN_BYTE = None


def _json_name_bytes(pb: Any, raw_many: Any, text_ids: Any) -> Tuple[Any, Any, Any]:
    """The names of ``text_ids`` (one per row) as the UTF-8 of their JSON strings without the quotes:
    ``(data, start, length)`` per row into ``data`` (NumPy). Names whose bytes need no escaping are
    taken as they are, in bulk; the others (escapes, non-ASCII, empty or unknown) as Python does."""
    import numpy as np

    global _PLAIN_BYTE
    if _PLAIN_BYTE is None:
        plain = np.zeros(256, dtype=bool)
        plain[0x20:0x80] = True
        plain[[ord('"'), ord("\\")]] = False
        _PLAIN_BYTE = plain
    data, lengths = raw_many(text_ids)
    take = np.maximum(lengths, 0)
    ends = np.cumsum(take)
    start = ends - take
    bad = np.concatenate(([0], np.cumsum(~_PLAIN_BYTE[data])))
    other = np.flatnonzero((lengths <= 0) | (bad[ends] != bad[start]))
    if len(other):
        ids, inverse = np.unique(text_ids[other], return_inverse=True)  # each name spelt once
        names = pb.texts(ids.tolist())
        extra = [_name_json(names[t])[1:-1].encode("utf-8") for t in ids.tolist()]
        start = start.copy()
        length = take.copy()
        extra_len = np.fromiter(map(len, extra), dtype=np.int64, count=len(extra))
        start[other] = len(data) + (np.cumsum(extra_len) - extra_len)[inverse.reshape(-1)]
        length[other] = extra_len[inverse.reshape(-1)]
        data = np.concatenate((data, np.frombuffer(b"".join(extra), dtype=np.uint8)))
        return data, start, length
    return data, start, take


def _table(texts: List[str], index: Any) -> Tuple[Any, Any, Any]:
    """``texts[index[i]]`` for each row i, as :meth:`~.fixedwidth.TextRows.text` takes it:
    ``(data, start, length)``."""
    np = _np
    encoded = [t.encode("utf-8") for t in texts]
    length = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    start = np.cumsum(length) - length
    return np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8), start[index], length[index]


#: how TextRows.number prints a payload, by its slot (scalars.py; the last entry: slot -1): the
#: integers as they are (a uint64 unsigned), the floating types not (their text is Python's)
_NUMBER_MODE = (2, 1, 0, 1, 1, 0, 0)


def _payload_texts(pb: Any, ptype: Any, raw: Any) -> Tuple[Any, Any, Any, Any, Any]:
    """The rows' payloads as :meth:`ChromeTraceWriter._rows_in_c` prints them, what
    :func:`json_value` writes of their :func:`~.columns.payload_value`: ``(number, mode)`` for
    :meth:`~.fixedwidth.TextRows.number` (the integers), ``(data, start, length)`` for
    :meth:`~.fixedwidth.TextRows.text` (the floating types and extension payloads; empty for the
    others and for an extension payload that was not decoded)."""
    from .columns import PT_EXT

    np = _np
    n = len(ptype)
    slot, bits = scalar_payloads(ptype, raw)
    mode = np.asarray(_NUMBER_MODE, dtype=np.int64).take(slot)
    floats = np.flatnonzero((slot == DOUBLE) | (slot == FLOAT))
    texts = _float_json(bits[floats].view(np.float64))
    exts = np.flatnonzero(ptype == PT_EXT)
    ids = raw[exts].tolist()
    for raw_id, text in zip(ids, pb.ext_texts(ids)):
        if text is None:
            value = pb.ext_payload(raw_id)
            text = json_value(value) if value is not None else ""
        texts.append(text)
    encoded = [t.encode("utf-8") for t in texts]
    length = np.zeros(n, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    where = np.concatenate((floats, exts))
    length[where] = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    start[where] = np.cumsum(length[where]) - length[where]
    return bits.view(np.int64), mode, np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8), start, length


def _float_json(values: Any) -> List[str]:
    """:func:`json_value` of each of ``values`` (a float64 array)."""
    texts = list(map(float.__repr__, values.tolist()))  # (what JSON writes of a finite float)
    for j in _np.flatnonzero(~_np.isfinite(values)).tolist():
        texts[j] = json_value(float(values[j]))  # NaN and the infinities, as strings
    return texts


def _float_texts(values: Any) -> Tuple[Any, Any]:
    """:func:`_float_json` of ``values`` as UTF-8: ``(data, length)``, each text after the one before."""
    np = _np
    encoded = [t.encode("ascii") for t in _float_json(values)]
    length = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8), length


def _join_rows(head: bytes, data: Any, start: Any, length: Any, fixed: Any) -> Any:
    """Rows ``head + data[start:start + length] + fixed row`` (``fixed``: equal rows, one per row), as
    one buffer."""
    import numpy as np

    n = len(length)
    zeros = np.zeros(n, dtype=np.int64)
    out = join_rows(np.frombuffer(head, dtype=np.uint8), zeros, zeros + len(head), data, start, length,
                    np.frombuffer(fixed, dtype=np.uint8).reshape(n, -1))
    return memoryview(out)


def _subset(cols: Any, rows: Any) -> _Sub:
    return _Sub(cols, rows)


def _pick(col: Any, rows: Any, numpy: bool) -> Any:
    return col[rows] if numpy else [col[i] for i in rows]


def _split_rows(r: Any, numpy: bool, unterminated: bool) -> Tuple[Any, Any]:
    """(rows for fixed-width blocks, rows formatted one by one): a payload or the unterminated flag
    makes a row's text vary beyond its numbers."""
    n = len(r)
    if unterminated:
        return None, (_np_arange(n) if numpy else list(range(n)))
    if numpy:
        import numpy as np

        has = r.ptype != 0
        return np.flatnonzero(~has), np.flatnonzero(has)
    return [i for i, p in enumerate(r.ptype) if not p], [i for i, p in enumerate(r.ptype) if p]


def _np_arange(n: int) -> Any:
    import numpy as np

    return np.arange(n)


def _args_text(static_args: str, payload: Any, unterminated: bool) -> str:
    parts = [static_args] if static_args else []
    if payload is not None:
        parts.append(f'"payload":{json_value(payload)}')
    if unterminated:
        parts.append('"unterminated":true')
    return ",".join(parts)


def write_chrome_trace(timeline: Timeline, out: IO[str], progress: Optional[Callable[[int, int], None]] = None,
                       extra_metadata: Optional[Dict[str, Any]] = None) -> int:
    """Write an in-memory ``timeline`` (:func:`~.pairing.build_timeline`) to ``out``; returns the event count.

    Ranges are written in time order, then marks. ``progress(done, total)`` is called every 65536
    ranges and marks.
    """
    writer = ChromeTraceWriter(out, timeline.start_ns)
    total = len(timeline.ranges) + len(timeline.marks)
    done = 0
    for r in sorted(timeline.ranges, key=lambda r: (r.start_ns, -r.end_ns, r.depth)):
        writer.range(r)
        done += 1
        if progress is not None and not done & 0xFFFF:
            progress(done, total)
    for m in timeline.marks:
        writer.mark(m)
        done += 1
        if progress is not None and not done & 0xFFFF:
            progress(done, total)
    return writer.finish(timeline, extra_metadata)
