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


STREAM_RANGE = "(0 to 18446744073709551615)"


@pytest.mark.parametrize("call, error, message", [
    # out of range: ArgumentRangeError, a ValueError and an OverflowError (as other ints out of range)
    (lambda: nvtx_cffi.name_cuda_stream(-1, "n"), "range", f"stream -1 is out of range {STREAM_RANGE}"),
    (lambda: nvtx_cffi.name_cuda_stream(2**64, "n"), "range", f"stream 18446744073709551616 is out of range {STREAM_RANGE}"),
    (lambda: nvtx_cffi.name_cuda_event(-1, "n"), "range", f"event -1 is out of range {STREAM_RANGE}"),
    (lambda: nvtx_cffi.name_cuda_context(2**64, "n"), "range",
     f"context 18446744073709551616 is out of range {STREAM_RANGE}"),
    (lambda: nvtx_cffi.name_cuda_device(-1, "n"), "range", "device -1 is out of range (0 to 2147483647)"),
    (lambda: nvtx_cffi.name_cuda_device(type("D", (), {"index": 2**31})(), "n"), "range",
     "device 2147483648 is out of range (0 to 2147483647)"),
    # str.index, list.index, tuple.index are methods, not a device's ordinal: the real type is named
    (lambda: nvtx_cffi.name_cuda_device("x", "n"), TypeError,
     "device must be an int handle or an object with .id, .index, not str"),
    (lambda: nvtx_cffi.name_cuda_device([0], "n"), TypeError,
     "device must be an int handle or an object with .id, .index, not list"),
    (lambda: nvtx_cffi.name_cuda_device((0,), "n"), TypeError,
     "device must be an int handle or an object with .id, .index, not tuple"),
    (lambda: nvtx_cffi.name_cuda_device(type("TorchCuda", (), {"index": None})(), "n"), TypeError,
     "device must be an int handle or an object with .id, .index, not TorchCuda"),
    (lambda: nvtx_cffi.name_cuda_stream(type("S", (), {"handle": lambda self: 5})(), "n"), TypeError,
     "stream must be an int handle or an object with .ptr, .cuda_stream, .handle, not S"),
    (lambda: nvtx_cffi.name_cuda_event(type("E", (), {"ptr": lambda self: 5})(), "n"), TypeError,
     "event must be an int handle or an object with .ptr, .cuda_event, .handle, not E"),
    (lambda: nvtx_cffi.name_cuda_context(type("C", (), {"handle": print})(), "n"), TypeError,
     "context must be an int handle or an object with .ptr, .handle, not C"),
    # an attribute that is neither an int, None nor a method: a handle object with a bad handle
    (lambda: nvtx_cffi.name_cuda_device(type("D", (), {"index": 1.0})(), "n"), TypeError,
     "device handle must be an int, not float"),
], ids=["stream -1", "stream 2**64", "event -1", "context 2**64", "device -1", "device .index 2**31",
        "device str", "device list", "device tuple", "device .index None", "stream .handle()", "event .ptr()",
        "context .handle builtin", "device .index float"])
def test_handle_errors_name_the_real_type_and_range_errors_are_both_types(call, error, message):
    from nvtx_cffi._validate import ArgumentRangeError

    with recorder.capture() as got:
        with pytest.raises(Exception) as caught:
            call()
        nvtx_cffi.name_cuda_device(0, "after")
    if error == "range":
        assert type(caught.value) is ArgumentRangeError
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, OverflowError)
    else:
        assert type(caught.value) is error
    assert str(caught.value) == message
    assert [(e.resource, e.target, e.name) for e in got if e.kind == "resource_name"] == [("cuda_device", 0, "after")]


def test_a_method_named_like_a_handle_attribute_is_skipped_for_the_next(tmp_path):
    run(tmp_path, """
        import nvtx_cffi
        class Device:  # .id a method, .index the ordinal
            index = 3
            def id(self):
                return 1
        class Stream:  # .ptr a method, .cuda_stream the handle
            cuda_stream = 0x7f00cc
            def ptr(self):
                return 1
        nvtx_cffi.name_cuda_device(Device(), "by index")
        nvtx_cffi.name_cuda_stream(Stream(), "by cuda_stream")
    """)
    assert resource_events(tmp_path) == [("cuda_device", 3, "by index"), ("cuda_stream", 0x7f00cc, "by cuda_stream")]
