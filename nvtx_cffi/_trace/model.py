"""Turn the recorder's event stream into ranges and marks: pair pushes with pops, starts with ends.

Streaming: :func:`pair_events` hands each range to a callback once paired and keeps only what is
still open, so memory does not grow with the recording; :func:`build_timeline` keeps everything.

Push/pop ranges nest per (pid, tid, domain) — NVTX keeps one stack per thread and domain — so a pop
closes the innermost open push of its own thread and domain. Start/end ranges are matched by
(pid, domain, range id) and may end on another thread. What does not pair up is counted, never
guessed: a pop with nothing open, an end with an unknown id, and ranges still open when their
process stopped (those are kept, closed at the process's last event, and flagged ``unterminated``;
the statistics leave them out).

>>> from types import SimpleNamespace as E
>>> ev = [E(kind="push", time_ns=10, pid=1, tid=1, domain=None, message="a", color=None,
...         category=0, payload=None, range_id=0),
...       E(kind="pop", time_ns=25, pid=1, tid=1, domain=None, message=None, color=None,
...         category=0, payload=None, range_id=0)]
>>> timeline = build_timeline(ev, processes={})
>>> [(r.name, r.start_ns, r.end_ns, r.depth) for r in timeline.ranges]
[('a', 10, 25, 0)]
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

__all__ = ["Range", "Mark", "Timeline", "pair_events", "build_timeline", "UNNAMED"]

#: Name shown for a range or mark recorded without a message.
UNNAMED = "(unnamed)"

Progress = Optional[Callable[[int], None]]


class Range:
    """One NVTX range: ``style`` is ``"push"`` (push/pop, one thread) or ``"start"`` (start/end)."""

    __slots__ = ("style", "name", "domain", "category", "color", "payload", "pid", "tid", "end_tid",
                 "start_ns", "end_ns", "depth", "range_id", "unterminated")

    def __init__(self, style: str, name: str, domain: Optional[str], category: Optional[str],
                 color: Optional[int], payload: Any, pid: int, tid: int, start_ns: int,
                 depth: int = 0, range_id: int = 0) -> None:
        self.style = style
        self.name = name
        self.domain = domain
        self.category = category
        self.color = color
        self.payload = payload
        self.pid = pid
        self.tid = tid
        self.end_tid = tid
        self.start_ns = start_ns
        self.end_ns = start_ns
        self.depth = depth
        self.range_id = range_id
        self.unterminated = False

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    def __repr__(self) -> str:
        return (f"Range({self.style}, {self.name!r}, domain={self.domain!r}, pid={self.pid}, tid={self.tid}, "
                f"{self.start_ns}..{self.end_ns}, depth={self.depth})")


class Mark:
    """One NVTX mark (an instant)."""

    __slots__ = ("name", "domain", "category", "color", "payload", "pid", "tid", "time_ns")

    def __init__(self, name: str, domain: Optional[str], category: Optional[str], color: Optional[int],
                 payload: Any, pid: int, tid: int, time_ns: int) -> None:
        self.name = name
        self.domain = domain
        self.category = category
        self.color = color
        self.payload = payload
        self.pid = pid
        self.tid = tid
        self.time_ns = time_ns


class Timeline:
    """What the writers need besides the ranges themselves, with the bookkeeping of what did not pair up.

    :func:`pair_events` hands ranges and marks to callbacks as they complete and keeps only counts
    here (``ranges`` and ``marks`` stay empty); :func:`build_timeline` also collects them in the lists.
    """

    def __init__(self) -> None:
        self.ranges: List[Range] = []
        self.marks: List[Mark] = []
        #: pid -> process name ("child of <ppid>"; the tracer names the root process by its command)
        self.process_names: Dict[int, str] = {}
        #: (pid, tid) -> thread name
        self.thread_names: Dict[Tuple[int, int], str] = {}
        #: every (pid, tid) that recorded an event
        self.threads: set = set()
        self.unmatched_pops = 0
        self.unmatched_ends = 0
        self.unterminated = 0
        self.dropped = 0
        self.dropped_by_pid: Dict[int, int] = {}
        self.start_ns = 0
        self.end_ns = 0
        #: NVTX events read: pushes, pops, starts, ends and marks (not definitions or names)
        self.event_count = 0
        #: ranges (terminated or not) and marks handed out
        self.range_count = 0
        self.mark_count = 0
        #: counter samples handed out (not NVTX events: a program may record only these), and the
        #: pids that recorded them
        self.counter_samples = 0
        self.counter_pids: set = set()
        #: (pid, counter title, time domain) -> batch samples left out: their time domain could not
        #: be placed on the trace's clock (:attr:`nvtx_cffi.ext_records.ExtDecoder.unmapped`)
        self.unmapped_samples: Dict[Tuple[int, str, int], int] = {}


def _category_name(names: Dict[Tuple[Optional[str], int], str], domain: Optional[str],
                   category: int) -> Optional[str]:
    if not category:
        return None
    return names.get((domain, category)) or str(category)


_NVTX_KINDS = frozenset(("push", "pop", "start", "end", "mark"))

RangeSink = Callable[[Range], None]
MarkSink = Callable[[Mark], None]


def pair_events(events: Iterable[Any], processes: Dict[int, Any], dropped: int = 0, *,
                on_range: Optional[RangeSink] = None, on_mark: Optional[MarkSink] = None,
                progress: Progress = None) -> Timeline:
    """Pair a stream of events into ranges and marks, handing each out as soon as it is complete.

    Memory holds what is open, not what went by: one stack per (pid, tid, domain) of open pushes,
    one dict of open starts by (pid, domain, range id), plus names and counters. ``events`` need not
    be sorted by time, as :func:`nvtx_cffi.recorder.iter_events` yields them: each thread's events
    in time order (enough for push/pop), threads and processes interleaved by chunk. So an end may
    come before its start (another thread's chunk first in the file): it waits, by (pid, domain,
    id), for its start; ends still waiting at the end of the stream count as unmatched.

    ``on_range(range)`` gets every range when its pop/end is seen, and the unterminated ones (still
    open when the stream ends: closed at their process's last event, flagged) at the end;
    ``on_mark(mark)`` every mark as it comes. ``processes`` maps pid to the recorder's
    ``ProcessInfo`` (``ppid``, ``dropped``, ``thread_names``, ``category_names``); missing entries are
    fine. ``progress`` is called with the count of events done every 65536 events.

    >>> from types import SimpleNamespace as E
    >>> ev = [E(kind="end", time_ns=30, pid=1, tid=2, domain=None, range_id=7),
    ...       E(kind="start", time_ns=10, pid=1, tid=1, domain=None, message="s", color=None,
    ...         category=0, payload=None, range_id=7)]
    >>> done = []
    >>> tl = pair_events(ev, {}, on_range=done.append)
    >>> [(r.name, r.start_ns, r.end_ns, r.tid, r.end_tid) for r in done], tl.unmatched_ends
    ([('s', 10, 30, 1, 2)], 0)
    """
    tl = Timeline()
    tl.dropped = dropped
    for pid, info in processes.items():
        # (info.path is the record file; the command line is known only for the root process)
        ppid = getattr(info, "ppid", 0)
        tl.process_names[pid] = f"child of {ppid}" if ppid else "process"
        tl.dropped_by_pid[pid] = int(getattr(info, "dropped", 0) or 0)
        for tid, name in (getattr(info, "thread_names", None) or {}).items():
            tl.thread_names[(pid, tid)] = name
    category_names: Dict[int, Dict[Tuple[Optional[str], int], str]] = {
        pid: dict(getattr(info, "category_names", None) or {}) for pid, info in processes.items()}
    no_names: Dict[Tuple[Optional[str], int], str] = {}

    def emit_range(r: Range) -> None:
        tl.range_count += 1
        if on_range is not None:
            on_range(r)

    stacks: Dict[Tuple[int, int, Optional[str]], List[Range]] = {}
    open_async: Dict[Tuple[int, Optional[str], int], Range] = {}
    early_ends: Dict[Tuple[int, Optional[str], int], Tuple[int, int]] = {}  # key -> (time, tid)
    last_time: Dict[int, int] = {}
    threads = tl.threads
    first: Optional[int] = None
    last = 0
    count = 0
    nvtx_events = 0  # push, pop, start, end, mark: what ``event_count`` reports
    for ev in events:
        count += 1
        if progress is not None and not count & 0xFFFF:
            progress(count)
        kind = ev.kind
        if kind in _NVTX_KINDS:
            nvtx_events += 1
        pid = ev.pid
        t = ev.time_ns
        if first is None or t < first:
            first = t
        if t > last:
            last = t
        if t > last_time.get(pid, -1):
            last_time[pid] = t
        if kind == "push":
            key = (pid, ev.tid, ev.domain)
            stack = stacks.get(key)
            if stack is None:
                stack = stacks[key] = []
            stack.append(Range("push", ev.message or UNNAMED, ev.domain,
                               _category_name(category_names.get(pid, no_names), ev.domain, ev.category),
                               ev.color, ev.payload, pid, ev.tid, t, depth=len(stack)))
            threads.add((pid, ev.tid))
        elif kind == "pop":
            stack = stacks.get((pid, ev.tid, ev.domain))
            if stack:
                r = stack.pop()
                r.end_ns = t
                emit_range(r)
            else:
                tl.unmatched_pops += 1
            threads.add((pid, ev.tid))
        elif kind == "start":
            key = (pid, ev.domain, ev.range_id)
            r = Range("start", ev.message or UNNAMED, ev.domain,
                      _category_name(category_names.get(pid, no_names), ev.domain, ev.category),
                      ev.color, ev.payload, pid, ev.tid, t, range_id=ev.range_id)
            ended = early_ends.pop(key, None) if early_ends else None
            if ended is not None and ended[0] >= t:
                r.end_ns, r.end_tid = ended
                emit_range(r)
            else:
                if ended is not None:
                    tl.unmatched_ends += 1  # an end from before this start: not its end
                open_async[key] = r
            threads.add((pid, ev.tid))
        elif kind == "end":
            key = (pid, ev.domain, ev.range_id)
            r = open_async.pop(key, None)
            if r is None:
                early_ends[key] = (t, ev.tid)  # its start may be in a chunk further on
            else:
                r.end_ns = t
                r.end_tid = ev.tid
                emit_range(r)
            threads.add((pid, ev.tid))
        elif kind == "mark":
            tl.mark_count += 1
            if on_mark is not None:
                on_mark(Mark(ev.message or UNNAMED, ev.domain,
                             _category_name(category_names.get(pid, no_names), ev.domain, ev.category),
                             ev.color, ev.payload, pid, ev.tid, t))
            threads.add((pid, ev.tid))
        elif kind == "thread_name":
            # Events carry the name in ``name`` and the named thread in ``target`` (fallback: itself).
            target = getattr(ev, "target", None) or ev.tid
            if getattr(ev, "name", None):
                tl.thread_names.setdefault((pid, int(target)), ev.name)
        # domain/string/category/resource definitions are already resolved by the reader.
    tl.event_count = nvtx_events
    tl.unmatched_ends += len(early_ends)
    # Still open when the process stopped (crash, exit inside a range): keep them, flagged.
    still_open = [r for stack in stacks.values() for r in stack]
    still_open += open_async.values()
    still_open.sort(key=lambda r: r.start_ns)
    for r in still_open:
        r.end_ns = last_time.get(r.pid, r.start_ns)
        r.unterminated = True
        tl.unterminated += 1
        emit_range(r)
    for pid, _tid in threads:
        tl.process_names.setdefault(pid, "process")
    tl.start_ns = first or 0
    tl.end_ns = last
    return tl


def build_timeline(events: Iterable[Any], processes: Dict[int, Any], dropped: int = 0,
                   progress: Progress = None) -> Timeline:
    """:func:`pair_events` that also keeps every range and mark, in ``timeline.ranges`` / ``.marks``.

    For small recordings and tests: memory grows with the recording (the tracer streams instead).
    """
    ranges: List[Range] = []
    marks: List[Mark] = []
    tl = pair_events(events, processes, dropped, on_range=ranges.append, on_mark=marks.append,
                     progress=progress)
    tl.ranges = ranges
    tl.marks = marks
    return tl
