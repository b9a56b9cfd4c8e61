"""Write an SQLite database whose NVTX tables follow Nsight Systems' ``nsys export --type sqlite``.

Analysis written against an Nsight export (pandas ``read_sql``, the NVTX queries of ``nsys stats``)
runs on it unchanged. Tables and what is filled:

``NVTX_EVENTS`` — Nsight's columns, in its order:

================  ==========================================================================
column            filled with
================  ==========================================================================
start             ns since the recording's first event (Nsight: since the session start)
end               ns, for ranges; NULL for marks, names and ranges still open when their
                  process ended (so summaries leave them out, as ``--stats`` does)
eventType         59 push/pop range, 60 start/end range, 34 mark, 33 category name,
                  75 domain create, 39 thread name (Nsight's NvtxEventType numbers)
rangeId           start/end range id (an id past 2**63-1 is stored as the signed int64 with
                  the same 64 bits, as uint64Value is)
category          NVTX category id (NULL: none); its name is an eventType 33 row
color             ARGB as given (NULL: none)
text              the message (as Nsight stores non-registered strings), or the name for
                  33/75/39 rows
globalTid         pid << 24 | tid of the thread that pushed/started/marked
endGlobalTid      pid << 24 | tid of the thread that ended a start/end range
textId            NULL (every message is in ``text``); ``StringIds`` holds the thread names
domainId          the domain's id in its process (0: NVTX's default domain); its name is an
                  eventType 75 row with the same domainId and process
uint64Value ...   the payload, in the column of its type: uint64Value (values past 2**63-1 as
                  the signed int64 with the same 64 bits: SQLite integers are signed), int64Value,
                  doubleValue, uint32Value, int32Value, floatValue (NaN is stored as NULL:
                  SQLite has no NaN); jsonTextId/jsonText: NULL
================  ==========================================================================

``NVTX_CFFI_COUNTERS(timestamp, globalPid, domain, counterId, name, unit, value, noValue)``: a row
per counter sample and field; a counter is (globalPid, domain, counterId) — ``name`` is its name
(``group.field`` for a group's field) without the domain. ``value`` is NULL for NaN and for a gap;
``noValue`` is ``zero``, ``unchanged`` or ``unavailable`` for a ``sample_no_value`` sample (NULL
otherwise): zero has value 0, unchanged the value held, unavailable NULL.

``StringIds(id, value)`` and ``ThreadNames(nameId, priority, globalTid)``: the thread names.
``NVTX_CFFI_META(key, value)``: ``t0_ns`` (the CLOCK_MONOTONIC time of ``start`` 0), counts of
dropped events, unmatched pops/ends and unterminated ranges (a count past 2**63-1, which only a
corrupt record file gives, is stored as 2**63-1).

Rows are inserted in one transaction, without journal: rows that differ only in their times and
scalar payloads (and, start/end ranges, range ids and end threads) by multi-row ``INSERT ...
VALUES`` statements binding just these, the others (ranges still open at the end, batches of rows
too unlike: a name per row) with ``executemany``; one index, ``NVTX_EVENTS(eventType)``, is made at the end.
"""
from __future__ import annotations

import itertools
import os
import sqlite3
from typing import Any, Dict, List, Optional, Tuple

from .. import _recording_format as _format
from .columns import payload_value
from .grouping import group_rows
from .model import Timeline
from .scalars import DOUBLE, FLOAT, SLOT_NAMES, scalar_payloads
from .writers import TrackCounters, register

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["SqliteWriter", "PUSH_POP", "START_END", "MARK", "CATEGORY_NAME", "DOMAIN_CREATE", "THREAD_NAME",
           "SCHEMA"]

