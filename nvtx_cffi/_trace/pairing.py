"""Pair a recording's records batch by batch, as columns: the pairing step of a conversion (:mod:`.convert`).

:func:`pair_batches` turns the :class:`~.columns.RecordBatch` es of a recording into
:class:`PairedBatch` es — complete push/pop ranges, start/end ranges and marks as columns — that the
writers (:mod:`.writers`) format in bulk. The rules (:mod:`.model`): push/pop nest per (pid, tid,
domain); start/end match by (pid, domain, range id) and may end on another thread (an end read
before its start waits for it); a pop with nothing open and an end that finds no start are
counted, never guessed; ranges still open when the recording ends are closed at their process's
last record and flagged ``unterminated``. The order of the records is the reader's: each thread's
in time order, threads and processes interleaved by chunk.

Two implementations give the same batches, in the same order:

* NumPy (CPython): per batch, the pushes and pops are sorted by (thread, domain) (stable, so each
  group stays in time order); the nesting depth is a cumulative sum of +1/-1 per group; a pop
  that would take the depth below the group's floor is unmatched (the running minimum finds
  them); then every push is followed, among the events of its group at its own depth, by its pop.
  Pushes still open at the end of a batch are carried into the next one.
* Pure Python (PyPy, no NumPy): a stack per (thread, domain), one record at a time.

Start/end ranges are paired in record order, an end waiting for its start: in C where the CFFI
module has the helper (a hash table of the starts still open and the ends still waiting, by
(domain, range id)), else one record at a time in Python. Memory: one batch, plus what is open.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .. import _bulk
from .columns import END, MARK, POP, PUSH, START, RecordBatch, Source, open_events, payload_value
from .model import UNNAMED, Mark, Range, Timeline

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["Columns", "PairedBatch", "pair_batches", "ranges_of", "marks_of", "build_timeline", "RANGE_FIELDS",
           "ASYNC_FIELDS", "MARK_FIELDS"]

#: Columns of a range batch (push/pop or start/end) and of a mark batch.
RANGE_FIELDS = ("tid", "start", "end", "depth", "text", "domain", "category", "color", "has_color",
                "ptype", "payload")
ASYNC_FIELDS = ("tid", "end_tid", "start", "end", "range_id", "text", "domain", "category", "color",
                "has_color", "ptype", "payload")
MARK_FIELDS = ("tid", "time", "text", "domain", "category", "color", "has_color", "ptype", "payload")


class Columns:
    """Parallel columns (NumPy arrays or lists), named by ``fields``; ``len()`` rows."""

    def __init__(self, fields: Tuple[str, ...], values: List[Any]) -> None:
        self.fields = fields
        for name, value in zip(fields, values):
            setattr(self, name, value)
        self._n = len(values[0]) if values else 0

    def __len__(self) -> int:
        return self._n

    def lists(self, *names: str) -> List[list]:
        """The named columns as Python lists (what the text writers format)."""
        out = []
        for name in names:
            col = getattr(self, name)
            out.append(col.tolist() if hasattr(col, "tolist") else list(col))
        return out


class PairedBatch:
    """What one batch of one process adds to the trace, as columns.

    ``ranges``: push/pop ranges complete in this batch, in the order of their pops; ``asyncs``:
    start/end ranges complete in this batch, in the order their second event was read; ``marks``:
    in record order. Text columns index ``strings``; ``domain`` columns are the file's domain ids
    (:meth:`domain_name`). ``unterminated``: the ranges of this batch were still open at the end
    (closed at their process's last record). ``records``: the source :class:`RecordBatch` (None for
    the final batch of unterminated ranges) and ``skip``: its records that the trace leaves out
    (unmatched pops), for writers that follow each thread's records in order (Perfetto).
    ``payloads``: the conversion's decoded binary payloads (:class:`~.counters.ExtPayloads`, None
    when it decodes none), looked up by :meth:`ext_payload`.
    """

    def __init__(self, pid: int, strings: Any, domains: Dict[int, Optional[str]],
                 category_names: Dict[Tuple[Optional[str], int], str], ranges: Columns, asyncs: Columns,
                 marks: Columns, unterminated: bool = False, records: Optional[RecordBatch] = None,
                 skip: Any = None, payloads: Any = None) -> None:
        self.pid = pid
        self.strings = strings
        self._domains = domains
        self._category_names = category_names
        self.ranges = ranges
        self.asyncs = asyncs
        self.marks = marks
        self.unterminated = unterminated
        self.records = records
        self.skip = skip
        self.payloads = payloads

    def ext_payload(self, raw: int) -> Any:
        """The decoded binary payload of a row whose ``ptype`` is PT_EXT, by its ``payload`` column
        (None when unknown or evicted)."""
        return self.payloads.get(raw) if self.payloads is not None else None

    def ext_texts(self, raws: List[int]) -> List[Optional[str]]:
        """The JSON text of the binary payloads of rows whose ``ptype`` is PT_EXT, by their ``payload``
        column, where the decoder decoded them together (:meth:`~.counters.ExtPayloads.texts`);
        None for the others."""
        return self.payloads.texts(raws) if self.payloads is not None else [None] * len(raws)

    def text(self, i: int) -> str:
        """The name shown for text id ``i`` (``(unnamed)`` for none or empty)."""
        return self.strings[i] or UNNAMED

    def texts(self, ids: Any) -> Dict[int, str]:
        """``{i: self.text(i)}`` for the text ids ``ids`` (ints, repeats allowed), looked up in one pass."""
        uniq = list(set(ids))
        bulk = getattr(self.strings, "texts", None)
        found = bulk(uniq) if bulk is not None else [self.strings[i] for i in uniq]
        return {i: t or UNNAMED for i, t in zip(uniq, found)}

    def text_list(self, ids: List[int]) -> List[str]:
        """``[self.text(i) for i in ids]`` (ints), looked up in one pass."""
        bulk = getattr(self.strings, "texts", None)
        found = bulk(ids) if bulk is not None else [self.strings[i] for i in ids]
        return found if all(found) else [t or UNNAMED for t in found]

    def domain_name(self, d: int) -> Optional[str]:
        if not d:
            return None
        name = self._domains.get(d, _MISSING)
        return f"<unknown domain {d}>" if name is _MISSING else name  # type: ignore[return-value]

    def category_name(self, d: int, category: int) -> Optional[str]:
        if not category:
            return None
        return self._category_names.get((self.domain_name(d), category)) or str(category)


_MISSING = object()


#: Ids of the texts a batch adds to a reader's table (ranges carried in from an earlier batch).
_EXTRA = 1 << 40


class _Strings:
    """A reader's string table (id -> text, not copied) plus the texts carried into this batch."""

    def __init__(self, base: Any) -> None:
        self._base = base
        self._extra: List[Optional[str]] = []

    def __getitem__(self, i: int) -> Optional[str]:
        return self._extra[i - _EXTRA] if i >= _EXTRA else self._base[i]

    def texts(self, ids: List[int]) -> List[Optional[str]]:
        """``[self[i] for i in ids]``, the reader's table asked in one pass."""
        bulk = getattr(self._base, "texts", None)
        if not self._extra and bulk is not None:  # no texts of its own: every id is the table's
            return bulk(ids)
        base = [i for i in ids if i < _EXTRA]
        found = iter(bulk(base) if bulk is not None else [self._base[i] for i in base])
        return [self._extra[i - _EXTRA] if i >= _EXTRA else next(found) for i in ids]

    def raw_many(self, keys: Any) -> Tuple[Any, Any]:
        """The reader's table's ``raw_many``; a text carried into this batch: length -1 (look it up)."""
        import numpy as np

        keys = np.asarray(keys, dtype=np.int64)
        base = keys < _EXTRA
        data, lengths = self._base.raw_many(np.where(base, keys, -1))
        return data, np.where(base, lengths, -1)

    def add(self, text: str) -> int:
        self._extra.append(text)
        return _EXTRA + len(self._extra) - 1


