"""Convert a recording into a trace file: read in batches, pair, hand each batch to one writer.

The output format follows the file name (:func:`format_for`): Chrome Trace Event JSON
(``.json``, the default), Perfetto's protobuf trace (``.pftrace``, ``.perfetto-trace``) or an
SQLite database in Nsight Systems' export schema (``.sqlite``, ``.db``, ``.sqlite3``). Every writer
has the same four methods: ``batch(paired_batch)``, ``counter(pid, name, unit, time_ns, value,
track=None, no_value=None)`` (``value`` None: a gap; ``track`` a :class:`~.counters.CounterTrack`),
``finish(timeline) -> int`` (events written) and ``close()``. Without an output (``convert(source,
None)``: ``--stats``/``--png`` with ``--no-output``) a :class:`NullWriter` takes them: the pairing,
the summary and the picture see every event, no file is written.

``python -m nvtx_cffi convert DIR -o X`` (:func:`nvtx_cffi._trace.cli.convert_main`) runs this
on a recording kept with ``trace --record-dir DIR`` (or written by any process started with
``nvtx_cffi.recorder.environment(DIR)``), with the trace command's output step: the same trace.

>>> format_for("run.pftrace"), format_for("a.trace.json"), format_for("x.db")
('pftrace', 'json', 'sqlite')
"""
from __future__ import annotations

import collections
import os
import queue
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Union

from .columns import open_recording
from .model import Timeline
from .pairing import PairedBatch, marks_of, pair_batches, ranges_of

try:
    import numpy as _np
except ImportError:  # pragma: no cover - PyPy
    _np = None

__all__ = ["FORMATS", "format_for", "convert", "open_writer", "NullWriter", "RecordingError"]

#: File name endings and the format each one picks.
FORMATS: Dict[str, str] = {
    ".json": "json",
    ".pftrace": "pftrace",
    ".perfetto-trace": "pftrace",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
}


class RecordingError(ValueError):
    """A record file of the recording is not one the reader takes (not a recording, cut inside its
    header, a header field out of range): the message names the file. Raised before the output
    is opened."""


def format_for(path: str) -> str:
    """The output format named by ``path``'s ending; :class:`ValueError` for an unknown one."""
    lower = path.lower()
    for ending, fmt in FORMATS.items():
        if lower.endswith(ending):
            return fmt
    endings = ", ".join(FORMATS)
    msg = f"cannot tell the trace format from {os.path.basename(path)!r}: end the name with one of {endings}"
    raise ValueError(msg)


class NullWriter:
    """The writer of no file (``--no-output``): takes every batch and sample, writes nothing."""

    def batch(self, pb: PairedBatch) -> None:
        pass

    def counter(self, *args: Any, **kwargs: Any) -> None:
        pass

    def finish(self, timeline: Timeline) -> int:
        return 0

    def close(self) -> None:
        pass


def open_writer(fmt: str, output: Optional[str], start_ns: int) -> Any:
    """A writer of format ``fmt`` to the file ``output`` (created or replaced); ``output`` None:
    a :class:`NullWriter`."""
    if output is None:
        return NullWriter()
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
            # grouped by (text id, domain id), not by text: one stable sort, then the texts of the
            # groups looked up in one pass (a program that names each range differently makes as
            # many groups as ranges)
            order = _np.argsort(key, kind="stable")
            skey = key[order]
            starts = _np.flatnonzero(_np.concatenate(([True], skey[1:] != skey[:-1])))
            uniq = skey[starts]
            bounds = _np.append(starts, len(skey))
            durations = (cols.end - cols.start)[order]
            texts = pb.text_list((uniq >> 20).tolist())
            domains = {d: pb.domain_name(d) for d in set((uniq & 0xFFFFF).tolist())}
            stats.add_grouped([domains[d] for d in (uniq & 0xFFFFF).tolist()], texts, style, durations, bounds)
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
        from .counters import NO_VALUE_KINDS, counter_tracks

        draw = getattr(picture, "counter", None)
        while pending:
            sample = pending.popleft()
            written = False
            no_value = NO_VALUE_KINDS.get(sample.no_value) if sample.no_value is not None else None
            for track, value in counter_tracks(sample):
                writer.counter(sample.pid, track.title, track.unit, sample.time_ns, value, track=track,
                               no_value=no_value)
                written = True
                if draw is not None and value is not None:
                    draw(sample.pid, track.title, track.unit, sample.time_ns, value)
            if written:  # (a sample without a value writes nothing)
                timeline.counter_samples += 1
                timeline.counter_pids.add(sample.pid)
            if counter_stats is not None:
                counter_stats.add(sample)
        if counter_stats is not None:
            counter_stats.unmapped = dict(ext.decoder.unmapped)

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


def convert(source: Union[str, Sequence[str]], output: Optional[str], fmt: Optional[str] = None, *, stats: Any = None, picture: Any = None,
            progress: Optional[Callable[[int, int], None]] = None, root_pid: Optional[int] = None,
            root_name: Optional[str] = None, numpy: Optional[bool] = None, counter_stats: Any = None) -> Timeline:
    """Convert the recording ``source`` (directory, record file or list of record files) into
    ``output`` (None: no file, for ``stats`` and ``picture`` only); returns the timeline.

    ``stats`` (a :class:`~.stats.StatsCollector`) and ``picture`` (a :class:`~.png.PngCollector`:
    its ``begin(start_ns, end_ns)`` first, then ``batch(paired_batch)``, or ``range``/``mark`` per
    object where it has no ``batch``) receive the ranges too; counter samples (payload extension) become the writer's counter events,
    ``counter_stats`` rows (a :class:`~.counters.CounterStats`) and ``picture`` lines. ``numpy=False`` forces the pure-Python path (what PyPy runs).
    A record file the reader refuses raises :class:`RecordingError` (naming it) before ``output`` is opened.
    """
    # Progress counts what is written, not what is read: the reader thread runs ahead of the writer
    # (it notes its position with each batch) and 100% waits for the writer's finish (SQLite's index).
    read_at = [0, 0]

    def note(done: int, total: int) -> None:
        read_at[0], read_at[1] = done, total

    try:
        recording = open_recording(source, numpy, note if progress is not None else None)
    except ValueError as exc:  # the reader names the file and what is wrong with it
        raise RecordingError(str(exc)) from None
    fmt = fmt or (format_for(output) if output is not None else "none")
    timeline = Timeline()
    writer = open_writer(fmt, output, recording.start_ns or 0)
    drain = _decode_extensions(recording)
    feed = getattr(picture, "batch", None)
    if hasattr(picture, "begin"):  # the pixel columns: the readers know the time bounds before the first event
        picture.begin(recording.start_ns, recording.end_ns)
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
                if feed is not None:  # columns, in bulk
                    feed(pb)
                else:
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
