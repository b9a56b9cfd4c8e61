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

import json
from typing import IO, Any, Callable, Dict, Optional, Tuple

from .model import Mark, Range, Timeline

__all__ = ["ChromeTraceWriter", "write_chrome_trace", "hex_color"]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=repr).encode


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


class ChromeTraceWriter:
    """Write trace events to ``out`` as they come: memory for the cached name fragments only.

    ``start_ns`` is the time that becomes ``ts`` 0 (the recording's first event). Call
    :meth:`range` and :meth:`mark` in any order (viewers sort events by time), then :meth:`finish`,
    which adds the process/thread names and ``otherData`` (counts known only at the end).

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

    def __init__(self, out: IO[str], start_ns: int) -> None:
        self._write = out.write
        self._t0 = start_ns
        self._sep = ""
        self.count = 0
        # Per-event text from cached fragments: names, categories and colours repeat, times do not.
        self._heads: Dict[tuple, Tuple[str, str]] = {}
        self._write('{"displayTimeUnit":"ns","traceEvents":[\n')

    def _head(self, ph: str, name: str, domain: Optional[str], category: Optional[str],
              color: Optional[int]) -> Tuple[str, str]:
        key = (ph, name, domain, category, color)
        cached = self._heads.get(key)
        if cached is None:
            if len(self._heads) > 100000:
                self._heads.clear()  # bounded even with a unique name per range
            extra = ',"s":"t"' if ph == "i" else ""
            static_args = _dumps(_args(domain, category, color, None))[1:-1]
            cached = self._heads[key] = (f'{{"name":{_dumps(name)},"cat":{_dumps(_cat(domain, category))},'
                                         f'"ph":"{ph}"{extra}', static_args)
        return cached

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

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: float) -> None:
        """One counter sample: a ``"C"`` event of process ``pid`` (Perfetto: a track per name);
        the series is named by ``unit``."""
        self._write(f'{self._sep}{{"name":{_dumps(name)},"ph":"C","ts":{(time_ns - self._t0) / 1000.0!r},'
                    f'"pid":{pid},"args":{{{_dumps(unit or "value")}:{_dumps(value)}}}}}')
        self._sep = ",\n"
        self.count += 1

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


def _args_text(static_args: str, payload: Any, unterminated: bool) -> str:
    parts = [static_args] if static_args else []
    if payload is not None:
        parts.append(f'"payload":{_dumps(payload)}')
    if unterminated:
        parts.append('"unterminated":true')
    return ",".join(parts)


def write_chrome_trace(timeline: Timeline, out: IO[str], progress: Optional[Callable[[int, int], None]] = None,
                       extra_metadata: Optional[Dict[str, Any]] = None) -> int:
    """Write an in-memory ``timeline`` (:func:`~.model.build_timeline`) to ``out``; returns the event count.

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