def _take(col: Any, idx: Any, numpy: bool) -> Any:
    if numpy:
        return col[idx]
    return [col[i] for i in idx]


def pair_batches(recording: Source, timeline: Timeline, batches: Optional[Iterable[RecordBatch]] = None,
                 payloads: Any = None) -> Iterator[PairedBatch]:
    """Yield the paired batches of ``recording`` (a batch of blobs without events, counter samples, too:
    no rows), then one batch per process of unterminated ranges.

    ``batches``: the recording's batches as the steps before pairing hand them on (default:
    ``recording.batches()``); ``payloads``: the conversion's decoded binary payloads, handed on with
    each paired batch. ``timeline`` receives the bookkeeping as it goes (threads, counts, unmatched
    pops/ends) and is complete (names, times) when the iteration ends.
    """
    tl = timeline
    tl.dropped = recording.dropped
    for pid, info in recording.processes.items():
        tl.process_names[pid] = f"child of {info.ppid}" if info.ppid else "process"
        tl.dropped_by_pid[pid] = int(info.dropped or 0)
    # keyed by (pid, exec generation): an exec()ed image does not close its predecessor's ranges
    carry: Dict[Tuple[int, int], Any] = {}  # open pushes (tuples, in (tid, domain, depth) order)
    async_state: Dict[Tuple[int, int], Tuple[dict, dict]] = {}  # (open starts, early ends)
    numpy = recording.numpy
    last_ns: Dict[Tuple[int, int], int] = {}  # latest event of each image: where its open ranges end
    domains_of: Dict[Tuple[int, int], Any] = {}
    categories_of: Dict[Tuple[int, int], Any] = {}
    for batch in recording.batches() if batches is None else batches:
        pid = batch.pid
        image = (pid, batch.image)
        if not len(batch):
            if batch.blobs or batch.samples is not None:  # counter samples to hand on: the steps after go on
                yield _without_events(batch, payloads)
            continue
        tl.event_count += len(batch)
        latest = int(batch.time.max()) if numpy else max(batch.time)
        if latest > last_ns.get(image, -1):
            last_ns[image] = latest
        domains = domains_of[image] = batch.domains
        categories = categories_of[image] = batch.category_names
        strings = batch.strings if isinstance(batch.strings, list) else _Strings(batch.strings)
        opened = carry.get(image, [])
        if numpy:
            ranges, skip, still_open = _pair_numpy(batch, opened, strings)
            tids = batch.tid
            threads = _np.unique(tids).tolist() if (tids != tids[0]).any() else [int(tids[0])]
        else:
            ranges, skip, still_open = _pair_python(batch, opened, strings)
            threads = sorted(set(batch.tid))
        carry[image] = still_open
        tl.unmatched_pops += _count(skip, numpy)
        for tid in threads:
            tl.threads.add((pid, tid))
        state = async_state.get(image)
        if state is None:
            state = async_state[image] = ({}, {})
        asyncs = _pair_async(batch, state, strings, tl)
        marks = _marks(batch, numpy)
        tl.range_count += len(ranges) + len(asyncs)
        tl.mark_count += len(marks)
        yield PairedBatch(pid, strings, domains, categories, ranges, asyncs, marks, records=batch, skip=skip,
                          payloads=payloads)
    # Still open when the recording ends: closed at their process's last record, flagged.
    for image in sorted(set(carry) | set(async_state)):
        pid = image[0]
        strings: List[Optional[str]] = [None]
        last = last_ns.get(image, 0)
        rows = sorted(carry.get(image, []), key=lambda r: (r[2], r[0], r[1], r[9]))
        cols: List[list] = [[] for _ in RANGE_FIELDS]
        for tid, dom, t, text, cat, color, has_color, ptype, payload, depth in rows:
            values = (tid, t, max(last, t), depth, _intern(strings, text), dom, cat, color, has_color, ptype,
                      payload)
            for col, value in zip(cols, values):
                col.append(value)
        opened, early = async_state.get(image, ({}, {}))
        tl.unmatched_ends += len(early)
        acols: List[list] = [[] for _ in ASYNC_FIELDS]
        for (dom, rid), (tid, t, text, cat, color, has_color, ptype, payload) in sorted(
                opened.items(), key=lambda item: (item[1][1], item[0])):
            values = (tid, tid, t, max(last, t), rid, _intern(strings, text), dom, cat, color, has_color, ptype,
                      payload)
            for col, value in zip(acols, values):
                col.append(value)
        if not cols[0] and not acols[0]:
            continue
        ranges = Columns(RANGE_FIELDS, cols)
        asyncs = Columns(ASYNC_FIELDS, acols)
        tl.unterminated += len(ranges) + len(asyncs)
        tl.range_count += len(ranges) + len(asyncs)
        yield PairedBatch(pid, strings, domains_of.get(image, {0: None}), categories_of.get(image, {}), ranges, asyncs,
                          Columns(MARK_FIELDS, [[] for _ in MARK_FIELDS]), unterminated=True, payloads=payloads)
    for pid, info in recording.processes.items():  # complete now (a reader may learn them as it reads)
        for tid, name in (info.thread_names or {}).items():
            tl.thread_names[(pid, tid)] = name
    for pid, _tid in tl.threads:
        tl.process_names.setdefault(pid, "process")
    tl.start_ns = recording.start_ns or 0
    tl.end_ns = max([recording.end_ns or 0] + list(last_ns.values()))


