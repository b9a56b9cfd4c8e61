"""``--png``: a timeline picture with matplotlib (optional extra ``nvtx-cffi[png]``).

The picture is rasterised, not drawn range by range: the timeline is :data:`WIDTH_PX` pixel
columns wide, each thread's row is split into one lane per nesting depth (start/end ranges get a
row of their process), and every (lane, column) cell keeps, in fixed-size NumPy arrays,

* how much of the column the lane's ranges cover (their summed durations, in columns), and
* the *name* (name and colour) that covers most of it, with how much it covers.

A cell is painted in that name's colour, faded toward the background where the ranges cover
little of it (sparse tiny ranges show as a pale tint, never as black outlines); a range at least
four columns wide gets a darker first and last column, so neighbours with the same name stay
apart. The image is one ``imshow``. Names are written on the widest runs of one name (at most
:data:`MAX_LABELS`, clipped to the run), a legend lists the names with the most total time, marks
are ticks in a strip above their thread's lanes, counter samples are lines under the timeline.

Memory does not grow with the recording: the collector is fed batch by batch (the columns the
converter pairs, :meth:`PngCollector.batch`) or range by range (:meth:`PngCollector.range`), and
each batch is added to the cells at once (NumPy, in bulk), so what it keeps is
``lanes x WIDTH_PX`` cells (at most :data:`MAX_LANES` lanes), the name table (at most
:data:`MAX_NAMES` entries) and the counter points. The pixel columns need the time bounds before
the first range: the converter passes the recording's (its readers know them from a first pass
over the record files' headers, before any event) to :meth:`PngCollector.begin`; ranges fed
before that wait in a list until :func:`write_png` gives the timeline's.

Which name a cell shows is exact within a batch (all of the batch's ranges of each name in that
cell are summed); across batches the stored name keeps the coverage it had and adds that of its
own name, and a name of a later batch takes the cell when it covers more (a running maximum).

matplotlib needs NumPy, so without NumPy (PyPy without it) ``--png`` is refused before the program
runs, like without matplotlib; the pure-Python conversion's batches (lists) are read into arrays.

>>> write_png(timeline, "timeline.png")  # doctest: +SKIP
"""
from __future__ import annotations

import zlib
from typing import Any, Dict, List, Optional, Tuple

from .model import Mark, Range, Timeline
from .writers import TrackCounters, register

__all__ = ["write_png", "PngCollector", "MatplotlibMissing", "WIDTH_PX", "MAX_LANES", "MAX_NAMES", "MAX_LABELS"]

#: Pixel columns of the timeline (the picture is this plus the margins wide).
WIDTH_PX = 1600
#: Lanes (thread x depth, a process's start/end row) drawn; ranges on further ones are counted, not drawn.
MAX_LANES = 256
#: Depth lanes per thread; deeper ranges share the last one (the name covering most of a column wins).
MAX_DEPTH_LANES = 8
#: Distinct (name, colour) pairs kept; further names are drawn in their colour as "(other names)".
MAX_NAMES = 4096
#: Names written on the picture (the widest runs of one name first).
MAX_LABELS = 300
#: Legend entries (the names with the most total time).
LEGEND_ENTRIES = 16
#: Rows with a strip of marks (the first ones seen).
MAX_MARK_ROWS = 256

_LANE_PX = 16  # height of a depth lane, pixels (1 of them a gap)
_MARK_PX = 8  # the strip of marks above a thread's lanes
_ROW_GAP_PX = 6
_LABEL_MIN_PX = 24  # narrowest run that gets a name
_CHAR_PX = 5.6  # about one character of the labels' font (7 pt at 100 dpi)
_DPI = 100
_LEFT_PX, _RIGHT_PX = 200, 30
_BATCH = 1 << 16  # ranges fed one by one are added this many at a time
#: Interiors at most this many columns wide are added in bulk; wider ranges (few) one by one.
_WIDE = 64
#: Uncoloured ranges: a colour from this palette (tab20), picked by a hash of the name.
_PALETTE = (0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf,
            0xaec7e8, 0xffbb78, 0x98df8a, 0xff9896, 0xc5b0d5, 0xc49c94, 0xf7b6d2, 0xc7c7c7, 0xdbdb8d, 0x9edae5)
