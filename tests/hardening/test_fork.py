"""Processes: os.fork() after use, spawn and forkserver children, a decorated function pickled over.

Each scenario runs in a recorded child (a script file, so that spawn/forkserver children can
import its functions); the recording must show every child's events under the child's own pid.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import defaultdict

import pytest

from support.hardening import child_env
from support.paths import TESTS
from nvtx_cffi import recorder
from nvtx_cffi._colors import NVTX_COLORS

SCRIPT = '''
import itertools, json, multiprocessing as mp, os, pickle, signal, sys, threading
import nvtx_cffi as nvtx

@nvtx.annotate("work", color="orange", category="jobs", payload=7)
def work(x):
    nvtx.mark(f"in child {x}")
    return os.getpid()

ANN = nvtx.annotate("pickled annotate", color="#123456", domain="fork", category="cat")

def use_pickled(blob):
    with pickle.loads(blob):
        pass
    return os.getpid()

def forked(k):
    signal.alarm(20)  # a lock inherited locked would hang here: die instead, and fail the test
    work(100 + k)  # prepared before the fork
    nvtx.push_range(f"child {k} new message", domain=f"child domain {k}", category="fresh")
    nvtx.pop_range(domain=f"child domain {k}")
    return 0

if __name__ == "__main__":
    mode = sys.argv[1]
    assert nvtx.enabled()
    with nvtx.annotate("parent before", domain="fork"):
        work(0)
    out = {"parent": os.getpid()}
    if mode == "fork":
        # Registration keeps running on another thread while the main thread forks.
        stop = threading.Event()
        def register():
            for i in itertools.count():
                if stop.is_set() or i >= 20000:
                    break
                nvtx.mark(f"registering {i}", domain="fork")
        thread = threading.Thread(target=register)
        thread.start()
        children = []
        for k in range(int(sys.argv[2])):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = forked(k)
                finally:
                    os._exit(code)
            children.append(pid)
        stop.set()
        thread.join()
        status = {pid: os.waitpid(pid, 0)[1] for pid in children}
        out["children"] = children
        out["status"] = [status[pid] for pid in children]
    else:
        ctx = mp.get_context(mode)
        with ctx.Pool(2) as pool:
            out["work_pids"] = pool.map(work, [1, 2, 3, 4])
            out["pickled_pids"] = pool.map(use_pickled, [pickle.dumps(ANN)] * 2)
        out["pickled_work"] = pickle.loads(pickle.dumps(work)) is work
    nvtx.mark("parent after")
    print(json.dumps(out))
'''


def run_script(tmp_path, *args, timeout=300) -> dict:
    import json

    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script), *args], env=child_env(tmp_path / "rec"),
                          capture_output=True, text=True, timeout=timeout, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def by_pid(rec):
    events = defaultdict(list)
    for e in rec.events:
        if e.kind in ("push", "pop", "start", "end", "mark"):
            events[e.pid].append(e)
    return events


def parent_checks(rec, out):
    parent = [(e.kind, e.domain, e.message) for e in by_pid(rec)[out["parent"]] if "registering" not in (e.message or "")]
    assert parent[:4] == [("push", "fork", "parent before"), ("push", None, "work"), ("mark", None, "in child 0"),
                          ("pop", None, None)]
    assert parent[-1] == ("mark", None, "parent after")


def test_fork_after_use(tmp_path):
    n = 12
    out = run_script(tmp_path, "fork", str(n))
    assert out["status"] == [0] * n
    rec = recorder.read(tmp_path / "rec")
    assert rec.dropped == 0
    events = by_pid(rec)
    parent_checks(rec, out)
    for k, pid in enumerate(out["children"]):
        assert pid in rec.processes and rec.processes[pid].ppid == out["parent"]
        got = [(e.kind, e.domain, e.message, e.color, e.payload, e.tid) for e in events[pid]]
        assert got == [
            ("push", None, "work", NVTX_COLORS["orange"], 7, pid),
            ("mark", None, f"in child {100 + k}", NVTX_COLORS["blue"], None, pid),
            ("pop", None, None, None, None, pid),
            ("push", f"child domain {k}", f"child {k} new message", NVTX_COLORS["blue"], None, pid),
            ("pop", f"child domain {k}", None, None, None, pid),
        ]
        fresh = events[pid][3].category
        assert rec.processes[pid].category_names[(f"child domain {k}", fresh)] == "fresh"
    # The parent's registering thread was not disturbed by the forks either.
    registering = [e.message for e in events[out["parent"]] if (e.message or "").startswith("registering")]
    assert registering == [f"registering {i}" for i in range(len(registering))] and registering


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver_children(tmp_path, method):
    out = run_script(tmp_path, method)
    assert out["pickled_work"] is True  # the decorated function pickles by reference
    rec = recorder.read(tmp_path / "rec")
    assert rec.dropped == 0
    events = by_pid(rec)
    parent_checks(rec, out)
    children = set(out["work_pids"]) | set(out["pickled_pids"])
    assert out["parent"] not in children
    works = [e for pid in children for e in events[pid] if e.message == "work"]
    assert len(works) == 4
    for e in works:
        jobs = [cid for (domain, cid), name in rec.processes[e.pid].category_names.items()
                if (domain, name) == (None, "jobs")]
        assert (e.kind, e.color, e.payload, e.payload_type, [e.category]) == (
            "push", NVTX_COLORS["orange"], 7, "int64", jobs)
    marks = sorted(e.message for pid in children for e in events[pid] if e.kind == "mark")
    assert marks == [f"in child {x}" for x in (1, 2, 3, 4)]
    pickled = [e for pid in children for e in events[pid] if e.message == "pickled annotate"]
    assert len(pickled) == 2
    for e in pickled:
        cats = rec.processes[e.pid].category_names
        assert (e.kind, e.domain, e.color, cats[("fork", e.category)]) == ("push", "fork", 0xFF123456, "cat")
    for pid in children:  # balanced in each child
        kinds = [e.kind for e in events[pid]]
        assert kinds.count("push") == kinds.count("pop")


HELD_AT_FORK = '''
import faulthandler, json, os, threading, time
import nvtx_cffi as nvtx
from nvtx_cffi import _counters, _payload, _threads

domain = nvtx.get_domain("held at fork")
nvtx.mark("parent", domain="held at fork")
status = {}
for name, lock in [("counters", _counters._lock), ("payload schemas", _payload._lock),
                   ("thread hooks", _threads._install_lock)]:
    held = threading.Event()

    def holder():
        with lock:  # another thread in the middle of a registration when the process forks
            held.set()
            time.sleep(0.3)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(5, exit=True)  # a lock left held: the child hangs
        domain.get_counter(f"child counter {name}", int).sample(len(name))
        nvtx.mark(f"child {name}", domain="held at fork", payload=[1, len(name)])
        child_thread = threading.Thread(target=nvtx.mark, args=(f"child thread {name}",))
        child_thread.start()
        child_thread.join()
        os._exit(0)
    thread.join()
    status[name] = os.waitpid(pid, 0)[1]
print(json.dumps(status))
'''


def test_a_fork_while_another_thread_registers_a_counter_or_schema_leaves_the_child_working(tmp_path):
    """The counter, schema and thread-hook locks are held across fork() like the domain's: a child
    forked while another thread held one used to hang at its first counter or array payload."""
    import json

    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(HELD_AT_FORK)], env=child_env(tmp_path / "rec"),
                          capture_output=True, text=True, timeout=120, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    status = json.loads(proc.stdout.strip().splitlines()[-1])
    assert status == {"counters": 0, "payload schemas": 0, "thread hooks": 0}, proc.stderr[-4000:]
    rec = recorder.read(tmp_path / "rec")
    marks = sorted(e.message for e in rec.events if e.kind == "mark" and e.message.startswith("child"))
    assert marks == sorted(f"child {kind}{name}" for name in ("counters", "payload schemas", "thread hooks")
                           for kind in ("", "thread "))


FORK_WHILE_REGISTERING = '''
import faulthandler, json, os, threading, time
import nvtx_cffi as nvtx

faulthandler.dump_traceback_later(30, exit=True)  # a deadlock at fork(): fail with the stacks, not hang
nvtx.mark("first")  # NVTX initialised, the tool loaded
registering = threading.Thread(target=nvtx.mark, args=("a new message",))  # registered: 300 ms in the tool
registering.start()
time.sleep(0.1)
pid = os.fork()  # (where the GIL is let go around C calls, as on PyPy: while the other thread registers)
if pid == 0:
    nvtx.mark("in the child")  # another registration, in the child: its locks were left free
    os._exit(0)
status = os.waitpid(pid, 0)[1]
registering.join()
print(json.dumps({"status": status}))
'''


def test_a_fork_while_another_thread_registers_a_string_takes_the_locks_in_order(tmp_path):
    """A string registration holds nvtx-cffi's registry lock while NVTX runs the tool's callback,
    which takes the tool's own lock; fork() must take them in that order. The tool here (as the
    recorder) holds its lock across fork() and registers slowly. nvtx-cffi's fork handlers used to
    be registered before the tool's, so fork() took the tool's lock first, then waited for the
    registering thread, which waited for the tool's lock: the parent hung (met on PyPy, whose cffi
    calls let other threads run; on CPython the GIL, kept across nvtx-cffi's C calls, orders them)."""
    import json

    from support.cbuild import c_library
    from support.paths import C_HELPERS

    tool = c_library(tmp_path, "slow_registration_tool", [C_HELPERS / "slow_registration_tool.c"], ["-lpthread"])
    env = {**child_env(tmp_path / "rec"), "NVTX_INJECTION64_PATH": tool}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FORK_WHILE_REGISTERING)], env=env,
                          capture_output=True, text=True, timeout=60, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"status": 0}


