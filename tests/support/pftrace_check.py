"""Read a ``.pftrace`` back with Perfetto's own message classes and rebuild what a viewer shows.

Independent of the writer: written from Perfetto's trace_packet.proto / track_event.proto docs
(incremental clocks, sequence defaults, interned data, SEQ_INCREMENTAL_STATE_CLEARED, zlib
``compressed_packets``). Needs the ``perfetto`` and ``protobuf`` packages (CPython test extras).
"""
from __future__ import annotations

import zlib
from collections import defaultdict
from typing import Any, Dict, List, Tuple

__all__ = ["packets", "read_pftrace", "Perfetto"]


class Perfetto:
    """Tracks, slices (per track, with depth), instants, counters and names of a trace."""

    def __init__(self) -> None:
        self.processes: Dict[int, Tuple[int, str]] = {}  # uuid -> (pid, name)
        self.threads: Dict[int, Tuple[int, int, str]] = {}  # uuid -> (pid, tid, name)
        self.tracks: Dict[int, Tuple[int, str]] = {}  # uuid -> (parent uuid, name): domain/async/counter
        self.counter_tracks: Dict[int, str] = {}  # uuid -> unit
        self.slices: List[dict] = []  # name, track, start, end, depth, args
        self.instants: List[dict] = []
        self.counters: List[Tuple[int, int, float]] = []  # (track, ts, value)
        self.open: Dict[int, list] = defaultdict(list)
        self.packets = 0

    def thread_of(self, track: int) -> Tuple[int, int]:
        """(pid, tid) of a thread track or of a domain track under one."""
        if track in self.threads:
            return self.threads[track][:2]
        parent = self.tracks[track][0]
        return self.threads[parent][:2]


def packets(data: bytes) -> List[Any]:
    """The trace's packets in order, those inside ``compressed_packets`` (zlib) in their place."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    out = []
    for p in pb.Trace.FromString(data).packet:
        if p.HasField("compressed_packets"):
            out.extend(packets(zlib.decompress(p.compressed_packets)))
        else:
            out.append(p)
    return out


def read_pftrace(path: str) -> Perfetto:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    with open(path, "rb") as f:
        trace = packets(f.read())
    out = Perfetto()
    out.packets = len(trace)
    defaults: Dict[int, Any] = {}
    clocks: Dict[int, int] = {}  # seq -> current value of its incremental clock 64
    names: Dict[int, Dict[int, str]] = defaultdict(dict)
    categories: Dict[int, Dict[int, str]] = defaultdict(dict)
    ann_names: Dict[int, Dict[int, str]] = defaultdict(dict)
    ann_strings: Dict[int, Dict[int, str]] = defaultdict(dict)
    for p in trace:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            for table in (names, categories, ann_names, ann_strings):
                table[seq].clear()
            defaults.pop(seq, None)
        if p.HasField("trace_packet_defaults"):
            defaults[seq] = p.trace_packet_defaults
        if p.HasField("interned_data"):
            d = p.interned_data
            names[seq].update({e.iid: e.name for e in d.event_names})
            categories[seq].update({e.iid: e.name for e in d.event_categories})
            ann_names[seq].update({e.iid: e.name for e in d.debug_annotation_names})
            ann_strings[seq].update({e.iid: e.str.decode() for e in d.debug_annotation_string_values})
        if p.HasField("clock_snapshot"):
            for c in p.clock_snapshot.clocks:
                if c.is_incremental:
                    clocks[seq] = c.timestamp
            continue
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            if t.HasField("process"):
                out.processes[t.uuid] = (t.process.pid, t.process.process_name)
            elif t.HasField("thread"):
                out.threads[t.uuid] = (t.thread.pid, t.thread.tid, t.thread.thread_name)
            else:
                out.tracks[t.uuid] = (t.parent_uuid, t.name)
                if t.HasField("counter"):
                    out.counter_tracks[t.uuid] = t.counter.unit_name
            continue
        if not p.HasField("track_event"):
            continue
        clock = p.timestamp_clock_id or (defaults[seq].timestamp_clock_id if seq in defaults else 0)
        if clock == 64:
            clocks[seq] += p.timestamp
            ts = clocks[seq]
        else:
            assert clock == 3, p  # MONOTONIC, the trace clock
            ts = p.timestamp
        e = p.track_event
        track = e.track_uuid if e.HasField("track_uuid") else defaults[seq].track_event_defaults.track_uuid
        name = names[seq][e.name_iid] if e.HasField("name_iid") else e.name
        args = {}
        for a in e.debug_annotations:
            key = ann_names[seq][a.name_iid] if a.HasField("name_iid") else a.name
            which = a.WhichOneof("value")
            args[key] = ann_strings[seq][a.string_value_iid] if which == "string_value_iid" else getattr(a, which)
        cats = [categories[seq][i] for i in e.category_iids] + list(e.categories)
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stack = out.open[track]
            s = {"name": name, "track": track, "start": ts, "end": None, "depth": len(stack), "args": args,
                 "categories": cats}
            stack.append(s)
            out.slices.append(s)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            s = out.open[track].pop()
            assert ts >= s["start"]
            s["end"] = ts
            s["args"].update(args)
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            out.instants.append({"name": name, "track": track, "ts": ts, "args": args, "categories": cats})
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            out.counters.append((track, ts, e.double_counter_value))
    return out