PUSH_POP, START_END, MARK, CATEGORY_NAME, DOMAIN_CREATE, THREAD_NAME = 59, 60, 34, 33, 75, 39

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL REFERENCES StringIds(id), priority INTEGER, globalTid INTEGER);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL,
    end INTEGER,
    eventType INTEGER NOT NULL,
    rangeId INTEGER,
    category INTEGER,
    color INTEGER,
    text TEXT,
    globalTid INTEGER,
    endGlobalTid INTEGER,
    textId INTEGER REFERENCES StringIds(id),
    domainId INTEGER,
    uint64Value INTEGER,
    int64Value INTEGER,
    doubleValue REAL,
    uint32Value INTEGER,
    int32Value INTEGER,
    floatValue REAL,
    jsonTextId INTEGER,
    jsonText TEXT
);
CREATE TABLE NVTX_CFFI_META (key TEXT NOT NULL PRIMARY KEY, value INTEGER);
"""

_PLAIN = ("INSERT INTO NVTX_EVENTS (start, end, eventType, category, color, text, globalTid, domainId)"
          " VALUES (?,?,%d,?,?,?,?,?)")
_ALL = ("INSERT INTO NVTX_EVENTS (start, end, eventType, category, color, text, globalTid, domainId, rangeId,"
        " endGlobalTid) VALUES (?,?,?,?,?,?,?,?,?,?)")
#: NVTX_EVENTS's payload columns (Nsight's: one per NVTX payload type, "<type>Value")
_PAYLOAD_COLUMNS = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value", "floatValue")
_WITH_PAYLOAD = ("INSERT INTO NVTX_EVENTS (start, end, eventType, category, color, text, globalTid, domainId, rangeId,"
                 " endGlobalTid, %s) VALUES (%s)" % (", ".join(_PAYLOAD_COLUMNS), ",".join("?" * (10 + len(_PAYLOAD_COLUMNS)))))
#: rows per multi-row INSERT statement (2 bound values a row: start, end)
_ROWS = 256


def _payload_slot(name: str) -> int:
    """The payload column of value type ``name``: its own, else the widest of its kind."""
    column = f"{name}Value"
    if column not in _PAYLOAD_COLUMNS:
        fmt = _format.PAYLOAD_FORMATS[name]
        column = "doubleValue" if fmt.floating else "uint64Value" if fmt.unsigned else "int64Value"
    return _PAYLOAD_COLUMNS.index(column)


#: payload type code (columns.PT_*) -> its column in _PAYLOAD_COLUMNS (unknown types: the raw bits
#: as uint64Value)
_PAYLOAD_SLOT = {_format.PAYLOAD_CODES[name]: _payload_slot(name) for name in _format.PAYLOAD_FORMATS}
_PAYLOAD_SLOT[_format.lib.NVTXREC_PT_UNKNOWN] = _PAYLOAD_COLUMNS.index("uint64Value")


#: the largest integer an SQLite INTEGER holds (signed 64-bit)
_INT64_MAX = (1 << 63) - 1
#: a row of NVTX_CFFI_COUNTERS: timestamp, globalPid, domain, counterId, name, unit, value, noValue
_INSERT_COUNTER = "INSERT INTO NVTX_CFFI_COUNTERS VALUES (?,?,?,?,?,?,?,?)"


def _uint64_bits(value: Optional[int]) -> Optional[int]:
    """A uint64 (payload, range id) as SQLite can store it: values past 2**63-1 keep their bits, as
    the signed int64 with the same 64 bits (read back with ``value & 0xFFFFFFFFFFFFFFFF``)."""
    if value is not None and value > _INT64_MAX:
        return value - (1 << 64)
    return value


def _payload_columns(ptype: int, raw: int) -> tuple:
    values: List[Any] = [None] * 6
    slot = _PAYLOAD_SLOT.get(ptype)
    if slot is not None:
        v = payload_value(ptype, raw)
        if isinstance(v, float) and v != v:
            v = None  # SQLite has no NaN
        elif slot == 0:
            v = _uint64_bits(v)
        values[slot] = v
    return tuple(values)


def _run_starts(keys: List[Any], n: int) -> Any:
    """Where the runs of consecutive rows (of 0..n-1) with equal ``keys`` (NumPy arrays) begin, but the first."""
    change = _np.zeros(n, dtype=bool)
    for key in keys:
        change[1:] |= key[1:] != key[:-1]
    return _np.flatnonzero(change)


def _runs(keys: List[Any], n: int) -> List[Any]:
    """Rows 0..n-1 in runs of consecutive rows with equal ``keys`` (NumPy arrays), in order."""
    return _np.split(_np.arange(n), _run_starts(keys, n))


def _pick(col: Any, rows: Any, numpy: bool, add: int) -> Any:
    """``col[rows] + add`` (NumPy), or as a list."""
    return col[rows] + add if numpy else [col[j] + add for j in rows]


def _payload_values(slot: int, bits: Any) -> Any:
    """The payloads of one slot (:mod:`.scalars`) as they are bound: integers (a uint64's as the
    int64 of its bits, as :func:`_uint64_bits` does), or floats with NaN as None (SQLite has none)."""
    if slot not in (DOUBLE, FLOAT):
        return bits.view(_np.int64)
    values = bits.view(_np.float64)
    out = values.tolist()
    for j in _np.flatnonzero(_np.isnan(values)).tolist():
        out[j] = None
    return out


def _interleave(columns: List[Any]) -> list:
    """The rows' values one row after another (``columns``: NumPy integer arrays, or lists)."""
    k = len(columns)
    if _np is None:  # (PyPy without NumPy)
        return [v for row in zip(*columns) for v in row]
    numbers = all(hasattr(c, "dtype") for c in columns)
    flat = _np.empty(k * len(columns[0]), dtype=_np.int64 if numbers else object)
    for j, c in enumerate(columns):
        flat[j::k] = c if numbers or not hasattr(c, "tolist") else c.tolist()
    return flat.tolist()


