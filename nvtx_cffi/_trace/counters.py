"""Counters and binary payloads in the tracer: the conversion's decode step
(:class:`BatchExtDecoder`) reads the recorder's payload-extension records (:mod:`nvtx_cffi.ext_records`)
on the way from the recording to the pairing and the writers.

* counter samples go to every writer (``sample(sample, tracks)``, :mod:`.writers`): the trace
  writers write an event per track (Chrome ``"C"`` events: Perfetto draws a track per counter, one
  per field of a counter group), ``--stats`` a row per track in its counter table (samples, min,
  max, mean, last — the latest in time —, unit, and the no-value and NaN samples) and ``--png``
  lines. A track is one counter of one process: (process, domain, counter id), titled
  ``"domain: name"`` (:class:`CounterTrack`);
* a push/start/mark's binary payload is decoded by its schema and kept in the conversion's
  :class:`ExtPayloads`, under a key that stands in the row's payload column (``args.payload`` in
  the JSON).

Samples of counters whose samples decode to numbers (a scalar counter of any dtype, float16 included,
or a group of scalar fields) take the compiled path where the CFFI module has its helpers
(:func:`compiled`): the reader hands them on as columns (``recorder.blocks(samples=True)``: samples of
up to 64 bytes), ``batch_submit`` records are unpacked into such rows, the decoder turns each run of
them into a :class:`SampleBlock` (no object a sample: a row per field, ``sample_no_value`` samples as
0, the values held or gaps) and the writers take a block at once (``samples(block)``, :mod:`.writers`).
The others go one by one, in their place among them: counters of arrays, strings or nested schemas,
samples the recorder cut, batches of timestamps not on the trace's clock or cut at the recorder's bound.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import struct
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .. import _bulk
from ..ext_records import _BATCH_CUT, _MONOTONIC_DOMAINS as _TRACE_CLOCK_DOMAINS
from ..ext_records import CounterInfo, CounterSample, ExtDecoder, decode_pending, time_domain_name
from ..recorder import _SAMPLE_DATA_MAX, _np_joined_rows, _sample_fields
from .columns import BATCH_EVENTS, MARK, PT_EXT, PUSH, START

__all__ = ["CounterStats", "CounterTrack", "ExtPayloads", "BatchExtDecoder", "SampleBlock", "compiled",
           "counter_series", "counter_tracks", "json_safe", "SIGNED", "UNSIGNED", "FLOATING"]


NO_VALUE_KINDS = {0: "zero", 1: "unchanged", 2: "unavailable"}


def json_safe(value: Any, _depth: int = 0) -> Any:
    """A decoded payload as JSON values: bytes as text (UTF-8, else hex); NaN and infinities as the
    strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (strict JSON has none), at any depth, as the
    writers spell a scalar payload or a counter sample's."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if _depth > 16:
        return None
    if isinstance(value, list):
        return [json_safe(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v, _depth + 1) for k, v in value.items()}
    return value


class CounterTrack(NamedTuple):
    """One series of one counter of one process: a counter track in the trace."""

    pid: int
    domain: Optional[str]
    counter_id: int
    name: str
    """The counter's name (``"group.field"`` for a group's field, ``" [scope]"`` appended), without the domain."""
    title: str
    """The track's name: ``"domain: name"`` (``name`` in the default domain), unique within the process
    (counters named alike get their value type or id added: ``"A: loss (int64)"``)."""
    unit: Optional[str]


def _scope_and_title(info: CounterInfo) -> Tuple[str, str]:
    """What a counter's tracks are named by: its scope (``" [scope]"``, or nothing) and its title."""
    scope = f" [{info.scope}]" if info.scope else ""
    return scope, info.title or (info.name if info.domain is None else f"{info.domain}: {info.name}")


def counter_tracks(sample: CounterSample) -> Iterator[Tuple[CounterTrack, Optional[float]]]:
    """(track, value) per numeric field of a sample: a scalar counter is one track; a group's fields
    are ``"group.field"``. The value is None for a gap: a ``sample_no_value(UNAVAILABLE)`` sample,
    or UNCHANGED before the counter had a value."""
    info = sample.counter
    scope, title = _scope_and_title(info)
    single = list(sample.values) == ["value"]
    gap = sample.no_value is not None
    for field, value in sample.values.items():
        if value is None and gap:
            pass
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name, shown = (info.name, title) if single else (f"{info.name}.{field}", f"{title}.{field}")
        yield CounterTrack(sample.pid, info.domain, info.id, name + scope, shown + scope,
                           sample.units.get(field)), value


def counter_series(sample: CounterSample) -> Iterator[Tuple[str, Optional[str], Optional[float]]]:
    """(track title, unit, value) per numeric field of a sample (see :func:`counter_tracks`)."""
    for track, value in counter_tracks(sample):
        yield track.title, track.unit, value


#: How the 64 bits of a :class:`SampleBlock` value read (its ``kind``): a signed integer, an unsigned
#: one (the modes 1 and 2 of :meth:`~nvtx_cffi._fixedwidth.TextRows.number`), an IEEE double.
SIGNED, UNSIGNED, FLOATING = 1, 2, 3


