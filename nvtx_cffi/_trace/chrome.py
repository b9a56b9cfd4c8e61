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
import os
from typing import IO, Any, Callable, Dict, List, Optional

from .model import Range, Timeline

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


def _us(ns: int, t0: int) -> float:
    return round((ns - t0) / 1000.0, 3)


def write_chrome_trace(timeline: Timeline, out: IO[str], progress: Optional[Callable[[int, int], None]] = None,
                       extra_metadata: Optional[Dict[str, Any]] = None) -> int:
    """Write ``timeline`` to the text stream ``out``; returns the number of trace events written.

    ``progress(done, total)`` is called every 65536 events.
    """
    t0 = timeline.start_ns
    # (time, order, payload): order puts metadata first, and at equal times a begin before the
    # shorter ranges it encloses (-end) and an async end before a later begin.
    items: List[tuple] = []
    for r in timeline.ranges:
        items.append((r.start_ns, -r.end_ns, r.depth, 0, r))
        if r.style == "start":
            items.append((r.end_ns, 0, 0, 1, r))
    for m in timeline.marks:
        items.append((m.time_ns, 0, 0, 2, m))
    items.sort(key=lambda item: item[:4])
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
        name = timeline.process_names.get(pid, f"pid {pid}")
        emit({"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
              "args": {"name": f"{os.path.basename(name) or name} ({pid})"}})
    for pid, tid in sorted(timeline.threads | set(timeline.thread_names)):
        name = timeline.thread_names.get((pid, tid))
        if name is None:
            name = "main thread" if tid == pid else f"thread {tid}"
        emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})

    for done, (_t, _o, _d, what, obj) in enumerate(items, 1):
        if progress is not None and not done & 0xFFFF:
            progress(done, total)
        if what == 2:
            emit({"name": obj.name, "cat": _cat(obj.domain, obj.category), "ph": "i", "s": "t",
                  "ts": _us(obj.time_ns, t0), "pid": obj.pid, "tid": obj.tid,
                  "args": _args(obj.domain, obj.category, obj.color, obj.payload)})
            continue
        r: Range = obj
        args = _args(r.domain, r.category, r.color, r.payload)
        if r.unterminated:
            args["unterminated"] = True
        if r.style == "push":
            emit({"name": r.name, "cat": _cat(r.domain, r.category), "ph": "X", "ts": _us(r.start_ns, t0),
                  "dur": round(r.duration_ns / 1000.0, 3), "pid": r.pid, "tid": r.tid, "args": args})
        elif what == 0:
            emit({"name": r.name, "cat": _cat(r.domain, r.category), "ph": "b",
                  "id2": {"local": f"0x{r.range_id:x}"}, "ts": _us(r.start_ns, t0), "pid": r.pid,
                  "tid": r.tid, "args": args})
        else:
            emit({"name": r.name, "cat": _cat(r.domain, r.category), "ph": "e",
                  "id2": {"local": f"0x{r.range_id:x}"}, "ts": _us(r.end_ns, t0), "pid": r.pid,
                  "tid": r.end_tid, "args": {}})
    write("\n]}\n")
    return total