def _without_events(batch: RecordBatch, payloads: Any) -> PairedBatch:
    """The paired batch of a batch without events (its blobs alone): no rows."""
    def none(fields: Tuple[str, ...]) -> Columns:
        return Columns(fields, [[] for _ in fields])

    return PairedBatch(batch.pid, batch.strings, batch.domains, batch.category_names, none(RANGE_FIELDS),
                       none(ASYNC_FIELDS), none(MARK_FIELDS), records=batch,
                       skip=_np.zeros(0, dtype=bool) if batch.numpy else [], payloads=payloads)


def _count(skip: Any, numpy: bool) -> int:
    return int(_np.count_nonzero(skip)) if numpy else sum(skip)


def _intern(strings: Any, text: Optional[str]) -> int:
    """Add ``text`` to a batch's strings; its id (0: no text)."""
    if text is None:
        return 0
    if isinstance(strings, list):
        strings.append(text)
        return len(strings) - 1
    return strings.add(text)


def _pair_python(b: RecordBatch, opened: list, strings: List[str]) -> Tuple[Columns, list, list]:
    """Stacks per (tid, domain), record by record; carried pushes first (in their stack order)."""
    stacks: Dict[Tuple[int, int], list] = {}
    for tid, dom, t, text, cat, color, has_color, ptype, payload, depth in opened:
        stacks.setdefault((tid, dom), []).append(
            [tid, dom, t, _intern(strings, text), cat, color, has_color, ptype, payload, depth])
    kind, tid_, time_, dom_, text_ = b.kind, b.tid, b.time, b.domain, b.text
    cols: List[list] = [[] for _ in RANGE_FIELDS]
    (c_tid, c_start, c_end, c_depth, c_text, c_dom, c_cat, c_color, c_has, c_ptype, c_payload) = cols
    skip = [0] * len(kind)
    for i, k in enumerate(kind):
        if k == PUSH:
            key = (tid_[i], dom_[i])
            stack = stacks.get(key)
            if stack is None:
                stack = stacks[key] = []
            stack.append([tid_[i], dom_[i], time_[i], text_[i], b.category[i], b.color[i], b.has_color[i],
                          b.ptype[i], b.payload[i], len(stack)])
        elif k == POP:
            stack = stacks.get((tid_[i], dom_[i]))
            if stack:
                tid, dom, t, text, cat, color, has_color, ptype, payload, depth = stack.pop()
                c_tid.append(tid)
                c_start.append(t)
                c_end.append(time_[i])
                c_depth.append(depth)
                c_text.append(text)
                c_dom.append(dom)
                c_cat.append(cat)
                c_color.append(color)
                c_has.append(has_color)
                c_ptype.append(ptype)
                c_payload.append(payload)
            else:
                skip[i] = 1
    still_open = []
    for key in sorted(stacks):
        for tid, dom, t, text, cat, color, has_color, ptype, payload, depth in stacks[key]:
            still_open.append((tid, dom, t, strings[text], cat, color, has_color, ptype,
                               payload, depth))
    return Columns(RANGE_FIELDS, cols), skip, still_open


