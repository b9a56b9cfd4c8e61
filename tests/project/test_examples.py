"""The examples, run under the tracer the way the README shows (short mode), with their ranges checked."""
from __future__ import annotations

import os
import re

import pytest
from support.paths import SOURCE
from support.trace_check import run_tracer

from nvtx_cffi import to_argb

EXAMPLES = str(SOURCE / "examples")


def example(name: str) -> str:
    return os.path.join(EXAMPLES, name)


def test_quickstart(tmp_path):
    traced = run_tracer(str(tmp_path), [example("quickstart.py"), "--short"], "--stats")
    assert traced.returncode == 0, traced.stderr
    (f,) = traced.events("X", "f()")
    loops = traced.events("X", "loop")
    assert f["args"]["color"] == f"#{to_argb('purple') & 0xFFFFFF:06x}"
    assert len(loops) == 4 and {e["args"]["color"] for e in loops} == {"#ff0000"}
    # time.sleep(i * 0.01): each loop at least as long as its sleep, in order
    assert [e["dur"] >= i * 10_000 for i, e in enumerate(loops)] == [True] * 4
    assert re.search(r"\s1\s.*PushPop\s+f\(\)$", traced.stdout, re.M)
    assert re.search(r"\s4\s.*PushPop\s+loop$", traced.stdout, re.M)


def test_multiprocessing_spawn_shows_both_children(tmp_path):
    traced = run_tracer(str(tmp_path), [example("multiprocessing_spawn.py"), "--short"], "--stats")
    assert traced.returncode == 0, traced.stderr
    (main,) = traced.events("X", "main")
    children = {e["pid"] for e in traced.events("X", "mock generate data")}
    assert len(children) == 2 and main["pid"] not in children
    assert {e["pid"] for e in traced.events("X", "mean")} == children
    assert re.search(r"\s2\s.*PushPop\s+mock generate data$", traced.stdout, re.M)


def test_groupby_pandas(tmp_path):
    pytest.importorskip("pandas")
    traced = run_tracer(str(tmp_path), [example("groupby.py"), "--short"])
    assert traced.returncode == 0, traced.stderr
    for name in ("make data", "agg count+mean+sum", "three separate aggs"):
        (e,) = traced.events("X", name)
        assert e["args"]["domain"] == "pandas"
    assert "pandas: 1000 groups" in traced.stdout


def test_groupby_without_pandas_skips_cleanly(tmp_path):
    fake = tmp_path / "nopandas"
    (fake / "pandas").mkdir(parents=True)
    (fake / "pandas" / "__init__.py").write_text("raise ImportError('no pandas here')\n")
    traced = run_tracer(str(tmp_path), [example("groupby.py"), "--short"], env={"PYTHONPATH": str(fake)})
    assert traced.returncode == 0, traced.stderr
    assert "skipped: pandas is not installed" in traced.stdout
    assert traced.events("X") == []


def _gpu_ready() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_ready(), reason="needs CuPy and a CUDA GPU")
def test_cupy_memory(tmp_path):
    traced = run_tracer(str(tmp_path), [example("cupy_memory.py"), "--short"], "--stats")
    assert traced.returncode == 0, traced.stderr
    variants = ["no memory pool", "default memory pool", "reserved pool", "reserved pool + cupy.fuse"]
    for name in variants:
        (v,) = traced.events("X", name)
        inside = [e for e in traced.events("X") if e["args"].get("domain") == "cupy_memory"
                  and v["ts"] <= e["ts"] <= v["ts"] + v["dur"]]
        assert sorted(e["name"] for e in inside) == ["compute", "data generation"]
    assert "done" in traced.stdout


@pytest.mark.skipif(_gpu_ready(), reason="CuPy and a GPU are here: test_cupy_memory runs instead")
def test_cupy_example_skips_cleanly_without_gpu(tmp_path):
    traced = run_tracer(str(tmp_path), [example("cupy_memory.py"), "--short"])
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.startswith("skipped: ") and traced.events("X") == []
