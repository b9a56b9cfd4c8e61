"""``import nvtx_cffi`` costs next to nothing: no heavy module is loaded until a feature needs it.

Libraries leave their annotations in for good, so every program that uses such a library pays for
``import nvtx_cffi``. It must not load ``typing``, ``dataclasses``, ``inspect``, ``re``, ``ast``,
``dis`` or NumPy, neither at import nor at the first annotation (with or without a tool, in both
the C and the pure-Python paths). Modules the bare interpreter already has at startup don't count.
How long the import takes is printed for information only: timing claims live in the benchmarks
(asv_bench/benchmarks/import_cost.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

import nvtx_cffi
from nvtx_cffi import recorder

HEAVY = ("typing", "dataclasses", "inspect", "re", "ast", "dis", "numpy")
#: Environment variables that would change what the child imports or does.
_TOOL_VARIABLES = ("NVTX_INJECTION64_PATH", "NVTX_CFFI_RECORD_DIR", "NVTX_CFFI_PURE_PYTHON", "NVTX_DISABLE")

FIRST_USES = {
    "import": "",
    "mark": "nvtx.mark('x')",
    "with": "with nvtx.annotate('x', color='red'):\n    pass",
    "push_pop": "nvtx.push_range('x'); nvtx.pop_range()",
    "all": ("nvtx.mark('x', payload=1)\nwith nvtx.annotate('x', color='red', domain='d', category='c'):\n    pass\n"
            "nvtx.push_range('y', color=0xFF00FF); nvtx.pop_range()\nnvtx.end_range(nvtx.start_range('z'))\n"
            "nvtx.get_domain('d').mark(message='m')\nnvtx.enabled(); nvtx.tool_attached()\n"
            "nvtx.null_tool_path(); nvtx.recorder_path()"),
}


def _child(code: str, env: dict) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if k not in _TOOL_VARIABLES and k != "PYTHONPATH"}
    child_env.update(env)
    # (from a folder of its own: never the source tree, whose nvtx_cffi has no compiled module)
    return subprocess.run([sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=120,
                          cwd=tempfile.gettempdir(), check=False)


def _modules(code: str, env: dict) -> set:
    proc = _child(code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))", env)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def at_startup() -> set:
    """What a bare interpreter has loaded before any code of its own (plus json and sys, which the
    probe itself imports)."""
    return _modules("", {})


def _tools(tmp_path) -> dict:
    return {"none": {}, "null": {"NVTX_INJECTION64_PATH": nvtx_cffi.null_tool_path()},
            "recorder": {"NVTX_INJECTION64_PATH": nvtx_cffi.recorder_path(), "NVTX_CFFI_RECORD_DIR": str(tmp_path)}}


@pytest.mark.parametrize("pure", [False, True], ids=["c", "pure"])
@pytest.mark.parametrize("tool", ["none", "null", "recorder"])
@pytest.mark.parametrize("use", sorted(FIRST_USES))
def test_no_heavy_module_is_loaded(at_startup, tmp_path, pure, tool, use):
    env = dict(_tools(tmp_path)[tool])
    if pure:
        env["NVTX_CFFI_PURE_PYTHON"] = "1"
    code = "import nvtx_cffi as nvtx\n" + FIRST_USES[use] + "\nassert nvtx.tool_attached() is %r\n" % (tool != "none")
    loaded = _modules(code, env)
    assert sorted(m for m in HEAVY if m in loaded and m not in at_startup) == []
    assert "nvtx_cffi._accel" in loaded
    if tool == "recorder" and use != "import":
        events = [e for e in recorder.read(tmp_path).events if e.kind in ("mark", "push", "start")]
        assert events and events[0].message == "x"


def test_the_accelerator_is_in_use_when_expected():
    # (the parametrised test above must test the C path where it exists; the child runs without
    # NVTX_CFFI_PURE_PYTHON, so a pure-mode run expects it wherever only that flag kept it out here)
    proc = _child("import nvtx_cffi._accel as a; print(a.accel is not None)", {})
    here = nvtx_cffi._accel
    expected = here.accel is not None or (here.PURE_PYTHON and not here._free_threaded_build())
    assert proc.stdout.strip() == str(sys.implementation.name == "cpython" and expected)


def test_the_lazy_names_are_the_package_api(at_startup):
    # Made at their first use (no typing / enum / dataclasses at import), and then the same objects
    # as in the modules that define them; dir() and __all__ list them all.
    code = """
import json, nvtx_cffi as nvtx, nvtx_cffi.nvtx as sub
from nvtx_cffi import _counters, _payload, _payload_enums, _profile, _ranges
missing = [n for n in nvtx.__all__ if not hasattr(nvtx, n)]
same = [nvtx.CounterSemantics is _counters.CounterSemantics is sub.CounterSemantics,
        nvtx.EntryKind is _payload.EntryKind is _payload_enums.EntryKind is sub.EntryKind,
        nvtx.Profile is _profile.Profile, nvtx.RangeId is _ranges.RangeId,
        nvtx.Counter is _counters.Counter, nvtx.TimestampType is _payload.TimestampType,
        nvtx.Domain.get_counter is _counters.get_counter, nvtx.colors.ColorLike is nvtx._colors.ColorLike]
