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

Samples of scalar counters (an int64, a double or another scalar value each: what ``sample()`` of an
``int``, ``float`` or scalar-dtype counter records) take the compiled path where the CFFI module has
its helpers (:func:`compiled`): the reader hands them on as columns (``recorder.blocks(samples=True)``),
the decoder turns each run of them into a :class:`SampleBlock` (no object a sample) and the writers
take a block at once (``samples(block)``, :mod:`.writers`); the other samples (groups, batches,
``sample_no_value``) go one by one, in their place among them.
"""
from __future__ import annotations

import bisect
import math
import struct
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .. import _bulk
from ..ext_records import CounterInfo, CounterSample, ExtDecoder, time_domain_name
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
    """Samples of scalar counters of one process, as columns, in the order they are handed on: what
    :class:`BatchExtDecoder` decodes in bulk (one value each, never a gap: one track a sample).

    Columns (NumPy arrays): ``tid``, ``time`` (ns), ``track`` (an index into ``tracks``, the
    :class:`CounterTrack` of each counter that has samples here, ``counters``, its :class:`~nvtx_cffi.ext_records.CounterInfo`,
    and ``units``, its samples' units by field), ``kind`` (:data:`SIGNED`, :data:`UNSIGNED` or
    :data:`FLOATING`) and ``bits`` (the value's 64 bits). A writer takes a block at once
    (``samples(block)``) or a sample at a time (:meth:`each`).
    """

    __slots__ = ("pid", "tid", "time", "track", "kind", "bits", "tracks", "counters", "units")

    def __init__(self, pid: int, tid: Any, time: Any, track: Any, kind: Any, bits: Any, tracks: List[CounterTrack],
                 counters: List[CounterInfo], units: List[Dict[str, Optional[str]]]) -> None:
        self.pid = pid
        self.tid = tid
        self.time = time
        self.track = track
        self.kind = kind
        self.bits = bits
        self.tracks = tracks
        self.counters = counters
        self.units = units

    def __len__(self) -> int:
        return len(self.time)

    def numbers(self) -> Any:
        """The values as float64 (``float(value)``; a uint64 past 2**53 rounded as Python rounds it)."""
        import numpy as np

        bits, kind = self.bits, self.kind
        return np.where(kind == SIGNED, bits.view(np.int64).astype(np.float64),
                        np.where(kind == UNSIGNED, bits.astype(np.float64), bits.view(np.float64)))

    def values(self, rows: Any = None) -> List[Union[int, float]]:
        """The values (of ``rows``; all by default) as the Python numbers their counters' samples
        decode to: ints and floats."""
        import numpy as np

        bits, kinds = (self.bits, self.kind) if rows is None else (self.bits[rows], self.kind[rows])
        out = bits.astype(object)  # (uint64: the unsigned ones as they are)
        for kind, view in ((SIGNED, np.int64), (FLOATING, np.float64)):
            at = np.flatnonzero(kinds == kind)
            if len(at):
                out[at] = bits[at].view(view).astype(object)
        return out.tolist()

    def typed(self, rows: Any) -> Any:
        """The values of ``rows`` (of one track: a counter's values are of one kind) as an int64,
        uint64 or float64 array."""
        import numpy as np

        bits = self.bits[rows]
        kind = int(self.kind[rows[0]])
        return bits.view(np.int64) if kind == SIGNED else bits.view(np.float64) if kind == FLOATING else bits

    def each(self) -> Iterator[Tuple[CounterSample, List[Tuple[CounterTrack, Optional[float]]]]]:
        """Each sample as a :class:`~nvtx_cffi.ext_records.CounterSample` and its (track, value), one
        at a time (what a writer without ``samples(block)`` takes)."""
        for tid, time_ns, k, value in zip(self.tid.tolist(), self.time.tolist(), self.track.tolist(), self.values()):
            track, info = self.tracks[k], self.counters[k]
            sample = CounterSample(pid=self.pid, tid=tid, time_ns=time_ns, counter=info, values={"value": value},
                                   units=self.units[k])
            yield sample, [(track, value)]


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
        self._last_key = 0

    def add(self, value: Any, truncated: bool = False) -> int:
        """Keep a decoded (JSON-ready) payload; returns its key (never 0)."""
        self._last_key += 1
        key = self._last_key
        values = self._values
        values[key] = {"value": value, "truncated": True} if truncated else value
        if len(values) > EXT_PAYLOADS_MAX:
            del values[next(iter(values))]
        return key

    def get(self, raw: int) -> Any:
        """The payload kept under ``raw`` (None when unknown or evicted)."""
        return self._values.get(int(raw))


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
        places = batch.blob_order.tolist() if batch.blob_order is not None else range(len(blobs))
        items: List[Tuple[int, int, int, int, int]] = [(blob.tid, blob.time_ns, 0, place, j)
                                                       for j, (blob, place) in enumerate(zip(blobs, places))]
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
        if samples is None:
            for item in items:
                self._item(batch, item)
            return
        # the sample rows in the same order, each run of them between two items decoded at once
        import numpy as np

        by_order = np.lexsort((samples["order"], samples["time_ns"], samples["tid"]))
        keys = _SampleKeys(samples, by_order)
        done = 0
        for item in items:
            before = bisect.bisect_left(keys, item[:4], lo=done)
            if before > done:
                self._samples(batch, by_order[done:before])
                done = before
            self._item(batch, item)
        if done < len(by_order):
            self._samples(batch, by_order[done:])

    def _item(self, batch: Any, item: Tuple[int, int, int, int, int]) -> None:
        """One blob (its counter samples to ``on_sample``), or one row's binary payload (its key to
        the payload column)."""
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
        decoded = decoder.take_payload(pid, tid, domains.get(int(batch.domain[j])))
        if decoded is not None and decoded[0] is not None:
            value, truncated = decoded
            batch.payload[j] = self.payloads.add(json_safe(value), truncated)

    def _samples(self, batch: Any, rows: Any) -> None:
        """The sample rows ``rows`` of ``batch.samples``, in this order: a :class:`SampleBlock` for each
        run of rows of scalar counters (a value of the counter's type, by sample() or its int64 or
        float64 variant); the others one by one, as blobs."""
        import numpy as np

        s = batch.samples[rows]
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
        layouts: List[Optional[Tuple[str, int]]] = []
        for domain, counter_id in counters:
            info = self.decoder.counters.get((pid, domains.get(domain), counter_id))
            layout = self.decoder.scalar_layout(info, pid) if info is not None else None
            infos.append(info)
            # (not a float16's: Python gives its NaNs bits of its own)
            layouts.append(layout if layout is not None and layout[0] != "e" else None)
        end = np.array([offset + struct.calcsize("<" + fmt) if fmt else 1 << 8 for fmt, offset in
                        (layout or ("", 0) for layout in layouts)], dtype=np.int64)
        data = s["data"]
        scalar = (data[:, 0] <= _MODE_RAW) & (s["size"].astype(np.int64) - _SAMPLE_HEAD >= end[which])
        for part in np.split(np.arange(len(s)), np.flatnonzero(np.diff(scalar.astype(np.int8))) + 1):
            if scalar[part[0]]:
                self.on_sample(self._block(pid, s[part], which[part], infos, layouts))
                continue
            for i in part.tolist():
                row = s[i]
                for sample in self.decoder.blob("counter_sample", pid, int(row["tid"]), int(row["time_ns"]),
                                                domains.get(int(row["domain"])), int(row["counter"]),
                                                row["data"][:row["size"]].tobytes(), False):
                    self.on_sample(sample)

    def _block(self, pid: int, s: Any, which: Any, infos: List[Any], layouts: List[Any]) -> SampleBlock:
        """The :class:`SampleBlock` of the scalar sample rows ``s`` (``which``: each one's counter in
        ``infos``, where its value is in ``layouts``); each counter's last value is held (UNCHANGED)."""
        import numpy as np

        used, track = np.unique(which, return_inverse=True)
        track = track.reshape(-1)
        body = s["data"][:, _SAMPLE_HEAD:].copy().view("<u8")[:, 0]
        kind = np.empty(len(s), dtype=np.uint8)
        bits = np.empty(len(s), dtype=np.uint64)
        tracks, counters, units = [], [], []
        order = np.argsort(track, kind="stable")  # each counter's rows, in order
        for k, rows in enumerate(np.split(order, np.flatnonzero(np.diff(track[order])) + 1)):
            info = infos[int(used[k])]
            fmt, offset = layouts[int(used[k])]
            scope, title = _scope_and_title(info)
            units.append(self.decoder.units(info, pid))
            tracks.append(CounterTrack(pid, info.domain, info.id, info.name + scope, title + scope,
                                       units[-1].get("value")))
            counters.append(info)
            kind[rows], bits[rows] = _scalar_bits(fmt, body[rows] >> np.uint64(8 * offset))
        block = SampleBlock(pid, s["tid"], s["time_ns"], track, kind, bits, tracks, counters, units)
        last = np.full(len(used), -1, dtype=np.int64)
        np.maximum.at(last, track, np.arange(len(s)))
        for info, value in zip(counters, block.values(last)):
            self.decoder.hold(pid, info, {"value": value})
        return block


#: sample() of a counter (its value's bytes), the modes below it its int64 and float64 variants (the
#: sample head's first byte; c/recorder/recorder_ext.c)
_MODE_RAW = 2
#: a counter sample record's head: mode, flags, item size, count; the value follows
_SAMPLE_HEAD = 16


def _scalar_bits(fmt: str, raw: Any) -> Tuple[int, Any]:
    """(kind, 64 bits) of values of the struct format ``fmt`` (one letter, not ``e``) held in the
    low bytes of ``raw`` (uint64, little-endian): what :class:`SampleBlock` keeps."""
    import numpy as np

    if fmt == "d":
        return FLOATING, raw
    if fmt == "f":
        low = (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return FLOATING, low.view(np.float32).astype(np.float64).view(np.uint64)
    shift = np.uint64(64 - 8 * struct.calcsize("<" + fmt))
    if fmt.isupper():  # unsigned
        return UNSIGNED, (raw << shift) >> shift
    return SIGNED, ((raw << shift).view(np.int64) >> np.int64(shift)).view(np.uint64)


class _SampleKeys:
    """The sample rows' sort keys (thread, time, 0, place in the file) in the order ``by_order``, as
    a sequence :func:`bisect.bisect_left` searches (a key made at each look)."""

    def __init__(self, samples: Any, by_order: Any) -> None:
        self._tid = samples["tid"][by_order]
        self._time = samples["time_ns"][by_order]
        self._order = samples["order"][by_order]

    def __len__(self) -> int:
        return len(self._tid)

    def __getitem__(self, k: int) -> Tuple[int, int, int, int]:
        return int(self._tid[k]), int(self._time[k]), 0, int(self._order[k])
