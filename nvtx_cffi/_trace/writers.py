"""What a conversion writes to: the :class:`Writer` protocol, and the registry of writers by name.

A conversion (:mod:`.convert`) reads a recording, pairs it (:mod:`.pairing`) and hands the result
to its writers, each one a :class:`Writer`. A format module registers its writer class under a
format name (:func:`register`) with the file endings that pick it for a trace file:

* ``json`` (``.json``): Chrome Trace Event JSON, :mod:`.chrome`;
* ``pftrace`` (``.pftrace``, ``.perfetto-trace``): Perfetto's protobuf trace, :mod:`.pftrace`;
* ``sqlite`` (``.sqlite``, ``.sqlite3``, ``.db``): Nsight Systems' export schema, :mod:`.sqlite`;
* ``png``: what ``--png`` draws, :mod:`.png` (drawn once the trace is in place: ``write_png``);
* ``stats``: what ``--stats`` prints, :mod:`.stats`.

A registered class opens with ``cls.open(output, recording)``: its file (None for those that
write none during the conversion) and the :class:`~.columns.Source` it converts (its time bounds).

>>> format_for("run.pftrace"), format_for("a.trace.json"), format_for("x.db")
('pftrace', 'json', 'sqlite')
"""
from __future__ import annotations

import importlib
import os
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

if TYPE_CHECKING:
    from ..ext_records import CounterSample
    from .columns import Source
    from .counters import CounterTrack, SampleBlock
    from .model import Timeline
    from .pairing import PairedBatch

__all__ = ["Writer", "TrackCounters", "StreamWriter", "register", "endings", "format_for", "writer_class",
           "open_writer"]


class Writer(Protocol):
    """What every writer of a conversion takes, in this order: the paired batches and counter
    samples as the recording is read, then :meth:`finish`; :meth:`close` in any case (also after
    an error)."""

    def batch(self, pb: "PairedBatch") -> None:
        """The ranges and marks of one paired batch."""

    def sample(self, sample: "CounterSample", tracks: Sequence[Tuple["CounterTrack", Optional[float]]]) -> None:
        """One counter sample and its (track, value) per numeric field (value None: a gap)."""

    # A writer may also take ``samples(block)``: a :class:`~.counters.SampleBlock` of samples at once,
    # the same as ``sample`` of each of them (:meth:`~.counters.SampleBlock.each`), which the
    # conversion calls for a writer without it.

    def finish(self, timeline: "Timeline") -> int:
        """The recording is read and ``timeline`` complete: complete the output; returns the
        events written."""

    def close(self) -> None:
        """Release what the writer holds (its file)."""


class TrackCounters:
    """:meth:`Writer.sample` for a writer that takes a counter sample one track at a time, with its
    ``counter(pid, name, unit, time_ns, value, track=, no_value=)`` (``no_value``: ``"zero"``,
    ``"unchanged"`` or ``"unavailable"`` for a ``sample_no_value`` sample)."""

    counter: Callable[..., None]

    def sample(self, sample: "CounterSample", tracks: Sequence[Tuple["CounterTrack", Optional[float]]]) -> None:
        from .counters import NO_VALUE_KINDS

        no_value = NO_VALUE_KINDS.get(sample.no_value) if sample.no_value is not None else None
        for track, value in tracks:
            self.counter(sample.pid, track.title, track.unit, sample.time_ns, value, track=track, no_value=no_value)

    def samples(self, block: "SampleBlock") -> None:
        """``counter`` of each row of a :class:`~.counters.SampleBlock`, one at a time."""
        pid, tracks = block.pid, block.tracks
        for k, time_ns, value, no_value in zip(block.track.tolist(), block.time.tolist(), block.values(),
                                               block.no_value_kinds()):
            track = tracks[k]
            self.counter(pid, track.title, track.unit, time_ns, value, track=track, no_value=no_value)


class StreamWriter(TrackCounters):
    """A writer of the stream ``out`` whose time 0 is ``start_ns`` (the recording's first event);
    :meth:`close` closes ``out`` when the writer opened it (``close=True``: :meth:`open`, a binary file)."""

    def __init__(self, out: IO[Any], start_ns: int, close: bool = False) -> None:
        self._out = out
        self._t0 = start_ns
        self._close = close

    @classmethod
    def open(cls, output: str, recording: "Source") -> Any:
        """The writer of the file ``output`` (created or replaced) for ``recording``."""
        return cls(open(output, "wb"), recording.start_ns or 0, close=True)

    def close(self) -> None:
        if self._close:
            self._out.close()


#: The modules that register writers, in the order their file endings are listed.
_MODULES = ("chrome", "pftrace", "sqlite", "png", "stats")
_CLASSES: Dict[str, Any] = {}
_ENDINGS: List[Tuple[str, str, str]] = []  # (module, ending, format name)


def register(name: str, *file_endings: str) -> Callable[[Any], Any]:
    """Class decorator: the writer of format ``name``, which ``file_endings`` pick for a trace file."""

    def add(cls: Any) -> Any:
        _CLASSES[name] = cls
        module = cls.__module__.rpartition(".")[2]
        _ENDINGS.extend((module, ending, name) for ending in file_endings)
        return cls

    return add


def _load() -> None:
    for module in _MODULES:  # each registers its writer on import
        importlib.import_module(f".{module}", __package__)


def endings() -> Dict[str, str]:
    """The trace file endings and the format each one picks, as the help lists them."""
    _load()
    ordered = sorted(_ENDINGS, key=lambda e: _MODULES.index(e[0]))  # stable: a module's in its order
    return {ending: name for _module, ending, name in ordered}


def format_for(path: str) -> str:
    """The trace format named by ``path``'s ending; :class:`ValueError` for an unknown one."""
    lower = path.lower()
    known = endings()
    for ending, fmt in known.items():
        if lower.endswith(ending):
            return fmt
    msg = (f"cannot tell the trace format from {os.path.basename(path)!r}: end the name with one of "
           f"{', '.join(known)}")
    raise ValueError(msg)


def writer_class(name: str) -> Any:
    """The writer class registered as ``name``; :class:`ValueError` for an unknown one."""
    _load()
    cls = _CLASSES.get(name)
    if cls is None:
        msg = f"unknown trace format {name!r}"
        raise ValueError(msg)
    return cls


def open_writer(name: str, output: Optional[str], recording: "Source") -> Writer:
    """The writer of format ``name`` to ``output`` (created or replaced) for ``recording``."""
    return writer_class(name).open(output, recording)
