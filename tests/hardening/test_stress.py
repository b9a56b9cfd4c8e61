"""Threads: 8 threads x N annotated calls with the recorder attached; nothing lost, all balanced.

Each worker thread makes N annotated calls, a quarter of each kind: a decorated function, a
``with annotate(...)`` block, ``push_range``/``pop_range`` with a payload, and ``start_range``
whose range an *ender* thread closes with ``end_range``. The recording must hold exactly those
events: counts per thread and kind, pushes and pops balanced and properly nested per thread and
domain, every started id ended once (on the ender thread), every payload present, nothing
dropped.

Default: N = 4000 per thread, checked event by event with ``recorder.read``. Full size
(``-m slow``): N = 1,000,000 per thread (16 million events), checked by a streaming pass over the
record file (counts, nesting, ids), since 16 million ``Event`` objects would not fit in memory.
"""
from __future__ import annotations

import glob
import os
from collections import Counter, defaultdict

import pytest

from support.hardening import opted_in_slow, run_child  # noqa: F401 (fixture)
from nvtx_cffi import recorder
from nvtx_cffi._colors import NVTX_COLORS

THREADS = 8

CHILD = """
import json, queue, sys, threading, time
import nvtx_cffi as nvtx

N, THREADS = int(sys.argv[1]), int(sys.argv[2])
assert nvtx.enabled()

@nvtx.annotate("decorated", color="red")
def decorated(i):
    return i

block = nvtx.annotate("with", domain="stress", category="loop")
started = queue.Queue(maxsize=100000)
tids = {}
barrier = threading.Barrier(THREADS)

def worker(k):
    tids[k] = threading.get_native_id()
    barrier.wait()  # all threads annotate at the same time
    for i in range(N // 4):
        decorated(i)
        with block:
            pass
        nvtx.push_range("pushed", domain="stress", payload=i)
        nvtx.pop_range(domain="stress")
        started.put(nvtx.start_range("crossing", color="green"))
    started.put(None)

def ender():
    tids["ender"] = threading.get_native_id()
    finished = 0
    while finished < THREADS:
        rng = started.get()
        if rng is None:
            finished += 1
        else:
            nvtx.end_range(rng)

threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
threads.append(threading.Thread(target=ender))
t0 = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
seconds = time.perf_counter() - t0
print(json.dumps({"tids": tids, "seconds": seconds,
                  "loop_category": nvtx.get_domain("stress").get_category_id("loop")}))
"""


def _run(tmp_path, n: int, timeout: float) -> dict:
    code = CHILD.replace("int(sys.argv[1]), int(sys.argv[2])", f"{n}, {THREADS}")
    return run_child(code, tmp_path, timeout=timeout)


def test_threads_exact_events(tmp_path):
    n = 4000
    out = _run(tmp_path, n, timeout=300)
    rec = recorder.read(tmp_path)
    assert rec.dropped == 0 and len(rec.processes) == 1
    workers = {out["tids"][str(k)] for k in range(THREADS)}
    ender = out["tids"]["ender"]
    assert len(workers) == THREADS and ender not in workers
    events = [e for e in rec.events if e.kind in ("push", "pop", "start", "end")]
    q = n // 4

    per = Counter((e.tid, e.kind, e.message, e.domain) for e in events)
    for tid in workers:
        assert per[tid, "push", "decorated", None] == q
        assert per[tid, "push", "with", "stress"] == q
        assert per[tid, "push", "pushed", "stress"] == q
        assert per[tid, "pop", None, None] == q
        assert per[tid, "pop", None, "stress"] == 2 * q
        assert per[tid, "start", "crossing", None] == q
    assert per[ender, "end", None, None] == THREADS * q
    assert sum(per.values()) == THREADS * q * 8  # nothing else, nothing more

    # Nesting per thread: each pop closes the innermost open push of its domain; all closed.
    by_thread = defaultdict(list)
    for e in events:
        by_thread[e.tid].append(e)
    for tid in workers:
        stacks = defaultdict(list)
        payloads = []
        for e in by_thread[tid]:
            if e.kind == "push":
                stacks[e.domain].append(e)
                if e.message == "pushed":
                    payloads.append(e.payload)
            elif e.kind == "pop":
                assert stacks[e.domain], f"pop with nothing open on thread {tid}"
                stacks[e.domain].pop()
        assert not any(stacks.values())
        assert payloads == list(range(q))  # in order, none lost

    # Attributes as given.
    for e in events:
        if e.message == "decorated":
            assert (e.color, e.category) == (NVTX_COLORS["red"], 0)
        elif e.message == "with":
            assert (e.color, e.category) == (NVTX_COLORS["blue"], out["loop_category"])
        elif e.message == "crossing":
            assert e.color == NVTX_COLORS["green"]
    # Every started range ended exactly once, on the ender thread.
    starts = [e.range_id for e in events if e.kind == "start"]
    ends = [e.range_id for e in events if e.kind == "end"]
    assert len(set(starts)) == len(starts) == len(ends) and set(starts) == set(ends)


def _stream(path: str):
    """Counts per (tid, kind), nesting per (tid, domain), start/end ids: one pass, no Event objects.

    Reads the file with the columnar reader (recorder.blocks, NumPy arrays of events).
    """
    pytest.importorskip("numpy")
    counts = Counter()
    depth = Counter()
    negative = 0
    starts, ends = set(), set()
    s = recorder.blocks(path)
    for b in s:
        ev = b.events
        for (tid, kind), c in Counter(zip(ev["tid"].tolist(), ev["kind"].tolist())).items():
            counts[tid, kind] += c
        pp = ev[(ev["kind"] == 1) | (ev["kind"] == 2)]
        for tid, dom, kind in zip(pp["tid"].tolist(), pp["domain"].tolist(), pp["kind"].tolist()):
            depth[tid, dom] += 1 if kind == 1 else -1
            negative += depth[tid, dom] < 0
        starts.update(ev["range_id"][ev["kind"] == 3].tolist())
        ends.update(ev["range_id"][ev["kind"] == 4].tolist())
    return counts, depth, negative, starts, ends, s.dropped


@pytest.mark.slow
def test_threads_full_size(tmp_path, opted_in_slow):
    n = 1_000_000
    out = _run(tmp_path, n, timeout=3600)
    files = glob.glob(str(tmp_path / "*.nvtxrec"))
    assert len(files) == 1
    counts, depth, negative, starts, ends, dropped = _stream(files[0])
    q = n // 4
    workers = {out["tids"][str(k)] for k in range(THREADS)}
    ender = out["tids"]["ender"]
    assert dropped == 0
    for tid in workers:
        assert (counts[tid, 1], counts[tid, 2], counts[tid, 3], counts[tid, 4]) == (3 * q, 3 * q, q, 0)
    assert counts[ender, 4] == THREADS * q
    assert negative == 0 and not any(depth.values())
    assert len(starts) == THREADS * q and starts == ends
    events = sum(c for (tid, kind), c in counts.items() if kind <= 5)
    assert events == THREADS * q * 8
    print(f"\n{THREADS} threads x {n} calls: {events} events, {out['seconds']:.1f} s, "
          f"{os.path.getsize(files[0]) / 2**20:.0f} MiB, dropped {dropped}")
