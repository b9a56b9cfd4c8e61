"""Counters and binary payloads in the tracer (issue 9): decode the recorder's payload-extension
records (:mod:`nvtx_cffi.ext_records`) on the way from the recording to the writers.

* counter samples become writer ``counter(pid, name, unit, time_ns, value)`` calls (Chrome ``"C"``
  events: Perfetto draws a track per counter, one series per field of a counter group), a row each in
  the ``--stats`` counter table (samples, min, max, mean, last — the latest in time —, unit) and
  lines in ``--png``;
* a push/start/mark's binary payload is decoded by its schema into the event's ``payload``
  (``args.payload`` in the JSON).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ..ext_records import CounterSample, ExtDecoder

__all__ = ["CounterStats", "decode_stream", "counter_series", "json_safe"]


def json_safe(value: Any, _depth: int = 0) -> Any:
    """A decoded payload as JSON values: bytes as text (UTF-8, else hex), NaN/inf as strings."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if _depth > 16:
        return None
    if isinstance(value, list):
        return [json_safe(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v, _depth + 1) for k, v in value.items()}
    return value


def counter_series(sample: CounterSample) -> Iterator[Tuple[str, Optional[str], float]]:
    """(track name, unit, value) per numeric field of a sample: a scalar counter is one track named
    after the counter; a group's fields are ``"group.field"``. The scope, when given, is appended."""
    info = sample.counter
    scope = f" [{info.scope}]" if info.scope else ""
    single = list(sample.values) == ["value"]
    for field, value in sample.values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = info.name if single else f"{info.name}.{field}"
        yield name + scope, sample.units.get(field), value


class CounterStats:
    """The ``--stats`` counter table: per (process-independent) counter track."""

    def __init__(self) -> None:
        self._rows: Dict[Tuple[Optional[str], str], List[Any]] = {}
        self.truncated = 0  # samples the recorder cut at its record bound (noted below the table)
        self.batches_cut = 0  # batches whose samples past the recorder's bound were left out (noted too)

    def add(self, sample: CounterSample) -> None:
        time_ns = sample.time_ns
        if sample.truncated:
            self.truncated += 1
        if sample.batch_cut:
            self.batches_cut += 1
        for name, unit, value in counter_series(sample):
            key = (sample.counter.domain, name)
            row = self._rows.get(key)
            if row is None:
                self._rows[key] = [1, value, value, float(value), value, unit, time_ns]
            else:
                row[0] += 1
                row[1] = min(row[1], value)
                row[2] = max(row[2], value)
                row[3] += value
                # "last" is the latest in time: samples come in file order, per thread and batch
                # (batch_submit gives each sample its own time), not in time order
                if time_ns >= row[6]:
                    row[4], row[6] = value, time_ns

    def __len__(self) -> int:
        return len(self._rows)

    def __bool__(self) -> bool:  # something to print: rows, or the notes on cut samples and batches
        return bool(self._rows) or bool(self.truncated) or bool(self.batches_cut)

    def rows(self) -> List[Dict[str, Any]]:
        return [{"domain": d, "counter": n, "samples": r[0], "min": r[1], "max": r[2], "mean": r[3] / r[0],
                 "last": r[4], "unit": r[5]} for (d, n), r in sorted(self._rows.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))]

    def format(self) -> str:
        rows = self.rows()
        note = (f"note: {self.truncated} counter sample(s) were cut at the recorder's 64 KiB record bound: "
                "their fields past the cut are missing above.\n") if self.truncated else ""
        if self.batches_cut:
            note += (f"note: {self.batches_cut} batch_submit() call(s) passed more than the recorder's 1 MiB of "
                     "values per batch: their samples past it were not recorded and are missing above.\n")
        if not rows:
            return note
        def num(v: Any) -> str:
            return f"{v:.6g}" if isinstance(v, float) else str(v)
        table = [("Samples", "Min", "Max", "Mean", "Last", "Unit", "Counter")]
        for r in rows:
            label = r["counter"] if r["domain"] is None else f"{r['domain']}:{r['counter']}"
            table.append((str(r["samples"]), num(r["min"]), num(r["max"]), num(r["mean"]), num(r["last"]),
                          r["unit"] or "-", label))
        widths = [max(len(row[i]) for row in table) for i in range(7)]
        lines = [f"NVTX counter summary: {len(rows)} counter track(s)", ""]
        for k, row in enumerate(table):
            cells = [row[i].rjust(widths[i]) for i in range(5)] + [row[5].ljust(widths[5]), row[6]]
            lines.append("  ".join(cells).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines) + "\n" + ("\n" + note if note else "")


