"""Thread names reach NVTX: main thread at import, threads at start, renames; checked with the recorder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from nvtx_cffi import recorder


def run(tmp_path, code: str) -> dict:
    env = {**os.environ, **recorder.environment(tmp_path / "rec")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_threads_carry_python_names(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        from concurrent.futures import ThreadPoolExecutor
        tids = {}
        def worker():
            tids["worker"] = threading.get_native_id()
            nvtx_cffi.mark("from worker")
        t = threading.Thread(target=worker)
        t.start(); t.join()
        named = threading.Thread(target=worker, name="loader")
        named.start(); named.join()
        tids["loader"] = named.native_id
        with ThreadPoolExecutor(1, thread_name_prefix="pool") as pool:
            pool_tid, pool_name = pool.submit(
                lambda: (threading.get_native_id(), threading.current_thread().name)).result()
        print(json.dumps({"main": threading.get_native_id(), "worker_name": t.name,
                          "worker": t.native_id, "loader": tids["loader"],
                          "pool": pool_tid, "pool_name": pool_name}))
    """)
    rec = recorder.read(tmp_path / "rec")
    names = [(e.target, e.name) for e in rec.events if e.kind == "thread_name"]
    assert names[0] == (out["main"], "MainThread")  # named at the first NVTX call
    assert (out["worker"], out["worker_name"]) in names
    assert out["worker_name"].startswith("Thread-") and out["worker_name"].endswith("(worker)") \
        or sys.version_info < (3, 10)
    assert (out["loader"], "loader") in names
    assert (out["pool"], out["pool_name"]) in names and out["pool_name"] == "pool_0"
    # the name event comes before the thread's first event
    marks = [e for e in rec.events if e.kind == "mark" and e.tid == out["loader"]]
    named_at = [e.time_ns for e in rec.events if e.kind == "thread_name" and e.target == out["loader"]]
    assert marks and named_at[0] <= marks[0].time_ns
    info = rec.processes[rec.events[0].pid]
    assert info.thread_names[out["main"]] == "MainThread"


def test_rename_updates_the_name(tmp_path):
    out = run(tmp_path, """
        import json, threading, nvtx_cffi
        assert nvtx_cffi.tool_attached()  # the first NVTX call: hooks go in here, not at import
        go, done = threading.Event(), threading.Event()
        def worker():
            go.wait()
            nvtx_cffi.mark("after rename")
            done.set()
        t = threading.Thread(target=worker, name="before")
        t.start()
        t.name = "after"
        t.setName("after-2") if hasattr(t, "setName") else None
        threading.current_thread().name = "Main-renamed"
        go.set(); t.join()
        print(json.dumps({"tid": t.native_id, "main": threading.get_native_id()}))
    """)
    rec = recorder.read(tmp_path / "rec")
    mine = [e.name for e in rec.events if e.kind == "thread_name" and e.target == out["tid"]]
    assert mine == ["before", "after", "after-2"]  # in time order
    assert rec.processes[rec.events[0].pid].thread_names[out["main"]] == "Main-renamed"


def test_a_process_forked_before_the_import_names_its_own_main_thread(tmp_path):
    """A worker forked before nvtx_cffi was imported (forkserver pools, pre-fork servers): its
    main thread is named under its own OS thread id (threading keeps the parent's on 3.11)."""
    out = run(tmp_path, """
        import json, os, threading
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            import nvtx_cffi
            nvtx_cffi.mark("child")
            renamer = threading.Thread(target=lambda: setattr(threading.main_thread(), "name", "Renamed"))
            renamer.start(); renamer.join()  # named from another thread
            os.write(write, str(threading.get_native_id()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(json.dumps({"child": pid, "child_tid": int(os.read(read, 64))}))
    """)
    rec = recorder.read(tmp_path / "rec")
    info = rec.processes[out["child"]]
    assert [e.tid for e in rec.events if e.pid == out["child"] and e.kind == "mark"] == [out["child_tid"]]
    named = [(e.target, e.name) for e in rec.events if e.pid == out["child"] and e.kind == "thread_name"]
    assert (out["child_tid"], "MainThread") in named and named[-1] == (out["child_tid"], "Renamed")
    assert info.thread_names[out["child_tid"]] == "Renamed"


def test_nothing_hooked_without_a_tool(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
    code = ("import threading, json, nvtx_cffi\n"
            "print(json.dumps({'hooked': hasattr(threading.Thread._bootstrap_inner, '__wrapped__'),"
            " 'installed': nvtx_cffi._threads.install()}))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"hooked": False, "installed": False}
