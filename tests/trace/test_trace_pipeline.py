"""The conversion as one pipeline (source → decode → pairing → writers): what one conversion decodes
stays in it, so conversions run at once in threads write what each writes alone."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from nvtx_cffi import recorder
from nvtx_cffi._trace import columns
from nvtx_cffi._trace.convert import convert, open_source, run
from nvtx_cffi._trace.writers import open_writer

pytest.importorskip("numpy")  # the recorded program's payloads are arrays

PAYLOADS = """
    import sys
    import numpy as np
    import nvtx_cffi as nvtx

    tag, sign = sys.argv[1], int(sys.argv[2])
    point = np.dtype([("x", "i4"), ("y", "f8")])
    for i in range(600):
        with nvtx.annotate(f"{tag}-step", payload=sign * np.arange(i % 5 + 1)):
            nvtx.mark(f"{tag}-point", payload=np.array([(sign * i, i / 2)], dtype=point))
"""


def _record(tmp_path, tag: str, sign: int) -> str:
    script = tmp_path / "payloads.py"
    script.write_text(textwrap.dedent(PAYLOADS))
    raw = tmp_path / f"raw-{tag}"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    env.update(recorder.environment(str(raw)))
    subprocess.run([sys.executable, str(script), tag, str(sign)], env=env, check=True, timeout=120)
    return str(raw)


def _outputs(base: str) -> tuple:
    with open(base + ".json", "rb") as f:
        trace = f.read()
    db = sqlite3.connect(base + ".sqlite")
    try:
        rows = db.execute("SELECT * FROM NVTX_EVENTS ORDER BY rowid").fetchall()
    finally:
        db.close()
    return trace, rows


class _BatchOnly:
    """A writer that does something with batches only: the rest of the Writer protocol, doing nothing."""

    def sample(self, sample, tracks):
        pass

    def finish(self, timeline):
        return 0

    def close(self):
        pass


class _Rendezvous(_BatchOnly):
    """A writer that, at its first batch, says so and waits for ``go``: the batches its conversion
    decoded so far wait for their writers while the other conversion starts."""

    def __init__(self, ready: threading.Event, go: threading.Event) -> None:
        self.ready, self.go, self.waited = ready, go, False

    def batch(self, pb):
        if not self.waited:
            self.waited = True
            self.ready.set()
            assert self.go.wait(60)


@pytest.mark.parametrize("numpy", [True, False] if columns.HAVE_NUMPY else [False])
def test_two_conversions_in_two_threads_write_what_each_writes_alone(tmp_path, monkeypatch, numpy):
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)  # several batches each: decoded ahead of their writing
    raws = {"a": _record(tmp_path, "a", 1), "b": _record(tmp_path, "b", -1)}
    alone = {}
    for tag, raw in raws.items():
        base = str(tmp_path / f"alone-{tag}")
        for ending in (".json", ".sqlite"):
            convert(raw, base + ending, numpy=numpy)
        alone[tag] = _outputs(base)
        assert alone[tag][0].count(b'"payload":[{"x":') == 600  # the struct payloads were decoded

    ready = {tag: threading.Event() for tag in raws}
    go = threading.Event()
    errors = []

    def conversion(tag: str) -> None:
        try:
            base = str(tmp_path / f"together-{tag}")
            recording = open_source(raws[tag], numpy)
            writers = [_Rendezvous(ready[tag], go), open_writer("json", base + ".json", recording),
                       open_writer("sqlite", base + ".sqlite", recording)]
            run(recording, writers)
        except BaseException as exc:  # raised in the test's thread below
            errors.append(exc)
            ready[tag].set()

    threads = {tag: threading.Thread(target=conversion, args=(tag,)) for tag in raws}
    threads["a"].start()
    assert ready["a"].wait(60)  # a's first batches are decoded, waiting to be written ...
    threads["b"].start()  # ... while b starts and decodes its own
    assert ready["b"].wait(60)
    go.set()
    for t in threads.values():
        t.join(120)
    assert not errors, errors
    for tag in raws:
        assert _outputs(str(tmp_path / f"together-{tag}")) == alone[tag], tag


COUNTERS = """
    import nvtx_cffi as nvtx
    bytes_read = nvtx.get_domain("io").get_counter("bytes", int)
    for i in range(3000):
        with nvtx.annotate("step"):
            pass
        if i % 500 == 0:
            bytes_read.sample(i)
"""


class _Slow(_BatchOnly):
    """A writer that takes its time over each batch: the reader thread reads ahead all it may."""

    def batch(self, pb):
        time.sleep(0.05)


@pytest.mark.skipif(not columns.HAVE_NUMPY, reason="the reader thread is the NumPy path's")
def test_counter_samples_are_written_among_the_events_of_their_batch_however_far_the_reader_is_ahead(
        tmp_path, monkeypatch):
    monkeypatch.setattr(columns, "BATCH_EVENTS", 500)  # a sample every other batch
    raw = tmp_path / "raw"
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR")}
    env.update(recorder.environment(str(raw)))
    subprocess.run([sys.executable, "-c", textwrap.dedent(COUNTERS)], env=env, check=True, timeout=120)
    traces = {}
    for numpy, slow in ((False, False), (True, False), (True, True)):
        out = str(tmp_path / f"t-{numpy}-{slow}.json")
        recording = open_source(str(raw), numpy)
        writers = ([_Slow()] if slow else []) + [open_writer("json", out, recording)]
        run(recording, writers)
        with open(out, "rb") as f:
            traces[numpy, slow] = f.read()
    assert traces[False, False].count(b'"ph":"C"') == 6
    assert traces[True, False] == traces[False, False] and traces[True, True] == traces[False, False]