def _counter_constants(pid: int, track: Any) -> Optional[str]:
    """What a counter track's rows of NVTX_CFFI_COUNTERS hold alike, as SQL (globalPid, domain,
    counterId, name, unit); None where a literal would not give what binding gives (a NUL in a
    text, a counter id past SQLite's signed 64 bits)."""
    texts = [track.domain, track.name, track.unit]
    if track.counter_id > _INT64_MAX or any(t is not None and "\0" in t for t in texts):
        return None
    domain, name, unit = ("NULL" if t is None else "'" + t.replace("'", "''") + "'" for t in texts)
    return f"{pid << 24},{domain},{track.counter_id},{name},{unit}"


def global_tid(pid: int, tid: int) -> int:
    """Nsight's thread key: ``pid << 24 | tid``."""
    return (pid << 24) | tid


@register("sqlite", ".sqlite", ".sqlite3", ".db")
class SqliteWriter(TrackCounters):
    """Write NVTX rows into a new SQLite database at ``path`` (an existing file is replaced)."""

    def __init__(self, path: str, start_ns: int) -> None:
        if os.path.exists(path):
            os.remove(path)
        self._db = sqlite3.connect(path, isolation_level=None)
        # One cursor for every statement: each execute resets the one before, so nothing is still
        # "in progress" at COMMIT (PyPy keeps a cursor per db.execute() alive until collected).
        self._cur = self._db.cursor()
        self._cur.execute("PRAGMA journal_mode=OFF")
        self._cur.execute("PRAGMA synchronous=OFF")
        self._cur.executescript(SCHEMA)
        self._cur.execute("BEGIN")
        self._t0 = start_ns
        self.count = 0
        self._domains: Dict[Tuple[int, int], Optional[str]] = {}
        self._categories: Dict[Tuple[int, int, int], str] = {}

    @classmethod
    def open(cls, output: str, recording: Any) -> "SqliteWriter":
        """The writer of the database ``output`` (created or replaced) for ``recording``."""
        return cls(output, recording.start_ns or 0)

    def _note_names(self, pb: Any, doms: List[int], cats: List[Tuple[int, int]]) -> None:
        pid = pb.pid
        for d in set(doms):
            if d and (pid, d) not in self._domains:
                self._domains[(pid, d)] = pb.domain_name(d)
        for d, c in set(cats):
            if c and (pid, d, c) not in self._categories:
                self._categories[(pid, d, c)] = pb.category_name(d, c)

    def batch(self, pb: Any) -> None:
        """Insert a :class:`~.pairing.PairedBatch`'s ranges and marks."""
        pid = pb.pid
        t0 = self._t0
        for cols, event_type in ((pb.ranges, PUSH_POP), (pb.asyncs, START_END), (pb.marks, MARK)):
            n = len(cols)
            if not n:
                continue
            if not pb.unterminated and self._blocks(pb, cols, event_type):
                self.count += n
                continue
            time_col = "time" if event_type == MARK else "start"
            numpy = hasattr(getattr(cols, time_col), "dtype")
            if numpy:
                uniq, inverse = _np.unique(_np.asarray(cols.text, dtype=_np.int64), return_inverse=True)
                texts = _np.array([pb.text(i) for i in uniq.tolist()] + [None], dtype=object)[:-1][
                    inverse.reshape(-1)].tolist()
                start = (getattr(cols, time_col) - t0).tolist()
                end = (cols.end - t0).tolist() if event_type != MARK else [None] * n
                gtid = ((cols.tid.astype(_np.int64) + (pid << 24))).tolist()
                category = _np.where(cols.category != 0, cols.category.astype(_np.int64), -1).tolist()
                color = _np.where(cols.has_color != 0, cols.color.astype(_np.int64), -1).tolist()
                dom, cat, ptype = cols.domain.tolist(), cols.category.tolist(), cols.ptype.tolist()
            else:
                texts = [pb.text(i) for i in cols.text]
                start = [t - t0 for t in getattr(cols, time_col)]
                end = [t - t0 for t in cols.end] if event_type != MARK else [None] * n
                gtid = [(pid << 24) | t for t in cols.tid]
                category = [c if c else -1 for c in cols.category]
                color = [c if h else -1 for c, h in zip(cols.color, cols.has_color)]
                dom, cat, ptype = list(cols.domain), list(cols.category), list(cols.ptype)
            if pb.unterminated:
                end = [None] * n  # its end is not known
            self._note_names(pb, dom, list(zip(dom, cat)))
            # -1 stands for NULL above (NumPy columns cannot hold None)
            category = [c if c >= 0 else None for c in category]
            color = [c if c >= 0 else None for c in color]
            payloads = any(ptype)
            if event_type == START_END or payloads:
                rid: List[Any] = ([_uint64_bits(r) for r in cols.lists("range_id")[0]] if event_type == START_END
                                  else [None] * n)
                end_gtid: List[Any] = ([(pid << 24) | t for t in cols.lists("end_tid")[0]]
                                       if event_type == START_END else [None] * n)
                rows = zip(start, end, [event_type] * n, category, color, texts, gtid, dom, rid, end_gtid)
                if payloads:
                    raw = cols.lists("payload")[0]
                    rows = [row + _payload_columns(pt, v) for row, pt, v in zip(rows, ptype, raw)]
                    self._cur.executemany(_WITH_PAYLOAD, rows)
                else:
                    self._cur.executemany(_ALL, rows)
            else:  # the common case, fewest bound values (binding is most of the cost)
                self._cur.executemany(_PLAIN % event_type, zip(start, end, category, color, texts, gtid, dom))
            self.count += n

    def _blocks(self, pb: Any, cols: Any, event_type: int) -> bool:
        """Rows that differ only in their times and payload values, inserted together: multi-row
        ``VALUES`` statements binding only these (binding is most of the cost). Rows without
        payload go in groups of everything else alike; rows with payloads (NumPy), and start/end
        ranges (NumPy: their range ids and end threads bound too), in runs of consecutive rows
        alike, the order they are inserted in one by one. False (nothing inserted) for too many
        groups (or runs), and for payloads or start/end ranges without NumPy."""
        numpy = hasattr(cols.tid, "dtype")
        n = len(cols)
        keys = [cols.text, cols.domain, cols.category, cols.color, cols.has_color, cols.tid]
        rows = _np.arange(n) if numpy else list(range(n))
        slot = bits = None
        if not numpy and event_type == START_END:
            return False
        if _np.any(cols.ptype != 0) if numpy else any(cols.ptype):
            if not numpy:
                return False
            slot, bits = scalar_payloads(cols.ptype, cols.payload)
            groups = _runs([*keys, slot], n)
        elif event_type == START_END:
            groups = _runs(keys, n)
        else:
            groups = group_rows(keys, rows, numpy)
        if len(groups) * 64 > n:
            return False
        time_col = cols.time if event_type == MARK else cols.start
        statements = []
        for group in groups:
            i = int(group[0])
            text = pb.text(int(cols.text[i]))
            if "\0" in text:
                return False
            d, c = int(cols.domain[i]), int(cols.category[i])
            self._note_names(pb, [d], [(d, c)])
            color = int(cols.color[i]) if cols.has_color[i] else None
            gtid = (pb.pid << 24) | int(cols.tid[i])
            constants = ",".join([str(event_type), str(c) if c else "NULL", "NULL" if color is None else str(color),
                                  "'" + text.replace("'", "''") + "'", str(gtid), str(d)])
            bound = [_pick(time_col, group, numpy, -self._t0)]
            if event_type != MARK:
                bound.append(_pick(cols.end, group, numpy, -self._t0))
            if event_type == START_END:  # (a range id past 2**63-1: the int64 of its bits, as _uint64_bits)
                bound += [cols.range_id[group].astype(_np.uint64).view(_np.int64),
                          cols.end_tid[group].astype(_np.int64) | (pb.pid << 24)]
            column = SLOT_NAMES[slot[i]] if slot is not None and slot[i] >= 0 else None
            if column is not None:
                bound.append(_payload_values(int(slot[i]), bits[group]))
            statements.append((constants, column, len(bound), _interleave(bound)))
        end = "?" if event_type != MARK else "NULL"
        ids, id_values = (", rangeId, endGlobalTid", ",?,?") if event_type == START_END else ("", "")
        for constants, column, per, values in statements:
            self._insert_rows(f"INSERT INTO NVTX_EVENTS (start, end, eventType, category, color, text, globalTid, "
                              f"domainId{ids}{', ' + column if column else ''}) VALUES ",
                              f"(?,{end},{constants}{id_values}{',?' if column else ''})", per, values)
        return True

    def _insert_rows(self, insert: str, row: str, per: int, values: list) -> None:
        """Rows of ``per`` values each (``values``: one row's after another), by multi-row ``insert
        ... VALUES row,row,...`` statements of up to _ROWS rows."""
        chunk = per * _ROWS
        full = len(values) // chunk * chunk
        if full:
            self._cur.executemany(insert + ",".join([row] * _ROWS), [values[k:k + chunk] for k in range(0, full, chunk)])
        rest = values[full:]
        if rest:
            self._cur.execute(insert + ",".join([row] * (len(rest) // per)), rest)

    def counter(self, pid: int, name: str, unit: Optional[str], time_ns: int, value: Optional[float],
                track: Any = None, no_value: Optional[str] = None) -> None:
        """Counter samples have no table in Nsight's NVTX export: kept in ``NVTX_CFFI_COUNTERS``
        (see the module's doc): a row per sample of a track, (globalPid, domain, counterId) its counter."""
        self._counter_table()
        # a REAL column: bound as a float, which an int past SQLite's signed 64 bits (a uint64
        # counter's sample) can be, too; NaN and a gap are NULL (SQLite has no NaN), infinities stay
        if track is not None:
            domain, counter_id, name = track.domain, track.counter_id, track.name
        else:
            domain = counter_id = None
        number = None if value is None or value != value else float(value)
        self._cur.execute(_INSERT_COUNTER, (time_ns - self._t0, pid << 24, domain, counter_id, name, unit, number,
                                            no_value))
        self.count += 1

    def samples(self, block: Any) -> None:
        """:meth:`counter` of each sample of a :class:`~.counters.SampleBlock`, the same rows: runs of
        one counter's samples (a row per field: the same tracks in turn) by multi-row statements
        binding only their times and values (binding is most of the cost), or, short runs, all of them
        by one statement binding every column."""
        self._counter_table()
        np = _np
        n = len(block)
        numbers = block.numbers()
        times = (block.time - self._t0).tolist()
        values = [None if v != v else v for v in numbers.tolist()]  # (NaN and a gap: NULL)
        no_value = block.no_value_kinds()
        if block.first is None:  # a row a sample
            lead, width = block.track, np.ones(n, dtype=np.int64)
        else:  # each row's sample: the track of its first row, and its rows
            first_rows = np.flatnonzero(block.first)
            sizes = np.diff(np.append(first_rows, n))
            lead, width = np.repeat(block.track[first_rows], sizes), np.repeat(sizes, sizes)
        starts = _run_starts([lead, width] if block.no_value is None else [lead, width, block.no_value], n).tolist()
        constants = [_counter_constants(block.pid, track) for track in block.tracks]
        if (len(starts) + 1) * 64 > n or None in constants:
            tracks = [(t.domain, t.counter_id, t.name, t.unit) for t in block.tracks]
            columns = zip(*[tracks[k] for k in block.track.tolist()])
            self._cur.executemany(_INSERT_COUNTER, zip(times, itertools.repeat(block.pid << 24), *columns, values,
                                                       no_value))
        else:
            for at, end in zip([0] + starts, starts + [n]):
                reason = "NULL" if no_value[at] is None else f"'{no_value[at]}'"
                fields = [int(k) for k in block.track[at:at + int(width[at])]]  # (one sample's tracks)
                self._insert_rows("INSERT INTO NVTX_CFFI_COUNTERS VALUES ",
                                  ",".join(f"(?,{constants[k]},?,{reason})" for k in fields), 2 * len(fields),
                                  [v for pair in zip(times[at:end], values[at:end]) for v in pair])
        self.count += n

    def _counter_table(self) -> None:
        self._cur.execute("CREATE TABLE IF NOT EXISTS NVTX_CFFI_COUNTERS (timestamp INTEGER, globalPid INTEGER,"
                         " domain TEXT, counterId INTEGER, name TEXT, unit TEXT, value REAL, noValue TEXT)")

    def finish(self, timeline: Timeline, extra_metadata: Optional[Dict[str, Any]] = None) -> int:
        """Names (domains, categories, threads), metadata, indexes; commit. Returns the rows of events."""
        db = self._cur
        db.executemany("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid, domainId) VALUES (0,?,?,?,?)",
                       [(DOMAIN_CREATE, name or "", pid << 24 | pid, d)
                        for (pid, d), name in sorted(self._domains.items())])
        db.executemany("INSERT INTO NVTX_EVENTS (start, eventType, category, text, globalTid, domainId) "
                       "VALUES (0,?,?,?,?,?)",
                       [(CATEGORY_NAME, c, name, pid << 24 | pid, d)
                        for (pid, d, c), name in sorted(self._categories.items()) if name != str(c)])
        names = sorted(timeline.thread_names.items())
        db.executemany("INSERT INTO StringIds (id, value) VALUES (?,?)",
                       [(i + 1, name) for i, (_key, name) in enumerate(names)])
        db.executemany("INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?,?,?)",
                       [(i + 1, None, global_tid(pid, tid)) for i, ((pid, tid), _name) in enumerate(names)])
        db.executemany("INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid) VALUES (0,?,?,?)",
                       [(THREAD_NAME, name, global_tid(pid, tid)) for (pid, tid), name in names])
        meta = {"t0_ns": self._t0, "events_recorded": timeline.event_count, "dropped_events": timeline.dropped,
                "unmatched_pops": timeline.unmatched_pops, "unmatched_ends": timeline.unmatched_ends,
                "unterminated_ranges": timeline.unterminated}
        # a count past 2**63-1 only comes from a corrupt record file header (the dropped count is a
        # uint64 there, summed over the files): stored as the largest INTEGER, "at least this many"
        db.executemany("INSERT INTO NVTX_CFFI_META (key, value) VALUES (?,?)",
                       [(key, min(value, _INT64_MAX)) for key, value in sorted(meta.items())])
        # one index, on what every NVTX query filters by (each index costs ~0.3 s per 1e6 rows); a
        # 16 MiB page cache for its sort (SQLite's default 2 MB spills it: 1e7 rows take 3.9 s, not 3.1)
        db.execute("PRAGMA cache_size=-16384")
        db.execute("CREATE INDEX NVTX_EVENTS_eventType ON NVTX_EVENTS (eventType)")
        db.close()
        self._db.execute("COMMIT").close()
        return self.count

    def close(self) -> None:
        self._db.close()