def _pair_numpy(b: RecordBatch, opened: list, strings: List[str]) -> Tuple[Columns, Any, list]:
    """Vectorised push/pop pairing of one batch (see the module docstring); same result as Python."""
    np = _np
    pp = np.flatnonzero((b.kind == PUSH) | (b.kind == POP))
    nc = len(opened)
    if nc:
        o_tid, o_dom, o_t, o_text, o_cat, o_color, o_has, o_ptype, o_payload, _depth = zip(*opened)
        o_text_ids = [_intern(strings, text) for text in o_text]

        def col(carried: Any, source: Any, dtype: Any) -> Any:
            return np.concatenate([np.asarray(carried, dtype=dtype), source[pp].astype(dtype)])

        tid = col(o_tid, b.tid, np.int64)
        dom = col(o_dom, b.domain, np.int64)
        time = col(o_t, b.time, np.int64)
        text = col(o_text_ids, b.text, np.int64)
        cat = col(o_cat, b.category, np.int64)
        color = col(o_color, b.color, np.int64)
        has_color = col(o_has, b.has_color, np.int64)
        ptype = col(o_ptype, b.ptype, np.int64)
        payload = col(o_payload, b.payload, np.uint64)
        kind = np.concatenate([np.full(nc, PUSH, dtype=np.uint8), b.kind[pp]])
    else:
        tid, dom, time, text = b.tid[pp], b.domain[pp], b.time[pp], b.text[pp]
        cat, color, has_color, ptype, payload = b.category[pp], b.color[pp], b.has_color[pp], b.ptype[pp], b.payload[pp]
        kind = b.kind[pp]
    n = len(kind)
    skip = np.zeros(len(b.kind), dtype=bool)
    if not n:
        return Columns(RANGE_FIELDS, [np.zeros(0, np.int64) for _ in RANGE_FIELDS]), skip, []
    g = (tid.astype(np.int64) << 32) | dom.astype(np.int64)
    native = _native()
    if native is not None:
        return _pair_native(native, b, pp, nc, kind, g, tid, dom, time, text, cat, color, has_color, ptype, payload,
                            strings, skip)
    if not (g != g[0]).any():  # one (tid, domain) group, the common case: already in order
        order = np.arange(n)
        gidx = np.zeros(n, dtype=np.int64)
        first = np.zeros(n, dtype=bool)
        first[0] = True
    else:
        uniq, gid = np.unique(g, return_inverse=True)
        gid = gid.reshape(-1)
        # by (tid, domain); each group stays in record order (a radix sort for 16-bit keys)
        order = np.argsort(gid.astype(np.uint16) if len(uniq) <= 1 << 16 else gid, kind="stable")
        gidx = gid[order]
        first = np.empty(n, dtype=bool)
        first[0] = True
        np.not_equal(gidx[1:], gidx[:-1], out=first[1:])
    ks = kind[order]
    step = np.where(ks == PUSH, 1, -1).astype(np.int64)
    csum = np.cumsum(step)
    running = csum - (csum - step)[first][gidx]  # depth change since the group's start, after each event
    big = 2 * n + 2  # separates groups so one running minimum serves them all
    floor = np.minimum(np.minimum.accumulate(running - gidx * big) + gidx * big, 0)
    prev_floor = np.empty(n, dtype=np.int64)
    prev_floor[0] = 0
    prev_floor[1:] = floor[:-1]
    prev_floor[first] = 0
    is_pop = ks == POP
    unmatched = is_pop & (floor < prev_floor)  # a pop below everything open: nothing to close
    depth_after = running - floor
    level = np.where(is_pop, depth_after, depth_after - 1)
    keep = np.flatnonzero(~unmatched)
    # by (group, level), each in order: a push and the pop that closes it are then neighbours
    levels = int(level[keep].max()) + 1 if len(keep) else 1
    key = gidx[keep] * levels + level[keep]
    if len(keep) and int(key.max()) < 1 << 16:
        key = key.astype(np.uint16)  # radix sort
    by_level = keep[np.argsort(key, kind="stable")]
    kk = ks[by_level]
    same = (gidx[by_level[:-1]] == gidx[by_level[1:]]) & (level[by_level[:-1]] == level[by_level[1:]])
    pair = (kk[:-1] == PUSH) & (kk[1:] == POP) & same
    push_s = by_level[:-1][pair]  # indices into the sorted order
    pop_s = by_level[1:][pair]
    # hand ranges out in the order of their pops (distinct positions: a scatter, not a sort)
    pop_at = order[pop_s]
    rank = np.empty(n, dtype=np.int64)
    rank[pop_at] = np.arange(len(pop_at))
    seen = np.zeros(n, dtype=bool)
    seen[pop_at] = True
    by_pop = rank[np.flatnonzero(seen)]
    push_s = push_s[by_pop]
    pop_s = pop_s[by_pop]
    pi = order[push_s]  # indices into the combined columns
    qi = order[pop_s]
    ranges = Columns(RANGE_FIELDS, [tid[pi], time[pi], time[qi], level[push_s], text[pi], dom[pi], cat[pi],
                                    color[pi], has_color[pi], ptype[pi], payload[pi]])
    bad = order[np.flatnonzero(unmatched)] - nc
    skip[pp[bad]] = True
    paired = np.zeros(n, dtype=bool)
    paired[push_s] = True
    open_s = np.flatnonzero((ks == PUSH) & ~paired)  # sorted: by (tid, domain), then depth
    still_open = []
    if len(open_s):
        oi = order[open_s]
        for row in zip(tid[oi].tolist(), dom[oi].tolist(), time[oi].tolist(), text[oi].tolist(), cat[oi].tolist(),
                       color[oi].tolist(), has_color[oi].tolist(), ptype[oi].tolist(), payload[oi].tolist(),
                       level[open_s].tolist()):
            still_open.append(row[:3] + (strings[row[3]],) + row[4:])
    return ranges, skip, still_open