print(json.dumps({"missing": missing, "same": same, "dir": sorted(set(nvtx.__all__) - set(dir(nvtx))),
                  "subdir": sorted({"CounterSemantics", "EntryKind", "PayloadEntryType"} - set(dir(sub))),
                  "rangeid": str(nvtx.RangeId)}))
"""
    proc = _child(code, {})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"missing": [], "same": [True] * 8, "dir": [], "subdir": [], "rangeid": "typing.Tuple[int, int]"}


def test_lazy_classes_keep_their_module_and_pickle():
    import dataclasses
    import pickle

    semantics = nvtx_cffi.CounterSemantics(unit="ms", min=0, max=10)
    assert dataclasses.is_dataclass(semantics) and nvtx_cffi.CounterSemantics.__module__ == "nvtx_cffi._counters"
    assert pickle.loads(pickle.dumps(semantics)) == semantics
    assert repr(semantics).startswith("CounterSemantics(unit=b'ms'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        semantics.unit = b"s"  # type: ignore[misc]
    kind = nvtx_cffi.EntryKind.MARK
    assert type(kind).__module__ == "nvtx_cffi._payload" and pickle.loads(pickle.dumps(kind)) is kind


def test_update_wrapper_copies_what_functools_does():
    import functools

    from nvtx_cffi import _accel

    if sys.version_info < (3, 14):
        assert _accel.WRAPPER_ASSIGNMENTS == functools.WRAPPER_ASSIGNMENTS
    assert _accel.partial is functools.partial

    def f(a: int) -> int:
        """doc"""
        return a

    f.extra = 1  # type: ignore[attr-defined]

    def ours():
        pass

    def theirs():
        pass

    _accel.update_wrapper(ours, f)
    functools.update_wrapper(theirs, f)
    names = (*functools.WRAPPER_ASSIGNMENTS, "__wrapped__", "extra")
    assert {n: getattr(ours, n) for n in names} == {n: getattr(theirs, n) for n in names}


def test_import_time_for_information(capsys):
    """The import's wall time in a fresh child, best of 5: printed, never asserted (a shared or
    slow machine makes any bound flaky; asv_bench/benchmarks/import_cost.py tracks it)."""
    code = ("import time; t = time.perf_counter(); import nvtx_cffi; "
            "print((time.perf_counter() - t) * 1000)")
    times = []
    for pure in ("0", "1"):
        runs = [_child(code, {"NVTX_CFFI_PURE_PYTHON": pure}) for _ in range(5)]
        assert all(p.returncode == 0 for p in runs), [p.stderr for p in runs]
        times.append(min(float(p.stdout.strip().splitlines()[-1]) for p in runs))
    with capsys.disabled():
        print(f"\n[info] import nvtx_cffi: {times[0]:.2f} ms (C path), {times[1]:.2f} ms (pure Python), best of 5")
    assert all(t > 0 for t in times)


def test_tool_paths_are_the_bundled_elf_libraries():
    for function, name in ((nvtx_cffi.null_tool_path, "libnvtx_null_tool.so"),
                           (nvtx_cffi.recorder_path, "libnvtx_recorder.so")):
        path = function()
        assert isinstance(path, str) and os.path.isabs(path) and os.path.basename(path) == name
        assert os.path.dirname(path) == os.path.dirname(nvtx_cffi.__file__)
        with open(path, "rb") as f:
            header = f.read(18)
        assert header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], sys.byteorder) == 3  # ET_DYN
    assert "null_tool_path" in nvtx_cffi.__all__ and "recorder_path" in nvtx_cffi.__all__
    assert recorder.library_path() == nvtx_cffi.recorder_path()
    assert recorder.null_tool_path() == nvtx_cffi.null_tool_path()
    assert recorder.environment(os.getcwd())["NVTX_INJECTION64_PATH"] == nvtx_cffi.recorder_path()


def test_a_missing_tool_library_is_a_file_not_found_error_naming_it(monkeypatch, tmp_path):
    from nvtx_cffi import _tools

    monkeypatch.setattr(_tools, "_PACKAGE_DIR", str(tmp_path))
    for function, name in ((nvtx_cffi.null_tool_path, "libnvtx_null_tool.so"),
                           (nvtx_cffi.recorder_path, "libnvtx_recorder.so")):
        with pytest.raises(FileNotFoundError, match=name) as info:
            function()
        assert info.value.filename == str(tmp_path / name)


def test_the_recorder_path_records_a_child(tmp_path):
    env = {**recorder.environment(tmp_path), "NVTX_INJECTION64_PATH": nvtx_cffi.recorder_path()}
    proc = _child("import nvtx_cffi as nvtx; nvtx.mark('x'); print(nvtx.tool_attached())", env)
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr
    assert [e.message for e in recorder.read(tmp_path).events if e.kind == "mark"] == ["x"]


def test_the_null_tool_path_attaches_a_tool():
    env = {"NVTX_INJECTION64_PATH": nvtx_cffi.null_tool_path()}
    code = "import nvtx_cffi as nvtx; print(nvtx.tool_attached()); nvtx.mark('x'); print(nvtx.tool_attached())"
    proc = _child(code, env)
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "True"], proc.stderr
    proc = _child("import nvtx_cffi as nvtx; nvtx.mark('x'); print(nvtx.tool_attached())", {})
    assert proc.stdout.strip() == "False"
