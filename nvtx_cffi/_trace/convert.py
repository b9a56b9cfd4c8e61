"""Convert a recording, in one direction: source → decode → pairing → writers.

:func:`run` is the pipeline. The source (:func:`open_source`, a :class:`~.columns.Source`) reads
the recording in batches; the decode step (:class:`~.counters.BatchExtDecoder`) takes each batch's
counter samples and binary payloads on the way; the pairing (:func:`~.pairing.pair_batches`) turns
each batch into a :class:`~.pairing.PairedBatch`, which every writer (:class:`~.writers.Writer`)
takes, with the counter samples read so far; then each writer's ``finish(timeline)``. What one
conversion decodes stays in it (its :class:`~.counters.ExtPayloads`, handed on with each paired
batch): conversions may run at once, in threads.

:func:`convert` opens the source and the writers for a trace file ``output``, whose ending picks
the format (:func:`~.writers.format_for`): Chrome Trace Event JSON (``.json``), Perfetto's protobuf
trace (``.pftrace``, ``.perfetto-trace``) or an SQLite database in Nsight Systems' export schema
(``.sqlite``, ``.db``, ``.sqlite3``). Without an output (``convert(source, None)``:
``--stats``/``--png`` with ``--no-output``) the pairing, the summary and the picture see every
event, no file is written.

``python -m nvtx_cffi convert DIR -o X`` (:func:`nvtx_cffi._trace.cli.convert_main`) runs this
on a recording kept with ``trace --record-dir DIR`` (or written by any process started with
``nvtx_cffi.recorder.environment(DIR)``), with the trace command's output step: the same trace.
"""
from __future__ import annotations

import collections
import queue
import threading
from typing import Any, Callable, Iterator, List, Optional, Sequence, Union

from .columns import Source, open_recording
from .counters import BatchExtDecoder, ExtPayloads, SampleBlock, compiled, counter_tracks
from .model import Timeline
from .pairing import pair_batches
from .writers import Writer, format_for, open_writer

__all__ = ["convert", "run", "open_source", "RecordingError"]


class RecordingError(ValueError):
    """A record file of the recording is not one the reader takes (not a recording, cut inside its
    header, a header field out of range): the message names the file. Raised before the output
    is opened."""


def open_source(source: Union[str, Sequence[str]], numpy: Optional[bool] = None) -> Source:
    """The recording ``source`` (directory, record file or list of record files) to convert;
    :class:`RecordingError` for a record file the reader refuses. ``numpy=False`` forces the
    pure-Python source (what PyPy runs)."""
    try:
        return open_recording(source, numpy, samples=compiled())
    except ValueError as exc:  # the reader names the file and what is wrong with it
        raise RecordingError(str(exc)) from None


def _drain(pending: "collections.deque[Any]") -> List[Any]:
    """The counter samples decoded so far, taken out of ``pending``."""
    taken = list(pending)
    pending.clear()
    return taken


def _hand_samples(samples: List[Any], writers: Sequence[Writer], timeline: Timeline) -> None:
    """Counter samples (and :class:`~.counters.SampleBlock` s of them) to every writer, counted in the
    timeline (a sample without a numeric field writes nothing and is not counted)."""
    for sample in samples:
        if isinstance(sample, SampleBlock):
            for writer in writers:
                take = getattr(writer, "samples", None)
                if take is not None:
                    take(sample)
                else:  # a writer of one sample at a time
                    for one, tracks in sample.each():
                        writer.sample(one, tracks)
            timeline.counter_samples += sample.sample_count
            timeline.counter_pids.add(sample.pid)
            continue
        tracks = list(counter_tracks(sample))
        for writer in writers:
            writer.sample(sample, tracks)
        if tracks:
            timeline.counter_samples += 1
            timeline.counter_pids.add(sample.pid)


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

    def produce() -> None:
        try:
            for pb in batches:
                if not put((pb, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_DONE, exc))

    thread = threading.Thread(target=produce, name="nvtx-cffi-trace-reader", daemon=True)
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


def run(recording: Source, writers: Sequence[Writer], *, progress: Optional[Callable[[int, int], None]] = None,
        root_pid: Optional[int] = None, root_name: Optional[str] = None) -> Timeline:
    """Convert ``recording`` into ``writers``; returns the timeline. Every writer is closed at the
    end, also after an error (then without its ``finish``).

    ``root_name`` names the process ``root_pid`` (the traced command) when it recorded something.
    ``progress(done, total)`` follows the reader's bytes as the writers take the batches, and ends
    at 100% once they finished (SQLite's index).
    """
    timeline = Timeline()
    payloads = ExtPayloads()
    pending: "collections.deque[Any]" = collections.deque()  # the samples of the batch being read
    decoder = BatchExtDecoder(payloads, pending.append)
    read_at = recording.read_at
    try:
        paired = pair_batches(recording, timeline, decoder.decoded(recording.batches()), payloads)
        # where the reader was when a batch was paired, and the samples read with it (or before,
        # since the last batch): the reader thread runs ahead of the writers, and a sample's place
        # among the events written must not depend on how far
        batches = ((pb, (read_at.done, read_at.total), _drain(pending)) for pb in paired)
        for pb, (done, total), samples in (_prefetch(batches) if recording.numpy else batches):
            _hand_samples(samples, writers, timeline)
            if pb.records is None or len(pb.records):  # (not a batch of counter samples alone)
                for writer in writers:
                    writer.batch(pb)
            if progress is not None and total:
                progress(min(done, total - 1), total)
        if root_pid is not None and root_name is not None and (
                root_pid in timeline.process_names or any(pid == root_pid for pid, _ in timeline.threads)):
            timeline.process_names[root_pid] = root_name
        _hand_samples(_drain(pending), writers, timeline)  # samples after the last NVTX event
        timeline.unmapped_samples = dict(decoder.decoder.unmapped)
        for writer in writers:
            writer.finish(timeline)
    finally:
        for writer in writers:
            writer.close()
    if progress is not None and read_at.total:
        progress(read_at.total, read_at.total)
    return timeline


def convert(source: Union[str, Sequence[str]], output: Optional[str], fmt: Optional[str] = None, *,
            stats: Any = None, picture: Any = None, progress: Optional[Callable[[int, int], None]] = None,
            root_pid: Optional[int] = None, root_name: Optional[str] = None, numpy: Optional[bool] = None,
            counter_stats: Any = None) -> Timeline:
    """Convert the recording ``source`` (directory, record file or list of record files) into
    ``output`` (None: no file, for ``stats`` and ``picture`` only) in format ``fmt`` (default: the
    one its ending names); returns the timeline.

    ``stats`` (a :class:`~.stats.StatsCollector`) and ``counter_stats`` (a
    :class:`~.counters.CounterStats`) count the ranges and counter samples; ``picture`` (a
    :class:`~.png.PngCollector`) gets the recording's time bounds, then the ranges and samples.
    ``numpy=False`` forces the pure-Python path (what PyPy runs). A record file the reader refuses
    raises :class:`RecordingError` (naming it) before ``output`` is opened.
    """
    recording = open_source(source, numpy)
    writers: List[Writer] = []
    if stats is not None or counter_stats is not None:
        from .stats import StatsWriter

        writers.append(StatsWriter(stats, counter_stats))
    if picture is not None:
        picture.begin(recording.start_ns, recording.end_ns)  # the pixel columns, before the first range
        writers.append(picture)
    if output is not None:
        writers.append(open_writer(fmt or format_for(output), output, recording))
    return run(recording, writers, progress=progress, root_pid=root_pid, root_name=root_name)
