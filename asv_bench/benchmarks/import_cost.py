"""What ``import nvtx_cffi`` costs: ms above a bare interpreter, in a fresh process each time.

Libraries leave their annotations in, so every program that uses one pays for the import. Each
run is ``python -X importtime -c "import <library>"`` in a fresh process (from a temporary folder,
so that a source tree is never imported): the cumulative time importtime gives the library's
top-level module is what the import added to the interpreter's own startup. Best of REPEATS runs.

    python asv_bench/benchmarks/import_cost.py        # a table: nvtx_cffi (C and pure Python), nvtx

``library``: nvtx_cffi, nvtx_cffi with ``NVTX_CFFI_PURE_PYTHON=1``, and NVIDIA's nvtx (skipped
when not importable); no tool is named, and importing makes no NVTX call either way.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Dict, Optional

REPEATS = 5
LIBRARIES = {"nvtx_cffi": ("nvtx_cffi", {}), "nvtx_cffi-pure": ("nvtx_cffi", {"NVTX_CFFI_PURE_PYTHON": "1"}),
             "nvtx": ("nvtx", {})}


def import_ms(module: str, env: Optional[Dict[str, str]] = None, repeats: int = REPEATS) -> Optional[float]:
    """Best of ``repeats``: ms that ``import module`` adds to a fresh interpreter (``-X importtime``),
    or None when it does not import."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "PYTHONPATH")}
    child_env.update(env or {})
    best = None
    for _ in range(repeats):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], env=child_env,
                              cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return None
        for line in proc.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[2].rstrip() == f" {module}":  # the top level (not indented)
                us = int(parts[1])
                best = us if best is None else min(best, us)
    return None if best is None else best / 1000


class ImportCost:
    """ms that ``import <library>`` adds to a bare interpreter (best of 5 fresh processes)."""

    params = [list(LIBRARIES)]
    param_names = ["library"]
    timeout = 120

    def setup(self, library):
        module, env = LIBRARIES[library]
        self.ms = import_ms(module, env)
        if self.ms is None:
            raise NotImplementedError(f"{module} does not import here")

    def track_import_ms(self, library):
        return self.ms

    track_import_ms.unit = "ms"


def main() -> int:
    for library, (module, env) in LIBRARIES.items():
        ms = import_ms(module, env, repeats=10)
        print(f"{library:16s} {'not importable' if ms is None else f'{ms:6.2f} ms'}  (best of 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