class SampleBlock:
    """Counter samples of one process, as columns, in the order they are handed on: what
    :class:`BatchExtDecoder` decodes in bulk. A row is one track's value of a sample: a scalar
    counter's sample is one row, a group's a row per field (consecutive, in the fields' order).

    Columns (NumPy arrays): ``tid``, ``time`` (ns), ``track`` (an index into ``tracks``, the
    :class:`CounterTrack` of each counter field that has samples here, ``counters``, its counter's
    :class:`~nvtx_cffi.ext_records.CounterInfo`, ``fields``, its field's name in the samples'
    values, and ``units``, its samples' units by field), ``kind`` (:data:`SIGNED`, :data:`UNSIGNED`
    or :data:`FLOATING`) and ``bits`` (the value's 64 bits). Where some rows are not one whole
    sample with a value: ``gap`` (True: no value, a gap), ``no_value`` (a ``sample_no_value``
    sample's reason, -1 for a sample with a value) and ``first`` (True where a sample's rows begin);
    None where every row is a sample with a value. A writer takes a block at once (``samples(block)``)
    or a sample at a time (:meth:`each`).
    """

    __slots__ = ("pid", "tid", "time", "track", "kind", "bits", "tracks", "counters", "units", "fields", "gap",
                 "no_value", "first", "sample_count")

    def __init__(self, pid: int, tid: Any, time: Any, track: Any, kind: Any, bits: Any, tracks: List[CounterTrack],
                 counters: List[CounterInfo], units: List[Dict[str, Optional[str]]], fields: List[str],
                 gap: Any = None, no_value: Any = None, first: Any = None) -> None:
        self.pid = pid
        self.tid = tid
        self.time = time
        self.track = track
        self.kind = kind
        self.bits = bits
        self.tracks = tracks
        self.counters = counters
        self.units = units
        self.fields = fields
        self.gap = gap
        self.no_value = no_value
        self.first = first
        #: the samples the rows are of
        self.sample_count = len(time) if first is None else int(first.sum())

    def __len__(self) -> int:
        return len(self.time)

    def numbers(self) -> Any:
        """The values as float64 (``float(value)``; a uint64 past 2**53 rounded as Python rounds it;
        a gap's: NaN)."""
        import numpy as np

        bits, kind = self.bits, self.kind
        out = np.where(kind == SIGNED, bits.view(np.int64).astype(np.float64),
                       np.where(kind == UNSIGNED, bits.astype(np.float64), bits.view(np.float64)))
        if self.gap is not None:
            out[self.gap] = np.nan
        return out

    def values(self, rows: Any = None) -> List[Union[int, float, None]]:
        """The values (of ``rows``; all by default) as the Python numbers their counters' samples
        decode to: ints and floats (None: a gap)."""
        import numpy as np

        bits, kinds = (self.bits, self.kind) if rows is None else (self.bits[rows], self.kind[rows])
        out = bits.astype(object)  # (uint64: the unsigned ones as they are)
        for kind, view in ((SIGNED, np.int64), (FLOATING, np.float64)):
            at = np.flatnonzero(kinds == kind)
            if len(at):
                out[at] = bits[at].view(view).astype(object)
        if self.gap is not None:
            out[self.gap if rows is None else self.gap[rows]] = None
        return out.tolist()

    def no_value_kinds(self) -> List[Optional[str]]:
        """Each row's ``sample_no_value`` reason by name (``"zero"``, ``"unchanged"``,
        ``"unavailable"``; None for a sample with a value)."""
        if self.no_value is None:
            return [None] * len(self)
        return [NO_VALUE_KINDS.get(k) for k in self.no_value.tolist()]

    def typed(self, rows: Any) -> Any:
        """The values of ``rows`` (of one track, no gaps: a counter's values are of one kind) as an
        int64, uint64 or float64 array."""
        import numpy as np

        bits = self.bits[rows]
        kind = int(self.kind[rows[0]])
        return bits.view(np.int64) if kind == SIGNED else bits.view(np.float64) if kind == FLOATING else bits

    def each(self) -> Iterator[Tuple[CounterSample, List[Tuple[CounterTrack, Optional[float]]]]]:
        """Each sample as a :class:`~nvtx_cffi.ext_records.CounterSample` and its (track, value), one
        at a time (what a writer without ``samples(block)`` takes)."""
        import numpy as np

        n = len(self)
        starts = np.arange(n) if self.first is None else np.flatnonzero(self.first)
        reasons = [-1] * n if self.no_value is None else self.no_value.tolist()
        values, track = self.values(), self.track.tolist()
        for at, end, tid, time_ns in zip(starts.tolist(), starts[1:].tolist() + [n], self.tid[starts].tolist(),
                                         self.time[starts].tolist()):
            k = track[at]
            info, rows = self.counters[k], range(at, end)
            sample = CounterSample(pid=self.pid, tid=tid, time_ns=time_ns, counter=info,
                                   values={self.fields[track[i]]: values[i] for i in rows},
                                   no_value=None if reasons[at] < 0 else reasons[at], units=self.units[k])
            yield sample, [(self.tracks[track[i]], values[i]) for i in rows]


_NATIVE: List[Any] = []


def compiled() -> bool:
    """Whether counter samples take the compiled path (:class:`SampleBlock`): NumPy and the CFFI
    module's C helpers for them (c/shim/trace_decode.c) are there."""
    try:
        import numpy  # noqa: F401
    except ImportError:  # pragma: no cover - PyPy
        return False
    return _bulk.helper(_NATIVE, "nvtxcffi_pftrace_counters") is not None


