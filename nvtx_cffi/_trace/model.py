"""What a conversion is made of: ranges, marks and the :class:`Timeline` of a recording.

The pairing (:mod:`.pairing`) makes them: push/pop ranges nest per (pid, tid, domain) — NVTX keeps
one stack per thread and domain — so a pop closes the innermost open push of its own thread and
domain; start/end ranges are matched by (pid, domain, range id) and may end on another thread.
What does not pair up is counted, never guessed: a pop with nothing open, an end with an unknown
id, and ranges still open when their process stopped (those are kept, closed at the process's
last event, and flagged ``unterminated``; the statistics leave them out).

The conversion hands ranges to the writers as columns (:class:`~.pairing.PairedBatch`);
:class:`Range` and :class:`Mark` objects are the same ranges one at a time
(:func:`~.pairing.ranges_of`, :func:`~.pairing.build_timeline`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Range", "Mark", "Timeline", "UNNAMED"]

#: Name shown for a range or mark recorded without a message.
UNNAMED = "(unnamed)"


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

    The conversion (:func:`~.pairing.pair_batches`) hands ranges and marks to the writers as they
    complete and keeps only counts here (``ranges`` and ``marks`` stay empty);
    :func:`~.pairing.build_timeline` also collects them in the lists.
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
