"""Write a :class:`~._trace.model.Timeline` as Chrome Trace Event JSON (Perfetto, chrome://tracing).

Mapping: push/pop ranges become complete events (``"ph": "X"``) on their thread; start/end ranges
become nestable async pairs (``"b"``/``"e"``, process-local ``id2``) that may end on another thread;
marks become thread-scoped instants (``"i"``); process and thread names are metadata (``"M"``).
``args`` carry the domain, category name, colour (``#rrggbb``), payload and, for ranges cut short by
the end of their process, ``"unterminated": true``.

Timestamps are microseconds (floats, ns precision) from the first recorded event; the recorder
uses CLOCK_MONOTONIC in every process, so processes line up. Events are written sorted by time
(an enclosing range before the ranges it contains), so every thread's timestamps are monotonic.

>>> import io, json
>>> from nvtx_cffi._trace.model import Timeline, Mark
>>> tl = Timeline(); tl.marks.append(Mark("hi", None, None, 0xFF00FF00, None, 7, 7, 1500))
>>> tl.threads.add((7, 7)); tl.process_names[7] = "demo"; tl.start_ns = 1000
>>> out = io.StringIO(); write_chrome_trace(tl, out)
1
>>> [e["ph"] for e in json.loads(out.getvalue())["traceEvents"]]
['M', 'M', 'i']
"""
from __future__ import annotations

import json
from typing import IO, Any, Callable, Dict, List, Optional, Tuple

from .model import Timeline

__all__ = ["write_chrome_trace", "hex_color"]

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


def write_chrome_trace(timeline: Timeline, out: IO[str], progress: Optional[Callable[[int, int], None]] = None,
                       extra_metadata: Optional[Dict[str, Any]] = None) -> int:
    """Write ``timeline`` to the text stream ``out``; returns the number of trace events written.

    ``progress(done, total)`` is called every 65536 events.
    """
    t0 = timeline.start_ns
    # Sort keys only (time, order..., index): at equal times a range before the shorter ones it
    # encloses (-end), then by depth; the index makes keys unique so objects are never compared.
    ranges = timeline.ranges
    marks = timeline.marks
    n_ranges = len(ranges)
    items: List[tuple] = [(r.start_ns, -r.end_ns, r.depth, i) for i, r in enumerate(ranges)]
    async_ends = [r for r in ranges if r.style == "start"]  # each also needs its "e" event
    async_end_at = n_ranges
    items += [(r.end_ns, 0, 0, async_end_at + i) for i, r in enumerate(async_ends)]
    marks_at = len(items)
    items += [(m.time_ns, 0, 0, marks_at + i) for i, m in enumerate(marks)]
    items.sort()
    total = len(items)

    other: Dict[str, Any] = {
        "generator": "nvtx_cffi trace",
        "clock": "CLOCK_MONOTONIC",
        "t0_ns": t0,
        "events_recorded": timeline.event_count,
        "dropped_events": timeline.dropped,
        "unmatched_pops": timeline.unmatched_pops,
        "unmatched_ends": timeline.unmatched_ends,
        "unterminated_ranges": timeline.unterminated,
    }
    if extra_metadata:
        other.update(extra_metadata)
    write = out.write
    write('{"displayTimeUnit":"ns","otherData":')
    write(_dumps(other))
    write(',"traceEvents":[\n')
    first = True

    def emit(event: Dict[str, Any]) -> None:
        nonlocal first
        if not first:
            write(",\n")
        first = False
        write(_dumps(event))

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

    # Per-event text from cached fragments: names, categories and colours repeat, times do not.
    heads: Dict[tuple, Tuple[str, str]] = {}

    def head(ph: str, name: str, domain: Optional[str], category: Optional[str], color: Optional[int]):
        key = (ph, name, domain, category, color)
        cached = heads.get(key)
        if cached is None:
            extra = ',"s":"t"' if ph == "i" else ""
            static_args = _dumps(_args(domain, category, color, None))[1:-1]
            cached = heads[key] = (f'{{"name":{_dumps(name)},"cat":{_dumps(_cat(domain, category))},'
                                   f'"ph":"{ph}"{extra}', static_args)
        return cached

    def args_text(static_args: str, payload: Any, unterminated: bool) -> str:
        parts = [static_args] if static_args else []
        if payload is not None:
            parts.append(f'"payload":{_dumps(payload)}')
        if unterminated:
            parts.append('"unterminated":true')
        return ",".join(parts)

    sep = "" if first else ",\n"
    for done, (_t, _o, _d, index) in enumerate(items, 1):
        if progress is not None and not done & 0xFFFF:
            progress(done, total)
        if index >= marks_at:
            m = marks[index - marks_at]
            prefix, static_args = head("i", m.name, m.domain, m.category, m.color)
            write(f'{sep}{prefix},"ts":{(m.time_ns - t0) / 1000.0!r},"pid":{m.pid},"tid":{m.tid},'
                  f'"args":{{{args_text(static_args, m.payload, False)}}}}}')
        elif index >= async_end_at:
            r = async_ends[index - async_end_at]
            prefix, _ = head("e", r.name, r.domain, r.category, r.color)
            write(f'{sep}{prefix},"id2":{{"local":"0x{r.range_id:x}"}},"ts":{(r.end_ns - t0) / 1000.0!r},'
                  f'"pid":{r.pid},"tid":{r.end_tid},"args":{{}}}}')
        else:
            r = ranges[index]
            if r.style == "push":
                prefix, static_args = head("X", r.name, r.domain, r.category, r.color)
                write(f'{sep}{prefix},"ts":{(r.start_ns - t0) / 1000.0!r},"dur":{(r.end_ns - r.start_ns) / 1000.0!r},'
                      f'"pid":{r.pid},"tid":{r.tid},"args":{{{args_text(static_args, r.payload, r.unterminated)}}}}}')
            else:
                prefix, static_args = head("b", r.name, r.domain, r.category, r.color)
                write(f'{sep}{prefix},"id2":{{"local":"0x{r.range_id:x}"}},"ts":{(r.start_ns - t0) / 1000.0!r},'
                      f'"pid":{r.pid},"tid":{r.tid},"args":{{{args_text(static_args, r.payload, r.unterminated)}}}}}')
        sep = ",\n"
    write("\n]}\n")
    return total