class CounterStats:
    """The ``--stats`` counter table: a row per counter track: (process, domain, counter id, field).

    Samples counts every sample of the track; Min, Max, Mean and Last (the latest in time) go over
    its numbers: values given, ZERO as 0, UNCHANGED as the value held; NaN (not a number) and gaps
    (UNAVAILABLE) are left out of them. Columns Zero, Unchanged, Unavailable and NaN count those
    samples, shown when any track has some.
    """

    def __init__(self) -> None:
        self._rows: Dict[Tuple[int, Optional[str], int, str], List[Any]] = {}
        self.truncated = 0  # samples the recorder cut at its record bound (noted below the table)
        self.batches_cut = 0  # batches whose samples past the recorder's bound were left out (noted too)
        #: batch samples left out: their time domain could not be placed on the trace's clock
        self.unmapped: Dict[Tuple[int, str, int], int] = {}

    def add(self, sample: CounterSample) -> None:
        time_ns = sample.time_ns
        if sample.truncated:
            self.truncated += 1
        if sample.batch_cut:
            self.batches_cut += 1
        kind = sample.no_value
        for track, value in counter_tracks(sample):
            key = (track.pid, track.domain, track.counter_id, track.name)
            row = self._rows.get(key)
            if row is None:
                # samples, numbers, min, max, sum, last, last time, unit, title, zero, unchanged, unavailable, nan
                row = self._rows[key] = [0, 0, None, None, 0.0, None, None, track.unit, track.title, 0, 0, 0, 0]
            row[0] += 1
            if kind is not None and kind in (0, 1, 2):
                row[9 + kind] += 1
            if value is None:
                continue
            if value != value:  # NaN: not a number, left out of the numbers
                row[12] += 1
                continue
            row[1] += 1
            row[2] = value if row[2] is None else min(row[2], value)
            row[3] = value if row[3] is None else max(row[3], value)
            row[4] += value
            # "last" is the latest in time: samples come in file order, per thread and batch
            # (batch_submit gives each sample its own time), not in time order
            if row[6] is None or time_ns >= row[6]:
                row[5], row[6] = value, time_ns

    def add_block(self, block: SampleBlock) -> None:
        """:meth:`add` of each sample of ``block``, a track at a time (NumPy): the same rows."""
        import numpy as np

        order = np.argsort(block.track, kind="stable")  # each track's rows, in order
        for rows in np.split(order, np.flatnonzero(np.diff(block.track[order])) + 1):
            if not len(rows):
                continue
            track = block.tracks[int(block.track[rows[0]])]
            key = (track.pid, track.domain, track.counter_id, track.name)
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = [0, 0, None, None, 0.0, None, None, track.unit, track.title, 0, 0, 0, 0]
            row[0] += len(rows)
            if block.no_value is not None:
                reasons = np.bincount(block.no_value[rows] + 1, minlength=4)  # (-1: a sample with a value)
                for kind in (0, 1, 2):
                    row[9 + kind] += int(reasons[kind + 1])
            if block.gap is not None:  # a gap: no number
                rows = rows[~block.gap[rows]]
                if not len(rows):
                    continue
            values = block.typed(rows)
            if values.dtype.kind == "f":
                number = values == values  # NaN: not a number, left out of the numbers
                row[12] += len(rows) - int(np.count_nonzero(number))
                rows, values = rows[number], values[number]
                if not len(rows):
                    continue
            row[1] += len(rows)
            # min() and max() keep the value held on a tie: the first of the least (greatest) one
            low = values[int(np.flatnonzero(values == values.min())[0])].item()
            high = values[int(np.flatnonzero(values == values.max())[0])].item()
            row[2] = low if row[2] is None or low < row[2] else row[2]
            row[3] = high if row[3] is None or high > row[3] else row[3]
            with np.errstate(all="ignore"):  # (inf - inf: NaN, as Python's float adds it)
                sums = np.add.accumulate(np.concatenate(([row[4]], values.astype(np.float64))))  # in order, as +=
            row[4] = float(sums[-1])
            times = block.time[rows]
            latest = int(times.max())
            if row[6] is None or latest >= row[6]:  # the last of the latest
                row[5], row[6] = values[int(np.flatnonzero(times == latest)[-1])].item(), latest

    def __len__(self) -> int:
        return len(self._rows)

    def __bool__(self) -> bool:  # something to print: rows, or the notes on cut samples and batches
        return bool(self._rows) or bool(self.truncated) or bool(self.batches_cut) or bool(self.unmapped)

    def rows(self) -> List[Dict[str, Any]]:
        out = []
        for (pid, d, cid, n), r in self._rows.items():
            out.append({"pid": pid, "domain": d, "counter_id": cid, "counter": n, "title": r[8], "samples": r[0],
                        "min": r[2], "max": r[3], "mean": r[4] / r[1] if r[1] else None, "last": r[5],
                        "unit": r[7], "zero": r[9], "unchanged": r[10], "unavailable": r[11], "nan": r[12]})
        out.sort(key=lambda r: (r["domain"] or "", r["counter"], r["title"], r["pid"]))
        return out

    def format(self) -> str:
        rows = self.rows()
        note = (f"note: {self.truncated} counter sample(s) were cut at the recorder's 64 KiB record bound: "
                "their fields past the cut are missing above.\n") if self.truncated else ""
        if self.batches_cut:
            note += (f"note: {self.batches_cut} batch_submit() call(s) passed more than the recorder's 1 MiB of "
                     "values per batch: their samples past it were not recorded and are missing above.\n")
        for (pid, title, time_domain), count in sorted(self.unmapped.items()):
            note += (f"note: {count} batch sample(s) of counter {title!r} (process {pid}) were left out: their "
                     f"time domain {time_domain_name(time_domain)} cannot be placed on the trace's clock.\n")
        if not rows:
            return note

        def num(v: Any) -> str:
            if v is None:
                return "-"
            return f"{v:.6g}" if isinstance(v, float) else str(v)

        pids = {r["pid"] for r in rows}
        extra = [(name, key) for name, key in (("Zero", "zero"), ("Unchanged", "unchanged"),
                                               ("Unavailable", "unavailable"), ("NaN", "nan"))
                 if any(r[key] for r in rows)]
        head = ["Samples", "Min", "Max", "Mean", "Last"] + [name for name, _ in extra]
        table = [tuple(head + ["Unit", "Counter"])]
        for r in rows:
            label = r["title"] if len(pids) == 1 else f"{r['title']} (process {r['pid']})"
            table.append(tuple([str(r["samples"]), num(r["min"]), num(r["max"]), num(r["mean"]), num(r["last"])]
                               + [str(r[key]) for _, key in extra] + [r["unit"] or "-", label]))
        cols = len(table[0])
        widths = [max(len(row[i]) for row in table) for i in range(cols)]
        lines = [f"NVTX counter summary: {len(rows)} counter track(s)", ""]
        for k, row in enumerate(table):
            cells = [row[i].rjust(widths[i]) for i in range(cols - 2)] + [row[-2].ljust(widths[-2]), row[-1]]
            lines.append("  ".join(cells).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines) + "\n" + ("\n" + note if note else "")


