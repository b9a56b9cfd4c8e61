"""``--png``: a timeline picture with matplotlib (optional extra ``nvtx-cffi[png]``).

One row per thread (grouped by process), push/pop ranges as bars in their own colours (nested
ranges drawn thinner, inside their parent), start/end ranges on a row of their process, marks as
ticks. Names are written on bars wide enough to hold them.

>>> write_png(timeline, "timeline.png")  # doctest: +SKIP
"""
from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Tuple

from .chrome import hex_color
from .model import Mark, Range, Timeline

__all__ = ["write_png", "PngCollector", "MatplotlibMissing", "MAX_BARS", "MAX_MARKS"]

#: Beyond this many ranges only the longest are drawn (a picture cannot show a million bars anyway).
MAX_BARS = 200_000
#: Beyond this many marks only the first are drawn.
MAX_MARKS = 200_000

_DEFAULT_COLOR = "#4c72b0"


class MatplotlibMissing(RuntimeError):
    """``--png`` needs matplotlib, which is not installed."""


def _load_pyplot():
    try:
        import matplotlib
    except ImportError:
        msg = "--png needs matplotlib: pip install 'nvtx-cffi[png]' (or pip install matplotlib)"
        raise MatplotlibMissing(msg) from None
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt
    return plt


class PngCollector:
    """What ``--png`` draws, bounded: the :data:`MAX_BARS` longest ranges and the first :data:`MAX_MARKS` marks.

    Fed range by range (a heap keeps the longest), so a recording of any length costs at most
    some :data:`MAX_BARS` small tuples.
    """

    def __init__(self, max_bars: int = MAX_BARS, max_marks: int = MAX_MARKS) -> None:
        self._max_bars = max_bars
        self._max_marks = max_marks
        self._heap: List[tuple] = []  # (duration, seq, start, end, depth, pid, tid, push?, name, color)
        self._seq = 0
        self.marks: List[tuple] = []  # (time, pid, tid, color)
        self.async_pids: set = set()

    def range(self, r: Range) -> None:
        self._seq += 1
        push = r.style == "push"
        if not push:
            self.async_pids.add(r.pid)
        item = (r.end_ns - r.start_ns, -self._seq, r.start_ns, r.end_ns, r.depth, r.pid, r.tid, push, r.name,
                r.color)
        if len(self._heap) < self._max_bars:
            heapq.heappush(self._heap, item)
        elif item[0] > self._heap[0][0]:
            heapq.heapreplace(self._heap, item)  # drop the shortest (the latest of equals)

    def bars(self) -> List[tuple]:
        """The kept ranges: ``(duration, -seq, start, end, depth, pid, tid, is_push, name, color)``."""
        return list(self._heap)

    def mark(self, m: Mark) -> None:
        if len(self.marks) < self._max_marks:
            self.marks.append((m.time_ns, m.pid, m.tid, m.color))

    #: Counter tracks drawn (the first ones seen) and points kept per track (the first ones).
    MAX_COUNTER_TRACKS = 8
    MAX_COUNTER_POINTS = 20000

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: float) -> None:
        """A counter sample (payload extension): a line per (process, counter) under the timeline."""
        tracks = self.__dict__.setdefault("counters", {})
        key = (pid, name, unit)
        points = tracks.get(key)
        if points is None:
            if len(tracks) >= self.MAX_COUNTER_TRACKS:
                return
            points = tracks[key] = []
        if len(points) < self.MAX_COUNTER_POINTS:
            points.append((time_ns, value))


