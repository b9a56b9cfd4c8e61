"""The ``--stats`` summary: one row per range name and domain, in the spirit of ``nsys stats -r nvtx_sum``.

Columns: Time (%) (share of the summed time of all ranges, as nsys computes it), Total, Count, Avg,
Med, Min, Max, StdDev (sample), Style (PushPop or StartEnd) and Range (``domain:name``; the default
domain has no prefix). Rows are sorted by total time, largest first. Ranges cut short by the end of
their process are left out and counted below the table, with dropped events and unpaired pops/ends.

>>> from nvtx_cffi._trace.model import Range, Timeline
>>> tl = Timeline()
>>> for start, end in [(0, 10), (20, 50)]:
...     r = Range("push", "loop", None, None, None, None, 1, 1, start); r.end_ns = end
...     tl.ranges.append(r)
>>> [(row.name, row.count, row.total_ns, row.median_ns) for row in summarize(tl)]
[('loop', 2, 40, 20.0)]
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from .model import Timeline

__all__ = ["RangeStats", "summarize", "format_summary", "format_duration"]


class RangeStats:
    """Statistics of the durations (ns) of the ranges that share a name, domain and style."""

    __slots__ = ("name", "domain", "style", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns",
                 "stddev_ns", "percent")

    def __init__(self, name: str, domain: Optional[str], style: str, durations: List[int], grand_total: int):
        durations.sort()
        n = len(durations)
        total = sum(durations)
        avg = total / n
        mid = n // 2
        self.name = name
        self.domain = domain
        self.style = style
        self.count = n
        self.total_ns = total
        self.avg_ns = avg
        self.median_ns = float(durations[mid]) if n % 2 else (durations[mid - 1] + durations[mid]) / 2.0
        self.min_ns = durations[0]
        self.max_ns = durations[-1]
        self.stddev_ns = math.sqrt(sum((d - avg) ** 2 for d in durations) / (n - 1)) if n > 1 else 0.0
        self.percent = 100.0 * total / grand_total if grand_total else 0.0

    @property
    def label(self) -> str:
        return self.name if self.domain is None else f"{self.domain}:{self.name}"


def summarize(timeline: Timeline) -> List[RangeStats]:
    """Group the complete ranges of ``timeline`` by (domain, name, style); sorted by total time."""
    groups: Dict[Tuple[Optional[str], str, str], List[int]] = {}
    for r in timeline.ranges:
        if r.unterminated:
            continue
        key = (r.domain, r.name, r.style)
        durations = groups.get(key)
        if durations is None:
            durations = groups[key] = []
        durations.append(r.end_ns - r.start_ns)
    grand_total = sum(sum(d) for d in groups.values())
    rows = [RangeStats(name, domain, "PushPop" if style == "push" else "StartEnd", durations, grand_total)
            for (domain, name, style), durations in groups.items()]
    rows.sort(key=lambda row: (-row.total_ns, row.label))
    return rows


def format_duration(ns: float) -> str:
    """Human units with 3 significant decimals: ``format_duration(1234567) == '1.235 ms'``."""
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.3f} us"
    return f"{ns:.0f} ns"


def format_summary(timeline: Timeline, rows: Optional[List[RangeStats]] = None) -> str:
    """The summary as text: the table, then what the table cannot show (drops, unpaired events)."""
    if rows is None:
        rows = summarize(timeline)
    pids = {pid for pid, _ in timeline.threads}
    lines = [f"NVTX range summary: {len(rows)} range name(s), {sum(r.count for r in rows)} range(s), "
             f"{len(timeline.marks)} mark(s), {len(pids)} process(es), {len(timeline.threads)} thread(s)"]
    if rows:
        header = ["Time (%)", "Total", "Count", "Avg", "Med", "Min", "Max", "StdDev", "Style", "Range"]
        table = [header]
        for r in rows:
            table.append([f"{r.percent:.1f}", format_duration(r.total_ns), str(r.count), format_duration(r.avg_ns),
                          format_duration(r.median_ns), format_duration(r.min_ns), format_duration(r.max_ns),
                          format_duration(r.stddev_ns), r.style, r.label])
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines.append("")
        for i, row in enumerate(table):
            cells = [cell.rjust(w) for cell, w in zip(row[:-2], widths)] + [row[-2].ljust(widths[-2]), row[-1]]
            lines.append("  ".join(cells).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
    else:
        lines.append("(no complete ranges recorded)")
    notes = []
    if timeline.dropped:
        per = ", ".join(f"pid {pid}: {n}" for pid, n in sorted(timeline.dropped_by_pid.items()) if n)
        notes.append(f"WARNING: {timeline.dropped} event(s) were dropped and are missing above"
                     f"{' (' + per + ')' if per else ''}; raise --max-bytes (NVTX_CFFI_RECORD_MAX_BYTES) "
                     "or check free disk space.")
    if timeline.unterminated:
        notes.append(f"note: {timeline.unterminated} range(s) were still open when their process ended "
                     "(left out of the table; flagged \"unterminated\" in the trace).")
    if timeline.unmatched_pops:
        notes.append(f"note: {timeline.unmatched_pops} pop(s) had no open push on their thread and domain.")
    if timeline.unmatched_ends:
        notes.append(f"note: {timeline.unmatched_ends} end(s) had no matching start.")
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines) + "\n"
