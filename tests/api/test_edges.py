"""Doubtful behaviours that were decided and fixed (docs/compatibility.md, "Guarantees at the edges").

Each scenario runs in a recorded child process and asserts what the recorder saw.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from nvtx_cffi import recorder


def run_recorded(tmp_path, code: str, extra_env=None) -> dict:
    env = {**os.environ, **recorder.environment(tmp_path / "rec"), **(extra_env or {})}
    env.pop("NVTX_DISABLE", None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_names_its_thread(tmp_path):
    """The thread that forks is the child's only thread, under a new OS id: it was left unnamed."""
    out = run_recorded(tmp_path, """
        import json, os, threading, nvtx_cffi as nvtx
        def work():
            nvtx.mark("worker")
        def fork_here():
            pid = os.fork()
            if pid == 0:
                t = threading.Thread(target=work, name="child worker"); t.start(); t.join()
                nvtx.mark("child")
                os._exit(0)
            os.waitpid(pid, 0)
            return pid
        child = fork_here()  # NVTX not initialised here yet (lazy): the child initialises it
        nvtx.mark("parent")  # initialised here: the hooks are installed before the next fork
        forker = threading.Thread(target=lambda: results.append(fork_here()), name="forker")
        results = []
        forker.start(); forker.join()
        print(json.dumps({"children": [child, results[0]]}))
    """)
    names = {}
    for e in recorder.read(tmp_path / "rec").events:
        if e.kind == "thread_name":
            names[e.pid, e.target] = e.name
    first, second = out["children"]
    assert names[first, first] == "MainThread"
    assert names[second, second] == "forker"  # forked from a non-main thread: its name goes with it
    assert "child worker" in {name for (pid, _), name in names.items() if pid == first}


def test_category_names_past_the_bound_share_one_category(tmp_path):
    """Past MAX_CATEGORY_NAMES names, categories degrade like messages (was: ValueError)."""
    out = run_recorded(tmp_path, """
        import json, nvtx_cffi as nvtx
        from nvtx_cffi import _domain
        _domain.MAX_CATEGORY_NAMES = _domain._category_names + 3  # scaled down from 65,536
        d = nvtx.get_domain("cats")
        ids = [d.get_category_id(f"c{i}") for i in range(5)] + [d.get_category_id("c0")]
        for i in range(5):
            nvtx.mark("m", domain="cats", category=f"c{i}")
        nvtx.mark("other domain", domain="cats2", category="late")
        print(json.dumps({"ids": ids, "other": _domain.OTHER_CATEGORY_ID}))
    """)
    other = out["other"]
    assert other == 2**32 - 1 and out["ids"] == [1, 2, 3, other, other, 1]
    rec = recorder.read(tmp_path / "rec")
    marks = [(e.domain, e.message, e.category) for e in rec.events if e.kind == "mark"]
    assert marks == [("cats", "m", 1), ("cats", "m", 2), ("cats", "m", 3), ("cats", "m", other),
                     ("cats", "m", other), ("cats2", "other domain", other)]
    (info,) = rec.processes.values()
    assert info.category_names == {("cats", 1): "c0", ("cats", 2): "c1", ("cats", 3): "c2",
                                   ("cats", other): "(other categories)", ("cats2", other): "(other categories)"}


@pytest.mark.parametrize("error", [ValueError, TypeError])
def test_arguments_whose_hash_raises_propagate_the_users_exception(tmp_path, error):
    """Documented: the caches hash their keys, so the user's own exception comes out unchanged."""
    out = run_recorded(tmp_path, f"""
        import json, nvtx_cffi as nvtx
        class BadStr(str):
            def __hash__(self):
                raise {error.__name__}("no hash for you")
        class BadInt(int):
            def __hash__(self):
                raise {error.__name__}("no hash for you")
        results = []
        for call in (lambda: nvtx.push_range(BadStr("m")), lambda: nvtx.mark("m", category=BadStr("c")),
                     lambda: nvtx.mark("m", color=BadInt(5)), lambda: nvtx.annotate(BadStr("a"))):
            try:
                call()
                results.append(None)
            except Exception as exc:
                results.append([type(exc).__name__, str(exc)])
        nvtx.mark("after")
        print(json.dumps(results))
    """)
    # 3.14+ wraps the message of a failed dict-key hash ("cannot use 'BadStr' as a dict key (...)").
    assert [name for name, _ in out] == [error.__name__] * 4
    assert all("no hash for you" in message for _, message in out)
    events = recorder.read(tmp_path / "rec").events
    assert [(e.kind, e.message) for e in events if e.kind in ("push", "mark", "start")] == [("mark", "after")]
