"""Convert a recording into a trace file: read in batches, pair, hand each batch to one writer.

The output format follows the file name (:func:`format_for`): Chrome Trace Event JSON
(``.json``, the default), Perfetto's protobuf trace (``.pftrace``, ``.perfetto-trace``) or an
SQLite database in Nsight Systems' export schema (``.sqlite``, ``.db``, ``.sqlite3``). Every writer
has the same four methods: ``batch(paired_batch)``, ``counter(pid, name, unit, time_ns, value)``,
``finish(timeline) -> int`` (events written) and ``close()``.

>>> format_for("run.pftrace"), format_for("a.trace.json"), format_for("x.db")
('pftrace', 'json', 'sqlite')
"""
from __future__ import annotations

import collections
import os
import queue
import threading
from typing import Any, Callable, Dict, Iterator, Optional

from .columns import open_recording
from .model import Timeline
from .pairing import PairedBatch, marks_of, pair_batches, ranges_of

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["FORMATS", "format_for", "convert", "open_writer"]

#: File name endings and the format each one picks.
FORMATS: Dict[str, str] = {
    ".json": "json",
    ".pftrace": "pftrace",
    ".perfetto-trace": "pftrace",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
}


def format_for(path: str) -> str:
    """The output format named by ``path``'s ending; :class:`ValueError` for an unknown one."""
    lower = path.lower()
    for ending, fmt in FORMATS.items():
        if lower.endswith(ending):
            return fmt
    endings = ", ".join(FORMATS)
    msg = f"cannot tell the trace format from {os.path.basename(path)!r}: end the name with one of {endings}"
    raise ValueError(msg)


def open_writer(fmt: str, output: str, start_ns: int) -> Any:
    """A writer of format ``fmt`` to the file ``output`` (created or replaced)."""
    if fmt == "json":
        from .chrome import ChromeTraceWriter

        out = open(output, "wb")
        writer = ChromeTraceWriter(out, start_ns)
        writer.close = out.close  # type: ignore[attr-defined]
        return writer
    if fmt == "pftrace":
        from .pftrace import PerfettoWriter

        return PerfettoWriter(open(output, "wb"), start_ns, close=True)
    if fmt == "sqlite":
        from .sqlite import SqliteWriter

        return SqliteWriter(output, start_ns)
    msg = f"unknown trace format {fmt!r}"
    raise ValueError(msg)


def _add_stats(stats: Any, pb: PairedBatch) -> None:
    """Durations of the batch's complete ranges, grouped by (domain, name, style), into ``stats``."""
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
                stats.add_many(pb.domain_name(k & 0xFFFFF), pb.text(k >> 20), style, cols.end - cols.start)
                continue
            uniq, inverse = _np.unique(key, return_inverse=True)
            inverse = inverse.reshape(-1)
            order = _np.argsort(inverse, kind="stable")
            durations = (cols.end - cols.start)[order]
            bounds = _np.searchsorted(inverse[order], _np.arange(len(uniq) + 1))
            for j, k in enumerate(uniq.tolist()):
                t, d = k >> 20, k & 0xFFFFF
                stats.add_many(pb.domain_name(d), pb.text(t), style, durations[bounds[j]:bounds[j + 1]])
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
                stats.add_many(domain, name, style, durations_list)


def _decode_extensions(recording: Any) -> Callable[[Any, Any, Any], None]:
    """Make ``recording.batches()`` decode each batch's counters and binary payloads on the way
    (:class:`~.counters.BatchExtDecoder`; with NumPy that runs in the reader thread). Returns
    ``drain(writer, picture, counter_stats, timeline)``, which the converting thread calls to hand
    the samples decoded so far to the writer, the picture and the table, and to count them in the
    timeline (one writer, one thread)."""
    from .columns import EXT_PAYLOADS
    from .counters import BatchExtDecoder

    EXT_PAYLOADS.clear()
    pending: "collections.deque[Any]" = collections.deque()  # bounded by the batches read ahead
    ext = BatchExtDecoder(pending.append)
    batches = recording.batches

    def decoded() -> Any:
        for batch in batches():
            ext.feed(batch)
            yield batch

    recording.batches = decoded

    def drain(writer: Any, picture: Any, counter_stats: Any, timeline: Timeline) -> None:
        from .counters import counter_series

        draw = getattr(picture, "counter", None)
        while pending:
            sample = pending.popleft()
            written = False
            for name, unit, value in counter_series(sample):
                writer.counter(sample.pid, name, unit, sample.time_ns, value)
                written = True
                if draw is not None:
                    draw(sample.pid, name, unit, sample.time_ns, value)
            if written:  # (a sample without a value writes nothing)
                timeline.counter_samples += 1
                timeline.counter_pids.add(sample.pid)
            if counter_stats is not None:
                counter_stats.add(sample)

    return drain


