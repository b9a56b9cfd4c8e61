"""Build decisions of build_ffi.py (setup.py asks it): which NVTX headers, which switches, which wheel tag.

What the wheels and the sdist hold is checked by scripts/abi3-check.sh (CI's abi3 stage): building
them takes minutes, these decisions take microseconds. One build does run here, and stops at once:
without a C compiler, pip's output ends with one line saying what to install (a few seconds).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import types
from pathlib import Path

import pytest

from conftest import build_script
from support.paths import SOURCE


@pytest.fixture(scope="module")
def build_ffi():
    return build_script()


def _headers(root: Path, folder: str, names) -> Path:
    include = root / "nvidia" / folder / "include"
    (include / "nvtx3").mkdir(parents=True)
    for name in names:
        (include / "nvtx3" / name).write_text("/* */\n")
    return include


def _only_these_nvidia_folders(monkeypatch, root: Path) -> None:
    """nvidia-nvtx's metadata not found, and the ``nvidia`` namespace package is ``root/nvidia``."""
    def no_distribution(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_distribution)
    spec = types.SimpleNamespace(submodule_search_locations=[str(root / "nvidia")])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "nvidia" else None)
    monkeypatch.delenv("NVTX_CFFI_INCLUDE_DIR", raising=False)


def test_the_headers_are_a_folder_that_has_the_extensions_not_the_last_by_name(build_ffi, tmp_path, monkeypatch):
    # nvidia-nvtx-cu12 (PyTorch's CUDA 12 wheels) installs nvidia/nvtx/include without the counters
    # extension; it sorts after nvidia/cu13, and the build took it and failed
    # ("nvtx3/nvToolsExtCounters.h: No such file").
    cu13 = _headers(tmp_path, "cu13", build_ffi.NEEDED_HEADERS)
    _headers(tmp_path, "nvtx", ["nvToolsExt.h", "nvToolsExtCuda.h"])
    _only_these_nvidia_folders(monkeypatch, tmp_path)
    assert build_ffi.nvtx_include_dir() == str(cu13)


def test_no_folder_with_every_header_names_what_is_missing(build_ffi, tmp_path, monkeypatch):
    _headers(tmp_path, "nvtx", ["nvToolsExt.h"])
    _only_these_nvidia_folders(monkeypatch, tmp_path)
    with pytest.raises(RuntimeError, match=r"nvToolsExtCounters\.h.*install nvidia-nvtx>=13,<14 or set NVTX_CFFI_INCLUDE_DIR"):
        build_ffi.nvtx_include_dir()


def test_the_nvidia_nvtx_distributions_own_headers_come_first(build_ffi, tmp_path, monkeypatch):
    # With nvidia-nvtx installed (as the build requirement is), its files decide: another folder
    # with every header too (sorting after it) is not taken.
    monkeypatch.delenv("NVTX_CFFI_INCLUDE_DIR", raising=False)
    own = next(f for f in importlib.metadata.distribution("nvidia-nvtx").files
               if f.name == "nvToolsExt.h" and f.parent.name == "nvtx3")
    expected = str(Path(own.locate()).parent.parent)
    _headers(tmp_path, "zz", build_ffi.NEEDED_HEADERS)
    real_find_spec = importlib.util.find_spec
    spec = types.SimpleNamespace(submodule_search_locations=[str(tmp_path / "nvidia")])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == "nvidia" else real_find_spec(name))
    assert build_ffi.nvtx_include_dir() == expected


@pytest.mark.parametrize("value, expected", [
    (None, True), ("", True), ("  ", True), ("1", True), ("ON", True), (" yes ", True), ("true", True),
    ("0", False), ("off", False), ("No", False), ("FALSE", False),
])
def test_the_speedups_switch_reads_booleans(build_ffi, monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("NVTX_CFFI_SPEEDUPS", raising=False)
    else:
        monkeypatch.setenv("NVTX_CFFI_SPEEDUPS", value)
    assert build_ffi.build_switch("NVTX_CFFI_SPEEDUPS", True) is expected


@pytest.mark.parametrize("value", ["disable", "2", "n", "of"])
def test_a_misspelt_speedups_switch_stops_the_build(build_ffi, monkeypatch, value):
    # Before: anything but 0/false/no/off ("disable", "2") built the accelerator.
    monkeypatch.setattr(sys, "implementation", types.SimpleNamespace(name="cpython"))
    monkeypatch.setattr(sys, "version_info", (3, 12, 0))
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: 0)
    monkeypatch.setenv("NVTX_CFFI_SPEEDUPS", value)
    with pytest.raises(ValueError, match=rf"NVTX_CFFI_SPEEDUPS='{value}' is not a boolean: use 1/true/yes/on or 0/false/no/off"):
        build_ffi.build_speedups()


