"""``import nvtx_cffi as nvtx`` finds every name a program written for nvtx 0.2.16 imports, the
submodules ``nvtx.nvtx`` and ``nvtx.colors`` included, and they record what nvtx's would."""
from __future__ import annotations

import importlib.util

import pytest

import nvtx_cffi
from nvtx_cffi import recorder

HAVE_NVTX = importlib.util.find_spec("nvtx") is not None
#: What nvtx.nvtx imports for itself (typing, stdlib, NumPy, Cython internals): not its API.
_NOT_API = {"Optional", "Tuple", "Union", "contextlib", "lru_cache", "np", "os", "warnings", "wraps", "DummyDomain",
            "dummy_domain", "PayloadTypeAlias", "libnvtx_end_range", "libnvtx_mark", "libnvtx_pop_range",
            "libnvtx_push_range", "libnvtx_start_range"}


@pytest.mark.skipif(not HAVE_NVTX, reason="NVIDIA's nvtx not installed (CPython test extra)")
def test_every_public_name_of_nvtx_and_its_submodules_exists():
    import nvtx
    import nvtx.colors
    import nvtx.nvtx

    import nvtx_cffi.colors
    import nvtx_cffi.nvtx

    top = {n for n in dir(nvtx) if not n.startswith("_")} - {"writer"}  # NVTXW: not provided (README)
    assert sorted(n for n in top if not hasattr(nvtx_cffi, n)) == []
    sub = {n for n in dir(nvtx.nvtx) if not n.startswith("_")} - _NOT_API
    assert sorted(n for n in sub if not hasattr(nvtx_cffi.nvtx, n)) == []
    for name in ("green", "blue", "yellow", "purple", "rapids", "cyan", "red", "white", "darkgreen", "orange", None,
                 0x123456):
        assert nvtx_cffi.colors.color_to_hex(name) == nvtx.colors.color_to_hex(name), name


def test_submodules_are_the_package_api_and_record_alike():
    import nvtx_cffi.colors as colors
    import nvtx_cffi.nvtx as nvtx_module

    assert nvtx_cffi.nvtx is nvtx_module and nvtx_module.annotate is nvtx_cffi.annotate
    with recorder.capture() as got:
        with nvtx_module.annotate("sub", color="red", domain="dropin"):
            pass
    push = [e for e in got if e.kind == "push"]
    assert [(e.message, e.color, e.domain) for e in push] == [("sub", colors.color_to_hex("red"), "dropin")]


def test_color_to_hex_rejects_what_it_cannot_read():
    from nvtx_cffi.colors import color_to_hex

    with pytest.raises(ValueError, match="color"):
        color_to_hex("no such colour")
    with pytest.raises(TypeError, match="color"):
        color_to_hex(1.5)