FORKING_TOOL = r'''
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
/* An NVTX tool that starts a helper process with fork() while NVTX initialises it (nvtx-cffi runs
 * that under its registry lock), then declines to record. */
int InitializeInjectionNvtx2(void *get_export_table)
{
    (void)get_export_table;
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    int status = 0;
    waitpid(pid, &status, 0);
    fprintf(stderr, "helper exited %d\n", WEXITSTATUS(status));
    return 0;
}
'''


def test_a_tool_that_forks_while_it_initialises_does_not_hang_the_first_call(tmp_path):
    """nvtx-cffi's registry lock is held while NVTX runs the tool's initialisation; its atfork
    handler must not lock it again in the thread that forks (it hung there, in pthread_mutex_lock)."""
    import os
    import shutil

    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    source, tool = tmp_path / "forking_tool.c", tmp_path / "libforking_tool.so"
    source.write_text(FORKING_TOOL)
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", str(source), "-o", str(tool)],
                   check=True)
    env = {**child_env(tmp_path / "rec"), "NVTX_INJECTION64_PATH": str(tool)}
    code = "import nvtx_cffi as nvtx; nvtx.mark('first'); d = nvtx.get_domain('after'); print(nvtx.enabled(), d.name)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout.split(), proc.stderr.strip()) == (0, ["False", "after"], "helper exited 7")


