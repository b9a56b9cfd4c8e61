"""Independent checks of the tracer's output: a Chrome Trace Event JSON validator and CLI helpers.

Written from the Trace Event Format spec, not from the writer: structure, per-thread monotonic
timestamps (in file order for B/E duration events, as the spec asks; in viewer order — sorted by
time — for the others, which the spec lets come in any order), proper nesting of complete events
per thread and domain, paired async events, and metadata for every thread that has events.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["validate_chrome_trace", "run_tracer", "record_in_chunks", "Traced", "complete_events", "sqlite_rows", "EPS"]

#: Float tolerance in microseconds (timestamps are ns / 1000 as floats).
EPS = 1e-6

_PHASES = {"X", "B", "E", "b", "e", "i", "M"}


def validate_chrome_trace(doc: Any) -> Dict[str, Any]:
    """Assert ``doc`` is a well-formed trace; returns the events grouped for further assertions."""
    assert isinstance(doc, dict), "JSON object format expected"
    events = doc["traceEvents"]
    assert isinstance(events, list)
    last_ts: Dict[tuple, float] = {}
    stacks: Dict[tuple, List[tuple]] = defaultdict(list)
    open_async: Dict[tuple, dict] = {}
    named_threads = set()
    named_processes = set()
    threads_with_events = set()
    timed = []
    duration_ts: Dict[tuple, float] = {}
    for ev in events:
        assert isinstance(ev, dict)
        ph = ev["ph"]
        assert ph in _PHASES, ev
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int), ev
        key = (ev["pid"], ev["tid"])
        if ph == "M":
            assert ev["name"] in ("process_name", "thread_name"), ev
            assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
            (named_threads if ev["name"] == "thread_name" else named_processes).add(
                key if ev["name"] == "thread_name" else ev["pid"])
            continue
        ts = ev["ts"]
        assert isinstance(ts, (int, float)) and ts >= 0, ev
        if ph in ("B", "E"):  # the spec asks file order only of duration events, per thread
            assert ts + EPS >= duration_ts.get(key, 0.0), f"B/E timestamps go back on thread {key}: {ev}"
            duration_ts[key] = ts
        timed.append(ev)
    # Complete, async and instant events may come in any order (the spec; Perfetto and
    # chrome://tracing sort them): check them in the order a viewer reads them, by time and, at
    # equal times, the longer range first (the enclosing one); stable, so equal keys keep file order.
    timed.sort(key=lambda ev: (ev["ts"], -ev["dur"] if ev["ph"] == "X" else 0))
    for ev in timed:
        ph = ev["ph"]
        key = (ev["pid"], ev["tid"])
        ts = ev["ts"]
        assert isinstance(ev.get("args", {}), dict)
        assert ts + EPS >= last_ts.get(key, 0.0), f"timestamps go back on thread {key}: {ev}"
        last_ts[key] = ts
        threads_with_events.add(key)
        if ph == "X":
            dur = ev["dur"]
            assert isinstance(dur, (int, float)) and dur >= 0, ev
            stack = stacks[(ev["pid"], ev["tid"], ev["args"].get("domain"))]
            while stack and stack[-1][1] <= ts + EPS:
                stack.pop()  # ended before this one starts
            if stack:
                assert ts + dur <= stack[-1][1] + EPS, f"{ev} overlaps {stack[-1][2]} without nesting"
            stack.append((ts, ts + dur, ev["name"]))
        elif ph in ("b", "e"):
            akey = (ev["pid"], ev["cat"], ev["name"], json.dumps(ev["id2"], sort_keys=True))
            if ph == "b":
                assert akey not in open_async, f"async id reused while open: {ev}"
                open_async[akey] = ev
            else:
                begin = open_async.pop(akey, None)
                assert begin is not None, f"async end without begin: {ev}"
                assert ts + EPS >= begin["ts"]
        elif ph == "i":
            assert ev["s"] in ("t", "p", "g")
    assert not open_async, f"async begins without end: {list(open_async.values())}"
    assert threads_with_events <= named_threads, threads_with_events - named_threads
    assert {pid for pid, _ in threads_with_events} <= named_processes
    return doc


def complete_events(doc: Dict[str, Any], name: Optional[str] = None) -> List[dict]:
    """The ``X`` events of ``doc`` (with that name, if given)."""
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and (name is None or e["name"] == name)]


class Traced:
    """Result of one tracer run: process, parsed and validated trace (None if not written)."""

    def __init__(self, proc: subprocess.CompletedProcess, trace_path: str) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.trace_path = trace_path
        self.doc: Optional[Dict[str, Any]] = None
        if os.path.exists(trace_path):
            with open(trace_path, encoding="utf-8") as f:
                self.doc = validate_chrome_trace(json.load(f))

    def events(self, ph: str, name: Optional[str] = None) -> List[dict]:
        assert self.doc is not None, f"no trace written; stderr:\n{self.stderr}"
        return [e for e in self.doc["traceEvents"] if e["ph"] == ph and (name is None or e["name"] == name)]

    def thread_names(self) -> Dict[tuple, str]:
        return {(e["pid"], e["tid"]): e["args"]["name"] for e in self.events("M", "thread_name")}


def run_tracer(cwd: str, program: Sequence[str], *tracer_args: str, env: Optional[Dict[str, str]] = None,
               trace_name: str = "trace.json", timeout: float = 120) -> Traced:
    """``python -m nvtx_cffi trace -o <cwd>/trace.json [tracer_args] program...`` in ``cwd``."""
    trace_path = os.path.join(cwd, trace_name)
    full_env = dict(os.environ)
    # The tracer must set these itself; a stray value from the test runner must not help it.
    for var in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR", "NVTX_CFFI_RECORD_MAX_BYTES"):
        full_env.pop(var, None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "nvtx_cffi", "trace", "-o", trace_path, *tracer_args, *program],
                          cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    return Traced(proc, trace_path)


def record_in_chunks(tmp: Any, scenario: str) -> Tuple[str, str]:
    """Run the Python program ``scenario`` (dedented) with the recorder attached, its record file in
    4 KiB chunks (many: the conversion's batches carry open ranges from one to the next), into
    ``tmp / "raw"``; returns the recording's directory and the program's stdout."""
    from nvtx_cffi import recorder

    raw = tmp / "raw"
    env = {**os.environ, **recorder.environment(str(raw))}
    env["NVTX_CFFI_RECORD_CHUNK_BYTES"] = "4096"
    env.pop("NVTX_CFFI_RECORD_MAX_BYTES", None)
    script = tmp / "scenario.py"
    script.write_text(textwrap.dedent(scenario))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    return str(raw), proc.stdout


def sqlite_rows(path: str, table: str = "NVTX_EVENTS") -> List[tuple]:
    """Every row of ``table`` of the SQLite file ``path``, in the order they were inserted."""
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    finally:
        db.close()
