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
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from ..ext_records import CounterSample, ExtDecoder, time_domain_name
from .columns import BATCH_EVENTS, MARK, PT_EXT, PUSH, START

__all__ = ["CounterStats", "CounterTrack", "ExtPayloads", "BatchExtDecoder", "counter_series", "counter_tracks",
           "json_safe"]


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


def counter_tracks(sample: CounterSample) -> Iterator[Tuple[CounterTrack, Optional[float]]]:
    """(track, value) per numeric field of a sample: a scalar counter is one track; a group's fields
    are ``"group.field"``. The value is None for a gap: a ``sample_no_value(UNAVAILABLE)`` sample,
    or UNCHANGED before the counter had a value."""
    info = sample.counter
    scope = f" [{info.scope}]" if info.scope else ""
    title = info.title or (info.name if info.domain is None else f"{info.domain}: {info.name}")
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
        if not blobs:
            return
        info = getattr(batch, "info", None)
        if info is not None and self._images.get(batch.pid) != batch.image:
            # every registration of the image first: decoding does not depend on the chunks' order
            self._images[batch.pid] = batch.image
            self.decoder.preload(info)
        pid = batch.pid
        domains = batch.domains
        items: List[Tuple[int, int, int, int]] = []
        for j, blob in enumerate(blobs):
            items.append((blob.tid, blob.time_ns, 0, j))
        if batch.numpy:
            import numpy as np

            rows = np.flatnonzero((batch.ptype == PT_EXT) & ((batch.kind == PUSH) | (batch.kind == START)
                                                              | (batch.kind == MARK)))
            rows = rows.tolist()
        else:
            rows = [i for i, (pt, k) in enumerate(zip(batch.ptype, batch.kind)) if pt == PT_EXT and k in _ROW_KINDS]
        for i in rows:
            items.append((int(batch.tid[i]), int(batch.time[i]), 1, i))
        items.sort()  # per thread in time order; a payload's blobs come just before its event
        decoder = self.decoder
        for tid, _t, is_row, j in items:
            if not is_row:
                blob = blobs[j]
                if hasattr(blob, "name"):  # an Event (the pure-Python source keeps the Event API's)
                    samples = decoder.feed(blob)
                else:  # a recorder.Blob: its domain is the file's id
                    samples = decoder.blob(blob.kind, pid, blob.tid, blob.time_ns, domains.get(blob.domain), blob.arg,
                                           blob.data, blob.truncated)
                for sample in samples:
                    self.on_sample(sample)
                continue
            decoded = decoder.take_payload(pid, tid, domains.get(int(batch.domain[j])))
            if decoded is not None and decoded[0] is not None:
                value, truncated = decoded
                batch.payload[j] = self.payloads.add(json_safe(value), truncated)