#: Decoded binary payloads an :class:`ExtPayloads` keeps: a value stays for the next this many binary
#: payloads: long enough for the writers, up to three batches behind the reader thread, and for its
#: range to end.
EXT_PAYLOADS_MAX = 4 * BATCH_EVENTS


class ExtPayloads:
    """The decoded binary payloads (payload extension) of one conversion, by the key that stands in
    the payload column of their rows (``ptype`` :data:`~.columns.PT_EXT`): what
    :class:`BatchExtDecoder` decodes, the writers look up (:meth:`.pairing.PairedBatch.ext_payload`).
    Bounded: the oldest value goes past :data:`EXT_PAYLOADS_MAX`.

    >>> store = ExtPayloads(); key = store.add([1, 2])
    >>> store.get(key), store.get(key + 1)
    ([1, 2], None)
    """

    def __init__(self) -> None:
        self._values: Dict[int, Any] = {}
        #: the keys of the payloads added together (add_many), in order: (first, end) a run (one
        #: list: the writers' thread reads it while the decoder's changes it)
        self._runs: List[Tuple[int, int]] = []
        self._last_key = 0

    def add(self, value: Any, truncated: bool = False) -> int:
        """Keep a decoded (JSON-ready) payload; returns its key (never 0)."""
        self._last_key += 1
        key = self._last_key
        values = self._values
        values[key] = {"value": value, "truncated": True} if truncated else value
        if len(values) > EXT_PAYLOADS_MAX:
            del values[next(iter(values))]
            if self._runs:
                self._forget_runs()
        return key

    def add_many(self, values: List[List[Any]]) -> int:
        """Keep decoded (JSON-ready) payloads, none truncated, each a list of numbers, strings
        ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, lists and dicts of them by keys without brackets,
        whose JSON text :meth:`texts` writes at once; returns the first one's key, the others' follow."""
        first = self._last_key + 1
        self._last_key += len(values)
        self._values.update(zip(range(first, self._last_key + 1), values))
        self._runs.append((first, self._last_key + 1))
        over = len(self._values) - EXT_PAYLOADS_MAX
        if over > 0:
            for key in list(itertools.islice(self._values, over)):
                del self._values[key]
            self._forget_runs()
        return first

    def _forget_runs(self) -> None:
        """Let the runs whose payloads all went go."""
        oldest = next(iter(self._values), self._last_key + 1)
        while self._runs and self._runs[0][1] <= oldest:
            del self._runs[0]

    def get(self, raw: int) -> Any:
        """The payload kept under ``raw`` (None when unknown or evicted)."""
        return self._values.get(int(raw))

    def texts(self, raws: List[int]) -> List[Optional[str]]:
        """The JSON text of each payload kept under ``raws`` (what :func:`~.chrome.json_value` writes
        of it) that was added with others (:meth:`add_many`), written at once; None for the others."""
        out: List[Optional[str]] = [None] * len(raws)
        if not self._runs:
            return out
        runs, values = self._runs, self._values
        at, found = [], []
        for i, key in enumerate(raws):
            run = bisect.bisect_right(runs, (key, _PAST_KEYS)) - 1
            value = values.get(key) if run >= 0 and key < runs[run][1] else None
            if value is not None:
                at.append(i)
                found.append(value)
        for i, text in zip(at, _json_texts(found) if found else ()):
            out[i] = text
        return out


#: past every key (ExtPayloads.texts: the run a key is in)
_PAST_KEYS = float("inf")

_ROW_KINDS = frozenset((PUSH, START, MARK))


