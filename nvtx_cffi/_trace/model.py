"""Turn the recorder's event stream into ranges and marks: pair pushes with pops, starts with ends.

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

__all__ = ["Range", "Mark", "Timeline", "build_timeline", "UNNAMED"]

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
    """Everything the writers need, with the bookkeeping of what did not pair up."""

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
        self.event_count = 0


def _category_name(names: Dict[Tuple[Optional[str], int], str], domain: Optional[str],
                   category: int) -> Optional[str]:
    if not category:
        return None
    return names.get((domain, category)) or str(category)


def build_timeline(events: Iterable[Any], processes: Dict[int, Any], dropped: int = 0,
                   progress: Progress = None) -> Timeline:
    """Pair the events (sorted by time, as :func:`nvtx_cffi.recorder.read` returns them) into a Timeline.

    ``processes`` maps pid to the recorder's ``ProcessInfo`` (``ppid``, ``dropped``, ``thread_names``,
    ``category_names``); missing entries are fine. ``progress`` is called with the count of events done
    every 65536 events.
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

    stacks: Dict[Tuple[int, int, Optional[str]], List[Range]] = {}
    open_async: Dict[Tuple[int, Optional[str], int], Range] = {}
    last_time: Dict[int, int] = {}
    ranges = tl.ranges
    first = None
    last = 0
    count = 0
    for ev in events:
        count += 1
        if progress is not None and not count & 0xFFFF:
            progress(count)
        kind = ev.kind
        pid = ev.pid
        t = ev.time_ns
        if first is None:
            first = t
        if t > last:
            last = t
        last_time[pid] = t  # events come sorted by time
        if kind == "push":
            key = (pid, ev.tid, ev.domain)
            stack = stacks.get(key)
            if stack is None:
                stack = stacks[key] = []
            r = Range("push", ev.message or UNNAMED, ev.domain,
                      _category_name(category_names.get(pid, {}), ev.domain, ev.category),
                      ev.color, ev.payload, pid, ev.tid, t, depth=len(stack))
            stack.append(r)
            tl.threads.add((pid, ev.tid))
        elif kind == "pop":
            stack = stacks.get((pid, ev.tid, ev.domain))
            if stack:
                r = stack.pop()
                r.end_ns = t
                ranges.append(r)
            else:
                tl.unmatched_pops += 1
            tl.threads.add((pid, ev.tid))
        elif kind == "start":
            r = Range("start", ev.message or UNNAMED, ev.domain,
                      _category_name(category_names.get(pid, {}), ev.domain, ev.category),
                      ev.color, ev.payload, pid, ev.tid, t, range_id=ev.range_id)
            open_async[(pid, ev.domain, ev.range_id)] = r
            tl.threads.add((pid, ev.tid))
        elif kind == "end":
            r = open_async.pop((pid, ev.domain, ev.range_id), None)
            if r is None:
                tl.unmatched_ends += 1
            else:
                r.end_ns = t
                r.end_tid = ev.tid
                ranges.append(r)
            tl.threads.add((pid, ev.tid))
        elif kind == "mark":
            tl.marks.append(Mark(ev.message or UNNAMED, ev.domain,
                                 _category_name(category_names.get(pid, {}), ev.domain, ev.category),
                                 ev.color, ev.payload, pid, ev.tid, t))
            tl.threads.add((pid, ev.tid))
        elif kind == "thread_name":
            # Events carry the name in ``name`` and the named thread in ``target`` (fallback: itself).
            target = getattr(ev, "target", None) or ev.tid
            if getattr(ev, "name", None):
                tl.thread_names.setdefault((pid, int(target)), ev.name)
        # domain/string/category/resource definitions are already resolved by the reader.
    tl.event_count = count
    # Still open when the process stopped (crash, exit inside a range): keep them, flagged.
    for stack in stacks.values():
        for r in stack:
            r.end_ns = last_time.get(r.pid, r.start_ns)
            r.unterminated = True
            ranges.append(r)
            tl.unterminated += 1
    for r in open_async.values():
        r.end_ns = last_time.get(r.pid, r.start_ns)
        r.unterminated = True
        ranges.append(r)
        tl.unterminated += 1
    for pid, _tid in tl.threads:
        tl.process_names.setdefault(pid, "process")
    tl.start_ns = first or 0
    tl.end_ns = last
    return tl
