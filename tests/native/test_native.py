"""The C shim: GIL kept in hot calls, tables bounded, bad indices ignored."""
from __future__ import annotations

import platform

import pytest

from nvtx_cffi import recorder
from nvtx_cffi._native import ffi, lib

from conftest import ranges


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="cffi wrappers are CPython's")
def test_hot_calls_keep_the_gil():
    # keep_gil.h removes the GIL release from cffi's wrappers; if a cffi release renamed the
    # macros it redefines, this call (made through the same kind of wrapper) would report 0.
    assert lib.nvtxcffi_gil_held() == 1


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="PyPy's CFFI module is not a CPython extension")
def test_the_abi3_core_imports_only_stable_abi_symbols():
    # _ffi.abi3.so serves every CPython 3.x: each CPython symbol it needs must be in the stable ABI
    # of the oldest (CPython's own list, test.test_stable_abi_ctypes). It linked to PyGILState_Check
    # (exported by every CPython, but not stable ABI before 3.14) for the guard above.
    import shutil
    import subprocess
    stable = pytest.importorskip("test.test_stable_abi_ctypes", reason="CPython's test package is not installed")
    if shutil.which("nm") is None:
        pytest.skip("no nm (binutils)")
    from nvtx_cffi._native import _ffi
    assert _ffi.__file__.endswith(".abi3.so")
    out = subprocess.run(["nm", "-D", "--undefined-only", _ffi.__file__], capture_output=True, text=True,
                         check=True).stdout
    needed = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()[-1].startswith(("Py", "_Py"))}
    assert needed and needed <= set(stable.SYMBOL_NAMES), needed - set(stable.SYMBOL_NAMES)


def test_the_tracers_bulk_calls_let_other_threads_run():
    """keep_gil.h keeps the GIL in every cffi wrapper; the tracer's bulk helpers (which run for up
    to seconds) release it themselves, so another thread ticks all through one of them (it held
    the GIL for the whole call: no tick inside)."""
    import threading
    import time

    n = 3_000_000
    values = ffi.new("int64_t[]", n)
    offsets, widths, zero_pad = ffi.new("int64_t[]", [0]), ffi.new("int64_t[]", [12]), ffi.new("uint8_t[]", [1])
    template = ffi.new("uint8_t[]", b"............\n")
    out = ffi.new("uint8_t[]", 13 * n)
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    lib.nvtxcffi_fixed_rows(values, n, 1, offsets, widths, zero_pad, template, 13, out)
    end = time.perf_counter()
    stop.set()
    thread.join()
    assert bytes(ffi.buffer(out, 26)) == b"000000000000\n000000000000\n"
    inside = [t for t in ticks if start + 0.1 * (end - start) < t < end - 0.1 * (end - start)]
    assert len(inside) >= 3, (end - start, len(inside))


def test_out_of_range_indices_are_ignored():
    bad = [-1, lib.nvtxcffi_slot_count(), 2**31 - 1]
    with recorder.capture() as got:
        for slot in bad:
            lib.nvtxcffi_push(slot)
            lib.nvtxcffi_mark(slot)
            assert lib.nvtxcffi_start(slot) == 0
            assert lib.nvtxcffi_emit_slot(lib.NVTXCFFI_OP_MARK, slot, 0, 0, 0.0) == 0
        for domain in (-1, lib.nvtxcffi_domain_count(), 10**6):
            lib.nvtxcffi_pop(domain)
            lib.nvtxcffi_end(domain, 1)
            assert lib.nvtxcffi_emit(lib.NVTXCFFI_OP_MARK, domain, ffi.NULL, 0, 0, 0, 0, 0.0) == 0
    assert [e for e in got if e.kind in ("push", "pop", "start", "end", "mark")] == []


def test_registration_rejects_bad_references():
    assert lib.nvtxcffi_string_register(10**6, b"x") == -1
    assert lib.nvtxcffi_string_register(0, ffi.NULL) == -1
    assert lib.nvtxcffi_slot_create(0, 10**7, 0, 0) == -1
    assert lib.nvtxcffi_slot_create(-5, -1, 0, 0) == -1
    assert lib.nvtxcffi_category_name(10**6, 1, b"x") == -1


def test_string_of_another_domain_cannot_make_a_slot():
    first = lib.nvtxcffi_domain_create(b"native-a")
    second = lib.nvtxcffi_domain_create(b"native-b")
    string_id = lib.nvtxcffi_string_register(first, b"owned by a")
    assert lib.nvtxcffi_slot_create(second, string_id, 0, 0) == -1
    slot = lib.nvtxcffi_slot_create(first, string_id, 0xFF00FF00, 9)
    with recorder.capture() as got:
        lib.nvtxcffi_mark(slot)
    (mark,) = ranges(got, "mark")
    assert (mark.message, mark.domain, mark.color, mark.category) == ("owned by a", "native-a", 0xFF00FF00, 9)