class BatchExtDecoder:
    """The conversion's decode step: counters and binary payloads of its batches (:mod:`.columns`), in
    file order.

    :meth:`feed` takes each :class:`~.columns.RecordBatch` before it is paired (:meth:`decoded`: a
    stream of them): its blobs go through one :class:`ExtDecoder` (per-process state across
    batches), counter samples to ``on_sample``; the payload column of each push/start/mark with a
    binary payload becomes the key under which ``payloads`` (an :class:`ExtPayloads`) holds the
    decoded value (JSON-ready) for the writers.
    """

    def __init__(self, payloads: ExtPayloads, on_sample: Callable[[CounterSample], None]) -> None:
        self.decoder = ExtDecoder()
        self.payloads = payloads
        self.on_sample = on_sample
        self._images: Dict[int, int] = {}  # pid -> exec generation whose registrations are loaded

    def decoded(self, batches: Iterable[Any]) -> Iterator[Any]:
        """``batches``, each fed as it goes by."""
        for batch in batches:
            self.feed(batch)
            yield batch

    def feed(self, batch: Any) -> None:
        blobs = batch.blobs
        samples = batch.samples
        if not blobs and samples is None:
            return
        info = getattr(batch, "info", None)
        if info is not None and self._images.get(batch.pid) != batch.image:
            # every registration of the image first: decoding does not depend on the chunks' order
            self._images[batch.pid] = batch.image
            self.decoder.preload(info)
        # (thread, time, a row or not, place in the file, index): per thread in time order, a
        # payload's blobs just before its event; a blob's place among the extension records
        columnar = batch.blob_order is not None  # (the reader's sample columns: the compiled path)
        places = batch.blob_order.tolist() if columnar else range(len(blobs))
        items: List[Tuple[int, int, int, int, int]] = []
        batches: List[Tuple[Any, int]] = []  # batch_submit records decoded in bulk: (sample rows, their key's time)
        for j, (blob, place) in enumerate(zip(blobs, places)):
            expanded = None
            if columnar and blob.kind == "counter_sample" and not blob.truncated:
                expanded = self._batch_rows(batch, blob.tid, blob.time_ns, blob.domain, blob.arg, blob.data, place)
            if expanded is None:
                items.append((blob.tid, blob.time_ns, 0, place, j))
            else:
                batches.append(expanded)
        if samples is not None:  # the short batches among the reader's rows
            samples = self._expand_batches(batch, samples, batches)
        if batch.numpy:
            import numpy as np

            rows = np.flatnonzero((batch.ptype == PT_EXT) & ((batch.kind == PUSH) | (batch.kind == START)
                                                              | (batch.kind == MARK)))
            rows = rows.tolist()
        else:
            rows = [i for i, (pt, k) in enumerate(zip(batch.ptype, batch.kind)) if pt == PT_EXT and k in _ROW_KINDS]
        for i in rows:
            items.append((int(batch.tid[i]), int(batch.time[i]), 1, i, i))
        items.sort()
        # payloads that decode to a list of numbers, by (layout, size): decoded at once at the end
        arrays: Optional[Dict[Tuple[Any, int], List[Tuple[int, bytes]]]] = {} if batch.numpy else None
        if samples is None and not batches:
            for item in items:
                self._item(batch, item, arrays)
            if arrays:
                self._arrays(batch, arrays)
            return
        # the sample rows in the same order, each run of them between two items decoded at once
        samples, keys = _ordered_rows(samples, batches)
        done = 0
        for item in items:
            before = bisect.bisect_left(keys, item[:4], lo=done)
            if before > done:
                self._samples(batch, samples[done:before])
                done = before
            self._item(batch, item, arrays)
        if done < len(samples):
            self._samples(batch, samples[done:])
        if arrays:
            self._arrays(batch, arrays)

    def _item(self, batch: Any, item: Tuple[int, int, int, int, int],
              arrays: Optional[Dict[Tuple[Any, int], List[Tuple[int, bytes]]]]) -> None:
        """One blob (its counter samples to ``on_sample``), or one row's binary payload (its key to
        the payload column; one that decodes to a list of numbers put in ``arrays`` instead, where
        it is not None, to decode with the others alike)."""
        tid, _t, is_row, _place, j = item
        pid, domains, decoder = batch.pid, batch.domains, self.decoder
        if not is_row:
            blob = batch.blobs[j]
            if hasattr(blob, "name"):  # an Event (the pure-Python source keeps the Event API's)
                samples = decoder.feed(blob)
            else:  # a recorder.Blob: its domain is the file's id
                samples = decoder.blob(blob.kind, pid, blob.tid, blob.time_ns, domains.get(blob.domain), blob.arg,
                                       blob.data, blob.truncated)
            for sample in samples:
                self.on_sample(sample)
            return
        domain = domains.get(int(batch.domain[j]))
        taken = decoder.take_pending(pid, tid, domain)
        if taken is None:
            return
        pending, schemas = taken
        if arrays is not None and len(pending) == 1 and not pending[0][2]:
            sid, data, _truncated = pending[0]
            layout = decoder.array_layout(pid, domain, sid)
            if layout is not None:
                arrays.setdefault((layout, len(data)), []).append((j, data))
                return
        value, truncated = decode_pending(pending, schemas)
        if value is not None:
            batch.payload[j] = self.payloads.add(json_safe(value), truncated)

    def _arrays(self, batch: Any, arrays: Dict[Tuple[Any, int], List[Tuple[int, bytes]]]) -> None:
        """The payloads of ``arrays`` (rows and data by :func:`~nvtx_cffi.ext_records.array_layout` and
        size) decoded a group at a time (NumPy), as :func:`~nvtx_cffi.ext_records.decode` and
        :func:`json_safe` make them, and kept with their JSON text; their keys to the payload column."""
        import numpy as np

        for ((count_fmt, start, item, fields), size), found in arrays.items():
            data = np.frombuffer(b"".join(d for _j, d in found), dtype=np.uint8).reshape(len(found), size)
            rows = np.array([j for j, _d in found], dtype=np.int64)
            if size < start:  # (no count: none)
                counts = np.zeros(len(found), dtype=np.int64)
            else:
                counts = np.clip(data[:, :start].copy().view("<" + count_fmt)[:, 0], 0, (size - start) // item)
            element = np.dtype({"names": [f"f{k}" for k in range(len(fields))],
                                "formats": [("<" + fmt, (n,)) if n else "<" + fmt for _key, _off, fmt, n in fields],
                                "offsets": [offset for _key, offset, _fmt, _n in fields], "itemsize": item})
            for count in np.unique(counts).tolist():
                at = np.flatnonzero(counts == count)
                numbers = data[at if len(at) < len(found) else slice(None), start:start + count * item]
                try:
                    elements = numbers.view(element)
                except ValueError:  # (NumPy before 1.23 views contiguous arrays only)
                    elements = numbers.copy().view(element)
                values = _json_rows(np, elements, [key for key, _off, _fmt, _n in fields])
                first = self.payloads.add_many(values)
                batch.payload[rows[at]] = np.arange(first, first + len(at), dtype=np.uint64)

    def _expand_batches(self, batch: Any, samples: Any, batches: List[Tuple[Any, int]]) -> Any:
        """The reader's sample rows ``samples`` less the ``batch_submit`` records among them that
        decode in bulk, whose samples go to ``batches`` (:meth:`_batch_rows`); None where none are left."""
        import numpy as np

        at = np.flatnonzero(samples["data"][:, 0] == _MODE_BATCH)
        if not len(at):
            return samples
        keep = np.ones(len(samples), dtype=bool)
        for i in at.tolist():
            row = samples[i]
            expanded = self._batch_rows(batch, int(row["tid"]), int(row["time_ns"]), int(row["domain"]),
                                        int(row["counter"]), row["data"][:row["size"]].tobytes(), int(row["order"]))
            if expanded is not None:
                batches.append(expanded)
                keep[i] = False
        return samples[keep] if keep.any() else None

    def _batch_rows(self, batch: Any, tid: int, time_ns: int, domain: int, counter: int, data: bytes,
                    place: int) -> Optional[Tuple[Any, int]]:
        """The samples of a ``batch_submit`` record (not cut; ``place``: its place among the extension
        records) as sample rows of the reader's columns, each with its own time and its value after
        a sample() head, and the time the record is ordered by; None where they do not decode in bulk:
        a counter whose samples are not numbers only (:meth:`~nvtx_cffi.ext_records.ExtDecoder.field_layout`),
        timestamps not on the trace's clock, a value past the columns' width, a batch cut short."""
        if len(data) < _SAMPLE_HEAD:
            return None
        mode, flags, _, item, n = _HEAD.unpack_from(data)
        if (mode != _MODE_BATCH or flags & _BATCH_CUT or not 0 < item <= _VALUE_MAX or not n
                or len(data) < _SAMPLE_HEAD + n * (8 + item)):
            return None
        info = self.decoder.counters.get((batch.pid, batch.domains.get(domain), counter))
        if info is None or info.time_domain not in _TRACE_CLOCK_DOMAINS:
            return None
        layout = self.decoder.field_layout(info, batch.pid)
        if layout is None or _layout_end(layout) > item:
            return None
        import numpy as np

        records = np.frombuffer(data, dtype=[("ts", "<i8"), ("value", "u1", (item,))], count=n, offset=_SAMPLE_HEAD)
        rows = np.zeros(n, dtype=_sample_fields(_SAMPLE_HEAD + (item + 7) // 8 * 8))
        rows["order"] = place
        rows["time_ns"] = records["ts"]
        rows["tid"], rows["domain"], rows["counter"] = tid, domain, counter
        rows["size"] = _SAMPLE_HEAD + item
        rows["data"][:, _SAMPLE_HEAD:_SAMPLE_HEAD + item] = records["value"]  # (mode 0: sample())
        return rows, time_ns

    def _samples(self, batch: Any, s: Any) -> None:
        """The sample rows ``s``, in this order: a :class:`SampleBlock` for each run of rows of counters
        whose samples decode to numbers (a value of the counter's type, by sample() or its int64 or
        float64 variant, or a ``sample_no_value`` of a known reason); the others one by one, as blobs."""
        import numpy as np

        pid, domains = batch.pid, batch.domains
        if int(s["counter"].max()) < 1 << 48:  # (domain ids are 16-bit: one integer a counter)
            found, which = np.unique(s["domain"].astype(np.uint64) << np.uint64(48) | s["counter"],
                                     return_inverse=True)
            counters = [(key >> 48, key & ((1 << 48) - 1)) for key in found.tolist()]
        else:
            counter = np.empty(len(s), dtype=[("domain", "<u4"), ("counter", "<u8")])
            counter["domain"], counter["counter"] = s["domain"], s["counter"]
            found, which = np.unique(counter, return_inverse=True)
            counters = found.tolist()
        which = which.reshape(-1)
        infos: List[Optional[CounterInfo]] = []
        layouts: List[Optional[List[Tuple[str, str, int]]]] = []
        for domain, counter_id in counters:
            info = self.decoder.counters.get((pid, domains.get(domain), counter_id))
            infos.append(info)
            layouts.append(self.decoder.field_layout(info, pid) if info is not None else None)
        known = np.array([layout is not None for layout in layouts])[which]
        end = np.array([_layout_end(layout) if layout else 0 for layout in layouts], dtype=np.int64)[which]
        data = s["data"]
        size = s["size"].astype(np.int64) - _SAMPLE_HEAD
        no_value = (data[:, 0] == _MODE_NO_VALUE) & (size >= 1) & (data[:, _SAMPLE_HEAD] <= _NO_UNAVAILABLE)
        bulk = known & np.where(data[:, 0] <= _MODE_RAW, size >= end, no_value)
        for part in np.split(np.arange(len(s)), np.flatnonzero(np.diff(bulk.astype(np.int8))) + 1):
            if bulk[part[0]]:
                self.on_sample(self._block(pid, s[part], which[part], infos, layouts))
                continue
            for i in part.tolist():
                row = s[i]
                for sample in self.decoder.blob("counter_sample", pid, int(row["tid"]), int(row["time_ns"]),
                                                domains.get(int(row["domain"])), int(row["counter"]),
                                                row["data"][:row["size"]].tobytes(), False):
                    self.on_sample(sample)

    def _block(self, pid: int, s: Any, which: Any, infos: List[Any], layouts: List[Any]) -> SampleBlock:
        """The :class:`SampleBlock` of the sample rows ``s`` (``which``: each one's counter in ``infos``,
        the fields of its samples in ``layouts``), as :meth:`~nvtx_cffi.ext_records.ExtDecoder.blob`
        decodes them: a ``sample_no_value`` ZERO as 0 in each field, UNCHANGED as the values held
        (the latest sample or ZERO of its counter before it), UNAVAILABLE (and UNCHANGED with nothing
        held) as a gap in each field; each counter's latest values are held after the block."""
        import numpy as np

        used, counter = np.unique(which, return_inverse=True)
        counter = counter.reshape(-1)
        data = s["data"]
        reason = np.where(data[:, 0] == _MODE_NO_VALUE, data[:, _SAMPLE_HEAD].astype(np.int8), np.int8(-1))
        per = np.array([len(layouts[int(c)]) for c in used.tolist()], dtype=np.int64)[counter]  # rows a sample
        start = np.cumsum(per) - per
        total = int(start[-1] + per[-1])
        track = np.empty(total, dtype=np.int64)
        kind = np.empty(total, dtype=np.uint8)
        bits = np.empty(total, dtype=np.uint64)
        gap = np.zeros(total, dtype=bool)
        tracks: List[CounterTrack] = []
        counters: List[CounterInfo] = []
        units: List[Dict[str, Optional[str]]] = []
        fields: List[str] = []
        latest: List[Tuple[CounterInfo, List[str], Any]] = []  # (counter, its fields, rows): the values to hold
        order = np.argsort(counter, kind="stable")  # each counter's samples, in order
        for k, rows in enumerate(np.split(order, np.flatnonzero(np.diff(counter[order])) + 1)):
            info, layout = infos[int(used[k])], layouts[int(used[k])]
            scope, title = _scope_and_title(info)
            unit = self.decoder.units(info, pid)
            single = [name for name, _fmt, _offset in layout] == ["value"]
            why = reason[rows]
            setter = (why != _NO_UNCHANGED) & (why != _NO_UNAVAILABLE)  # a value, or ZERO
            source = np.maximum.accumulate(np.where(setter, np.arange(len(rows)), -1))  # the latest setter
            from_held = source < 0
            source = np.maximum(source, 0)
            held = self.decoder.held(pid, info)
            body = data[rows, _SAMPLE_HEAD:]
            for f, (name, fmt, offset) in enumerate(layout):
                shown_name, shown = (info.name, title) if single else (f"{info.name}.{name}", f"{title}.{name}")
                at = start[rows] + f
                track[at] = len(tracks)
                tracks.append(CounterTrack(pid, info.domain, info.id, shown_name + scope, shown + scope,
                                           unit.get(name)))
                counters.append(info)
                units.append(unit)
                fields.append(name)
                raw = np.zeros((len(rows), 8), dtype=np.uint8)
                raw[:, :struct.calcsize("<" + fmt)] = body[:, offset:offset + struct.calcsize("<" + fmt)]
                field_kind, own = _scalar_bits(fmt, raw.view("<u8")[:, 0])
                own[why == _NO_ZERO] = 0  # (0 and 0.0 alike)
                kept = None if held is None else held.get(name)
                kind[at] = field_kind
                bits[at] = np.where(from_held, np.uint64(_held_bits(kept)), own[source])
                gap[at] = (why == _NO_UNAVAILABLE) | from_held & (kept is None)
            if setter.any():
                last = int(rows[int(np.flatnonzero(setter)[-1])])
                latest.append((info, [name for name, _fmt, _offset in layout],
                               np.arange(int(start[last]), int(start[last] + per[last]))))
        repeated = per.max() > 1
        no_value = np.repeat(reason, per) if (reason >= 0).any() else None
        first = None
        if repeated:
            first = np.zeros(total, dtype=bool)
            first[start] = True
        block = SampleBlock(pid, np.repeat(s["tid"], per) if repeated else s["tid"],
                            np.repeat(s["time_ns"], per) if repeated else s["time_ns"], track, kind, bits, tracks,
                            counters, units, fields, gap if gap.any() else None, no_value, first)
        for info, names, at in latest:
            self.decoder.hold(pid, info, dict(zip(names, block.values(at))))
        return block


#: sample() of a counter (its value's bytes), the modes below it its int64 and float64 variants; then
#: sample_no_value() (its reason) and batch_submit() (timestamps and values) (the sample head's
#: first byte; c/recorder/recorder_ext.c)
_MODE_RAW, _MODE_NO_VALUE, _MODE_BATCH = 2, 3, 4
#: a counter sample record's head: mode, flags, item size, count; the value follows
_HEAD = struct.Struct("<BBHIQ")
_SAMPLE_HEAD = _HEAD.size
#: the longest value of a sample row (the reader's widest rows)
_VALUE_MAX = _SAMPLE_DATA_MAX - _SAMPLE_HEAD
#: sample_no_value() reasons (CounterNoValueReason)
_NO_ZERO, _NO_UNCHANGED, _NO_UNAVAILABLE = 0, 1, 2


#: the JSON text of a payload, as :func:`~.chrome.json_value` writes it
_JSON_TEXT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=repr).encode
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _json_rows(np: Any, elements: Any, keys: List[Optional[str]]) -> List[List[Any]]:
    """The rows of ``elements`` (a 2-D structured array, a payload a row, a field per key) as
    :func:`json_safe` makes their decoded values: lists of elements, each a dict by ``keys`` (or, a
    key None, its one field's value) of Python numbers and lists of them; NaN and the infinities
    as strings."""
    columns = []
    for k in range(len(keys)):
        numbers = elements[f"f{k}"]
        column = numbers.tolist()
        if numbers.dtype.kind == "f":
            for at in np.argwhere(~np.isfinite(numbers)).tolist():
                inner = column
                for i in at[:-1]:
                    inner = inner[i]
                inner[at[-1]] = _NON_FINITE[repr(inner[at[-1]])]
        columns.append(column)
    if keys == [None]:
        return columns[0]
    return [[dict(zip(keys, fields)) for fields in zip(*row)] for row in zip(*columns)]


def _json_texts(values: List[Any]) -> List[str]:
    """The JSON text of each of ``values`` (lists), as :func:`~.chrome.json_value` writes it, from one
    text of them all: its elements are where the brackets open at depth 1 (the keys and strings
    of the values hold none)."""
    import numpy as np

    text = _JSON_TEXT(values)
    code = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    steps = _bracket_steps()
    at = np.flatnonzero(steps[code])  # the brackets, and the depth after each
    depth = np.cumsum(steps[code[at]], dtype=np.int32)
    opens = at[(depth == 2) & (code[at] == ord("["))].tolist()
    closes = (at[(depth == 1) & (code[at] == ord("]"))] + 1).tolist()
    return [text[a:b] for a, b in zip(opens, closes)]


@functools.lru_cache(maxsize=None)
def _bracket_steps() -> Any:
    """What each byte adds to the depth of brackets: 1 for ``[`` and ``{``, -1 for ``]`` and ``}``."""
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[[ord("["), ord("{")]] = 1
    steps[[ord("]"), ord("}")]] = -1
    return steps


def _layout_end(layout: List[Tuple[str, str, int]]) -> int:
    """The bytes a sample's value needs for every field of ``layout``."""
    return max(offset + struct.calcsize("<" + fmt) for _name, fmt, offset in layout)


def _held_bits(value: Optional[Union[int, float]]) -> int:
    """The 64 bits a :class:`SampleBlock` keeps for a value held (0 for None: a gap)."""
    if isinstance(value, float):
        return int.from_bytes(struct.pack("<d", value), "little")
    return 0 if value is None else value & 0xFFFFFFFFFFFFFFFF


def _ordered_rows(samples: Any, batches: List[Tuple[Any, int]]) -> Tuple[Any, "_SampleKeys"]:
    """The sample rows ``samples`` (or None) and those of ``batches`` (rows, the time their record
    is ordered by) as one array in the order they are handed on, with their sort keys."""
    import numpy as np

    if not batches:
        by_order = np.lexsort((samples["order"], samples["time_ns"], samples["tid"]))
        rows = samples[by_order]
        return rows, _SampleKeys(rows["tid"], rows["time_ns"], rows["order"])
    parts = ([] if samples is None else [samples]) + [rows for rows, _time in batches]
    lengths = [len(rows) for rows in parts]
    # a batch's samples in its record's place, in their order there
    key = np.concatenate(([samples["time_ns"]] if samples is not None else [])
                         + [np.full(len(rows), time_ns, dtype=np.int64) for rows, time_ns in batches])
    within = np.concatenate([np.arange(n) for n in lengths])
    rows = _np_joined_rows(np, parts)
    by_order = np.lexsort((within, rows["order"], key, rows["tid"]))
    rows = rows[by_order]
    return rows, _SampleKeys(rows["tid"], key[by_order], rows["order"])


def _scalar_bits(fmt: str, raw: Any) -> Tuple[int, Any]:
    """(kind, 64 bits) of values of the struct format ``fmt`` (one letter) held in the low bytes of
    ``raw`` (uint64, little-endian): what :class:`SampleBlock` keeps."""
    import numpy as np

    if fmt == "d":
        return FLOATING, raw
    if fmt == "f":
        low = (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return FLOATING, low.view(np.float32).astype(np.float64).view(np.uint64)
    if fmt == "e":
        half = (raw & np.uint64(0xFFFF)).astype(np.uint16)
        out = half.view(np.float16).astype(np.float64).view(np.uint64)
        for i in np.flatnonzero((half & 0x7FFF) > 0x7C00).tolist():  # a NaN: the bits Python gives it
            out[i] = _held_bits(struct.unpack("<e", struct.pack("<H", int(half[i])))[0])
        return FLOATING, out
    shift = np.uint64(64 - 8 * struct.calcsize("<" + fmt))
    if fmt.isupper():  # unsigned
        return UNSIGNED, (raw << shift) >> shift
    return SIGNED, ((raw << shift).view(np.int64) >> np.int64(shift)).view(np.uint64)


class _SampleKeys:
    """The sample rows' sort keys (thread, time, 0, place in the file), as a sequence
    :func:`bisect.bisect_left` searches (a key made at each look)."""

    def __init__(self, tid: Any, time: Any, order: Any) -> None:
        self._tid = tid
        self._time = time
        self._order = order

    def __len__(self) -> int:
        return len(self._tid)

    def __getitem__(self, k: int) -> Tuple[int, int, int, int]:
        return int(self._tid[k]), int(self._time[k]), 0, int(self._order[k])