_NATIVE: List[Any] = []


def _native() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the C stack pairing (nvtxcffi_pair_stacks), else None."""
    return _bulk.helper(_NATIVE, "nvtxcffi_pair_stacks")


def _pair_native(native: Any, b: RecordBatch, pp: Any, nc: int, kind: Any, g: Any, tid: Any, dom: Any, time: Any,
                 text: Any, cat: Any, color: Any, has_color: Any, ptype: Any, payload: Any, strings: Any,
                 skip: Any) -> Tuple[Columns, Any, list]:
    """The same pairing as the NumPy one, with one stack per (tid, domain) in C: O(n), no sorting."""
    np = _np
    ffi, lib = native
    n = len(kind)
    if not (g != g[0]).any():  # one (tid, domain) group, the common case
        gid = np.zeros(n, dtype=np.int64)
        ngroups = 1
    else:
        uniq, gid = np.unique(g, return_inverse=True)  # group ids in (tid, domain) order
        gid = np.ascontiguousarray(gid.reshape(-1), dtype=np.int64)
        ngroups = len(uniq)
    kind = np.ascontiguousarray(kind, dtype=np.uint8)
    top = np.empty(ngroups, dtype=np.int64)
    below = np.empty(n, dtype=np.int64)
    level = np.empty(n, dtype=np.int64)
    state = np.empty(n, dtype=np.uint8)
    push_of = np.empty(n, dtype=np.int64)
    pop_of = np.empty(n, dtype=np.int64)

    def buf(a: Any, ctype: str) -> Any:
        return ffi.from_buffer(ctype + "[]", a)

    pairs = lib.nvtxcffi_pair_stacks(buf(kind, "uint8_t"), buf(gid, "int64_t"), n, ngroups, buf(top, "int64_t"),
                                     buf(below, "int64_t"), buf(level, "int64_t"), buf(state, "uint8_t"),
                                     buf(push_of, "int64_t"), buf(pop_of, "int64_t"))
    pi = push_of[:pairs]
    qi = pop_of[:pairs]
    ranges = Columns(RANGE_FIELDS, [tid[pi], time[pi], time[qi], level[pi], text[pi], dom[pi], cat[pi],
                                    color[pi], has_color[pi], ptype[pi], payload[pi]])
    bad = np.flatnonzero(state == 1) - nc  # unmatched pops (carried rows are pushes)
    skip[pp[bad]] = True
    still_open = []
    oi = np.flatnonzero(state == 2)
    if len(oi):
        oi = oi[np.lexsort((level[oi], gid[oi]))]  # by (tid, domain), then depth
        for row in zip(tid[oi].tolist(), dom[oi].tolist(), time[oi].tolist(), text[oi].tolist(), cat[oi].tolist(),
                       color[oi].tolist(), has_color[oi].tolist(), ptype[oi].tolist(), payload[oi].tolist(),
                       level[oi].tolist()):
            still_open.append(row[:3] + (strings[row[3]],) + row[4:])
    return ranges, skip, still_open


def _pair_async(b: RecordBatch, state: Tuple[dict, dict], strings: List[str], tl: Timeline) -> Columns:
    """Start/end pairing: record order, ends may wait for their start. ``state``: the starts still
    open and the ends still waiting, by (domain, range id), carried from batch to batch."""
    if b.numpy:
        native = _native_keys()
        if native is not None:
            return _pair_async_native(native, b, state, strings, tl)
    return _pair_async_rows(b, state, strings, tl)


def _native_keys() -> Any:
    """``(ffi, lib)`` of the CFFI module when it has the C start/end pairing (nvtxcffi_pair_keys) too,
    else None."""
    native = _native()
    return native if native is not None and hasattr(native[1], "nvtxcffi_pair_keys") else None


def _pair_async_native(native: Any, b: RecordBatch, state: Tuple[dict, dict], strings: Any, tl: Timeline) -> Columns:
    """:func:`_pair_async_rows`' pairing in C (a hash table of the pending rows), NumPy columns out.
    What ``state`` carries in for a range id of this batch goes first, as the rows that made it."""
    np = _np
    ffi, lib = native
    opened, early = state
    se = np.flatnonzero((b.kind == START) | (b.kind == END))
    if not len(se):
        return Columns(ASYNC_FIELDS, [[] for _ in ASYNC_FIELDS])
    names = ("kind", "tid", "time", "domain", "arg", "text", "category", "color", "has_color", "ptype", "payload")
    cols = [getattr(b, name)[se] for name in names]
    if opened or early:
        keys = [*opened, *early]
        rids = np.fromiter((rid for _dom, rid in keys), dtype=np.uint64, count=len(keys))
        # (a carried row whose domain differs pairs with nothing here: it goes back as it came)
        hits = np.flatnonzero(np.isin(rids, cols[4]))
        if len(hits):
            open_keys = [keys[j] for j in hits[hits < len(opened)].tolist()]
            early_keys = [keys[j] for j in hits[hits >= len(opened)].tolist()]
            starts = list(zip(*[opened.pop(key) for key in open_keys])) or [()] * 8
            ends = list(zip(*[early.pop(key) for key in early_keys])) or [(), ()]
            text_ids = {text: _intern(strings, text) for text in dict.fromkeys(starts[2])}  # each text once
            none = [0] * len(early_keys)
            kk = open_keys + early_keys
            carried = ([START] * len(open_keys) + [END] * len(early_keys), [*starts[0], *ends[1]],
                       [*starts[1], *ends[0]], [k[0] for k in kk], [k[1] for k in kk],
                       [*map(text_ids.__getitem__, starts[2]), *none], *([*c, *none] for c in starts[3:]))
            cols = [np.concatenate([np.asarray(c, dtype=np.uint64 if name in ("arg", "payload") else np.int64), col])
                    for c, col, name in zip(carried, cols, names)]
    kind, tid, time, dom, rid, text, cat, color, has, ptype, payload = cols
    n = len(kind)
    is_start = np.ascontiguousarray(kind == START, dtype=np.uint8)
    dom32 = np.ascontiguousarray(dom, dtype=np.uint32)
    rid64 = np.ascontiguousarray(rid, dtype=np.uint64)
    time64 = np.ascontiguousarray(time, dtype=np.int64)
    capacity = 1 << (2 * n).bit_length()
    table = np.empty(capacity, dtype=np.int64)
    row_state = np.empty(n, dtype=np.uint8)
    start_of = np.empty(n, dtype=np.int64)
    end_of = np.empty(n, dtype=np.int64)
    unmatched = ffi.new("int64_t *")

    def buf(a: Any, ctype: str) -> Any:
        return ffi.from_buffer(ctype + "[]", a)

    pairs = lib.nvtxcffi_pair_keys(buf(is_start, "uint8_t"), buf(dom32, "uint32_t"), buf(rid64, "uint64_t"),
                                   buf(time64, "int64_t"), n, buf(table, "int64_t"), capacity,
                                   buf(row_state, "uint8_t"), buf(start_of, "int64_t"), buf(end_of, "int64_t"),
                                   unmatched)
    tl.unmatched_ends += unmatched[0]
    si, ei = start_of[:pairs], end_of[:pairs]
    # what is left open or waiting: carried on (a key each), its text as a string
    left = np.flatnonzero(row_state == 2)
    if len(left):
        uniq, inverse = np.unique(text[left], return_inverse=True)
        names = [strings[t] for t in uniq.tolist()]
        opened.update(zip(zip(dom[left].tolist(), rid[left].tolist()),
                          zip(tid[left].tolist(), time[left].tolist(), [names[j] for j in inverse.reshape(-1).tolist()],
                              *(c[left].tolist() for c in (cat, color, has, ptype, payload)))))
    left = np.flatnonzero(row_state == 3)
    if len(left):
        early.update(zip(zip(dom[left].tolist(), rid[left].tolist()), zip(time[left].tolist(), tid[left].tolist())))
    return Columns(ASYNC_FIELDS, [tid[si], tid[ei], time[si], time[ei], rid[si], text[si], dom[si], cat[si],
                                  color[si], has[si], ptype[si], payload[si]])


def _pair_async_rows(b: RecordBatch, state: Tuple[dict, dict], strings: List[str], tl: Timeline) -> Columns:
    """The start/end pairing one row at a time (the Python source's, and without the compiled module)."""
    opened, early = state
    if b.numpy:
        se = _np.flatnonzero((b.kind == START) | (b.kind == END))
        if not len(se):
            return Columns(ASYNC_FIELDS, [[] for _ in ASYNC_FIELDS])
        rows = zip(*(col[se].tolist() for col in (b.kind, b.tid, b.time, b.domain, b.arg, b.text, b.category,
                                                   b.color, b.has_color, b.ptype, b.payload)))
    else:
        rows = ((b.kind[i], b.tid[i], b.time[i], b.domain[i], b.arg[i], b.text[i], b.category[i], b.color[i],
                 b.has_color[i], b.ptype[i], b.payload[i]) for i, k in enumerate(b.kind) if k == START or k == END)
    cols: List[list] = [[] for _ in ASYNC_FIELDS]

    def emit(values: tuple) -> None:
        for col, value in zip(cols, values):
            col.append(value)

    for kind, tid, t, dom, rid, text, cat, color, has_color, ptype, payload in rows:
        key = (dom, rid)
        if kind == START:
            text_str = strings[text]
            ended = early.pop(key, None) if early else None
            if ended is not None and ended[0] >= t:
                emit((tid, ended[1], t, ended[0], rid, text, dom, cat, color, has_color, ptype, payload))
            else:
                if ended is not None:
                    tl.unmatched_ends += 1  # an end from before this start: not its end
                opened[key] = (tid, t, text_str, cat, color, has_color, ptype, payload)
        else:
            r = opened.pop(key, None)
            if r is None:
                early[key] = (t, tid)  # its start may be in a chunk further on
            else:
                s_tid, s_t, s_text, s_cat, s_color, s_has, s_ptype, s_payload = r
                emit((s_tid, tid, s_t, t, rid, _intern(strings, s_text), dom, s_cat, s_color, s_has, s_ptype,
                      s_payload))
    return Columns(ASYNC_FIELDS, cols)


def _marks(b: RecordBatch, numpy: bool) -> Columns:
    if numpy:
        mk = _np.flatnonzero(b.kind == MARK)
    else:
        mk = [i for i, k in enumerate(b.kind) if k == MARK]
    return Columns(MARK_FIELDS, [_take(col, mk, numpy) for col in (b.tid, b.time, b.text, b.domain, b.category,
                                                                   b.color, b.has_color, b.ptype, b.payload)])


# --------------------------------------------------------------------------- objects, for slow consumers


def ranges_of(pb: PairedBatch) -> Iterator[Range]:
    """The batch's ranges as :class:`~.model.Range` objects (for ``--png`` and other per-range consumers)."""
    pid = pb.pid
    for tid, start, end, depth, text, dom, cat, color, has, ptype, payload in zip(*pb.ranges.lists(*RANGE_FIELDS)):
        r = Range("push", pb.text(text), pb.domain_name(dom), pb.category_name(dom, cat), color if has else None,
                  payload_value(ptype, payload), pid, tid, start, depth=depth)
        r.end_ns = end
        r.unterminated = pb.unterminated
        yield r
    for tid, end_tid, start, end, rid, text, dom, cat, color, has, ptype, payload in zip(
            *pb.asyncs.lists(*ASYNC_FIELDS)):
        r = Range("start", pb.text(text), pb.domain_name(dom), pb.category_name(dom, cat), color if has else None,
                  payload_value(ptype, payload), pid, tid, start, range_id=rid)
        r.end_ns = end
        r.end_tid = end_tid
        r.unterminated = pb.unterminated
        yield r


def marks_of(pb: PairedBatch) -> Iterator[Mark]:
    """The batch's marks as :class:`~.model.Mark` objects."""
    for tid, t, text, dom, cat, color, has, ptype, payload in zip(*pb.marks.lists(*MARK_FIELDS)):
        yield Mark(pb.text(text), pb.domain_name(dom), pb.category_name(dom, cat), color if has else None,
                   payload_value(ptype, payload), pb.pid, tid, t)


def build_timeline(events: Sequence[Any], processes: Dict[int, Any], dropped: int = 0) -> Timeline:
    """Pair :class:`~nvtx_cffi.recorder.Event` objects held in memory (``recorder.read().events``, or
    made by hand) as a conversion does (:func:`~.columns.open_events`, :func:`pair_batches`),
    keeping every range and mark in ``timeline.ranges`` / ``.marks``, in the order the pairing
    hands them out. ``processes`` maps pid to the reader's ``ProcessInfo`` (``ppid``, ``dropped``,
    ``thread_names``, ``category_names``; missing entries are fine); ``thread_name`` events name
    the threads that ``processes`` leaves unnamed, as the reader's first pass folds them into
    ``thread_names``. For small recordings and tests: memory grows with the recording.

    >>> from types import SimpleNamespace as E
    >>> ev = [E(kind=kind, time_ns=t, pid=1, tid=1, domain=None, message=message, color=None, category=0,
    ...         payload=None, payload_type=None, range_id=None)
    ...       for kind, t, message in [("push", 10, "a"), ("pop", 25, None)]]
    >>> [(r.name, r.start_ns, r.end_ns, r.depth) for r in build_timeline(ev, {}).ranges]
    [('a', 10, 25, 0)]
    """
    tl = Timeline()
    for pb in pair_batches(open_events(events, processes, dropped), tl):
        tl.ranges.extend(ranges_of(pb))
        tl.marks.extend(marks_of(pb))
    for ev in events:
        if ev.kind == "thread_name" and ev.name:
            tl.thread_names.setdefault((ev.pid, int(ev.target or ev.tid)), ev.name)
    return tl