def write_png(timeline: Timeline, path: str, *, title: str = "NVTX timeline",
              collected: Optional[PngCollector] = None) -> int:
    """Draw into the PNG file ``path``; returns the number of bars drawn.

    The ranges and marks come from ``collected`` (streamed) or else from ``timeline.ranges`` /
    ``timeline.marks`` (an in-memory timeline); names and rows from ``timeline``.
    """
    plt = _load_pyplot()
    from matplotlib.collections import PolyCollection

    if collected is None:
        collected = PngCollector()
        for r in timeline.ranges:
            collected.range(r)
        for m in timeline.marks:
            collected.mark(m)
    rows: List[Tuple[int, int]] = sorted(timeline.threads)
    row_keys: List[Tuple[int, int, str]] = [(pid, tid, "thread") for pid, tid in rows]
    row_keys += [(pid, 0, "async") for pid in sorted(collected.async_pids)]
    row_keys.sort(key=lambda k: (k[0], k[2] == "async", k[1]))
    index: Dict[Tuple[int, int, str], int] = {k: i for i, k in enumerate(row_keys)}
    t0 = timeline.start_ns
    span_s = max((timeline.end_ns - t0) / 1e9, 1e-9)

    bars = sorted(collected.bars(), key=lambda b: b[4])  # parents first, so nested bars are drawn on top
    max_depth = max((b[4] for b in bars), default=0)
    fig_h = 1.4 + 0.6 * max(len(row_keys), 1)
    counters = getattr(collected, "counters", {})
    if counters:  # one small line plot per counter track under the timeline, same time axis
        fig, axes = plt.subplots(1 + len(counters), 1, sharex=True, dpi=100,
                                 figsize=(14, fig_h + 1.2 * len(counters)),
                                 gridspec_kw={"height_ratios": [fig_h] + [1.2] * len(counters)})
        ax = axes[0]
        for cax, ((cpid, cname, cunit), points) in zip(axes[1:], sorted(counters.items(), key=lambda kv: kv[0][:2])):
            points.sort()
            cax.step([(t - t0) / 1e9 for t, _ in points], [v for _, v in points], where="post", linewidth=1)
            cax.set_ylabel(f"{cname}" + (f" [{cunit}]" if cunit else "") + f"\npid {cpid}", fontsize=7)
            cax.tick_params(labelsize=7)
            cax.grid(axis="x", linestyle=":", linewidth=0.5)
    else:
        fig, ax = plt.subplots(figsize=(14, fig_h), dpi=100)
    polys, colors, labels = [], [], []
    for _dur, _seq, start_ns, end_ns, depth, pid, tid, push, name, color in bars:
        key = (pid, tid, "thread") if push else (pid, 0, "async")
        y = index[key]
        shrink = min(depth, max_depth) * (0.6 / (max_depth + 1)) if push else 0.0
        half = 0.4 - shrink / 2
        x0 = (start_ns - t0) / 1e9
        x1 = max((end_ns - t0) / 1e9, x0 + span_s * 1e-4)  # keep instant-short ranges visible
        polys.append([(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)])
        colors.append(hex_color(color) or _DEFAULT_COLOR)
        if (x1 - x0) / span_s > 0.04:
            labels.append((x0 + span_s * 2e-3, y - half, name))  # top-left: nested labels stack
    ax.add_collection(PolyCollection(polys, facecolors=colors, edgecolors="black", linewidths=0.3))
    for x, y, text in labels[:2000]:
        ax.text(x, y, text, ha="left", va="top", fontsize=7, clip_on=True)
    if collected.marks:
        mx = [(t - t0) / 1e9 for t, _pid, _tid, _color in collected.marks]
        my = [index[(pid, tid, "thread")] for _t, pid, tid, _color in collected.marks]
        mc = [hex_color(color) or "black" for _t, _pid, _tid, color in collected.marks]
        ax.scatter(mx, my, marker="|", s=200, c=mc, zorder=3)
    names = []
    for pid, tid, what in row_keys:
        if what == "async":
            names.append(f"pid {pid} start/end")
        else:
            thread = timeline.thread_names.get((pid, tid)) or ("main" if tid == pid else f"tid {tid}")
            names.append(f"pid {pid} {thread}")
    ax.set_yticks(range(len(row_keys)))
    ax.set_yticklabels(names, fontsize=8)
    ax.set_ylim(len(row_keys) - 0.5, -0.5)
    ax.set_xlim(0, span_s * 1.01)
    (fig.axes[-1] if counters else ax).set_xlabel("seconds since the first event")
    ax.set_title(title)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return len(polys)