@pytest.mark.parametrize("implementation, version, gil_disabled, speedups, built, tag", [
    ("cpython", (3, 11, 7), 0, "1", True, None),       # the accelerator inside: per-version wheel
    ("cpython", (3, 11, 7), 0, "0", False, "cp311"),   # abi3 code only
    ("cpython", (3, 15, 2), 0, "0", False, "cp311"),
    ("cpython", (3, 10, 14), 0, "1", False, None),     # no accelerator (3.11 API), no cp311 tag (would not install)
    ("cpython", (3, 9, 18), 0, "0", False, None),
    ("cpython", (3, 14, 0), 1, "1", False, None),      # free-threaded before 3.15: no limited API at all
    ("cpython", (3, 13, 1), 1, "0", False, None),
    ("cpython", (3, 15, 0), 1, "1", False, "cp311"),   # free-threaded 3.15: the limited API is there
    ("pypy", (3, 9, 16), 0, "1", False, None),
])
def test_which_modules_and_which_wheel_tag(build_ffi, monkeypatch, implementation, version, gil_disabled, speedups,
                                           built, tag):
    monkeypatch.setattr(sys, "implementation", types.SimpleNamespace(name=implementation))
    monkeypatch.setattr(sys, "version_info", version)
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: gil_disabled if name == "Py_GIL_DISABLED" else real(name))
    monkeypatch.setenv("NVTX_CFFI_SPEEDUPS", speedups)
    assert build_ffi.build_speedups() is built
    assert build_ffi.wheel_limited_api(built) == tag




def _setuptools_major() -> int:
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


@pytest.mark.skipif(not (SOURCE / "setup.py").is_file(), reason="needs the source tree (repository or sdist)")
@pytest.mark.skipif(_setuptools_major() < 77, reason="pyproject.toml needs setuptools>=77 (the test extra has it)")
def test_without_a_compiler_pip_ends_with_one_line_saying_what_to_install(tmp_path):
    # A copy of what the build reads: pip builds in the tree it is given, writing build/ and *.egg-info.
    tree = tmp_path / "src"
    ignore = shutil.ignore_patterns("*.so", "__pycache__", "_ffi.c")
    tree.mkdir()
    for name in ("setup.py", "build_ffi.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy2(SOURCE / name, tree / name)
    for folder in ("c", "nvtx_cffi"):
        shutil.copytree(SOURCE / folder, tree / folder, ignore=ignore)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVTX_")}  # no recorder in pip
    env.update(CC="/nonexistent/cc", PIP_DISABLE_PIP_VERSION_CHECK="1")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-build-isolation", "--no-deps", "--no-index",
         "-w", str(tmp_path / "wheels")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert build.returncode != 0, build.stdout
    last = build.stdout.splitlines()[-10:]
    line = [x.strip() for x in last if "nvtx-cffi: building needs a C compiler" in x]
    assert line, "\n".join(last)
    assert line[0].startswith("error: nvtx-cffi: building needs a C compiler and the C library headers, "
                              "and '/nonexistent/cc' did not compile a test file: apt-get install gcc"), line[0]
    assert not list((tmp_path / "wheels").glob("*.whl"))


@pytest.mark.parametrize("installed", [True, False])
def test_the_documented_fallback_for_libraries_runs_with_and_without_nvtx_cffi(installed, tmp_path):
    guide = (SOURCE / "docs" / "library-authors.md").read_text(encoding="utf-8")
    section = guide.split("\n## Depending on nvtx-cffi\n", 1)[1].split("\n## ", 1)[0]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    block = "" if installed else "import sys; sys.modules['nvtx_cffi'] = None  # import raises ImportError\n"
    program = block + snippet + (
        "@nvtx.annotate()\n"
        "def f(x): return x + 1\n"
        "@nvtx.annotate('g', color='blue')\n"
        "def g(x): return x * 2\n"
        "with nvtx.annotate('block', color='red'):\n"
        "    nvtx.mark('m'); nvtx.push_range('p', color='green'); nvtx.pop_range()\n"
        "assert f(1) == 2 and g(3) == 6 and (f.__name__, g.__name__) == ('f', 'g')\n"
        "print(getattr(nvtx, '__name__', 'stand-in'))\n")
    ran = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == ("nvtx_cffi" if installed else "stand-in")