_DONE = object()


def _prefetch(batches: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """``batches``, read and paired by a helper thread at most ``depth`` batches ahead of the writer.

    The decoder, the pairing and most NumPy work release the GIL, and so do SQLite's statements and
    file writes: on two cores reading and writing overlap. Memory: ``depth`` batches more. The
    thread's exceptions are raised here; leaving early (an error, Ctrl-C) stops it.
    """
    q: "queue.Queue[Any]" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for pb in batches:
                if not put((pb, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_DONE, exc))

    thread = threading.Thread(target=run, name="nvtx-cffi-trace-reader", daemon=True)
    thread.start()
    try:
        while True:
            pb, exc = q.get()
            if pb is _DONE:
                if exc is not None:
                    raise exc
                return
            yield pb
    finally:
        stop.set()
        thread.join()


def convert(source: str, output: str, fmt: Optional[str] = None, *, stats: Any = None, picture: Any = None,
            progress: Optional[Callable[[int, int], None]] = None, root_pid: Optional[int] = None,
            root_name: Optional[str] = None, numpy: Optional[bool] = None, counter_stats: Any = None) -> Timeline:
    """Convert the recording ``source`` (directory or record file) into ``output``; returns the timeline.

    ``stats`` (a :class:`~.stats.StatsCollector`) and ``picture`` (a :class:`~.png.PngCollector`)
    receive the ranges too; counter samples (payload extension) become the writer's counter events,
    ``counter_stats`` rows (a :class:`~.counters.CounterStats`) and ``picture`` lines. ``numpy=False`` forces the pure-Python path (what PyPy runs).
    """
    # Progress counts what is written, not what is read: the reader thread runs ahead of the writer
    # (it notes its position with each batch) and 100% waits for the writer's finish (SQLite's index).
    read_at = [0, 0]

    def note(done: int, total: int) -> None:
        read_at[0], read_at[1] = done, total

    recording = open_recording(source, numpy, note if progress is not None else None)
    fmt = fmt or format_for(output)
    timeline = Timeline()
    writer = open_writer(fmt, output, recording.start_ns or 0)
    drain = _decode_extensions(recording)
    try:
        batches = pair_batches(recording, timeline)
        if progress is not None:
            batches = ((pb, (read_at[0], read_at[1])) for pb in batches)
        else:
            batches = ((pb, None) for pb in batches)
        for pb, at in (_prefetch(batches) if recording.numpy else batches):
            drain(writer, picture, counter_stats, timeline)  # the samples read with this batch (or before)
            writer.batch(pb)
            if stats is not None:
                _add_stats(stats, pb)
            if picture is not None:
                for r in ranges_of(pb):
                    picture.range(r)
                for m in marks_of(pb):
                    picture.mark(m)
            if at is not None and at[1]:
                progress(min(at[0], at[1] - 1), at[1])  # type: ignore[misc]
        if root_pid is not None and root_name is not None and (
                root_pid in timeline.process_names or any(pid == root_pid for pid, _ in timeline.threads)):
            timeline.process_names[root_pid] = root_name
        drain(writer, picture, counter_stats, timeline)  # samples after the last NVTX event
        writer.finish(timeline)
    finally:
        writer.close()
    if progress is not None and read_at[1]:
        progress(read_at[1], read_at[1])
    return timeline