REGISTERED_BEFORE_FORK = '''
import json, multiprocessing as mp, os, sys
import numpy as np
import nvtx_cffi as nvtx

domain = nvtx.get_domain("fork ext")
depth = domain.get_counter("depth", int)  # registered before any fork
depth.sample(-1)
nvtx.mark("parent array", domain="fork ext", payload=np.array([-1, -2, -3], dtype=np.int32))  # the dtype's schema

def child(k):
    depth.sample(k)
    nvtx.mark(f"child array {k}", domain="fork ext", payload=np.array([k, k + 1, k + 2], dtype=np.int32))
    return os.getpid()

start_together = None  # each worker's first task waits for the other three: every worker records

def started_together(barrier):
    global start_together
    start_together = barrier

def pooled(k):
    global start_together
    if start_together is not None:
        start_together.wait(120)
        start_together = None
    return child(k)

if __name__ == "__main__":
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child(1000)
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    ctx = mp.get_context("fork")
    with ctx.Pool(4, initializer=started_together, initargs=(ctx.Barrier(4),)) as pool:
        workers = pool.map(pooled, range(100), chunksize=5)
    print(json.dumps({"parent": os.getpid(), "forked": pid, "workers": workers}))
'''


def test_a_counter_and_a_payload_schema_registered_before_fork_reach_the_children(tmp_path):
    """A counter registered, and an array dtype's payload schema first sent, in the parent: the
    forked children's files re-record them (flagged inherited, like domains and strings), so each
    child's samples and array payloads decode with the right values."""
    pytest.importorskip("numpy")
    import json

    from nvtx_cffi._trace.convert import convert
    from nvtx_cffi.ext_records import ExtDecoder

    script = tmp_path / "registered.py"
    script.write_text(textwrap.dedent(REGISTERED_BEFORE_FORK))
    proc = subprocess.run([sys.executable, str(script)], env=child_env(tmp_path / "rec"), capture_output=True,
                          text=True, timeout=300, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr[-6000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    values: dict = defaultdict(list)  # pid -> its samples' values
    values[out["parent"]].append(-1)
    values[out["forked"]].append(1000)
    for k, pid in enumerate(out["workers"]):
        values[pid].append(k)
    assert len(set(out["workers"])) == 4
    rec = recorder.read(tmp_path / "rec")
    assert rec.dropped == 0
    decoder = ExtDecoder()
    got: dict = defaultdict(list)
    arrays: dict = {}
    for e in rec.events:  # one process's events in time order
        for s in decoder.feed(e):
            assert (s.counter.name, s.counter.domain) == ("depth", "fork ext")
            got[s.pid].append(s.values["value"])
        if e.kind == "mark":
            arrays[e.message] = (e.pid, decoder.payload_of(e)[0])
    assert {pid: sorted(v) for pid, v in got.items()} == {pid: sorted(v) for pid, v in values.items()}
    assert arrays.pop("parent array") == (out["parent"], [-1, -2, -3])
    assert arrays.pop("child array 1000") == (out["forked"], [1000, 1001, 1002])
    assert arrays == {f"child array {k}": (pid, [k, k + 1, k + 2]) for k, pid in enumerate(out["workers"])}
    # the converted trace (columnar and Event-API readers alike) has every sample
    for use_numpy in (True, False):
        trace = tmp_path / f"trace{int(use_numpy)}.json"
        convert(str(tmp_path / "rec"), str(trace), numpy=use_numpy)
        samples = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "C"]
        assert sorted((e["pid"], e["args"]["value"]) for e in samples) == sorted(
            (pid, v) for pid, vs in values.items() for v in vs), use_numpy
