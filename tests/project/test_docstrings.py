"""The examples in nvtx-cffi's docstrings run and print what they show (doctest, module by module)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import nvtx_cffi

MODULES = sorted(m.name for m in pkgutil.walk_packages(nvtx_cffi.__path__, "nvtx_cffi.")
                 if not m.name.endswith("__main__") and not m.name.rsplit(".", 1)[-1].startswith("lib"))


@pytest.mark.parametrize("name", ["nvtx_cffi", *MODULES])
def test_docstring_examples(name):
    from nvtx_cffi._native import lib

    if name == "nvtx_cffi.writer" and not lib.nvtxcffi_w_available():
        pytest.skip("built without the NVTXW headers: the examples need a backend")
    module = importlib.import_module(name)
    failed, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert failed == 0, f"{failed} of {tried} docstring examples of {name} failed (see the output above)"


def test_the_documented_modules_have_examples():
    # (a module list that found nothing, or examples no longer found, would pass the test above)
    finder = doctest.DocTestFinder()
    found = {name: sum(len(t.examples) for t in finder.find(importlib.import_module(name)))
             for name in ("nvtx_cffi", "nvtx_cffi._annotate", "nvtx_cffi._domain", "nvtx_cffi._trace.chrome")}
    assert all(n > 0 for n in found.values()), found
    assert len(MODULES) > 20
