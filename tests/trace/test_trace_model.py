"""Pairing rules of the tracer on hand-made event streams (the recorder's own Event type), paired
by the conversion's own pairing (``pairing.build_timeline``).

These are the cases a real program rarely produces on purpose: pops with nothing open, ends of
unknown ids, ranges of two domains interleaved on one thread, ranges still open at exit.
"""
from __future__ import annotations

import io
import json
import math
import random
import statistics

from support.trace_check import validate_chrome_trace

from nvtx_cffi._trace.chrome import write_chrome_trace
from nvtx_cffi._trace.pairing import build_timeline
from nvtx_cffi._trace.stats import format_summary, summarize
from nvtx_cffi.recorder import Event, ProcessInfo


def ev(kind, t, *, tid=1, pid=1, domain=None, message=None, range_id=None, name=None, target=None,
       category=0, color=None):
    return Event(kind=kind, time_ns=t, pid=pid, tid=tid, domain=domain, message=message, color=color,
                 category=category, payload=None, payload_type=None, range_id=range_id, api="ex",
                 name=name, target=target)


def trace_of(timeline):
    out = io.StringIO()
    write_chrome_trace(timeline, out)
    return validate_chrome_trace(json.loads(out.getvalue()))


def test_domains_nest_independently_on_one_thread():
    # a(A) opens, b(B) opens, a closes (A's pop), b closes: overlapping, legal across domains
    events = [ev("push", 10, domain="A", message="a"), ev("push", 20, domain="B", message="b"),
              ev("pop", 30, domain="A"), ev("pop", 40, domain="B")]
    tl = build_timeline(events, {})
    spans = sorted((r.name, r.start_ns, r.end_ns, r.depth) for r in tl.ranges)
    assert spans == [("a", 10, 30, 0), ("b", 20, 40, 0)]
    trace_of(tl)


def test_unmatched_pops_and_ends_are_counted_not_guessed():
    events = [ev("pop", 5), ev("push", 10, message="x"), ev("pop", 20), ev("pop", 25),
              ev("end", 30, range_id=99), ev("start", 40, message="s", range_id=1),
              ev("end", 50, range_id=1, tid=2)]
    tl = build_timeline(events, {})
    assert (tl.unmatched_pops, tl.unmatched_ends, tl.unterminated) == (2, 1, 0)
    assert sorted((r.name, r.style, r.tid, r.end_tid) for r in tl.ranges) == [("s", "start", 1, 2),
                                                                               ("x", "push", 1, 1)]
    text = format_summary(tl)
    assert "2 pop(s) had no open push" in text and "1 end(s) had no matching start" in text


def test_open_ranges_end_at_their_process_last_event_and_stay_out_of_stats():
    events = [ev("push", 10, message="open"), ev("push", 12, message="done"), ev("pop", 15),
              ev("mark", 90, message="last", pid=1), ev("mark", 200, message="other", pid=2, tid=2)]
    tl = build_timeline(events, {})
    (open_range,) = [r for r in tl.ranges if r.unterminated]
    assert (open_range.name, open_range.end_ns) == ("open", 90)  # its process's last event, not pid 2's
    assert [row.name for row in summarize(tl)] == ["done"]
    (x,) = [e for e in trace_of(tl)["traceEvents"] if e.get("name") == "open"]
    assert x["args"]["unterminated"] is True and x["dur"] == 0.08


def test_names_from_process_info_and_thread_name_events():
    info = ProcessInfo(pid=1, ppid=0, path="/usr/bin/python3", dropped=3, thread_names={1: "MainThread"},
                       category_names={("D", 4): "io"})
    events = [ev("thread_name", 1, name="worker", target=2), ev("push", 10, tid=2, domain="D", category=4,
                                                                   message="r"),
              ev("pop", 20, tid=2, domain="D")]
    tl = build_timeline(events, {1: info}, dropped=3)
    assert tl.thread_names == {(1, 1): "MainThread", (1, 2): "worker"}
    (r,) = tl.ranges
    assert r.category == "io"
    doc = trace_of(tl)
    names = {(e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {1: "MainThread", 2: "worker"}
    assert doc["otherData"]["dropped_events"] == 3
    assert "WARNING: 3 event(s) were dropped" in format_summary(tl)


def test_summary_statistics():
    durations = [10, 20, 30, 100]
    events = []
    t = 0
    for d in durations:
        events += [ev("push", t, message="r"), ev("pop", t + d)]
        t += 1000
    (row,) = summarize(build_timeline(events, {}))
    assert (row.count, row.total_ns, row.min_ns, row.max_ns, row.median_ns, row.avg_ns) == (4, 160, 10, 100, 25.0, 40.0)
    assert round(row.stddev_ns, 3) == 40.825  # sample standard deviation
    assert row.percent == 100.0


def test_streamed_order_an_end_before_its_start_pairs_but_not_backwards_in_time():
    # stream order (per thread chunk), not time order: thread 2's chunk came first in the file
    events = [ev("end", 50, range_id=1, tid=2), ev("end", 5, range_id=2, tid=2),
              ev("start", 40, message="s", range_id=1), ev("start", 60, message="late", range_id=2)]
    tl = build_timeline(events, {})
    # the end at 5 is older than the start at 60: not its end (counted); "late" stays open
    assert [(r.name, r.start_ns, r.end_ns, r.end_tid, r.unterminated) for r in tl.ranges] == [
        ("s", 40, 50, 2, False), ("late", 60, 60, 1, True)]
    assert (tl.unmatched_ends, tl.unterminated, tl.range_count) == (1, 1, 2)


def test_median_of_large_groups_is_exact():
    # longer than stats._SORT_AT_MOST (65536): the histogram narrowing runs
    rng = random.Random(3)
    for durations in ([rng.randrange(10**9) for _ in range(70_001)],
                      [rng.choice((7, 7, 7, 10**12)) for _ in range(70_000)],
                      [int(rng.expovariate(1e-4)) for _ in range(66_000)]):
        events = []
        for i, d in enumerate(durations):
            events += [ev("push", i * 10**13, message="r"), ev("pop", i * 10**13 + d)]
        (row,) = summarize(build_timeline(events, {}))
        assert row.median_ns == statistics.median(durations)
        assert (row.min_ns, row.max_ns, row.total_ns) == (min(durations), max(durations), sum(durations))
        assert math.isclose(row.stddev_ns, statistics.stdev(durations), rel_tol=1e-9)
