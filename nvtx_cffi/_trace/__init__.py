"""The tracer behind ``python -m nvtx_cffi trace``: see NVTX ranges without Nsight.

- :mod:`.runner` runs the program as a child process with the recorder in its environment,
- :mod:`.model` pairs the recorded events into ranges and marks,
- :mod:`.chrome` writes Chrome Trace Event JSON (Perfetto, chrome://tracing),
- :mod:`.stats` prints the ``--stats`` summary, :mod:`.png` draws ``--png`` (matplotlib),
- :mod:`.cli` ties them together.
"""
from __future__ import annotations

__all__: list = []
