"""The ``--stats`` summary: one row per range name and domain, in the spirit of ``nsys stats -r nvtx_sum``.

Columns: Time (%) (share of the summed time of all ranges, as nsys computes it), Total, Count, Avg,
Med, Min, Max, StdDev (sample), Style (PushPop or StartEnd) and Range (``domain:name``; the default
domain has no prefix). Rows are sorted by total time, largest first. Ranges cut short by the end of
their process are left out and counted below the table, with dropped events and unpaired pops/ends.

Bounded by names: the first :data:`MAX_NAMES` (domain, name, style) groups seen get rows of their
own; ranges of any later name are summed into one ``(other names)`` row per style, exact over all
of them (a program that names each range ``f"request {i}"`` makes millions of names). Memory: 8
bytes a range (for the exact median) plus a few hundred bytes for each of at most MAX_NAMES groups.

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
import operator
from array import array
from collections import Counter
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from .model import Range, Timeline
from .writers import register

if TYPE_CHECKING:
    from .counters import CounterStats

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy: the histogram narrowing below
    _np = None

__all__ = ["RangeStats", "StatsCollector", "StatsWriter", "summarize", "format_summary", "format_duration", "MAX_NAMES",
           "OTHER_NAME"]

#: Groups (domain, name, style) with a row of their own; later names go to the OTHER_NAME row.
MAX_NAMES = 4096
#: The row of the ranges whose names came after the first MAX_NAMES.
OTHER_NAME = "(other names)"
_OTHER = object()  # its domain in the group keys: no real (domain, name) can collide with it


#: Groups at most this long are sorted outright for their median; longer ones are narrowed first.
_SORT_AT_MOST = 1 << 16


def _kth_smallest(values: Sequence[int], k: int) -> int:
    """The ``k``-th smallest (0-based) of ``values`` without a sorted copy of them all.

    Exact: count the values per bucket of a histogram over [lo, hi], keep the bucket that holds the
    k-th, repeat on it until few enough values are left to sort. Extra memory: the histogram and
    the kept bucket (8 bytes a value), never a list of Python ints as long as ``values``.

    >>> _kth_smallest(array("q", [5, 1, 4, 2, 3] * 30000), 75000)
    3
    """
    if _np is not None and isinstance(values, array) and len(values) > _SORT_AT_MOST:
        # NumPy's introselect in place (~100x faster than the narrowing below, no copy): it only
        # reorders the durations, which no statistic depends on
        view = _np.frombuffer(values, dtype=_np.int64)
        view.partition(k)
        return int(view[k])
    lo, hi = min(values), max(values)
    candidates: Sequence[int] = values
    n = len(values)
    while lo != hi and n > _SORT_AT_MOST:
        width = (hi - lo) // 4096 + 1
        counts: Counter = Counter()
        for i in range(0, len(candidates), _SORT_AT_MOST):  # slices: the index list stays small
            counts.update([(d - lo) // width for d in candidates[i:i + _SORT_AT_MOST] if lo <= d <= hi])
        below = 0
        for bucket in sorted(counts):
            if below + counts[bucket] > k:
                break
            below += counts[bucket]
        k -= below
        n = counts[bucket]
        lo, hi = lo + bucket * width, min(hi, lo + bucket * width + width - 1)
        candidates = array("q", (d for d in candidates if lo <= d <= hi))
    if lo == hi:
        return lo
    return sorted(d for d in candidates if lo <= d <= hi)[k]


def _int64_view(durations: Sequence[int]):
    """``durations`` (an ``array('q')``) as a NumPy int64 view, no copy; None without NumPy."""
    if _np is not None and isinstance(durations, array) and durations.typecode == "q" and len(durations):
        return _np.frombuffer(durations, dtype=_np.int64)
    return None


def _exact_sum(view) -> int:
    """The exact integer sum of an int64 array (NumPy sums in int64: exact while no partial sum
    overflows, which the bound below guarantees; Python ints otherwise)."""
    top = max(abs(int(view.min())), abs(int(view.max())))
    if top * len(view) < 1 << 63:
        return int(view.sum())
    return sum(view.tolist())


class RangeStats:
    """Statistics of the durations (ns) of the ranges that share a name, domain and style.

    ``durations`` may be any sequence of ints (the collector keeps an ``array('q')``: 8 bytes a
    range); it is not copied (NumPy may reorder it in place for the median). Sums are exact
    integers, so the standard deviation is as exact as a float can hold.
    """

    __slots__ = ("name", "domain", "style", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns",
                 "stddev_ns", "percent", "other")

    def __init__(self, name: str, domain: Optional[str], style: str, durations: Sequence[int], grand_total: int,
                 other: bool = False):
        n = len(durations)
        self.other = other  # the OTHER_NAME row: ranges of the names past the bound
        view = _int64_view(durations)
        total = _exact_sum(view) if view is not None else sum(durations)
        self.name = name
        self.domain = domain
        self.style = style
        self.count = n
        self.total_ns = total
        self.avg_ns = total / n
        mid = n // 2
        if n % 2:
            self.median_ns = float(_kth_smallest(durations, mid))
        else:
            self.median_ns = (_kth_smallest(durations, mid - 1) + _kth_smallest(durations, mid)) / 2.0
        self.min_ns = int(view.min()) if view is not None else min(durations)
        self.max_ns = int(view.max()) if view is not None else max(durations)
        if n > 1:
            top = max(abs(self.min_ns), abs(self.max_ns))
            step = (1 << 63) // (top * top + 1)  # values whose squares NumPy can sum exactly in int64
            if view is not None and step >= 64:
                squares = sum(int(_np.dot(view[i:i + step], view[i:i + step])) for i in range(0, n, step))
            else:
                squares = sum(map(operator.mul, durations, durations))
            self.stddev_ns = math.sqrt((n * squares - total * total) / (n * (n - 1)))  # sample stddev
        else:
            self.stddev_ns = 0.0
        self.percent = 100.0 * total / grand_total if grand_total else 0.0

    @property
    def label(self) -> str:
        return self.name if self.domain is None else f"{self.domain}:{self.name}"


class StatsCollector:
    """Durations of complete ranges by (domain, name, style), 8 bytes a range; feed it as ranges come.

    >>> from nvtx_cffi._trace.model import Range
    >>> c = StatsCollector()
    >>> r = Range("push", "a", None, None, None, None, 1, 1, 10); r.end_ns = 25
    >>> c.add(r); [(row.name, row.count, row.total_ns) for row in c.rows()]
    [('a', 1, 15)]
    """

    def __init__(self, max_names: Optional[int] = None) -> None:
        self._groups: Dict[Tuple[object, str, str], array] = {}
        self.max_names = MAX_NAMES if max_names is None else max_names

    def _group(self, domain: Optional[str], name: str, style: str) -> array:
        key = (domain, name, style)
        durations = self._groups.get(key)
        if durations is None:
            if len(self._groups) >= self.max_names:  # a new name past the bound: the "other" row
                key = (_OTHER, OTHER_NAME, style)
                durations = self._groups.get(key)
                if durations is not None:
                    return durations
            durations = self._groups[key] = array("q")
        return durations

    def add(self, r: Range) -> None:
        """Count ``r`` (unterminated ranges are left out: their end is not known)."""
        if r.unterminated:
            return
        self._group(r.domain, r.name, r.style).append(r.end_ns - r.start_ns)

    def add_many(self, domain: Optional[str], name: str, style: str, durations: Sequence[int]) -> None:
        """Count complete ranges of one (domain, name, style) at once: ``durations`` in ns."""
        group = self._group(domain, name, style)
        if hasattr(durations, "dtype"):  # a NumPy array: appended as bytes, no Python ints
            group.frombytes(durations.astype("=i8", copy=False).tobytes())
        else:
            group.extend(durations)

    def add_grouped(self, domains: Sequence[Optional[str]], names: Sequence[str], style: str, durations: Any,
                    bounds: Any) -> None:
        """Count many groups of complete ranges of one style at once: group ``j`` is
        (``domains[j]``, ``names[j]``, ``style``) with the durations ``durations[bounds[j]:bounds[j + 1]]``
        (a NumPy int64 array, ``len(bounds) == len(names) + 1``). The same as :meth:`add_many` per
        group in that order, but the groups past the bound are summed into their row in one step."""
        groups = self._groups
        keys = list(zip(domains, names, repeat(style)))
        found: List[Optional[array]] = list(map(groups.get, keys))  # the rows they already have
        missing = list(compress(range(len(keys)), map(operator.is_, found, repeat(None))))
        i = 0
        while i < len(missing) and len(groups) < self.max_names:  # new rows, in order, up to the bound
            j = missing[i]
            group = found[j] = groups.get(keys[j])  # (two ids of one text: the row made just now)
            if group is None:
                group = found[j] = groups[keys[j]] = array("q")
            i += 1
        folded = missing[i:]
        if folded and i:  # past the bound: a name that got its row above (another id of its text) keeps it
            again = list(map(groups.get, [keys[j] for j in folded]))
            for j, group in zip(folded, again):
                found[j] = group
            folded = [j for j, group in zip(folded, again) if group is None]
        durations = durations.astype("=i8", copy=False)
        hits = list(compress(range(len(keys)), map(operator.is_not, found, repeat(None))))
        if hits:
            index = _np.array(hits, dtype=_np.int64)
            for j, lo, hi in zip(hits, bounds[index].tolist(), bounds[index + 1].tolist()):
                found[j].frombytes(durations[lo:hi].tobytes())  # type: ignore[union-attr]
        if folded:
            other_key = (_OTHER, OTHER_NAME, style)
            other = groups.get(other_key)
            if other is None:
                other = groups[other_key] = array("q")
            keep = _np.zeros(len(keys), dtype=bool)
            keep[folded] = True
            other.frombytes(durations[_np.repeat(keep, _np.diff(bounds))].tobytes())

    def add_batch(self, pb: Any) -> None:
        """Count the complete ranges of a :class:`~.pairing.PairedBatch`, grouped by (domain, name, style)."""
        if pb.unterminated:
            return  # their end is not known
        for style, cols in (("push", pb.ranges), ("start", pb.asyncs)):
            if not len(cols):
                continue
            if _np is not None and hasattr(cols.start, "dtype") and int(cols.domain.max()) < 1 << 20:
                # (text id, domain) as one integer: text ids stay below 2**43 (see pairing._EXTRA)
                key = (cols.text.astype(_np.int64) << 20) | cols.domain.astype(_np.int64)
                if not (key != key[0]).any():  # one name: no grouping needed
                    k = int(key[0])
                    self.add_many(pb.domain_name(k & 0xFFFFF), pb.text(k >> 20), style, cols.end - cols.start)
                    continue
                # grouped by (text id, domain id), not by text: one stable sort, then the texts of the
                # groups looked up in one pass (a program that names each range differently makes as
                # many groups as ranges)
                order = _np.argsort(key, kind="stable")
                skey = key[order]
                starts = _np.flatnonzero(_np.concatenate(([True], skey[1:] != skey[:-1])))
                uniq = skey[starts]
                bounds = _np.append(starts, len(skey))
                durations = (cols.end - cols.start)[order]
                texts = pb.text_list((uniq >> 20).tolist())
                domains = {d: pb.domain_name(d) for d in set((uniq & 0xFFFFF).tolist())}
                self.add_grouped([domains[d] for d in (uniq & 0xFFFFF).tolist()], texts, style, durations, bounds)
            else:
                groups: Dict[tuple, list] = {}
                text, dom, start, end = cols.lists("text", "domain", "start", "end")
                for t, d, s, e in zip(text, dom, start, end):
                    key2 = (pb.domain_name(d), pb.text(t))
                    group = groups.get(key2)
                    if group is None:
                        group = groups[key2] = []
                    group.append(e - s)
                for (domain, name), durations_list in groups.items():
                    self.add_many(domain, name, style, durations_list)

    @property
    def folded(self) -> int:
        """Ranges counted in the OTHER_NAME rows (their names came after the first ``max_names``)."""
        return sum(len(d) for (domain, _, _), d in self._groups.items() if domain is _OTHER)

    def rows(self) -> List[RangeStats]:
        """One row per group, sorted by total time (largest first), then label."""
        grand_total = 0
        for d in self._groups.values():
            view = _int64_view(d)
            grand_total += _exact_sum(view) if view is not None else sum(d)
        rows = [RangeStats(name, None if domain is _OTHER else domain, "PushPop" if style == "push" else "StartEnd",
                           durations, grand_total, other=domain is _OTHER)
                for (domain, name, style), durations in self._groups.items()]
        rows.sort(key=lambda row: (-row.total_ns, row.label))
        return rows


@register("stats")
class StatsWriter:
    """A conversion's :class:`~.writers.Writer` for ``--stats``: the complete ranges into ``ranges``
    (a :class:`StatsCollector`), the counter samples into ``counters`` (a
    :class:`~.counters.CounterStats`); either may be None. The CLI prints them with the timeline."""

    def __init__(self, ranges: Optional[StatsCollector] = None, counters: Optional[CounterStats] = None) -> None:
        self.ranges = ranges
        self.counters = counters

    @classmethod
    def open(cls, output: Optional[str], recording: Any) -> "StatsWriter":
        """Both tables, empty (``output``: none, the summary is printed)."""
        from .counters import CounterStats

        return cls(StatsCollector(), CounterStats())

    def batch(self, pb: Any) -> None:
        if self.ranges is not None:
            self.ranges.add_batch(pb)

    def sample(self, sample: Any, tracks: Any) -> None:
        if self.counters is not None:
            self.counters.add(sample)

    def samples(self, block: Any) -> None:
        if self.counters is not None:
            self.counters.add_block(block)

    def finish(self, timeline: Timeline) -> int:
        """The counter table notes the samples the decoder could not place on the trace's clock."""
        if self.counters is not None:
            self.counters.unmapped = dict(timeline.unmapped_samples)
        return 0

    def close(self) -> None:
        """Nothing to release: the tables stay for the summary."""


def summarize(source: Union[Timeline, StatsCollector]) -> List[RangeStats]:
    """Rows of a :class:`StatsCollector`, or of the ranges of an in-memory timeline; by total time."""
    if isinstance(source, StatsCollector):
        return source.rows()
    collector = StatsCollector()
    for r in source.ranges:
        collector.add(r)
    return collector.rows()


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
    # processes that recorded NVTX events or counter samples, as the tracer's "wrote" line counts them
    pids = {pid for pid, _ in timeline.threads} | set(getattr(timeline, "counter_pids", ()))
    named = [r for r in rows if not r.other]
    folded = sum(r.count for r in rows if r.other)
    lines = [f"NVTX range summary: {len(named)}{'+' if folded else ''} range name(s), {sum(r.count for r in rows)} range(s), "
             f"{timeline.mark_count} mark(s), {len(pids)} process(es), {len(timeline.threads)} thread(s)"]
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
    if folded:
        notes.append(f"note: {folded} range(s) with names beyond the first {len(named)} are summed in the "
                     f"{OTHER_NAME!r} row(s): the summary has a row for at most that many names "
                     "(nvtx_cffi._trace.stats.MAX_NAMES), so its memory stays bounded.")
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
