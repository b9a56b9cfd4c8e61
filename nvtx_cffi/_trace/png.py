"""``--png``: a timeline picture with matplotlib (optional extra ``nvtx-cffi[png]``).

One row per thread (grouped by process), push/pop ranges as bars in their own colours (nested
ranges drawn thinner, inside their parent), start/end ranges on a row of their process, marks as
ticks. Names are written on bars wide enough to hold them.

>>> write_png(timeline, "timeline.png")  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from .chrome import hex_color
from .model import Timeline

__all__ = ["write_png", "MatplotlibMissing", "MAX_BARS"]

#: Beyond this many ranges only the longest are drawn (a picture cannot show a million bars anyway).
MAX_BARS = 200_000

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


def write_png(timeline: Timeline, path: str, *, title: str = "NVTX timeline") -> int:
    """Draw ``timeline`` into the PNG file ``path``; returns the number of bars drawn."""
    plt = _load_pyplot()
    from matplotlib.collections import PolyCollection

    rows: List[Tuple[int, int]] = sorted(timeline.threads)
    async_pids = sorted({r.pid for r in timeline.ranges if r.style == "start"})
    row_keys: List[Tuple[int, int, str]] = [(pid, tid, "thread") for pid, tid in rows]
    row_keys += [(pid, 0, "async") for pid in async_pids]
    row_keys.sort(key=lambda k: (k[0], k[2] == "async", k[1]))
    index: Dict[Tuple[int, int, str], int] = {k: i for i, k in enumerate(row_keys)}
    t0 = timeline.start_ns
    span_s = max((timeline.end_ns - t0) / 1e9, 1e-9)

    ranges = timeline.ranges
    if len(ranges) > MAX_BARS:
        ranges = sorted(ranges, key=lambda r: r.end_ns - r.start_ns, reverse=True)[:MAX_BARS]
    ranges = sorted(ranges, key=lambda r: r.depth)  # parents first, so nested bars are drawn on top
    max_depth = max((r.depth for r in ranges), default=0)
    fig_h = 1.4 + 0.6 * max(len(row_keys), 1)
    fig, ax = plt.subplots(figsize=(14, fig_h), dpi=100)
    polys, colors, labels = [], [], []
    for r in ranges:
        key = (r.pid, r.tid, "thread") if r.style == "push" else (r.pid, 0, "async")
        y = index[key]
        shrink = min(r.depth, max_depth) * (0.6 / (max_depth + 1)) if r.style == "push" else 0.0
        half = 0.4 - shrink / 2
        x0 = (r.start_ns - t0) / 1e9
        x1 = max((r.end_ns - t0) / 1e9, x0 + span_s * 1e-4)  # keep instant-short ranges visible
        polys.append([(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)])
        colors.append(hex_color(r.color) or _DEFAULT_COLOR)
        if (x1 - x0) / span_s > 0.04:
            labels.append((x0 + span_s * 2e-3, y - half, r.name))  # top-left: nested labels stack
    ax.add_collection(PolyCollection(polys, facecolors=colors, edgecolors="black", linewidths=0.3))
    for x, y, text in labels[:2000]:
        ax.text(x, y, text, ha="left", va="top", fontsize=7, clip_on=True)
    if timeline.marks:
        mx = [(m.time_ns - t0) / 1e9 for m in timeline.marks]
        my = [index[(m.pid, m.tid, "thread")] for m in timeline.marks]
        mc = [hex_color(m.color) or "black" for m in timeline.marks]
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
    ax.set_xlabel("seconds since the first event")
    ax.set_title(title)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return len(polys)
