"""name_cuda_stream/device/event/context: resource_name events in the recorder (CPU, raw handles),
argument errors, and a CuPy run where a GPU exists (marker gpu)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import nvtx_cffi
from nvtx_cffi import recorder


def run(tmp_path, code: str) -> dict:
    env = {**os.environ, **recorder.environment(tmp_path / "rec")}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def resource_events(tmp_path):
    return [(e.resource, e.target, e.name) for e in recorder.read(tmp_path / "rec").events
            if e.kind == "resource_name"]


def test_raw_handles_and_handle_objects(tmp_path):
    run(tmp_path, """
        import nvtx_cffi
        class CupyLikeStream:  ptr = 0x7f00aa
        class TorchLikeStream: cuda_stream = 0x7f00bb
        class CupyLikeDevice:  id = 1
        class TorchLikeDevice: index = 2
        class TorchLikeEvent:  cuda_event = 0x5000
        nvtx_cffi.name_cuda_stream(0x1234, "raw stream")
        nvtx_cffi.name_cuda_stream(0, "legacy default")
        nvtx_cffi.name_cuda_stream(CupyLikeStream(), "cupy stream")
        nvtx_cffi.name_cuda_stream(TorchLikeStream(), "torch stream")
        nvtx_cffi.name_cuda_device(0, "GPU 0 \u00e9")
        nvtx_cffi.name_cuda_device(CupyLikeDevice(), "GPU 1")
        nvtx_cffi.name_cuda_device(TorchLikeDevice(), "GPU 2")
        nvtx_cffi.name_cuda_event(0x4000, "raw event")
        nvtx_cffi.name_cuda_event(TorchLikeEvent(), "torch event")
        nvtx_cffi.name_cuda_context(0xFFFFFFFFFFFFFFFF, "ctx")
    """)
    assert resource_events(tmp_path) == [
        ("cuda_stream", 0x1234, "raw stream"),
        ("cuda_stream", 0, "legacy default"),
        ("cuda_stream", 0x7f00aa, "cupy stream"),
        ("cuda_stream", 0x7f00bb, "torch stream"),
        ("cuda_device", 0, "GPU 0 \u00e9"),
        ("cuda_device", 1, "GPU 1"),
        ("cuda_device", 2, "GPU 2"),
        ("cuda_event", 0x4000, "raw event"),
        ("cuda_event", 0x5000, "torch event"),
        ("cuda_context", 0xFFFFFFFFFFFFFFFF, "ctx"),
    ]


@pytest.mark.parametrize("call, error, match", [
    (lambda: nvtx_cffi.name_cuda_stream("s", "x"), TypeError,
     "stream must be an int handle or an object with .ptr, .cuda_stream, .handle, not str"),
    (lambda: nvtx_cffi.name_cuda_stream(-1, "x"), ValueError, r"stream -1 is out of range \(0 to 18446744073709551615\)"),
    (lambda: nvtx_cffi.name_cuda_stream(1 << 64, "x"), ValueError, "stream .* is out of range"),
    (lambda: nvtx_cffi.name_cuda_stream(True, "x"), TypeError, "stream must be an int handle"),
    (lambda: nvtx_cffi.name_cuda_device(1 << 31, "x"), ValueError, "device 2147483648 is out of range"),
    (lambda: nvtx_cffi.name_cuda_device(None, "x"), TypeError, "device must be an int handle or an object with .id, .index"),
    (lambda: nvtx_cffi.name_cuda_event(1.5, "x"), TypeError, "event must be an int handle"),
    (lambda: nvtx_cffi.name_cuda_context(object(), "x"), TypeError, "context must be an int handle"),
    (lambda: nvtx_cffi.name_cuda_stream(1, 5), TypeError, "name must be a str, not int"),
    (lambda: nvtx_cffi.name_cuda_device(0, "a\x00b"), ValueError, "name must not contain NUL"),
    (lambda: nvtx_cffi.name_cuda_stream(type("S", (), {"ptr": "bad"})(), "x"), TypeError,
     "stream handle must be an int, not str"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.gpu
def test_cupy_objects_on_a_gpu(tmp_path):
    pytest.importorskip("cupy")
    out = run(tmp_path, """
        import json, cupy, nvtx_cffi
        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise SystemExit(0)
        dev = cupy.cuda.Device(0)
        stream = cupy.cuda.Stream(non_blocking=True)
        event = cupy.cuda.Event()
        nvtx_cffi.name_cuda_device(dev, "gpu0")
        nvtx_cffi.name_cuda_stream(stream, "copy stream")
        nvtx_cffi.name_cuda_event(event, "done")
        with stream:
            x = cupy.arange(1000) * 2
            event.record(stream)
        event.synchronize()
        print(json.dumps({"stream": stream.ptr, "event": event.ptr, "sum": int(x.sum())}))
    """)
    if not out:
        pytest.skip("no CUDA device")
    assert out["sum"] == 999000
    assert resource_events(tmp_path) == [("cuda_device", 0, "gpu0"), ("cuda_stream", out["stream"], "copy stream"),
                                         ("cuda_event", out["event"], "done")]