def decode_stream(events: Iterable[Any], on_sample: Callable[[CounterSample], None]) -> Iterator[Any]:
    """``events`` without the blob records: counter samples go to ``on_sample``; a push/start/mark
    with a binary payload gets it decoded (``payload``; ``payload_truncated`` when it was cut)."""
    decoder = ExtDecoder()
    set_ = object.__setattr__
    for event in events:
        kind = event.kind
        if kind == "blob":
            for sample in decoder.feed(event):
                on_sample(sample)
            continue
        if event.payload_type == "ext" and kind in ("push", "start", "mark"):
            decoder.feed(event)
            value, truncated = decoder.payload_of(event)
            set_(event, "payload", json_safe(value))
            if truncated:
                set_(event, "payload_truncated", True)
        yield event


class _BlobEvent:
    """A ``recorder.Blob`` of a columnar batch, seen as the ``blob`` Event that :class:`ExtDecoder` takes."""

    __slots__ = ("kind", "name", "pid", "tid", "time_ns", "domain", "target", "data", "truncated")

    def __init__(self, blob: Any, pid: int, domain: Optional[str]) -> None:
        self.kind = "blob"
        self.name = blob.kind
        self.pid = pid
        self.tid = blob.tid
        self.time_ns = blob.time_ns
        self.domain = domain
        self.target = blob.arg
        self.data = blob.data
        self.truncated = blob.truncated


class _RowEvent:
    """A push/start/mark row with a binary payload, seen as the Event that :class:`ExtDecoder` takes."""

    __slots__ = ("kind", "pid", "tid", "domain")

    def __init__(self, kind: str, pid: int, tid: int, domain: Optional[str]) -> None:
        self.kind, self.pid, self.tid, self.domain = kind, pid, tid, domain


_ROW_KINDS = {1: "push", 3: "start", 5: "mark"}
_PT_EXT = 7


class BatchExtDecoder:
    """Counters and binary payloads of a conversion's batches (:mod:`.columns`), in file order.

    :meth:`feed` takes each :class:`~.columns.RecordBatch` before it is paired: its blobs go through
    one :class:`ExtDecoder` (per-process state across batches), counter samples to ``on_sample``; the
    payload column of each push/start/mark with a binary payload becomes a key of
    :data:`.columns.EXT_PAYLOADS`, which holds the decoded value (JSON-ready) for the writers.
    """

    def __init__(self, on_sample: Callable[[CounterSample], None]) -> None:
        self.decoder = ExtDecoder()
        self.on_sample = on_sample

    def feed(self, batch: Any) -> None:
        blobs = batch.blobs
        if not blobs:
            return
        from .columns import store_ext_payload

        pid = batch.pid
        domains = batch.domains
        items: List[Tuple[int, int, int, int]] = []
        for j, blob in enumerate(blobs):
            items.append((blob.tid, blob.time_ns, 0, j))
        if batch.numpy:
            import numpy as np

            rows = np.flatnonzero((batch.ptype == _PT_EXT) & ((batch.kind == 1) | (batch.kind == 3) | (batch.kind == 5)))
            rows = rows.tolist()
        else:
            rows = [i for i, (pt, k) in enumerate(zip(batch.ptype, batch.kind)) if pt == _PT_EXT and k in _ROW_KINDS]
        for i in rows:
            items.append((int(batch.tid[i]), int(batch.time[i]), 1, i))
        items.sort()  # per thread in time order; a payload's blobs come just before its event
        decoder = self.decoder
        for tid, _t, is_row, j in items:
            if not is_row:
                blob = blobs[j]
                event = blob if hasattr(blob, "name") else _BlobEvent(blob, pid, domains.get(blob.domain))
                for sample in decoder.feed(event):
                    self.on_sample(sample)
                continue
            row = _RowEvent(_ROW_KINDS[int(batch.kind[j])], pid, tid, domains.get(int(batch.domain[j])))
            decoder.feed(row)
            value, truncated = decoder.payload_of(row)
            if value is not None:
                batch.payload[j] = store_ext_payload(json_safe(value), truncated)