_OTHER = "(other names)"


class MatplotlibMissing(RuntimeError):
    """``--png`` needs matplotlib (and so NumPy), which is not installed."""


def _load_pyplot():
    try:
        import matplotlib
        import numpy  # noqa: F401 - matplotlib's own dependency; the rasteriser's too
    except ImportError:
        msg = "--png needs matplotlib: pip install 'nvtx-cffi[png]' (or pip install matplotlib)"
        raise MatplotlibMissing(msg) from None
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt
    return plt


def rgb_of(argb: Optional[int], name: str) -> int:
    """The ``0xRRGGBB`` a range is drawn in: its recorded colour with the alpha byte ignored (nvtx's
    named colours have alpha 0; Nsight draws them opaque, as :func:`.chrome.hex_color` writes
    them), or for an uncoloured range one of a palette, picked by its name.

    >>> hex(rgb_of(0x00FF0000, "a")), rgb_of(None, "a") == rgb_of(None, "a")
    ('0xff0000', True)
    """
    if argb is not None:
        return int(argb) & 0xFFFFFF
    return _PALETTE[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(_PALETTE)]


@register("png")
class PngCollector(TrackCounters):
    """What ``--png`` draws, in arrays of fixed size (see the module's docstring).

    ``start_ns``/``end_ns``: the time bounds (or later :meth:`begin`); ``width``: pixel columns.
    A conversion's :class:`~.writers.Writer` (:meth:`open`): it collects, :func:`write_png` draws.
    """

    #: Counter tracks drawn (the first ones seen) and points kept per track (the first ones).
    MAX_COUNTER_TRACKS = 8
    MAX_COUNTER_POINTS = 20000

    def __init__(self, start_ns: Optional[int] = None, end_ns: Optional[int] = None, *,
                 width: int = WIDTH_PX) -> None:
        import numpy as np

        self._np = np
        self.width = int(width)
        self.start_ns: Optional[int] = None
        self.px_ns = 1.0  # nanoseconds per pixel column
        #: (kind, pid, tid, depth) -> lane index; kind "thread" or "async" (then tid and depth 0)
        self.lanes: Dict[Tuple[str, int, int, int], int] = {}
        w = self.width
        self.cover = np.zeros((0, w))  # summed coverage of the cell, in columns (may exceed 1: overlaps)
        self.best = np.zeros((0, w))  # coverage of the shown name
        self.best_key = np.zeros((0, w), dtype=np.int32)  # the shown name (index into names), -1: none
        self.edge = np.zeros((0, w), dtype=bool)  # first/last column of a range >= 4 columns wide
        #: (pid, tid) -> row of the mark arrays
        self.mark_rows: Dict[Tuple[int, int], int] = {}
        self.mark_key = np.zeros((0, w), dtype=np.int32)  # the mark's name (colour) of the column
        self.mark_hit = np.zeros((0, w), dtype=bool)  # a mark in the column
        #: (name, 0xRRGGBB) of each name index, and per name: ranges and their total duration
        self.names: List[Tuple[str, int]] = []
        self._name_index: Dict[Tuple[str, int], int] = {}
        self.count = np.zeros(0, dtype=np.int64)
        self.total_ns = np.zeros(0)
        self.ranges = 0  # ranges fed
        self.marks = 0  # marks fed
        self.not_drawn = 0  # ranges on lanes past MAX_LANES
        self.async_pids: set = set()
        self.counters: Dict[Tuple[int, str, Optional[str]], List[Tuple[int, float]]] = {}
        self._pending: List[tuple] = []  # ranges fed one by one: (kind, pid, tid, depth, start, end, name, argb)
        self._pending_marks: List[tuple] = []  # (pid, tid, time, name, argb)
        if start_ns is not None:
            self.begin(start_ns, end_ns if end_ns is not None else start_ns)

    @classmethod
    def open(cls, output: Optional[str], recording: Any) -> "PngCollector":
        """The collector of a conversion of ``recording`` (a :class:`~.columns.Source`: its time
        bounds); :func:`write_png` draws it into ``output`` once the trace is in place."""
        return cls(recording.start_ns, recording.end_ns)

    def finish(self, timeline: Timeline) -> int:
        """Nothing to complete: :func:`write_png` draws what was collected (it writes no trace events)."""
        return 0

    def close(self) -> None:
        """Nothing to release: the picture is a file of :func:`write_png`'s."""

    # ----------------------------------------------------------------------------------- feeding

    def begin(self, start_ns: Optional[int], end_ns: Optional[int]) -> None:
        """Set the time bounds (once; later calls are ignored), then add what waited for them."""
        if self.start_ns is not None or start_ns is None:
            return
        end_ns = end_ns if end_ns is not None else start_ns
        self.start_ns = int(start_ns)
        self.px_ns = max(int(end_ns) - int(start_ns), 1) / self.width
        self.flush()

    def range(self, r: Range) -> None:
        """One range (an in-memory timeline, or a per-range consumer); added ``_BATCH`` at a time."""
        kind = "thread" if r.style == "push" else "async"
        self._pending.append((kind, r.pid, r.tid if kind == "thread" else 0, r.depth if kind == "thread" else 0,
                              r.start_ns, r.end_ns, r.name, r.color))
        if len(self._pending) >= _BATCH and self.start_ns is not None:
            self.flush()

    def mark(self, m: Mark) -> None:
        self._pending_marks.append((m.pid, m.tid, m.time_ns, m.name, m.color))
        if len(self._pending_marks) >= _BATCH and self.start_ns is not None:
            self.flush()

    def batch(self, pb: Any) -> None:
        """A :class:`~.pairing.PairedBatch`: its push/pop ranges, start/end ranges and marks, in bulk."""
        if self.start_ns is None:  # no bounds yet: as objects, until begin()
            from .pairing import marks_of, ranges_of

            for r in ranges_of(pb):
                self.range(r)
            for m in marks_of(pb):
                self.mark(m)
            return
        np = self._np
        pid = pb.pid
        for cols, kind in ((pb.ranges, "thread"), (pb.asyncs, "async")):
            if not len(cols):
                continue
            tid = np.asarray(cols.tid, dtype=np.int64)
            start = np.asarray(cols.start, dtype=np.int64)
            end = np.asarray(cols.end, dtype=np.int64)
            if kind == "thread":
                depth = np.minimum(np.asarray(cols.depth, dtype=np.int64), MAX_DEPTH_LANES - 1)
            else:
                self.async_pids.add(pid)
                tid = np.zeros(len(start), dtype=np.int64)
                depth = tid
            lane = self._lane_ids(kind, pid, tid, depth)
            key = self._keys(pb, cols)
            self._add_ranges(lane, start, end, key)
        if len(pb.marks):
            m = pb.marks
            tid = np.asarray(m.tid, dtype=np.int64)
            self.marks += len(tid)
            self._add_marks(self._mark_row_ids(pid, tid), np.asarray(m.time, dtype=np.int64), self._keys(pb, m))

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: Optional[float],
                track: Any = None, no_value: Optional[str] = None) -> None:
        """A counter sample (payload extension): a line per (process, counter) under the timeline."""
        if value is None:  # a gap: no point
            return
        tracks = self.counters
        key = (pid, name, unit)
        points = tracks.get(key)
        if points is None:
            if len(tracks) >= self.MAX_COUNTER_TRACKS:
                return
            points = tracks[key] = []
        if len(points) < self.MAX_COUNTER_POINTS:
            points.append((time_ns, value))

    # ------------------------------------------------------------------------------ what is kept

    def legend(self, n: int = LEGEND_ENTRIES) -> List[Tuple[str, str, int, int]]:
        """The ``n`` names with the most total time (then the most ranges):
        ``(name, "#rrggbb", ranges, total ns)``."""
        np = self._np
        if not len(self.names):
            return []
        order = np.lexsort((-self.count, -self.total_ns))[:n]
        return [(self.names[i][0], f"#{self.names[i][1]:06x}", int(self.count[i]), int(self.total_ns[i]))
                for i in order.tolist() if self.count[i]]

    def array_bytes(self) -> int:
        """Bytes of the per-pixel arrays (they grow with the lanes and names, never with the ranges)."""
        return sum(a.nbytes for a in (self.cover, self.best, self.best_key, self.edge, self.mark_key, self.mark_hit,
                                      self.count, self.total_ns))

    def shown(self, lane: int) -> Any:
        """The name index each column of ``lane`` shows (-1: nothing there)."""
        np = self._np
        return np.where(self.cover[lane] > 0, self.best_key[lane], -1)

    # ------------------------------------------------------------------------------- internals

    def flush(self) -> None:
        """Add the ranges and marks fed one by one that wait (for the bounds, or a full batch)."""
        if self.start_ns is None:
            return
        np = self._np
        pending, self._pending = self._pending, []
        if pending:
            kinds, pids, tids, depths, starts, ends, names, colors = zip(*pending)
            lane = np.empty(len(pending), dtype=np.int64)
            for i, (kind, pid, tid, depth) in enumerate(zip(kinds, pids, tids, depths)):
                if kind == "async":
                    self.async_pids.add(pid)
                lane[i] = self._lane(kind, pid, tid, min(depth, MAX_DEPTH_LANES - 1))
            key = np.array([self._key(name, rgb_of(color, name)) for name, color in zip(names, colors)],
                           dtype=np.int64)
            self._add_ranges(lane, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), key)
        marks, self._pending_marks = self._pending_marks, []
        if marks:
            pids, tids, times, names, colors = zip(*marks)
            self.marks += len(marks)
            rows = np.array([self._mark_row(pid, tid) for pid, tid in zip(pids, tids)], dtype=np.int64)
            key = np.array([self._key(name, rgb_of(color, name)) for name, color in zip(names, colors)],
                           dtype=np.int64)
            self._add_marks(rows, np.array(times, dtype=np.int64), key)

    def _lane(self, kind: str, pid: int, tid: int, depth: int) -> int:
        k = (kind, pid, tid, depth)
        lane = self.lanes.get(k)
        if lane is None:
            if len(self.lanes) >= MAX_LANES:
                return -1
            np = self._np
            lane = self.lanes[k] = len(self.lanes)
            if lane >= len(self.cover):  # grow the arrays (doubling, up to MAX_LANES rows)
                rows = min(max(2 * len(self.cover), 4), MAX_LANES)
                self.cover = _grow(np, self.cover, rows, 0)
                self.best = _grow(np, self.best, rows, 0)
                self.best_key = _grow(np, self.best_key, rows, -1)
                self.edge = _grow(np, self.edge, rows, False)
        return lane

    def _lane_ids(self, kind: str, pid: int, tid: Any, depth: Any) -> Any:
        np = self._np
        combined = (tid << 8) | depth  # depth < MAX_DEPTH_LANES
        if not (combined != combined[0]).any():
            t, d = int(tid[0]), int(depth[0])
            return np.full(len(tid), self._lane(kind, pid, t, d), dtype=np.int64)
        uniq, inv = np.unique(combined, return_inverse=True)
        ids = np.array([self._lane(kind, pid, int(u) >> 8, int(u) & 0xFF) for u in uniq.tolist()], dtype=np.int64)
        return ids[inv.reshape(-1)]

    def _mark_row(self, pid: int, tid: int) -> int:
        row = self.mark_rows.get((pid, tid))
        if row is None:
            if len(self.mark_rows) >= MAX_MARK_ROWS:
                return -1
            row = self.mark_rows[(pid, tid)] = len(self.mark_rows)
            if row >= len(self.mark_key):
                rows = min(max(2 * len(self.mark_key), 4), MAX_MARK_ROWS)
                self.mark_key = _grow(self._np, self.mark_key, rows, 0)
                self.mark_hit = _grow(self._np, self.mark_hit, rows, False)
        return row

    def _mark_row_ids(self, pid: int, tid: Any) -> Any:
        np = self._np
        uniq, inv = np.unique(tid, return_inverse=True)
        ids = np.array([self._mark_row(pid, int(t)) for t in uniq.tolist()], dtype=np.int64)
        return ids[inv.reshape(-1)]

    def _key(self, name: str, rgb: int) -> int:
        k = (name, rgb)
        i = self._name_index.get(k)
        if i is None:
            if len(self.names) >= MAX_NAMES:  # one "(other names)" entry per colour from now on
                k = (_OTHER, rgb if len(self.names) < 2 * MAX_NAMES else 0x999999)
                i = self._name_index.get(k)
                if i is not None:
                    return i
            i = self._name_index[k] = len(self.names)
            self.names.append(k)
            if i >= len(self.count):
                np = self._np
                size = max(2 * len(self.count), 64)
                self.count = _grow(np, self.count, size, 0)
                self.total_ns = _grow(np, self.total_ns, size, 0)
        return i

    def _keys(self, pb: Any, cols: Any) -> Any:
        """The name index of each row of ``cols`` (text ids of ``pb``, colours as recorded)."""
        np = self._np
        text = np.asarray(cols.text, dtype=np.int64)
        has = np.asarray(cols.has_color).astype(bool)
        color = np.where(has, np.asarray(cols.color, dtype=np.int64) & 0xFFFFFF, 1 << 24)
        tu, ti = np.unique(text, return_inverse=True)
        combined = (ti.reshape(-1).astype(np.int64) << 25) | color
        uniq, inv = np.unique(combined, return_inverse=True)
        texts = pb.text_list(tu.tolist())
        ids = []
        for u in uniq.tolist():
            name = texts[u >> 25]
            c = u & ((1 << 25) - 1)
            ids.append(self._key(name, rgb_of(None if c == 1 << 24 else c, name)))
        return np.array(ids, dtype=np.int64)[inv.reshape(-1)]

    def _add_ranges(self, lane: Any, start: Any, end: Any, key: Any) -> None:
        np = self._np
        n = len(lane)
        self.ranges += n
        if not n:
            return
        self._bincount_into(self.count, key, None)
        self._bincount_into(self.total_ns, key, (end - start).astype(np.float64))
        on = lane >= 0
        if not on.all():
            self.not_drawn += int(n - np.count_nonzero(on))
            lane, start, end, key = lane[on], start[on], end[on], key[on]
        w = self.width
        x0 = np.clip((start - self.start_ns) / self.px_ns, 0, w)
        x1 = np.clip((end - self.start_ns) / self.px_ns, x0, w)
        c0 = np.minimum(x0.astype(np.int64), w - 1)
        c1 = np.minimum(x1.astype(np.int64), w - 1)
        base = lane * w
        one = c0 == c1
        many = ~one
        cells = [base[one] + c0[one]]
        covs = [np.maximum(x1[one] - x0[one], 1e-6)]  # an instant range still marks its column (faintly)
        keys = [key[one]]
        if many.any():
            b, a0, a1, k = base[many], c0[many], c1[many], key[many]
            cells += [b + a0, b + a1]
            covs += [a0 + 1 - x0[many], x1[many] - a1]
            keys += [k, k]
            wide_edge = a1 - a0 >= 4
            if wide_edge.any():
                flat = self.edge.reshape(-1)
                flat[(b + a0)[wide_edge]] = True
                flat[(b + a1)[wide_edge]] = True
            inner = a1 - a0 - 1
            narrow = (inner > 0) & (inner <= _WIDE)
            if narrow.any():
                m = inner[narrow]
                total = int(m.sum())
                first = np.repeat(b[narrow] + a0[narrow] + 1 - np.cumsum(m) + m, m)
                cells.append(first + np.arange(total))
                covs.append(np.ones(total))
                keys.append(np.repeat(k[narrow], m))
            for row, lo, hi, name in zip((b // w)[inner > _WIDE].tolist(), (a0 + 1)[inner > _WIDE].tolist(),
                                         a1[inner > _WIDE].tolist(), k[inner > _WIDE].tolist()):
                self._fill(row, lo, hi, name)
        self._accumulate(np.concatenate(cells), np.concatenate(keys), np.concatenate(covs))

    def _fill(self, row: int, lo: int, hi: int, key: int) -> None:
        """Columns ``lo:hi`` of lane ``row`` wholly covered by one range of name ``key``."""
        np = self._np
        self.cover[row, lo:hi] += 1.0
        best = self.best[row, lo:hi]
        names = self.best_key[row, lo:hi]
        same = names == key
        best[same] += 1.0
        take = ~same & (best <= 1.0)  # (ties: the later range)
        best[take] = 1.0
        names[take] = key

    def _accumulate(self, cells: Any, keys: Any, covs: Any) -> None:
        """Add pieces (cell, name, coverage): summed per (cell, name), then the running maximum."""
        np = self._np
        nk = max(len(self.names), 1)
        cover = self.cover.reshape(-1)
        best = self.best.reshape(-1)
        best_key = self.best_key.reshape(-1)
        uniq, inv = np.unique(cells * nk + keys, return_inverse=True)
        sums = np.bincount(inv.reshape(-1), weights=covs)
        ucell = uniq // nk
        ukey = uniq - ucell * nk
        np.add.at(cover, ucell, sums)
        same = best_key[ucell] == ukey  # the shown name covers more of its cell
        best[ucell[same]] += sums[same]
        other = ~same
        if other.any():
            oc, ok, os_ = ucell[other], ukey[other], sums[other]
            # the name covering most of each cell (uniq is sorted by cell: a stable sort by coverage, then the last)
            order = np.lexsort((os_, oc))
            oc, ok, os_ = oc[order], ok[order], os_[order]
            last = np.ones(len(oc), dtype=bool)
            last[:-1] = oc[1:] != oc[:-1]
            oc, ok, os_ = oc[last], ok[last], os_[last]
            take = os_ > best[oc]
            best[oc[take]] = os_[take]
            best_key[oc[take]] = ok[take]

    def _add_marks(self, rows: Any, times: Any, key: Any) -> None:
        np = self._np
        on = rows >= 0
        col = np.clip(((times - self.start_ns) / self.px_ns).astype(np.int64), 0, self.width - 1)
        flat = (rows * self.width + col)[on]
        self.mark_key.reshape(-1)[flat] = key[on]
        self.mark_hit.reshape(-1)[flat] = True

    def _bincount_into(self, target: Any, key: Any, weights: Any) -> None:
        np = self._np
        add = np.bincount(key, weights=weights, minlength=len(target))
        target += add[:len(target)].astype(target.dtype)


def _grow(np: Any, a: Any, rows: int, fill: Any) -> Any:
    out = np.full((rows,) + a.shape[1:], fill, dtype=a.dtype)
    out[:len(a)] = a
    return out


def _rgb_table(np: Any, names: List[Tuple[str, int]]) -> Any:
    table = np.zeros((len(names) + 1, 3))
    for i, (_name, rgb) in enumerate(names):
        table[i] = ((rgb >> 16) & 0xFF, (rgb >> 8) & 0xFF, rgb & 0xFF)
    return table / 255.0  # [-1]: black, for "none" (never shown: no coverage)


def _text_color(rgb: Any) -> str:
    luminance = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    return "black" if luminance > 0.5 else "white"


def write_png(timeline: Timeline, path: str, *, title: str = "NVTX timeline",
              collected: Optional[PngCollector] = None) -> int:
    """Draw into the PNG file ``path``; returns the number of ranges in the picture.

    The ranges and marks come from ``collected`` (streamed) or else from ``timeline.ranges`` /
    ``timeline.marks`` (an in-memory timeline); names, rows and time bounds from ``timeline``.
    """
    plt = _load_pyplot()
    import numpy as np
    from matplotlib.patches import Patch, Rectangle

    if collected is None:
        collected = PngCollector(timeline.start_ns, timeline.end_ns)
        for r in timeline.ranges:
            collected.range(r)
        for m in timeline.marks:
            collected.mark(m)
    collected.begin(timeline.start_ns, max(timeline.end_ns, timeline.start_ns))
    collected.flush()
    c = collected
    w = c.width
    px_s = c.px_ns / 1e9
    span_s = w * px_s

    # rows: each thread (its lanes by depth, a strip of marks above them if it has marks), then
    # each process's start/end row after its threads
    depth_of: Dict[Tuple[str, int, int], int] = {}
    for kind, pid, tid, depth in c.lanes:
        depth_of[(kind, pid, tid)] = max(depth_of.get((kind, pid, tid), 0), depth)
    row_keys = [("thread", pid, tid) for pid, tid in sorted(timeline.threads | set(c.mark_rows))]
    row_keys += [("async", pid, 0) for pid in sorted(c.async_pids)]
    row_keys.sort(key=lambda k: (k[1], k[0] == "async", k[2]))
    n_lanes = sum(depth_of.get(k, 0) + 1 for k in row_keys)
    lane_px = _LANE_PX if n_lanes <= 64 else max(4, 1024 // n_lanes)
    labels_fit = lane_px >= 12
    table = _rgb_table(np, c.names)
    background = np.array([1.0, 1.0, 1.0])
    bands: List[Any] = []  # image rows, top to bottom
    ticks: List[Tuple[float, str]] = []
    label_candidates: List[Tuple[int, float, int, int]] = []  # (run length, y of the lane's top, first column, name)
    y = 0
    for k in row_keys:
        kind, pid, tid = k
        bands.append(np.tile(np.array([0.82, 0.82, 0.82]), (_ROW_GAP_PX, w, 1)) if y else np.ones((2, w, 3)))
        y += len(bands[-1])
        top = y
        mrow = c.mark_rows.get((pid, tid)) if kind == "thread" else None
        if mrow is not None:
            mk = c.mark_key[mrow].copy()
            hit = c.mark_hit[mrow].copy()
            wider = np.flatnonzero(hit[:-1] & ~hit[1:]) + 1  # ticks two columns wide where there is room
            mk[wider] = mk[wider - 1]
            hit[wider] = True
            strip = np.ones((_MARK_PX, w, 3))
            strip[:-1, hit] = table[mk[hit]]
            bands.append(strip)
            y += _MARK_PX
        for depth in range(depth_of.get(k, 0) + 1):
            lane = c.lanes.get((kind, pid, tid, depth))
            band = np.ones((lane_px, w, 3))
            if lane is not None:
                shown = c.shown(lane)
                fill = np.minimum(c.cover[lane], 1.0)
                alpha = np.where(fill > 0, 0.35 + 0.65 * fill, 0.0)[:, None]
                rgb = background * (1 - alpha) + table[shown] * alpha
                rgb[c.edge[lane] & (fill > 0)] *= 0.55
                band[1:] = rgb  # the first pixel row: a gap between depths
                if labels_fit:
                    # runs of one name, split where a range begins or ends (its darker columns)
                    change = np.flatnonzero((np.diff(shown) != 0) | c.edge[lane][1:]) + 1
                    starts = np.concatenate(([0], change))
                    lengths = np.diff(np.concatenate((starts, [w])))
                    keep = (lengths >= _LABEL_MIN_PX) & (shown[starts] >= 0)
                    for s, n in zip(starts[keep].tolist(), lengths[keep].tolist()):
                        label_candidates.append((n, y, s, int(shown[s])))
            bands.append(band)
            y += lane_px
        if kind == "async":
            name = f"pid {pid} start/end"
        else:
            thread = timeline.thread_names.get((pid, tid)) or ("main" if tid == pid else f"tid {tid}")
            name = f"pid {pid} {thread}"
        ticks.append(((top + y) / 2, name))
    if not bands:
        bands.append(np.ones((lane_px, w, 3)))
        y = lane_px
    image = np.concatenate(bands)
    height = len(image)

    legend = c.legend()
    legend_cols = 4
    legend_rows = -(-len(legend) // legend_cols)
    counters = sorted(c.counters.items(), key=lambda kv: kv[0][:2])
    title_px, axis_px, counter_px, legend_px = 56, 40, 90, 18 * legend_rows + (26 if legend else 0)
    fig_h = title_px + height + axis_px + counter_px * len(counters) + legend_px + 10
    fig_w = _LEFT_PX + w + _RIGHT_PX
    fig = plt.figure(figsize=(fig_w / _DPI, fig_h / _DPI), dpi=_DPI)

    def axes_at(top_px: float, height_px: float) -> Any:
        return fig.add_axes((_LEFT_PX / fig_w, 1 - (top_px + height_px) / fig_h, w / fig_w, height_px / fig_h))

    try:
        ax = axes_at(title_px, height)
        # transparent where nothing is drawn: the grid shows there, under the ranges elsewhere
        opaque = (image < 1.0).any(axis=2, keepdims=True).astype(image.dtype)
        ax.imshow(np.concatenate((image, opaque), axis=2), aspect="auto", interpolation="nearest",
                  extent=(0, span_s, height, 0), zorder=1)
        ax.set_axisbelow(True)
        ax.set_xlim(0, span_s)
        ax.set_ylim(height, 0)
        ax.set_yticks([t for t, _ in ticks])
        ax.set_yticklabels([n for _, n in ticks], fontsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        label_candidates.sort(key=lambda item: -item[0])
        for n, top, s, key in label_candidates[:MAX_LABELS]:
            chars = int((n - 4) / _CHAR_PX)
            text = c.names[key][0]
            if chars < 2:
                continue
            if len(text) > chars:
                text = text[:chars - 1] + "\u2026"
            x0 = s * px_s
            clip = Rectangle((x0, top), n * px_s, lane_px, transform=ax.transData)
            t = ax.text(x0 + 2 * px_s, top + lane_px / 2 + 0.5, text, ha="left", va="center", fontsize=7,
                        color=_text_color(table[key]), clip_on=True)
            t.set_clip_path(clip)
        bottom = ax
        for i, ((cpid, cname, cunit), points) in enumerate(counters):
            cax = axes_at(title_px + height + 14 + i * counter_px, counter_px - 14)
            cax.sharex(ax)
            points.sort()
            t0 = collected.start_ns or 0
            cax.step([(t - t0) / 1e9 for t, _ in points], [v for _, v in points], where="post", linewidth=1)
            cax.set_ylabel(f"{cname}" + (f" [{cunit}]" if cunit else "") + f"\npid {cpid}", fontsize=7)
            cax.tick_params(labelsize=7)
            cax.grid(axis="x", linestyle=":", linewidth=0.5)
            bottom = cax
        for a in fig.axes:
            if a is not bottom:
                a.tick_params(axis="x", labelbottom=False)
        bottom.tick_params(axis="x", labelsize=8)
        bottom.set_xlabel("seconds since the first event", fontsize=8, labelpad=1)
        ax.grid(axis="x", linestyle=":", linewidth=0.5, color="#666666")
        drawn = c.ranges - c.not_drawn
        threads = len(timeline.threads)
        processes = len({pid for pid, _ in timeline.threads} | c.async_pids)
        head = (f"{c.ranges} ranges" + (f" ({c.not_drawn} past {MAX_LANES} lanes not drawn)" if c.not_drawn else "")
                + f", {c.marks} marks, {threads} thread(s) in {processes} process(es), {span_s:.6g} s")
        fig.text(0.5, 1 - 8 / fig_h, title, ha="center", va="top", fontsize=12)
        fig.text(0.5, 1 - 30 / fig_h, f"{head}; a pixel column is {_duration(c.px_ns)}, drawn in the colour "
                 "of the name covering most of it (paler: less covered)", ha="center", va="top", fontsize=8)
        if legend:
            handles = [Patch(facecolor=color, edgecolor="none",
                             label=f"{name[:40]}  ({count} \u00d7, {_duration(total)})")
                       for name, color, count, total in legend]
            fig.legend(handles=handles, loc="lower left", ncol=legend_cols, fontsize=8, frameon=False,
                       bbox_to_anchor=(_LEFT_PX / fig_w, 2 / fig_h), title="most time", title_fontsize=8,
                       handlelength=1.6, columnspacing=2.0)
        fig.savefig(path, format="png", dpi=_DPI)
    finally:
        plt.close(fig)
    return drawn


def _duration(ns: float) -> str:
    for unit, size in (("s", 1e9), ("ms", 1e6), ("\u00b5s", 1e3)):
        if ns >= size:
            return f"{ns / size:.3g} {unit}"
    return f"{ns:.3g} ns"
